"""Hostile input on the less-travelled outputs and inputs: the HTML report, custom checks'
codes, names and fix values, baselines. Each test runs vmtune as a user does (a subprocess)
and checks the result with a real consumer (Chromium, lxml); each failed before the fix it
guards (see SECURITY.md for the numbers)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import html as lxml_html

from vmtune.report.html import SCRIPT

from conftest import ROOT, domain_xml
from helpers import console_messages

TABLET = "<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>"  # USB002, info
NIC = "<interface type='network'><source network='default'/></interface>"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def run(*args: str | bytes | Path, cwd: Path = ROOT) -> tuple[int, str, str]:
    """vmtune's exit code and output, decoded as strict UTF-8 (an invalid byte fails the test)."""
    done = subprocess.run([sys.executable, "-m", "vmtune", *(a if isinstance(a, bytes) else str(a) for a in args)],
                          capture_output=True, timeout=120, cwd=cwd)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")


# --- the HTML report ------------------------------------------------------------------------

@pytest.mark.slow
def test_html_report_shows_odd_names_as_visible_escapes(tmp_path: Path) -> None:
    """Before: a file name that is not UTF-8 made `-f html -o` die with a UnicodeEncodeError
    traceback (no report), and ESC and RLO from names reached the page raw (an RLO in a domain
    name reversed the file name shown after it)."""
    folder = tmp_path / "domains"
    folder.mkdir()
    (folder / "esc\x1b[31mred\n.xml").write_text(domain_xml(name="rlo\u202eevil", cpu=""))
    with open(os.fsencode(folder) + b"/latin\xe9\x80.xml", "wb") as handle:
        handle.write(domain_xml(name="c1\u009b31m", cpu="", devices=TABLET).encode())
    (folder / "markup.xml").write_text(domain_xml(
        name="&lt;/b&gt;&lt;/summary&gt;&lt;script&gt;alert(1)&lt;/script&gt;\"' onmouseover='x", cpu=""))
    page = tmp_path / "report.html"
    code, out, err = run("check", "--isolated", "-f", "html", "-o", page, folder)
    assert (code, out, err) == (1, "", "")
    text = page.read_bytes().decode("utf-8")  # strict: the page is valid UTF-8
    assert not CONTROL.search(text)
    messages, dom = console_messages(page, tmp_path)
    assert messages == []
    tree = lxml_html.fromstring(dom)
    assert [s.text for s in tree.iter("script")] == [SCRIPT]  # vmtune's filter script and nothing else
    assert not tree.xpath("//@onmouseover")
    summaries = sorted(s.text_content() for s in tree.xpath("//details[@class='domain']/summary"))
    assert summaries == [
        "</b></summary><script>alert(1)</script>\"' onmouseover='x " + f"{folder}/markup.xml1 warning",
        f"c1\\x9b31m {folder}/latin\\xe9\\x80.xml1 warning1 info",
        f"rlo\\u202eevil {folder}/esc\\x1b[31mred\\n.xml1 warning",
    ]


# --- custom checks in policies --------------------------------------------------------------

CHECK = """name: evil
extends: default
checks:
  - code: {code}
    name: {name}
    severity: warning
    message: NIC must use virtio
    select: devices/interface
    assert: {{path: model, attribute: type, equals: {value}}}
    fix: {{safety: safe, {fix}}}
"""


def _policy(tmp_path: Path, code: str = "XEV001", name: str = "evil-nic", value: str = "virtio",
            fix: str = "ensure: {path: model, attributes: {type: virtio}}") -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)
    policy = tmp_path / "evil.yaml"
    policy.write_text(CHECK.format(code=code, name=name, value=value, fix=fix))
    return policy


