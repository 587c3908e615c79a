"""`vmtune check` on KubeVirt manifests, through the real command: the lines findings point at,
exit codes, what a directory walk and stdin read."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_vmtune

WINDOWS_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win10
spec:
  preference:
    kind: VirtualMachineClusterPreference
    name: windows.10.virtio
  template:
    spec:
      domain:
        clock:
          utc: {}
          timer:
            hpet:
              present: false
            hyperv: {}
        cpu:
          cores: 4
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
        features:
          hyperv:
            relaxed: {}
            vapic: {}
            spinlocks: {}
        memory:
          guest: 8Gi
      volumes:
      - name: root
        persistentVolumeClaim:
          claimName: win10
"""


def _findings(stdout: str) -> list[tuple[str, str, int, str]]:
    return [(f["rule"], f["severity"], f["line"], f["domain"]) for f in json.loads(stdout)["findings"]]


def test_the_synthetic_timer_warning_points_at_the_hyperv_mapping(tmp_path: Path) -> None:
    manifest = tmp_path / "win10.yaml"
    manifest.write_text(WINDOWS_VM)
    result = run_vmtune("check", "--format", "json", str(manifest))
    assert result.returncode == 1, result.stderr
    found = _findings(result.stdout)
    assert ("CLK002", "warning", 26, "VirtualMachine/win10") in found
    assert ("STK001", "info", 6, "VirtualMachine/win10") in found
    (clk002,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "CLK002"]
    assert clk002["note"].startswith("spec.template.spec.domain.features.hyperv: {synic: {}, synictimer: {}, "
                                     "vpindex: {}}")


def test_a_walk_checks_the_kubevirt_manifests_and_skips_other_yaml_quietly(tmp_path: Path) -> None:
    (tmp_path / "win10.yaml").write_text(WINDOWS_VM)
    (tmp_path / "configmap.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    (tmp_path / "chart-values.yaml").write_text("replicas: 3\n")
    result = run_vmtune("check", "--format", "json", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    assert {f[3] for f in _findings(result.stdout)} == {"VirtualMachine/win10"}


def test_kubectl_list_output_on_stdin() -> None:
    listing = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        "- " + line + "\n" if i == 0 else "  " + line + "\n" for i, line in enumerate(WINDOWS_VM.splitlines()))
    result = run_vmtune("check", "--format", "json", "-", stdin=listing.encode())
    assert result.returncode == 1, result.stderr
    found = _findings(result.stdout)
    assert ("CLK002", "warning", 29, "VirtualMachine/win10") in found  # the List shifts it by 3 lines


def test_sixteen_cores_without_multiqueue_get_the_queue_warning_on_the_devices_line() -> None:
    result = run_vmtune("check", "--format", "json", "fixtures/stacks/kubevirt/dump/vmi-linux-16cores.yaml")
    assert result.returncode == 1, result.stderr
    assert ("NET001", "warning", 11, "VirtualMachineInstance/vmi-linux-16cores") in _findings(result.stdout)
