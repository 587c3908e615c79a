"""KubeVirt manifests as GitOps repositories keep them (issue 50): cluster-api-provider-kubevirt's
machine templates read as the VMs they make, instancetypes and preferences found in other files of
the same work tree, and what vmtune did not see said, never fixed from the partial view. Through
the real command: findings and their lines, exact fixed bytes, exit codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from kubevirt_schema import validate
from lxml import etree

from vmtune.stacks.frontend import read_file
from vmtune.stacks.kubevirt import frontend

from conftest import FIXTURES, run_vmtune
from helpers import findings, options

CAPK = FIXTURES / "stacks" / "kubevirt" / "capk" / "cluster.yaml"


def _findings(stdout: str) -> list[tuple[str, str, int, str]]:
    return [(f["rule"], f["severity"], f["line"], f["domain"]) for f in json.loads(stdout)["findings"]]


# -- cluster-api-provider-kubevirt -------------------------------------------------------------------

def test_a_kubevirt_machine_template_is_checked_as_the_vm_it_makes(tmp_path: Path) -> None:
    done = run_vmtune("check", "--isolated", "-f", "json", str(CAPK))
    assert done.returncode == 1, done.stderr
    assert _findings(done.stdout) == [
        ("CLK004", "info", 32, "KubevirtMachineTemplate/tenant-a-md-0"),
        ("DSK003", "info", 32, "KubevirtMachineTemplate/tenant-a-md-0"),
        ("MEM001", "info", 35, "KubevirtMachineTemplate/tenant-a-md-0"),
        ("NET001", "warning", 37, "KubevirtMachineTemplate/tenant-a-md-0")]
    (net001,) = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "NET001"]
    assert net001["note"] == ("spec.template.spec.virtualMachineTemplate.spec.template.spec.domain.devices."
                              "networkInterfaceMultiqueue: true")


def test_its_fix_is_written_in_the_vm_template_and_kubevirt_accepts_the_vm(tmp_path: Path) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_bytes(CAPK.read_bytes())
    done = run_vmtune("check", "--isolated", "--fix", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    before = CAPK.read_text().splitlines(keepends=True)
    assert manifest.read_text() == "".join(
        [*before[:41], "                  networkInterfaceMultiqueue: true\n", *before[41:]])
    template = next(d for d in yaml.safe_load_all(manifest.read_text()) if d["kind"] == "KubevirtMachineTemplate")
    vm = template["spec"]["template"]["spec"]["virtualMachineTemplate"]
    validate({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", **vm})
    assert run_vmtune("check", "--isolated", "--fix", str(manifest)).returncode == 0
    assert manifest.read_text() == "".join([*before[:41], "                  networkInterfaceMultiqueue: true\n",
                                            *before[41:]])


def test_the_machine_templates_vm_renders_as_the_same_vm_written_plainly() -> None:
    """The wrapper adds nothing: its VM, written as a VirtualMachine, renders to the same domain."""
    docs = list(yaml.safe_load_all(CAPK.read_text()))
    template = next(d for d in docs if d["kind"] == "KubevirtMachineTemplate")
    plain = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
             "metadata": {"name": template["metadata"]["name"], "namespace": "tenants"},
             "spec": template["spec"]["template"]["spec"]["virtualMachineTemplate"]["spec"]}
    (wrapped,), _ = frontend.render([read_file("capk.yaml", CAPK.read_bytes())])
    (vm,), _ = frontend.render([read_file("vm.yaml", yaml.safe_dump(plain).encode())])
    assert wrapped.xml == vm.xml and wrapped.name == "KubevirtMachineTemplate/tenant-a-md-0"


def test_other_cluster_api_kinds_are_not_read(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CAPK.read_text().split("---\n")[0])  # the KubevirtCluster alone
    done = run_vmtune("check", "--isolated", "c.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "vmtune: c.yaml: no KubeVirt, OpenStack or Terraform definition in it (--skip-non-domain " \
                          "skips such files)\n"


# -- references in other files of the work tree ------------------------------------------------------

TEAM_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: app
spec:
  instancetype:
    kind: VirtualMachineClusterInstancetype
    name: team.large
  preference:
    kind: VirtualMachineClusterPreference
    name: team.linux
  template:
    spec:
      domain:
        devices:
          disks:
          - name: root
            disk: {}
      volumes:
      - name: root
        containerDisk:
          image: quay.io/containerdisks/fedora
"""
TEAM_DEFS = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: team.large
spec:
  cpu: {guest: 16}
  memory: {guest: 32Gi}
---
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: team.linux
spec:
  cpu: {preferredCPUTopology: cores}
  devices: {preferredDiskBus: virtio, preferredInterfaceModel: virtio}
