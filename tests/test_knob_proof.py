"""Every knob of the stack-knob table, proven with the stack's OWN code (#37, #33).

For each row of `vmtune/stacks/openstack/knobs_rows.py` with a value (a fix), nova 34.0.0's own
`_get_guest_config` rendered a pair of cases (fixtures/stacks/nova/oracle/knob/, see its
PROVENANCE.md): the same flavor × image × nova.conf, the "after" one with the row's knob set to the
row's value. vmtune must report the rule on nova's "before" XML and must not on nova's "after" XML;
nova refusing the "after" case fails too. A row whose finding nova's XML cannot carry on the
oracle's fake host is listed in NOVA_NOT_EXERCISABLE with the reason. vmtune's own renderers are
proven separately (tests/test_openstack_render.py::test_knob_cures_its_finding); this proof does
not depend on them.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import pytest
import yaml
from lxml import etree

from vmtune.stacks.knob_table import Knob, rows

from conftest import FIXTURES
from helpers import findings, options, set_knob

NOVA_KNOB = FIXTURES / "stacks" / "nova" / "oracle" / "knob"
NOVA_NS = {"nova": "http://openstack.org/xmlns/libvirt/nova/1.1"}

# The check options a rule needs to look at all: the latency policy, or the guest OS that nova's
# XML does not say (CLK001/HV001 are about a Windows guest whose image lacks os_type=windows).
NOVA_CHECKED_WITH: dict[str, dict[str, object]] = {
    "CPU007": {"policies": ("latency",)}, "MEM007": {"policies": ("latency",)},
    "CLK001": {"os": "windows"}, "HV001": {"os": "windows"}, "CLK003": {"os": "linux"},
}
# Rows with a value whose finding nova's XML cannot carry on the oracle's fake host (no pair):
NOVA_NOT_EXERCISABLE: dict[tuple[str, int], str] = {
    ("CPU008", 0): "needs host facts (vCPUs pinned across host NUMA nodes): the oracle's XML is checked without a host",
    ("CPU011", 0): "needs host facts (memory on another host NUMA node than the vCPUs)",
    ("CPU019", 0): "needs host facts (the host's NUMA nodes the vCPUs span)",
    ("CPU016", 0): "needs the Windows edition from libosinfo metadata, which nova never writes",
    ("CPU016", 1): "needs the Windows edition from libosinfo metadata, which nova never writes",
    ("CPU020", 1): "nova pins each realtime vCPU to its own host CPU and the emulator threads off them: "
                   "nova's XML never carries the finding",
    ("USB002", 0): "nova writes its USB tablet only with a graphics device (knob-USB002-no-graphics: no tablet)",
    ("USB002", 1): "nova writes its USB tablet only with a graphics device (knob-USB002-no-graphics: no tablet)",
}


def _valued(stack: str) -> list[tuple[str, int, Knob]]:
    table, _no = rows(stack)
    return [(code, n, knob) for code, knobs in table.items() for n, knob in enumerate(knobs) if knob.value is not None]


def _provenance_rows(directory: Path) -> dict[str, tuple[str, str, str]]:
    found: dict[str, tuple[str, str, str]] = {}
    for line in (directory / "PROVENANCE.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] not in ("case", "---"):
            assert cells[0] not in found, f"two provenance rows for {cells[0]}"
            found[cells[0]] = (cells[1], cells[2], cells[3])
    return found


# -- nova --------------------------------------------------------------------------------------------

NOVA_ROWS = [(c, n, k) for c, n, k in _valued("openstack") if (c, n) not in NOVA_NOT_EXERCISABLE]


def test_every_nova_row_with_a_value_has_a_pair_or_says_why_not() -> None:
    valued = {(code, n) for code, n, _knob in _valued("openstack")}
    pairs = {(p.stem.split("-")[1], int(p.stem.split("-")[2])) for p in NOVA_KNOB.glob("knob-*-*-before.yaml")}
    afters = {(p.stem.split("-")[1], int(p.stem.split("-")[2])) for p in NOVA_KNOB.glob("knob-*-*-after.yaml")}
    assert pairs == afters
    assert set(NOVA_NOT_EXERCISABLE) <= valued  # no stale excuse
    assert not pairs & set(NOVA_NOT_EXERCISABLE)
    assert valued - set(NOVA_NOT_EXERCISABLE) == pairs  # a new row without a proof fails here
    assert len(pairs) >= 24


@pytest.mark.parametrize("code, n, knob", NOVA_ROWS, ids=lambda v: v if isinstance(v, str) else None)
def test_the_after_case_is_the_before_case_with_the_knob_set(code: str, n: int, knob: Knob) -> None:
    before = yaml.safe_load((NOVA_KNOB / f"knob-{code}-{n}-before.yaml").read_text())
    after = yaml.safe_load((NOVA_KNOB / f"knob-{code}-{n}-after.yaml").read_text())
    expected = copy.deepcopy(before)
    if knob.on == "flavor":
        expected["flavor"]["extra_specs"][knob.path[0]] = knob.value
    elif knob.on == "image":
        expected["image"]["properties"][knob.path[0]] = knob.value
    else:
        section, option = knob.path
        current = expected["nova_conf"].setdefault(section, {})
        current[option] = [knob.value] if isinstance(current.get(option, after["nova_conf"][section][option]),
                                                     list) else knob.value
    assert after == expected


@pytest.mark.parametrize("code, n, knob", NOVA_ROWS, ids=lambda v: v if isinstance(v, str) else None)
def test_nova_own_xml_carries_the_finding_before_the_knob_and_not_after(code: str, n: int, knob: Knob) -> None:
    opts = options(**NOVA_CHECKED_WITH.get(code, {}))  # type: ignore[arg-type]
    before, after = NOVA_KNOB / f"knob-{code}-{n}-before", NOVA_KNOB / f"knob-{code}-{n}-after"
    assert before.with_suffix(".xml").exists(), before.with_suffix(".error").read_text()
    assert code in {f.rule.code for f in findings(before.with_suffix(".xml").read_bytes(), opts)}
    assert after.with_suffix(".xml").exists(), f"nova refuses the knob: {after.with_suffix('.error').read_text()}"
    still = [f.message for f in findings(after.with_suffix(".xml").read_bytes(), opts) if f.rule.code == code]
    assert still == [], f"{knob.on} {'/'.join(knob.path)}={knob.value} does not cure {code} in nova's XML"


def test_nova_writes_no_usb_tablet_without_graphics() -> None:
    # the reason USB002 is not exercisable, from nova's own XML
    root = etree.parse(str(NOVA_KNOB / "knob-USB002-no-graphics.xml")).getroot()
    assert root.find("devices/graphics") is None and root.find("devices/input[@type='tablet']") is None


def test_the_nova_knob_cases_are_complete_and_unedited() -> None:
    cases = sorted(NOVA_KNOB.glob("*.yaml"))
    names = {p.stem for p in cases}
    outputs = [*NOVA_KNOB.glob("*.xml"), *NOVA_KNOB.glob("*.error")]
    assert [p.name for p in outputs if p.stem not in names] == []
    assert [p.stem for p in cases if p.with_suffix(".xml").exists() == p.with_suffix(".error").exists()] == []
    expected = {p.name for p in cases} | {p.name for p in outputs} | {"generate.py", "PROVENANCE.md"}
    assert {p.name for p in NOVA_KNOB.iterdir() if p.name != "__pycache__"} == expected
    found = _provenance_rows(NOVA_KNOB)
    assert sorted(found) == sorted(names)
    for path in cases:
        about, answer, digest = found[path.stem]
        assert about == path.read_text().splitlines()[0].removeprefix("# ").strip().replace("|", "/")
        output = path.with_suffix(".xml")
        if not output.exists():
            output = path.with_suffix(".error")
            assert answer.startswith("refused at ")
        else:
            assert answer == "XML"
            root = etree.fromstring(output.read_bytes())
            assert root.findtext("metadata/nova:instance/nova:name", namespaces=NOVA_NS) == path.stem
        assert hashlib.sha256(output.read_bytes()).hexdigest()[:16] == digest, f"{output.name} edited after generate.py"


# -- KubeVirt ----------------------------------------------------------------------------------------

KV_KNOB = FIXTURES / "stacks" / "kubevirt" / "oracle" / "knob"
KV_CHECKED_WITH: dict[str, dict[str, object]] = {
    "CPU007": {"policies": ("latency",)}, "MEM007": {"policies": ("latency",)}, "CPU021": {"policies": ("latency",)},
    "CLK003": {"os": "linux"}, "HV001": {"os": "windows"}, "CLK001": {"os": "windows"},
}
# Rows with a value that have no pair, and why: VMI rows whose finding KubeVirt's XML cannot carry in
# the harness; preference rows are proven through a VirtualMachine using a preference (prefs/), where
# that was cheap; instancetype rows are not exercised (the VMI row with the same knob is).
_NOT_ATTEMPTED = "not exercised: an instancetype row (the VMI row with the same knob is proven)"
_HOST = "needs host facts"
KV_NOT_EXERCISABLE: dict[tuple[str, int], str] = {
    ("CPU006", 0): "KubeVirt writes hint-dedicated whenever it pins vCPUs (dedicatedCpuPlacement): its XML never "
                   "carries the finding",
    ("DSK002", 0): "needs a block-mode volume (disk type='block'); the harness's PVCs are filesystem volumes",
    ("HV008", 0): f"{_HOST} (an Intel host's Hyper-V features) and the Windows version from libosinfo",
    ("NET002", 0): f"KubeVirt writes queues = vCPUs; the tap limit {_HOST}",
    ("USB001", 0): "KubeVirt writes a qemu-xhci controller for a USB tablet, which the rule accepts",
    ("NET002", 1): f"the tap limit {_HOST}", ("DSK002", 1): "needs a block-mode volume, as DSK002 row 0",
    ("USB001", 1): "as USB001 row 0", ("CPU016", 1): "needs the Windows edition from libosinfo metadata",
    ("CLK001", 1): "not exercised: a clock/Hyper-V preference (the VMI row is proven)",
    ("CLK002", 1): "not exercised: a clock/Hyper-V preference (the VMI row is proven)",
    ("CLK003", 1): "not exercised: a clock/Hyper-V preference (the VMI row is proven)",
    ("CLK004", 1): "not exercised: a clock/Hyper-V preference (the VMI row is proven)",
    ("HV001", 1): "not exercised: a clock/Hyper-V preference (the VMI row is proven)",
    ("HV005", 1): "not exercised: a clock/Hyper-V preference (the VMI row is proven)",
    # CPU008, CPU019, CPU020 and CPU021 are advice only (value None): KubeVirt refuses their knob alone
    **{(code, 1): _NOT_ATTEMPTED for code in ("CPU001", "CPU004", "CPU006", "CPU007", "MEM001", "DSK003")},
}
KV_ROWS = [(c, n, k) for c, n, k in _valued("kubevirt") if (c, n) not in KV_NOT_EXERCISABLE]


def test_every_kubevirt_vmi_row_with_a_value_has_a_pair_or_says_why_not() -> None:
    valued = {(code, n) for code, n, _knob in _valued("kubevirt")}
    pairs = {(p.stem.split("-")[1], int(p.stem.split("-")[2])) for p in KV_KNOB.glob("knob-*-*-before.yaml")}
    afters = {(p.stem.split("-")[1], int(p.stem.split("-")[2])) for p in KV_KNOB.glob("knob-*-*-after.yaml")}
    assert pairs == afters
    assert set(KV_NOT_EXERCISABLE) <= valued
    assert not pairs & set(KV_NOT_EXERCISABLE)
    assert valued - set(KV_NOT_EXERCISABLE) == pairs  # a new row without a proof fails here
    assert len(pairs) >= 24


@pytest.mark.parametrize("code, n, knob", KV_ROWS, ids=lambda v: v if isinstance(v, str) else None)
def test_the_kubevirt_after_case_is_the_before_case_with_the_knob_set(code: str, n: int, knob: Knob) -> None:
    names = (f"knob-{code}-{n}-before", f"knob-{code}-{n}-after")
    before, after = (yaml.safe_load((KV_KNOB / f"{name}.yaml").read_text()) for name in names)
    if knob.on == "vmi":
        set_knob(before["spec"], knob.path, knob.value)
    else:  # a VirtualMachine using its own preference (prefs/NAME.yaml): the VMs differ only in names
        pref_before, pref_after = (yaml.safe_load((KV_KNOB / "prefs" / f"{name}.yaml").read_text()) for name in names)
        assert before["spec"]["preference"] == {"kind": "VirtualMachinePreference", "name": names[0]}
        assert after["spec"]["preference"] == {"kind": "VirtualMachinePreference", "name": names[1]}
        before["spec"]["preference"]["name"] = names[1]
        set_knob(pref_before["spec"], knob.path, knob.value)
        pref_before["metadata"]["name"] = names[1]
        assert pref_after == pref_before
    before["metadata"]["name"] = after["metadata"]["name"]
    assert after == before


@pytest.mark.parametrize("code, n, knob", KV_ROWS, ids=lambda v: v if isinstance(v, str) else None)
def test_kubevirt_own_xml_carries_the_finding_before_the_knob_and_not_after(code: str, n: int, knob: Knob) -> None:
    opts = options(**KV_CHECKED_WITH.get(code, {}))  # type: ignore[arg-type]
    before, after = KV_KNOB / f"knob-{code}-{n}-before", KV_KNOB / f"knob-{code}-{n}-after"
    assert before.with_suffix(".xml").exists(), before.with_suffix(".rejected.txt").read_text()
    assert code in {f.rule.code for f in findings(before.with_suffix(".xml").read_bytes(), opts)}
    refused = after.with_suffix(".rejected.txt")
    assert after.with_suffix(".xml").exists(), f"KubeVirt refuses the knob: {refused.read_text()}"
    still = [f.message for f in findings(after.with_suffix(".xml").read_bytes(), opts) if f.rule.code == code]
    assert still == [], f"spec.{'.'.join(knob.path)}: {knob.value} does not cure {code} in KubeVirt's XML"


def test_the_kubevirt_knob_cases_are_complete_and_unedited() -> None:
    cases = sorted(KV_KNOB.glob("*.yaml"))
    names = {p.stem for p in cases}
    outputs = [*KV_KNOB.glob("*.xml"), *KV_KNOB.glob("*.rejected.txt")]
    assert sorted({p.name.split(".")[0] for p in outputs} - names) == []
    assert [n for n in names if (KV_KNOB / f"{n}.xml").exists() == (KV_KNOB / f"{n}.rejected.txt").exists()] == []
    expected = {p.name for p in cases} | {p.name for p in outputs} | {"generate.sh", "PROVENANCE.md", "prefs"}
    assert {p.name for p in KV_KNOB.iterdir()} == expected
    # prefs/: one preference per VirtualMachine case that names one, and nothing else
    used = {n for n in names if yaml.safe_load((KV_KNOB / f"{n}.yaml").read_text().split("\n", 1)[1])["spec"].get(
        "preference")}
    assert {p.stem for p in (KV_KNOB / "prefs").iterdir()} == used
    found = _provenance_rows(KV_KNOB)
    assert sorted(found) == sorted(names)
    for path in cases:
        about, answer, digest = found[path.stem]
        assert about == path.read_text().splitlines()[0].removeprefix("# ").strip().replace("|", "/")
        (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert doc["metadata"]["name"] == path.stem
        output = path.with_suffix(".xml")
        if output.exists():
            assert answer == "XML"
            assert f"<name>default_{path.stem}</name>" in output.read_text()
        else:
            output = path.with_suffix(".rejected.txt")
            assert answer == "rejected"
        assert hashlib.sha256(output.read_bytes()).hexdigest()[:16] == digest, f"{output.name} edited after generate.sh"
