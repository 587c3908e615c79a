"""Policies: schema, built-ins, scoping, parameters, custom checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vmtune.errors import VmtuneError
from vmtune.policy.load import load_policies, schema
from vmtune.rules.base import Severity

from conftest import DOMAINS, ROOT, domain_xml, run_vmtune
from helpers import codes, findings, fix, options


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_builtin_and_example_policies_validate() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    for path in [*sorted((ROOT / "policies").glob("*.yaml")), *sorted((ROOT / "policies" / "examples").glob("*.yaml"))]:
        validator.validate(yaml.safe_load(path.read_text()))
    load_policies([str(p) for p in sorted((ROOT / "policies" / "examples").glob("*.yaml"))])


def test_top_level_policies_are_the_packaged_ones() -> None:
    packaged = ROOT / "vmtune" / "policy" / "builtin"
    for name in ("default.yaml", "latency.yaml", "policy.schema.json"):
        assert (ROOT / "policies" / name).read_bytes() == (packaged / name).read_bytes()
    json.loads((ROOT / "policies" / "policy.schema.json").read_text())


def test_default_policy_leaves_dedicated_rules_to_latency() -> None:
    xml = domain_xml(devices="<memballoon model='virtio'/>")
    assert codes(xml) == []
    assert {"CPU007", "MEM005", "MEM007"} <= set(codes(xml, options(("latency",))))


def test_latency_policy_raises_severity_and_lowers_hugepage_threshold() -> None:
    xml = domain_xml(memory="<memory unit='GiB'>2</memory>")
    found = {f.rule.code: f for f in findings(xml, options(("latency",)))}
    assert found["MEM001"].severity is Severity.WARNING
    assert "MEM001" not in codes(xml)


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("name: x\nrules:\n  - select: [ALL]\n    sevrity: error\n", "unknown key 'rules.0.sevrity'", 4),
        ("name: x\nrules:\n  - select: [ALL]\n    severity: fatal\n", "key 'rules.0.severity'", 4),
        ("name: x\nrules:\n  - select: [HV999]\n", "selector 'HV999' matches no rule", None),
        # Not near a known key: not quoted (a file read as a policy by mistake may be a secret).
        ("name: x\ncolour: blue\n", "unknown key (keys: checks, description, extends, name, rules)", 2),
        ("name: x\nrules:\n  - when: {vcpus: {min: many}}\n    select: [ALL]\n", "key 'rules.0.when.vcpus.min'", 3),
        ("name: [unclosed\n", "invalid YAML", 2),
        ("checks:\n  - code: HV001\n    name: clash\n    severity: info\n    message: m\n    select: .\n"
         "    assert: {present: true}\n", "key 'checks.0.code'", 2),
        ("checks:\n  - code: X001\n    name: bad-xpath\n    severity: info\n    message: m\n    select: '[['\n"
         "    assert: {present: true}\n", "invalid custom check X001: select: XPath outside the allowed subset", 6),
    ],
)
def test_invalid_policies_name_file_key_and_line(tmp_path: Path, text: str, message: str, line: int | None) -> None:
    path = write(tmp_path, text)
    with pytest.raises(VmtuneError) as info:
        load_policies([path])
    assert message in info.value.message
    assert info.value.source == path
    if line is not None:
        assert info.value.line == line


def test_invalid_policy_on_the_command_line_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nrules:\n  - select: [ALL]\n    sevrity: error\n")
    result = run_vmtune("check", "--policy", path, str(DOMAINS / "linux-tuned.xml"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"vmtune: {path}:4: invalid policy: unknown key 'rules.0.sevrity'; " \
                                    "did you mean 'severity'?"


def test_extends_cycles_are_errors(tmp_path: Path) -> None:
    write(tmp_path, "extends: b.yaml\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\n", "b.yaml")
    with pytest.raises(VmtuneError, match="extends itself"):
        load_policies([str(tmp_path / "a.yaml")])


@pytest.mark.parametrize(
    ("when", "kwargs", "applies"),
    [
        ("{os: windows}", {"os": "windows"}, True),
        ("{os: windows}", {"os": "linux"}, False),
        ("{os: unknown}", {"os": None}, True),
        ("{name: 'db-*'}", {"name": "db-01"}, True),
        ("{name: 'db-*'}", {"name": "web-01"}, False),
        ("{type: qemu}", {"dtype": "kvm"}, False),
        ("{vcpus: {min: 4}}", {"vcpus": 4}, True),
        ("{vcpus: {min: 4}}", {"vcpus": 2}, False),
        ("{vcpus: {max: 2}}", {"vcpus": 2}, True),
        ("{memory: {min: 8GiB}}", {"memory": "<memory unit='GiB'>8</memory>"}, True),
        ("{memory: {min: 8GiB}}", {"memory": "<memory unit='MiB'>8191</memory>"}, False),
        ("{memory: {max: 1GiB}}", {"memory": "<memory unit='GiB'>2</memory>"}, False),
        ("{tag: latency}", {"metadata": "<vmtune:vmtune xmlns:vmtune='https://vmtune.dev/xmlns/domain/1'>"
                                        "<vmtune:tag>latency</vmtune:tag></vmtune:vmtune>"}, True),
        ("{tag: latency}", {}, False),
    ],
)
def test_scoping(tmp_path: Path, when: str, kwargs: dict, applies: bool) -> None:
    path = write(tmp_path, f"name: scoped\nrules:\n  - when: {when}\n    select: [vcpus-not-pinned]\n")
    assert ("CPU007" in codes(domain_xml(**kwargs), options((path,)))) is applies


def test_parameters_reach_the_rule(tmp_path: Path) -> None:
    xml = domain_xml(vcpus=16, devices="<interface type='bridge'><source bridge='br0'/><model type='virtio'/>"
                                       "</interface>")
    path = write(tmp_path, "extends: default\nrules:\n  - select: [NET001]\n    params: {max_queues: 4}\n")
    assert b"queues='4'" in fix(xml, options((path,))).fixed
    assert b"queues='16'" in fix(xml).fixed


def test_severity_override_and_later_ignore(tmp_path: Path) -> None:
    xml = domain_xml(devices="<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>")
    path = write(tmp_path, "extends: default\nrules:\n  - select: [USB002]\n    severity: error\n")
    assert [f.severity for f in findings(xml, options((path,))) if f.rule.code == "USB002"] == [Severity.ERROR]
    path2 = write(tmp_path, "extends: default\nrules:\n  - ignore: [USB]\n", "p2.yaml")
    assert not [c for c in codes(xml, options((path2,))) if c.startswith("USB")]


CUSTOM = """name: house
checks:
  - code: XORG001
    name: prod-bridge-nic-virtio
    severity: warning
    message: NIC on br-prod must use virtio
    select: "devices/interface[@type='bridge'][source/@bridge='br-prod']"
    assert: {path: model, attribute: type, equals: virtio}
    fix:
      safety: safe
      ensure: {path: model, attributes: {type: virtio}}
  - code: XORG002
    name: guest-agent-channel
    severity: info
    message: guests need the QEMU guest agent channel
    when: {os: linux}
    select: devices
    assert: {path: "channel[target/@name='org.qemu.guest_agent.0']", present: true}
  - code: XORG003
    name: vcpus-bounded
    severity: error
    message: at most 8 vCPUs
    select: vcpu
    assert: {path: ".", attribute: placement, in: [static]}