@pytest.mark.parametrize(("field", "line", "expected"), [
    # Python's `$` matched before a final newline: these passed the schema, and the code and
    # name were printed with a raw newline in every text line of the check's findings.
    ({"code": '"XEV001\\n"'}, 4, "key 'checks.0.code': does not match ^X[A-Z]{0,4}[0-9]{3}$"),
    ({"name": '"evil-nic\\n"'}, 5, "key 'checks.0.name': does not match ^[a-z0-9]+(-[a-z0-9]+)*$"),
    ({"fix": 'ensure: {path: "model\\n", attributes: {type: virtio}}'}, 10,
     "key 'checks.0.fix.ensure.path': does not match ^[A-Za-z][\\w.-]*(/[A-Za-z][\\w.-]*)*$"),
    ({"fix": "ensure: {path: \"mod\u00e8le\", attributes: {type: virtio}}"}, 10,  # \w is ASCII in JSON Schema
     "key 'checks.0.fix.ensure.path': does not match ^[A-Za-z][\\w.-]*(/[A-Za-z][\\w.-]*)*$"),
    # A NUL written into the domain: before, refused only when fixing ("would produce invalid XML").
    ({"fix": 'ensure: {path: model, attributes: {type: "a\\0b"}}'}, 10,
     "key 'checks.0.fix.ensure.attributes.type': does not match "
     "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\ufffe\\uffff]*$"),
    # xmlns would move the element out of libvirt's namespace (or make the file invalid).
    ({"fix": "set_attribute: {name: xmlns, value: 'http://example.com/ns'}"}, 10,
     "key 'checks.0.fix.set_attribute.name': does not match ^(?![Xx][Mm][Ll])[A-Za-z_][\\w.-]*$"),
    # A custom check named like a built-in rule would be selected, ignored and shown as that rule.
    ({"name": "virtio-net-single-queue"}, 5, "custom check name virtio-net-single-queue is already used"),
])
def test_custom_checks_that_would_forge_output_or_break_xml_are_refused_at_load(
        tmp_path: Path, field: dict[str, str], line: int, expected: str) -> None:
    policy = _policy(tmp_path, **field)
    domain = tmp_path / "d.xml"
    domain.write_text(domain_xml(devices=NIC))
    code, out, err = run("check", "--isolated", "-p", policy, "--fix", domain)
    assert (code, out) == (2, "")
    prefix = f"vmtune: {policy}:{line}: " + ("invalid policy: " if expected.startswith("key") else "")
    assert err == prefix + expected + "\n"
    assert domain.read_text() == domain_xml(devices=NIC)


def test_a_custom_fix_writes_tabs_and_newlines_as_references(tmp_path: Path) -> None:
    """A raw tab, newline or CR in an attribute reads back as a space: before, the fix wrote them
    raw, libvirt would read another value, and the check fired again after every --fix."""
    value = "a\\tb\\nc\\rd e'\\\"<&>"
    policy = _policy(tmp_path, value=f'"{value}"', fix=f'ensure: {{path: model, attributes: {{type: "{value}"}}}}')
    domain = tmp_path / "d.xml"
    domain.write_text(domain_xml(devices=NIC))
    assert run("check", "--isolated", "-p", policy, "--fix", domain) == (
        0, "1 domain(s) checked: 0 finding(s) (0 error, 0 warning, 0 info); 1 fix(es) applied\n", "")
    assert domain.read_text() == domain_xml(devices=(
        "<interface type='network'><source network='default'/>\n"
        "      <model type='a&#9;b&#10;c&#13;d e&apos;\"&lt;&amp;&gt;'/></interface>"))
    assert run("check", "--isolated", "-p", policy, domain) == (
        0, "1 domain(s) checked: 0 finding(s) (0 error, 0 warning, 0 info)\n", "")


# --- baselines ------------------------------------------------------------------------------

NEEDS_FIX = domain_xml(os="windows", clock="<clock offset='localtime'/>")  # CLK002 (and HV001), warnings


@pytest.mark.parametrize("findings", ["[]," * 10_000_000 + "[]", '"ab",' * 6_000_000 + '"ab"'])
def test_a_baseline_that_is_no_baseline_is_refused_before_it_is_built(tmp_path: Path, findings: str) -> None:
    """The pull request's `.vmtune.yaml` names the baseline. Before: the JSON decoder built all
    of it first: 30 MiB of `[],` took 4.4 s and 780 MB, 30 MiB of `"ab",` 500 MB, before the refusal."""
    from test_hostile_config import MEMORY_LIMIT_KB, TIME_LIMIT
    from test_hostile_config import vmtune as measured

    (tmp_path / ".git").mkdir()
    (tmp_path / "vm.xml").write_text(NEEDS_FIX)
    (tmp_path / "baseline.json").write_text('{"version": 1, "findings": [' + findings + "]}")
    (tmp_path / ".vmtune.yaml").write_text("baseline: baseline.json\n")
    done = measured("check", "vm.xml", cwd=tmp_path)
    assert (done.code, done.stdout) == (2, "")
    assert done.stderr == (f"vmtune: {tmp_path / 'baseline.json'}: cannot read baseline: not a vmtune baseline "
                           "(written by --write-baseline)\n")
    assert done.cpu_seconds < TIME_LIMIT and done.max_rss_kb < MEMORY_LIMIT_KB, done