"""


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "vms").mkdir(parents=True)
    (repo / "defs").mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "vms" / "app.yaml").write_text(TEAM_VM)
    (repo / "defs" / "team.yaml").write_text(TEAM_DEFS)
    return repo


def _check(repo: Path, *args: str) -> tuple[int, list[dict[str, object]]]:
    done = run_vmtune("check", "--isolated", "-f", "json", *args, cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["findings"]


def test_a_vm_whose_instancetype_and_preference_live_in_another_file_is_judged_with_them(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    code, alone = _check(repo, "vms/app.yaml")  # what pre-commit passes when only the VM changed
    _code, both = _check(repo, "vms/app.yaml", "defs/team.yaml")
    assert alone == both
    assert code == 1 and [(f["rule"], f["severity"], f["line"]) for f in alone] == [
        ("CLK004", "info", 14), ("DSK003", "info", 14), ("MEM001", "info", 14), ("NET001", "warning", 15)]
    assert not any(f["rule"] == "STK001" for f in alone)
    fixed = run_vmtune("check", "--isolated", "--fix", "vms/app.yaml", cwd=repo)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (repo / "vms" / "app.yaml").read_text() == TEAM_VM.replace(
        "            disk: {}\n", "            disk: {}\n          networkInterfaceMultiqueue: true\n", 1)
    assert (repo / "defs" / "team.yaml").read_text() == TEAM_DEFS


def _unseen(findings: list[dict[str, object]]) -> list[tuple[object, object, object]]:
    return [(f["rule"], f["severity"], f["line"]) for f in findings]


def test_what_is_outside_the_work_tree_ignored_or_behind_a_symlink_is_not_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / "defs" / "team.yaml").rename(outside / "team.yaml")  # above the work tree
    (repo / "linked").symlink_to(outside, target_is_directory=True)  # a directory symlink out of it
    (repo / "file-link.yaml").symlink_to(outside / "team.yaml")  # a file symlink out of it
    (repo / "generated").mkdir()
    (repo / "generated" / "team.yaml").write_text(TEAM_DEFS)
    (repo / ".gitignore").write_text("generated/\n")  # git ignores it: not part of the repository
    (repo / "sub").mkdir()
    subprocess.run(["git", "init", "-q", str(repo / "sub")], check=True)
    (repo / "sub" / "team.yaml").write_text(TEAM_DEFS)  # a work tree of its own (a submodule)
    before = (repo / "vms" / "app.yaml").read_bytes()
    done = run_vmtune("check", "--isolated", "--fix", "-f", "json", "vms/app.yaml", cwd=repo)
    assert done.returncode == 0, done.stderr  # nothing above info: what it depends on was not seen
    assert (repo / "vms" / "app.yaml").read_bytes() == before  # no fix from the partial view
    found = json.loads(done.stdout)["findings"]
    notes = [f for f in found if f["rule"] == "STK001"]
    assert [(f["line"], f["severity"]) for f in notes] == [(6, "info"), (9, "info")]
    assert str(notes[0]["message"]) == (
        "instancetype team.large not found in the files given: its CPU and memory are not checked; the cluster "
        "must have it: KubeVirt does not start a VM whose instancetype it cannot find; no other file of its git "
        "work tree defines it; --instancetypes PATH names where it is. No fix is written for this VM: a "
        "VM-level field could shadow what it sets")
    assert all(f["severity"] == "info" and f["fix"] is None for f in found)


def test_a_common_instancetypes_name_is_taken_as_the_bundle_defines_it_and_said(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "vms" / "app.yaml").write_text(TEAM_VM.replace("team.large", "u1.2xlarge").replace("team.linux",
                                                                                                "windows.2k22.virtio"))
    (repo / "defs" / "team.yaml").unlink()
    _code, found = _check(repo, "vms/app.yaml")
    assert not any(f["rule"] == "STK001" for f in found)
    assert [(f["rule"], f["line"]) for f in found if str(f["message"]).startswith("assumed: ") and
            "common-instancetypes" in str(f["message"])] == [("STK002", 6), ("STK002", 9)]
    assert str(next(f for f in found if f["line"] == 9)["message"]) == (
        "assumed: preference windows.2k22.virtio as common-instancetypes v1.7.0 (fb2fbb9687ba) defines it "
        "(virt-operator of KubeVirt 1.9 deploys it cluster-wide: the newest release vmtune knows; --kubevirt-version "
        "X.Y names the cluster's; no file given or in the work tree defines it); the cluster may run others: "
        "--instancetypes PATH names the definitions it runs")
    # its Hyper-V set and timers are the preference's: no Windows warning, as on KubeVirt's own XML
    assert not [f for f in found if f["severity"] != "info"]


# the cases KubeVirt renders (the one it refuses is test_kubevirt_passthrough's)
CIT_RENDERED = sorted(p for p in (FIXTURES / "stacks" / "kubevirt" / "oracle").glob("cit-*.yaml")
                      if p.with_suffix(".xml").exists())


@pytest.mark.parametrize("manifest", CIT_RENDERED, ids=lambda p: p.stem)
def test_common_instancetypes_vms_given_alone_get_kubevirts_verdict(manifest: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle's common-instancetypes cases, with no file defining what they name: the table
    gives the verdict KubeVirt's converter gives with the bundle deployed."""
    from vmtune.rules.base import Severity
    from vmtune.stacks.kubevirt import render as render_module

    monkeypatch.setattr(render_module, "NODE_TSC_HZ", None)  # as the oracle's XML was generated
    (item,), _ = frontend.render([read_file(manifest.name, manifest.read_bytes())])
    assert [n.code for n in item.notes if n.code == "STK001"] == []
    opts = options(os=item.os_family)
    mine = {f.rule.code for f in findings(item.xml, opts) if f.severity >= Severity.WARNING}
    theirs = {f.rule.code for f in findings(manifest.with_suffix(".xml").read_bytes(), opts)
              if f.severity >= Severity.WARNING}
    assert mine == theirs