"""


def test_custom_checks_find_and_fix(tmp_path: Path) -> None:
    path = write(tmp_path, CUSTOM)
    nic = "<interface type='bridge'><source bridge='br-prod'/><model type='{m}'/></interface>"
    bad = domain_xml(devices=nic.format(m="e1000"), vcpus="<vcpu placement='auto'>2</vcpu>")
    found = {f.rule.code: f for f in findings(bad, options((path,)))}
    assert set(found) == {"XORG001", "XORG002", "XORG003"}
    assert found["XORG003"].severity is Severity.ERROR
    outcome = fix(bad, options((path,)))
    assert b"<model type='virtio'/>" in outcome.fixed
    assert "XORG001" not in {f.rule.code for f in outcome.findings}
    good = domain_xml(os="windows", devices=nic.format(m="virtio"), vcpus="<vcpu placement='static'>2</vcpu>")
    assert codes(good, options((path,))) == []


def test_custom_checks_can_be_ignored_on_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, CUSTOM)
    target = tmp_path / "d.xml"
    target.write_text(domain_xml())
    result = run_vmtune("check", "-p", path, "--ignore", "XORG002", "--format", "json", str(target))
    assert "XORG002" not in {f["rule"] for f in json.loads(result.stdout)["findings"]}


def test_each_selector_matches_what_selector_matches_accepts(tmp_path: Path) -> None:
    """PolicySet.matching looks selectors up once per run instead of testing every rule; it must
    pick exactly the rules selector_matches accepts, in registry order (codes, prefixes, names,
    names in capitals, custom checks, ALL, unknown selectors)."""
    from vmtune.policy.model import selector_matches

    policy = load_policies(["default", write(tmp_path, CUSTOM)])
    keys = {"ALL", "X", "XORG", "ZZZ", "vcpus", "", "clk001", "PROD-BRIDGE-NIC-VIRTIO", "Clk001"}
    for rule in policy.rules:
        prefixes = (rule.code[:n] for n in range(1, len(rule.code) + 1))
        keys |= {rule.name, rule.name.upper(), rule.code.lower(), *prefixes}
    for selector in sorted(keys):
        assert policy.matching(selector) == tuple(r for r in policy.rules if selector_matches(selector, r)), selector
    assert [r.code for r in policy.matching("XORG")] == ["XORG001", "XORG002", "XORG003"]


def test_entries_select_and_ignore_the_rules_their_selectors_match(tmp_path: Path) -> None:
    from vmtune.policy.model import selector_matches

    path = write(tmp_path, "extends: latency\nrules:\n  - select: [USB, hint-dedicated-missing, CLK001, USB002]\n"
                           "    ignore: [USB00, balloon-present]\n")
    policy = load_policies([path])
    assert len(policy.entry_rules) == len(policy.entries) > 3
    for entry, selected, ignored in policy.entry_rules:
        assert selected == [r for r in policy.rules if any(selector_matches(s, r) for s in entry.select)]
        assert ignored == {r.code for r in policy.rules if any(selector_matches(s, r) for s in entry.ignore)}


def test_policy_records_are_values() -> None:
    """Scope, Entry and RuleConfig were NamedTuples: equal by value, Scope hashable, and a
    scope without conditions matches every domain."""
    from vmtune.policy.model import Entry, RuleConfig, Scope

    assert Scope() == Scope() and hash(Scope()) == hash(Scope()) and Scope().everywhere
    assert Scope.from_data({"os": "linux"}) == Scope(os=("linux",)) != Scope()
    assert not Scope(vcpus_min=0).everywhere and not Scope(tags=("x",)).everywhere
    assert RuleConfig(None, {"a": 1}) == RuleConfig(None, {"a": 1}) != RuleConfig(Severity.INFO, {"a": 1})
    entry = Entry(select=("ALL",), ignore=(), severity=None, params={}, scope=Scope(), origin="p")
    assert entry == Entry(("ALL",), (), None, {}, Scope(), "p") != Entry(("ALL",), (), None, {}, Scope(), "q")
    assert repr(RuleConfig(None, {})) == "RuleConfig(params={}, severity=None)"


@pytest.mark.parametrize("first", ["vm.xml", "/vm.xml"])
def test_a_file_here_and_one_in_the_root_each_get_their_own_folders_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    """The settings of a file are looked up once a folder, by its name up to its last "/":
    "vm.xml" (the current directory, whose configuration says fail-on: info) and "/vm.xml" (the
    root, which has none) are two folders, whichever is asked first."""
    from vmtune.request import CheckRequest, OptionsResolver

    if Path("/.vmtune.yaml").exists():
        pytest.skip("this machine's root holds a .vmtune.yaml")
    (tmp_path / ".vmtune.yaml").write_text("fail-on: info\n")
    monkeypatch.chdir(tmp_path)
    resolver = OptionsResolver(CheckRequest(paths=["vm.xml"]))
    other = "/vm.xml" if first == "vm.xml" else "vm.xml"
    settings = {name: resolver.settings_for_file(name) for name in (first, other)}
    assert (settings["vm.xml"].path, settings["vm.xml"].fail_on) == (str(tmp_path / ".vmtune.yaml"), "info")
    assert (settings["/vm.xml"].path, settings["/vm.xml"].fail_on) == (None, None)