@pytest.mark.parametrize("what", ["escapes", "entries"])
def test_a_baseline_of_many_repeats_is_checked_in_bounded_memory(tmp_path: Path, what: str) -> None:
    """A baseline of the right shape whose one string is 20 MiB of `\\"` (10 M repeats of the
    string's escape group), or of 1.2 M entries. The shape check's greedy repeats in atomic groups
    kept a backtracking frame a repeat, ~650 MB for the escapes; from 3.11.5 its possessive group
    repeats keep none, and before 3.11.5 (gh-106052: Debian 12's 3.11.2) such a baseline is
    refused before it is matched."""
    from test_hostile_config import MEMORY_LIMIT_KB, TIME_LIMIT
    from test_hostile_config import vmtune as measured

    if what == "entries" and sys.version_info >= (3, 11, 5):
        pytest.skip("read whole from 3.11.5 (1.2 M entries: ~2.5 s of json.loads), in bounded memory")
    (tmp_path / ".git").mkdir()
    (tmp_path / "vm.xml").write_text(NEEDS_FIX)
    if what == "escapes":
        text = '{"version": 1, "findings": [{"rule": "' + '\\"' * 10_000_000 + '", "domain": "d", "xpath": "x"}]}'
    else:
        text = '{"version": 1, "findings": [' + ",".join(['{"rule":"R","domain":"d","xpath":"x"}'] * 1_200_000) + "]}"
    (tmp_path / "baseline.json").write_text(text)
    (tmp_path / ".vmtune.yaml").write_text("baseline: baseline.json\n")
    done = measured("check", "vm.xml", cwd=tmp_path)
    if sys.version_info >= (3, 11, 5):
        assert (done.code, done.stderr) == (1, ""), done.stderr
    else:
        assert (done.code, done.stdout) == (2, "")
        version = sys.version.split()[0]
        assert done.stderr == (f"vmtune: {tmp_path / 'baseline.json'}: cannot read baseline: more than 1,000,000 "
                               f"entries and escapes, more than Python {version} (before 3.11.5) checks in bounded "
                               "memory\n")
    assert done.cpu_seconds < TIME_LIMIT and done.max_rss_kb < MEMORY_LIMIT_KB, (done.cpu_seconds, done.max_rss_kb)


def test_a_baseline_entry_listed_twice_counts_twice(tmp_path: Path) -> None:
    """Before: the last of the two counts won (0 here), and the baselined finding came back."""
    (tmp_path / "vm.xml").write_text(NEEDS_FIX)
    code, out, _ = run("check", "--isolated", "-f", "json", tmp_path / "vm.xml")
    assert code == 1
    keys = [(f["rule"], f["domain"], f["xpath"]) for f in json.loads(out)["findings"]]
    entries = [{"rule": r, "domain": d, "xpath": x, "count": 1} for r, d, x in keys]
    entries.append({**entries[0], "count": 0})
    (tmp_path / "b.json").write_text(json.dumps({"version": 1, "findings": entries}, indent=2))
    assert run("check", "--isolated", "--baseline", tmp_path / "b.json", tmp_path / "vm.xml") == (
        0, f"1 domain(s) checked: 0 finding(s) (0 error, 0 warning, 0 info); {len(keys)} more hidden by the baseline\n",
        "")


# --- plan --write on live domains -----------------------------------------------------------

VICTIM_UUID = "11111111-1111-1111-1111-111111111111"
OWN_UUID = "22222222-2222-2222-2222-222222222222"
PINNED = "<cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='9'/></cputune>"


def _node(tmp_path: Path, name: str) -> str:
    """A test-driver host: root's pinned domain `victim`, and one someone else defined."""
    victim = domain_xml(name="victim").replace("<vcpu", PINNED + "<vcpu", 1)
    (tmp_path / "victim.xml").write_text(victim.replace("<name>", f"<uuid>{VICTIM_UUID}</uuid><name>", 1))
    (tmp_path / "other.xml").write_text(domain_xml(name=name).replace("<name>", f"<uuid>{OWN_UUID}</uuid><name>", 1))
    node = (ROOT / "fixtures/hosts/testnode/node.xml").read_text()
    node = re.sub(r'  <domain file=.*\n', "", node).replace(
        "</node>", '  <domain file="victim.xml"/>\n  <domain file="other.xml"/>\n</node>')
    (tmp_path / "node.xml").write_text(node)
    return f"test://{tmp_path / 'node.xml'}"


