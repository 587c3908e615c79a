"""`vmtune check` on KubeVirt manifests, through the real command: the lines findings point at,
exit codes, what a directory walk and stdin read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, run_vmtune

KV_ORACLE = FIXTURES / "stacks" / "kubevirt" / "oracle"

WINDOWS_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win10
spec:
  preference:
    kind: VirtualMachineClusterPreference
    name: windows.10.team
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


# -- --fix writes the KubeVirt fields into the manifest ------------------------------------------------

FIXED_WINDOWS_VM = WINDOWS_VM.replace("""            spinlocks: {}
""", """            spinlocks: {}
            synic: {}
            synictimer: {}
            vpindex: {}
            runtime: {}
            frequencies: {}
            tlbflush: {}
            ipi: {}
""")


def _stated(text: str) -> str:
    """The Windows VM without a preference, its OS stated as OpenShift's common templates state it."""
    return text.replace("  name: win10\n", '  name: win10\n  labels:\n    os.template.kubevirt.io/win10: "true"\n', 1) \
        .replace("  preference:\n    kind: VirtualMachineClusterPreference\n    name: windows.10.team\n", "", 1)


def test_fix_adds_the_hyperv_fields_that_cure_the_synthetic_timer_warning(tmp_path: Path) -> None:
    from kubevirt_schema import validate

    manifest = tmp_path / "win10.yaml"
    manifest.write_text(_stated(WINDOWS_VM))
    result = run_vmtune("check", "--fix", "--format", "json", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr  # what remains is info
    assert manifest.read_text() == _stated(FIXED_WINDOWS_VM)
    validate(yaml.safe_load(_stated(FIXED_WINDOWS_VM)))
    assert not {"CLK002", "HV001"} & {f[0] for f in _findings(result.stdout)}
    again = run_vmtune("check", "--fix", str(manifest))
    assert again.returncode == 0 and manifest.read_text() == _stated(FIXED_WINDOWS_VM)  # idempotent


def test_no_fix_is_written_on_a_vm_whose_preference_vmtune_did_not_see(tmp_path: Path) -> None:
    """windows.10.team is the cluster's own preference, in no file vmtune read: Hyper-V fields written
    on the VM would shadow its values. The warning on the mapping the VM writes stays; nothing is written."""
    manifest = tmp_path / "win10.yaml"
    manifest.write_text(WINDOWS_VM)
    result = run_vmtune("check", "--fix", "--format", "json", str(manifest))
    assert result.returncode == 1, result.stdout + result.stderr
    assert manifest.read_text() == WINDOWS_VM
    found = json.loads(result.stdout)["findings"]
    (clk002,) = [f for f in found if f["rule"] == "CLK002"]
    assert (clk002["severity"], clk002["line"], clk002["fix"]) == ("warning", 26, None)
    assert clk002["note"].endswith("(not fixed: vmtune did not see preference windows.10.team, which a VM-level "
                                   "field could shadow)")


def test_fix_turns_on_multiqueue_for_sixteen_cores(tmp_path: Path) -> None:
    from kubevirt_schema import validate

    source = Path("fixtures/stacks/kubevirt/dump/vmi-linux-16cores.yaml").read_text()
    manifest = tmp_path / "vm.yaml"
    manifest.write_text(source)
    result = run_vmtune("check", "--fix", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr
    expected = source.replace("      rng: {}\n", "      rng: {}\n      networkInterfaceMultiqueue: true\n")
    assert manifest.read_text() == expected
    validate(yaml.safe_load(manifest.read_text()))


KNOB_BASE = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm}
spec:
  template:
    spec:
      domain:
        devices:
          disks:
          - {name: root, disk: {bus: sata}}
          interfaces:
          - {name: default, masquerade: {}, model: e1000}
          inputs:
          - {name: tablet, type: tablet, bus: usb}
        memory: {guest: 4Gi}
      networks:
      - {name: default, pod: {}}
      volumes:
      - {name: root, persistentVolumeClaim: {claimName: root}}
"""
PREFERENCE_BASE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachinePreference
metadata: {name: p}
spec: {}
"""
INSTANCETYPE_BASE = """\
apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineInstancetype
metadata: {name: it}
spec: {cpu: {guest: 2}, memory: {guest: 4Gi}}
"""


def _rows() -> list[tuple[str, int]]:
    from vmtune.stacks.kubevirt.knobs_rows import ROWS

    return [(code, i) for code, knobs in sorted(ROWS.items()) for i, k in enumerate(knobs) if k.value is not None]


@pytest.mark.parametrize("code, index", _rows())
def test_every_knob_with_a_value_writes_a_manifest_kubevirts_schema_accepts(code: str, index: int) -> None:
    """The field names and values of the knob table, against KubeVirt's own OpenAPI schema."""
    from kubevirt_schema import validate

    from vmtune.stacks.kubevirt.knobs_rows import ROWS
    from vmtune.stacks.yamledit import set_paths

    knob = ROWS[code][index]
    base, prefix = {"vmi": (KNOB_BASE, ("spec", "template", "spec")), "preference": (PREFERENCE_BASE, ("spec",)),
                    "instancetype": (INSTANCETYPE_BASE, ("spec",))}[knob.on]
    path = tuple(0 if key == "[]" else key for key in (*prefix, *knob.path))
    fixed = set_paths(base.encode(), [(0, path, knob.value)])
    validate(yaml.safe_load(fixed))


# -- a well-tuned Windows preference (issue #33's "Done when") ---------------------------------------

CIT = "fixtures/stacks/kubevirt/instancetypes/common-instancetypes-cluster-"  # kubevirt/common-instancetypes 7c1e305
WIN2K22 = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win2k22
spec:
  instancetype:
    kind: VirtualMachineClusterInstancetype
    name: u1.xlarge
  preference:
    kind: VirtualMachineClusterPreference
    name: windows.2k22.virtio
  runStrategy: Always
  template:
    spec:
      domain:
        devices:
          disks:
          - name: rootdisk
            disk:
              bus: virtio
          interfaces:
          - name: default
            masquerade: {}
            model: virtio
          networkInterfaceMultiqueue: true
      networks:
      - name: default
        pod: {}
      volumes:
      - name: rootdisk
        dataVolume:
          name: win2k22-root
"""


def test_a_virtio_vm_on_the_windows_2k22_virtio_preference_gets_no_warning(tmp_path: Path) -> None:
    # The preference turns on Hyper-V reenlightenment: KubeVirt gives it the nodes' TSC frequency
    # (assumed, and said as STK002 at the domain mapping the preference fills), so no HV005.
    manifest = tmp_path / "win2k22.yaml"
    manifest.write_text(WIN2K22)
    result = run_vmtune("check", "--format", "json", "--instancetypes", CIT + "preferences.yaml",
                        "--instancetypes", CIT + "instancetypes.yaml", str(manifest))
    assert result.returncode == 0, result.stdout
    found = _findings(result.stdout)
    assert [f for f in found if f[1] != "info"] == []
    assert ("STK002", "info", 15, "VirtualMachine/win2k22") in found


def test_the_sata_and_e1000e_of_the_non_virtio_windows_preference_are_real_costs(tmp_path: Path) -> None:
    # windows.2k22 (no .virtio) picks the buses Windows has in-box drivers for: emulated AHCI and e1000e
    manifest = tmp_path / "win2k22.yaml"
    manifest.write_text(WIN2K22.replace("windows.2k22.virtio", "windows.2k22")
                        .replace("            disk:\n              bus: virtio\n", "")
                        .replace("            model: virtio\n", ""))
    result = run_vmtune("check", "--format", "json", "--instancetypes", CIT + "preferences.yaml",
                        "--instancetypes", CIT + "instancetypes.yaml", str(manifest))
    assert result.returncode == 1, result.stdout
    assert {(f[0], f[2]) for f in _findings(result.stdout) if f[1] != "info"} == {("DSK004", 18), ("NET004", 20)}


# -- CLK001: KubeVirt has a knob for the hypervclock timer (kubevirt/user-guide virtual_hardware.md) -----

HYPERV_NO_CLOCK = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: myvmi
spec:
  domain:
    features:
      hyperv:
        relaxed: {}
        vapic: {}
        spinlocks:
          spinlocks: 8191
    resources:
      requests:
        memory: 512M
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


def test_the_hypervclock_finding_names_kubevirts_hyperv_timer_and_the_fix_writes_it(tmp_path: Path) -> None:
    # spec.domain.clock.timer.hyperv is what makes virt-launcher write <timer name="hypervclock">
    # (converter: Convert_v1_Clock_To_api_Clock); vmtune said no KubeVirt field changed it
    from kubevirt_schema import validate

    manifest = tmp_path / "myvmi.yaml"
    manifest.write_text(HYPERV_NO_CLOCK)
    result = run_vmtune("check", "--format", "json", "--select", "CLK001", str(manifest))
    (clk001,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "CLK001"]
    assert clk001["note"].startswith("spec.domain.clock: {utc: {}, timer: {hyperv: {present: true}}}")
    fixed = run_vmtune("check", "--fix", "--select", "CLK001", str(manifest))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = manifest.read_text()
    assert yaml.safe_load(text)["spec"]["domain"]["clock"] == {"utc": {}, "timer": {"hyperv": {"present": True}}}
    validate(yaml.safe_load(text))


def test_the_hypervclock_fix_keeps_the_timers_a_clock_already_has(tmp_path: Path) -> None:
    manifest = tmp_path / "myvmi.yaml"
    manifest.write_text(HYPERV_NO_CLOCK.replace("    resources:\n", "    clock:\n      timezone: Europe/Berlin\n"
                                                "      timer:\n        hpet:\n          present: false\n"
                                                "    resources:\n", 1))
    fixed = run_vmtune("check", "--fix", "--select", "CLK001", str(manifest))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    clock = yaml.safe_load(manifest.read_text())["spec"]["domain"]["clock"]
    assert clock == {"timezone": "Europe/Berlin", "timer": {"hpet": {"present": False}, "hyperv": {"present": True}}}


def test_the_hypervclock_fix_turns_an_explicitly_disabled_timer_on_with_unsafe_fixes(tmp_path: Path) -> None:
    manifest = tmp_path / "myvmi.yaml"
    manifest.write_text(HYPERV_NO_CLOCK.replace("    resources:\n", "    clock:\n      utc: {}\n      timer:\n"
                                                "        hyperv:\n          present: false\n"
                                                "    resources:\n", 1))
    fixed = run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "CLK001", str(manifest))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert yaml.safe_load(manifest.read_text())["spec"]["domain"]["clock"] == {"utc": {}, "timer": {"hyperv": {
        "present": True}}}


# -- STK003: a key KubeVirt's API does not have under domain (ocp-virt-cookbook's vm-realtime.yaml puts
# ioThreadsPolicy under cpu; an OpenShift user's VM spells autoattachGraphicsDevices) -------------------

MISPLACED = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: rt
spec:
  template:
    spec:
      domain:
        cpu:
          cores: 2
          ioThreadsPolicy: auto
        devices:
          autoattachGraphicsDevices: false
          disks:
          - name: root
            disk:
              bus: virtio
        memory:
          guest: 2Gi
      volumes:
      - name: root
        containerDisk:
          image: quay.io/containerdisks/fedora
"""


def test_a_key_kubevirt_does_not_have_under_domain_is_said_where_it_belongs(tmp_path: Path) -> None:
    manifest = tmp_path / "rt.yaml"
    manifest.write_text(MISPLACED)
    result = run_vmtune("check", "--format", "json", "--select", "STK003", str(manifest))
    assert result.returncode == 0, result.stdout + result.stderr
    notes = [(f["rule"], f["severity"], f["line"], f["message"]) for f in json.loads(result.stdout)["findings"]]
    assert notes == [
        ("STK003", "info", 11, "spec.template.spec.domain.cpu.ioThreadsPolicy is not a field of the KubeVirt API "
                               "(d923fdb, after v1.9.0-beta.0): the API server refuses or drops it, so it has no "
                               "effect; it is a field of domain.ioThreadsPolicy"),
        ("STK003", "info", 13, "spec.template.spec.domain.devices.autoattachGraphicsDevices is not a field of the "
                               "KubeVirt API (d923fdb, after v1.9.0-beta.0): the API server refuses or drops it, so "
                               "it has no effect; did you mean autoattachGraphicsDevice?"),
    ]


def test_every_wild_manifest_kubevirt_renders_has_only_kubevirt_fields_but_three_known_slips() -> None:
    # the public manifests of oracle/wild: the three real slips are said (KubeVirt's own user guide's
    # realtime VM, copied by the cookbook, has ioThreadsPolicy under cpu), nothing else is
    from vmtune.stacks.kubevirt.fields import unknown
    from vmtune.stacks.kubevirt.objects import find

    slips = {}
    for path in sorted((KV_ORACLE / "wild").glob("*.yaml")):
        if not path.with_suffix(".xml").exists():
            continue
        (vmi,) = find([d for d in yaml.safe_load_all(path.read_text()) if d is not None]).vmis
        for where, _advice in unknown(vmi.spec.get("domain")):
            slips[path.stem] = where
    assert slips == {"ck-vm-realtime": ("cpu", "ioThreadsPolicy"), "ug-numa-119": ("cpu", "ioThreadsPolicy"),
                     "wangjun-intel-eci-ubuntu-realtime": ("devices", "autoattachGraphicsDevices")}


def test_a_knob_that_picks_its_own_host_cpus_is_advised_without_vmtunes_host_facts() -> None:
    """CPU004's XML fix needs host CPUs to pin the emulator to (the policy's housekeeping_cpus or
    --host); KubeVirt's isolateEmulatorThread and nova's hw:emulator_threads_policy pick them
    themselves, so their advice no longer ends with "… or give --host"."""
    kubevirt = run_vmtune("check", "--select", "CPU004", str(KV_ORACLE / "var-dedicated-cpu.yaml"))
    assert kubevirt.returncode == 1, kubevirt.stderr
    assert "\n    note: spec.domain.cpu.isolateEmulatorThread: true\n" in kubevirt.stdout
    openstack = FIXTURES / "stacks" / "openstack"
    nova = run_vmtune("check", "--select", "CPU004", str(openstack / "flavor-show.yaml"),
                      str(openstack / "image-show.yaml"))
    assert nova.returncode == 1, nova.stderr
    assert ("\n    note: on the flavor c1.pinned: hw:emulator_threads_policy=isolate; run: openstack flavor set "
            "--property hw:emulator_threads_policy=isolate c1.pinned\n") in nova.stdout
    assert "housekeeping" not in kubevirt.stdout + nova.stdout


def test_a_vm_the_renderer_refuses_is_one_line_and_the_other_files_are_checked(tmp_path: Path) -> None:
    # A VM past QEMU's 4,096 vCPUs used to end every stack check of the run: "0 domain(s) checked"
    # and exit 2, the other manifests' (and Terraform's, OpenStack's) findings lost.
    (tmp_path / "huge.yaml").write_text(WINDOWS_VM.replace("cores: 4", "cores: 100000"))
    (tmp_path / "win.yaml").write_text(WINDOWS_VM)
    done = run_vmtune("check", "--isolated", "-f", "json", "huge.yaml", "win.yaml", cwd=tmp_path)
    assert done.returncode == 2
    line = WINDOWS_VM.splitlines().index("        cpu:") + 1
    assert done.stderr == (f"vmtune: huge.yaml:{line}: VirtualMachine/win10: 100,000 vCPUs (sockets × cores × threads, "
                           "or the CPU request): more than 4,096, the most QEMU's q35 machine starts\n")
    report = json.loads(done.stdout)
    assert report["summary"]["domains"] == 1
    assert {f["file"] for f in report["findings"]} == {"win.yaml"}
