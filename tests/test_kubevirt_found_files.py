"""--fix never writes a file it does not check (issue 50, item 3): an instancetype or preference
found in another file of the work tree (or named by --instancetypes) is shared by every VM that
names it, so a value it owns is not changed there from one VM's run; the note names the file.
Given among the files checked, the instancetype's file is fixed. Through the real command:
findings, lines, notes, exact bytes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import run_vmtune

TYPES = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: team.large
spec:
  cpu:
    guest: 4
    model: qemu64
  memory:
    guest: 16Gi
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: windows.team
spec:
  clock:
    preferredClockOffset: {utc: {}}
    preferredTimer:
      hpet: {present: false}
      pit: {tickPolicy: delay}
      rtc: {tickPolicy: catchup}
  features:
    preferredHyperv:
      relaxed: {}
      vapic: {}
      spinlocks: {spinlocks: 8191}
"""

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  instancetype:
    name: team.large
  preference:
    name: windows.team
  template:
    spec:
      domain:
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
      volumes:
      - name: root
        persistentVolumeClaim:
          claimName: win
"""

ELSEWHERE = "defs/types.yaml, a file not checked, which --fix leaves alone: a change there applies to every VM using it"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "vms").mkdir(parents=True)
    (repo / "defs").mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "vms" / "app.yaml").write_text(VM)
    (repo / "defs" / "types.yaml").write_text(TYPES)
    return repo


def _check(repo: Path, *args: str) -> list[dict[str, object]]:
    done = run_vmtune("check", "--isolated", "-f", "json", *args, cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    return list(json.loads(done.stdout)["findings"])


def test_an_instancetype_found_in_another_file_is_not_fixed_there(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (cpu001,) = _check(repo, "--fix", "--unsafe-fixes", "--select", "CPU001", "vms/app.yaml")
    assert (cpu001["file"], cpu001["line"]) == ("vms/app.yaml", 6)  # at the VM's reference to it
    assert cpu001["fix"] is None
    assert cpu001["note"] == ("set by instancetype team.large: change instancetype spec.cpu.model: host-passthrough "
                              "(KubeVirt refuses a VM that sets a field its instancetype sets); not fixed: "
                              f"{ELSEWHERE}")
    assert (repo / "defs" / "types.yaml").read_text() == TYPES
    assert (repo / "vms" / "app.yaml").read_text() == VM


def test_an_instancetype_among_the_files_checked_is_fixed_there(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    done = run_vmtune("check", "--isolated", "--fix", "--unsafe-fixes", "--select", "CPU001", "vms/app.yaml",
                      "defs/types.yaml", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "defs" / "types.yaml").read_text() == TYPES.replace("model: qemu64", "model: host-passthrough")
    assert (repo / "vms" / "app.yaml").read_text() == VM


def test_a_preference_found_in_another_file_is_named_and_left_alone(tmp_path: Path) -> None:
    """The value a preference owns: the note names its file; --fix writes the VM's own field (with
    the preference's values it would shadow), never the shared file."""
    repo = _repo(tmp_path)
    found = {f["rule"]: f for f in _check(repo, "--select", "HV001", "vms/app.yaml")}
    assert str(found["HV001"]["note"]).endswith(
        "(the value comes from preference windows.team, defined in " + ELSEWHERE + ": change preference "
        "spec.features.preferredHyperv: {relaxed: {}, vapic: {}, spinlocks: {}, vpindex: {}, runtime: {}, "
        "frequencies: {}, tlbflush: {}, ipi: {}} for every VM using it; a VM-level field overrides the preference)")
    (given,) = _check(repo, "--select", "HV001", "vms/app.yaml", "defs/types.yaml")
    assert str(given["note"]).endswith("(the value comes from preference windows.team: change preference "
                                       "spec.features.preferredHyperv: {relaxed: {}, vapic: {}, spinlocks: {}, "
                                       "vpindex: {}, runtime: {}, frequencies: {}, tlbflush: {}, ipi: {}} for every "
                                       "VM using it; a VM-level field overrides the preference)")
    done = run_vmtune("check", "--isolated", "--fix", "--select", "HV001", "vms/app.yaml", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "defs" / "types.yaml").read_text() == TYPES
    fixed = (repo / "vms" / "app.yaml").read_text()
    assert fixed != VM and "spinlocks: 8191" in fixed  # the preference's retries carried to the VM