@pytest.mark.parametrize(("name", "code", "backups", "said"), [
    # Trimmed, "victim\t" is "victim": it was planned, then the placement was defined into the
    # other domain that libvirt calls "victim". Now the name is ambiguous and nothing is placed.
    ("victim&#9;", 1, [], "victim (test:///node.xml/victim\\t): not placed: 2 domains have this name (compared "
                          "without surrounding whitespace); give each its own name"),
    # Trimmed, the name is victim's UUID: looked up by name (none), then by UUID, it was victim
    # that got the placement. Now the domain is looked up by its exact libvirt name.
    (f" {VICTIM_UUID}", 0, [OWN_UUID], f"verified:  {VICTIM_UUID} is pinned to node 0"),
])
def test_plan_write_redefines_the_domain_it_planned_not_one_of_a_similar_name(
        libvirt_mod, tmp_path: Path, name: str, code: int, backups: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    uri = _node(tmp_path, name)
    state = tmp_path / "state"
    done, out, err = run("plan", "--isolated", "-p", "latency", "-c", uri, "--host",
                         ROOT / "fixtures/hosts/intel-2node.xml", "--write", "--yes", "--state-dir", state)
    assert (done, err) == (code, ""), out
    assert said.replace("test:///", f"test://{tmp_path}/") in out.splitlines()
    assert "victim is pinned" not in out
    # one backup per domain redefined, in the folder of its UUID
    assert sorted(p.parent.name for p in state.rglob("*.xml") if p.is_file()) == backups
    if backups:
        assert f"(vmtune rollback --domain ' {VICTIM_UUID}' --to " in out  # quoted: the shell keeps the space


def test_plan_write_leaves_two_files_of_one_domain_name_alone(tmp_path: Path) -> None:
    """Before: both files got the one placement the plan had for the name: the same CPUs twice."""
    for file in ("a.xml", "b.xml"):
        (tmp_path / file).write_text(domain_xml(name="db"))
    code, out, err = run("plan", "--isolated", "-p", "latency", "--host", ROOT / "fixtures/hosts/intel-2node.xml",
                         "--write", tmp_path)
    assert (code, err) == (1, "")
    assert out.splitlines() == [f"db ({tmp_path / file}): not placed: 2 domains have this name (compared without "
                                "surrounding whitespace); give each its own name" for file in ("a.xml", "b.xml")]
    assert [(tmp_path / file).read_text() for file in ("a.xml", "b.xml")] == [domain_xml(name="db")] * 2


def test_the_ansible_tune_path_fixes_the_domain_it_read_not_one_named_after_its_uuid(
        libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """fleet.tune (the Ansible `tune` module) reads a domain, then applies and re-reads it by UUID.
    The lookup tried names first: a domain *named* after victim's UUID was fixed, defined and
    reported instead (victim `changed: false`, the backup in the other domain's folder)."""
    from vmtune.live import fleet

    base = re.sub(r"<uuid>[^<]*</uuid>", "", (ROOT / "fixtures/domains/win10-timer-storm.xml").read_text())
    _node(tmp_path, "unused")
    (tmp_path / "victim.xml").write_text(base.replace("<name>win10</name>",
                                                      f"<name>victim</name><uuid>{VICTIM_UUID}</uuid>"))
    (tmp_path / "other.xml").write_text(base.replace("<name>win10</name>",
                                                     f"<name>{VICTIM_UUID}</name><uuid>{OWN_UUID}</uuid>"))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (change,) = fleet.tune(f"test://{tmp_path / 'node.xml'}", ["victim"], fleet.Selection(select=["CLK002"]),
                           state_dir=str(state))
    assert (change.domain, change.uuid, change.changed, change.error) == ("victim", VICTIM_UUID, True, None)
    assert "<name>victim</name>" in change.after and "<stimer state='on'/>" in change.after
    assert [p.parent.name for p in state.rglob("*.xml") if p.is_file()] == [VICTIM_UUID]


# --- a domain named after another's UUID (apply --all, history, rollback) ---------------------

WIN10_UUID = "7f1a2c3e-0000-4000-8000-000000000010"  # fixtures/domains/win10-timer-storm.xml's


def _impostor_node(tmp_path: Path) -> str:
    """win10, and a domain named after win10's UUID."""
    domains = ROOT / "fixtures" / "domains"
    (tmp_path / "impostor.xml").write_text((domains / "nginx-single-queue.xml").read_text().replace(
        "<name>nginx01<", f"<name>{WIN10_UUID}<"))
    node = re.sub(r"  <domain file=.*\n", "", (ROOT / "fixtures/hosts/testnode/node.xml").read_text()).replace(
        "</node>", f'  <domain file="{domains / "win10-timer-storm.xml"}"/>\n  <domain file="impostor.xml"/>\n</node>')
    (tmp_path / "node.xml").write_text(node)
    return f"test://{tmp_path / 'node.xml'}"


def test_a_domain_named_after_another_uuid_neither_takes_its_changes_nor_its_rollback(
        libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    uri, state = _impostor_node(tmp_path), tmp_path / "state"
    # apply --all looks each listed domain up by its UUID: win10 itself is changed and backed up
    # (looked up name first, win10's UUID found the impostor, and win10 was never changed).
    code, out, err = run("apply", "-c", uri, "--all", "--yes", "--state-dir", state)
    assert code in (0, 1) and err == "", out
    assert WIN10_UUID in {p.parent.name for p in state.rglob("*.xml")}
    # A UUID typed for history or rollback that is also a domain's name: either could be meant.
    said = (f"vmtune: {uri}: '{WIN10_UUID}' is the name of the domain with UUID {{}} and the UUID of the "
            "domain named 'win10': give that UUID or that name")
    for command in (["history"], ["rollback", "--yes"]):
        code, out, err = run(*command, "-c", uri, "--domain", WIN10_UUID, "--state-dir", state)
        impostor = re.search(r"UUID ([0-9a-f-]{36}) and", err)
        assert code == 2 and impostor and err.splitlines() == [said.format(impostor.group(1))], (out, err)
    code, out, err = run("history", "-c", uri, "--domain", "win10", "--state-dir", state)
    assert code == 0 and "apply" in out and "no backups" not in out, out


# --- every format, one set of hostile names (#49) ------------------------------------------------

HOSTILE_NAMES = ["##[error file=a.xml,line=1]forged", "::warning::forged", "esc\x1b[2Jbell\x07", "cr\r::error::x",
                 "tab\there", "c1\x9b31m", "##vso[task.complete result=Failed]x", "nl\n::error::y"]
FORMATS = ["text", "json", "sarif", "github", "junit", "openmetrics", "html"]
C0_BUT_LF = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _manifest(name: str) -> str:
    quoted = json.dumps(name)  # a JSON string is a YAML double-quoted scalar: every character as written
    return (f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {quoted}\nspec:\n  template:\n"
            "    spec:\n      domain:\n        cpu: {cores: 8}\n        resources: {requests: {memory: 2Gi}}\n")


@pytest.mark.parametrize("output_format", FORMATS)
def test_every_output_format_is_inert_whatever_the_names(tmp_path: Path, output_format: str) -> None:
    """A domain name, a manifest's metadata.name and a file name: no `##[` (GitHub's runner takes
    it anywhere in a line), no line that starts with `::`, no control character but the newline,
    in any format. Before: `-f openmetrics` wrote manifest names raw."""
    files = []
    for index, name in enumerate(HOSTILE_NAMES):
        xml = tmp_path / f"{index}-{name.replace('/', '_')}.xml"
        xml.write_text(domain_xml(name=name.replace("\n", " ").replace("\r", " ").replace("\x07", "")
                                  .replace("\x1b", "").replace("\x9b", ""), cpu=""))  # XML forbids most controls
        manifest = tmp_path / f"{index}.yaml"
        manifest.write_text(_manifest(name))
        files += [xml.name, manifest.name]
    code, out, err = run("check", "--isolated", "-f", output_format, *files, cwd=tmp_path)
    assert code == 1, err
    assert len(out) > 1000
    assert "##[" not in out and "##vso[" not in out.lower()
    lines = re.split(r"\r\n|\r|\n", out)
    if output_format == "github":  # its own annotations, and only them (one per line, properties escaped)
        lines = [re.sub(r"^::(error|warning|notice) [^:]*::", "", line) for line in lines]
    assert [line for line in lines if line.lstrip(" \t").startswith("::")] == []
    assert C0_BUT_LF.search(out) is None, repr(C0_BUT_LF.search(out))
    assert "##[" not in err and C0_BUT_LF.search(err) is None
