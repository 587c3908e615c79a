"""features.hypervPassthrough beside a Hyper-V set (issue 50, item 4): KubeVirt's preference code
fills features.hyperv from a preference's preferredHyperv whatever hypervPassthrough says
(pkg/instancetype/preference/apply/features.go), and virt-api's VMI create admitter refuses a VMI
with both (pkg/virt-api/webhooks/hyperv.go). vmtune says so, renders the VM's passthrough, and
writes no fix that adds features.hyperv to a VM with hypervPassthrough. Through the real command:
notes, lines, exact bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vmtune.stacks.frontend import read_file
from vmtune.stacks.kubevirt import frontend

from conftest import FIXTURES, run_vmtune

PREFERENCES = FIXTURES / "stacks" / "kubevirt" / "instancetypes" / "common-instancetypes-cluster-preferences.yaml"
REFUSED = ("virt-api refuses the VMI with both (webhooks/hyperv.go: \"Cannot explicitly set hyperV features if "
           "HypervPassthrough is being used\"): the VM does not start")

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  preference:
    name: windows.2k22.virtio
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: 2
        memory:
          guest: 4Gi
        devices: {{}}
        features:
          hypervPassthrough:
            enabled: {enabled}
      volumes:
        - name: root
          containerDisk:
            image: example.com/win:latest
"""

VMI_BOTH = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: both
spec:
  domain:
    cpu:
      cores: 2
    devices: {}
    features:
      hyperv:
        relaxed: {}
      hypervPassthrough:
        enabled: true
    resources:
      requests:
        memory: 2Gi
"""


def _render(text: str) -> tuple[bytes, list[tuple[str, int, str]]]:
    references = read_file(PREFERENCES.name, PREFERENCES.read_bytes(), explicit=False)
    from vmtune.stacks.kubevirt import Settings

    (item,), _ = frontend.render([read_file("vm.yaml", text.encode())], Settings(references=[references]))
    return item.xml, [(n.code, n.line, n.message) for n in item.notes]


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_a_preferences_hyperv_set_beside_the_vms_passthrough_is_refused(tmp_path: Path, enabled: str) -> None:
    xml, notes = _render(VM.format(enabled=enabled))
    assert ("STK004", 18, "features.hypervPassthrough is set on the VM and its preference sets "
                          f"features.preferredHyperv, which KubeVirt applies all the same: {REFUSED}") in notes
    # the preference's set not merged into the VM's passthrough (disabled: no Hyper-V at all)
    assert (b'<hyperv mode="passthrough"/>' in xml) == (enabled == "true") and b"<relaxed" not in xml
    path = tmp_path / "vm.yaml"
    path.write_text(VM.format(enabled=enabled))
    done = run_vmtune("check", "--isolated", "-f", "json", "--instancetypes", str(PREFERENCES), str(path))
    assert done.returncode == 1, done.stderr
    # the refusal is the verdict: no tuning advice for a VM that never runs
    assert [(f["rule"], f["severity"], f["line"]) for f in json.loads(done.stdout)["findings"]] == [
        ("STK004", "error", 18)]


def test_a_vm_level_hyperv_set_beside_passthrough_is_refused() -> None:
    xml, notes = _render(VMI_BOTH)
    assert notes == [("STK004", 13, f"features.hyperv and features.hypervPassthrough are both set: {REFUSED}")]
    assert b'<relaxed state="on"/>' in xml  # the converter's choice when both are set


VMI_OFF = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: off
spec:
  domain:
    clock:
      utc: {}
      timer:
        hpet:
          present: false
        hyperv: {}
    cpu:
      cores: 2
    devices: {}
    features:
      hypervPassthrough:
        enabled: false
    resources:
      requests:
        memory: 2Gi
"""


def test_no_fix_adds_a_hyperv_set_beside_passthrough(tmp_path: Path) -> None:
    """hypervPassthrough disabled and no Hyper-V set: KubeVirt takes the VMI, HV001 and CLK002
    are right, but their fix (features.hyperv) would make a VMI virt-api refuses: withheld, said
    why. The same VMI without the passthrough field gets its fix."""
    path = tmp_path / "vmi.yaml"
    path.write_text(VMI_OFF)
    args = ("check", "--isolated", "--fix", "--select", "HV001,CLK002", "--os", "windows", "-f", "json", str(path))
    done = run_vmtune(*args)
    assert done.returncode == 1, done.stderr
    assert path.read_text() == VMI_OFF
    found = {f["rule"]: f for f in json.loads(done.stdout)["findings"]}
    assert set(found) == {"HV001", "CLK002"}
    for finding in found.values():
        assert finding["line"] == 16 and finding["fix"] is None
        assert str(finding["note"]).endswith("(not fixed: the VM sets features.hypervPassthrough, and virt-api "
                                             "refuses a VMI with it and features.hyperv both: remove it first)")
    args = ("check", "--isolated", "--fix", "--select", "HV001", "--os", "windows", str(path))
    without = VMI_OFF.replace("    features:\n      hypervPassthrough:\n        enabled: false\n", "")
    path.write_text(without)
    done = run_vmtune(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    fixed = path.read_text()
    assert fixed != without and "    features:\n      hyperv:\n        relaxed: {}\n" in fixed


ORACLE = FIXTURES / "stacks" / "kubevirt" / "oracle"


@pytest.mark.parametrize("rejected", sorted(ORACLE.glob("*hyperv-passthrough*.rejected.txt")), ids=lambda p: p.stem)
def test_kubevirts_own_refusal_of_passthrough_beside_hyperv_is_vmtunes(rejected: Path) -> None:
    """The oracle: KubeVirt's code (dump/main.go, the VMI create admitter's Hyper-V check) refuses
    these manifests with this message; vmtune refuses them with the same reason, at the field."""
    assert "Cannot explicitly set hyperV features if HypervPassthrough is being used" in rejected.read_text()
    manifest = rejected.with_name(rejected.name.replace(".rejected.txt", ".yaml"))
    done = run_vmtune("check", "--isolated", "-f", "json", "--instancetypes", str(PREFERENCES), str(manifest))
    assert done.returncode == 1, done.stderr
    (finding,) = json.loads(done.stdout)["findings"]
    text = manifest.read_text().splitlines()
    assert finding["rule"] == "STK004" and text[finding["line"] - 1].strip() == "hypervPassthrough:"
    assert "Cannot explicitly set hyperV features if HypervPassthrough is being used" in str(finding["message"])


def test_passthrough_disabled_renders_as_kubevirt_writes_it() -> None:
    """The oracle's accepted case: hypervPassthrough disabled and no Hyper-V set, no <hyperv>."""
    xml = (ORACLE / "var-windows-hyperv-passthrough-disabled.xml").read_bytes()
    assert b"<hyperv" not in xml
    mine, notes = _render((ORACLE / "var-windows-hyperv-passthrough-disabled.yaml").read_text())
    assert b"<hyperv" not in mine and not notes