def test_the_search_is_bounded_and_says_where_it_stopped(tmp_path: Path, monkeypatch: object) -> None:
    import os

    from vmtune.stacks.kubevirt import lookup

    repo = _repo(tmp_path)
    (repo / "defs" / "team.yaml").rename(repo / "defs" / "zz.yaml")
    for i in range(30):
        (repo / "defs" / f"a{i:02}.yaml").write_text("a: 1\n")
    monkeypatch.setattr(lookup, "MAX_ENTRIES", 20)  # type: ignore[attr-defined]
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        (item,), _ = frontend.render([read_file("vms/app.yaml", (repo / "vms" / "app.yaml").read_bytes())])
    finally:
        os.chdir(cwd)
    (note, _pref) = [n for n in item.notes if n.code == "STK001"]
    assert "the search of its work tree stopped after 20 entries: not all of it was seen" in note.message


# -- fixes that follow KubeVirt's merge semantics ----------------------------------------------------

TEAM_WINDOWS = """\
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
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  preference:
    kind: VirtualMachineClusterPreference
    name: windows.team
  template:
    spec:
      domain:
        cpu:
          cores: 4
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
        memory:
          guest: 8Gi
      volumes:
      - name: root
        persistentVolumeClaim:
          claimName: win
"""
# What --fix writes: the Hyper-V timer and enlightenments the preference lacks, with the preference's
# timers and spinlock retries carried, since a VM-level timer set and spinlocks replace the preference's
CARRIED = """\
        clock:
          timer:
            hpet:
              present: false
            pit:
              tickPolicy: delay
            rtc:
              tickPolicy: catchup
            hyperv:
              present: true
        features:
          hyperv:
            synic: {}
            synictimer: {}
            vpindex: {}
            spinlocks:
              spinlocks: 8191
            relaxed: {}
            vapic: {}
            runtime: {}
            frequencies: {}
            tlbflush: {}
            ipi: {}
"""
# The fields those fixes wrote before: KubeVirt then drops the preference's whole timer set and
# defaults the spinlocks to 4096 retries
SHADOWING = """\
        clock:
          timer:
            hyperv:
              present: true
        features:
          hyperv:
            synic: {}
            synictimer: {}
            vpindex: {}
            relaxed: {}
            vapic: {}
            spinlocks: {}
            runtime: {}
            frequencies: {}
            tlbflush: {}
            ipi: {}
"""


def _with(fields: str) -> str:
    return TEAM_WINDOWS.replace("          guest: 8Gi\n", "          guest: 8Gi\n" + fields, 1)


def _domain(text: str) -> tuple[etree._Element, dict[str, str]]:
    (item,), _ = frontend.render([read_file("win.yaml", text.encode())])
    found = {f.rule.code: str(f.severity) for f in findings(item.xml, options(os="windows"))}
    return etree.fromstring(item.xml), found


def test_a_fix_carries_the_preference_values_a_vm_level_field_would_shadow(tmp_path: Path) -> None:
    manifest = tmp_path / "win.yaml"
    manifest.write_text(TEAM_WINDOWS)
    done = run_vmtune("check", "--isolated", "--fix", "win.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert manifest.read_text() == _with(CARRIED)
    root, after = _domain(_with(CARRIED))
    assert root.find("clock/timer[@name='hpet']").get("present") == "no"
    assert root.find("clock/timer[@name='rtc']").get("tickpolicy") == "catchup"
    assert root.find("clock/timer[@name='pit']").get("tickpolicy") == "delay"
    assert root.find("features/hyperv/spinlocks").get("retries") == "8191"
    # rendered again, no worse in any finding: only the three fixed warnings are gone
    _root, before = _domain(TEAM_WINDOWS)
    assert set(before) - set(after) == {"CLK001", "CLK002", "HV001"}
    assert all(before[code] == severity for code, severity in after.items())
    assert run_vmtune("check", "--isolated", "--fix", "win.yaml", cwd=tmp_path).returncode == 0
    assert manifest.read_text() == _with(CARRIED)  # idempotent


def test_the_fields_written_before_shadowed_the_preference() -> None:
    """Why the carrying is needed, on KubeVirt's rules as rendered: the old fix lost the timers."""
    root, _found = _domain(_with(SHADOWING))
    assert root.find("clock/timer[@name='hpet']") is None or root.find("clock/timer[@name='hpet']").get(
        "present") != "no"
    assert root.find("clock/timer[@name='rtc']") is None
    assert root.find("features/hyperv/spinlocks").get("retries") == "4096"
