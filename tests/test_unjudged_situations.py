"""The situations issue 48 found no rule judging: each rule's edges, its severity and its exact
patched bytes (the embedded-driver proofs are in test_embed_start.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vmtune.rules.base import Severity

from conftest import FIXTURES, domain_xml, run_vmtune
from helpers import codes, findings, fix, options

EXPLICIT = "written explicitly: if deliberate, suppress it with its reason"
DISK = ("<disk type='file' device='disk'><driver name='qemu' type='raw'{drv}/>"
        "<source file='{src}'/><target dev='vda' bus='virtio'/></disk>")


def _only(xml: str, code: str, opts=None):  # type: ignore[no-untyped-def]
    (finding,) = [f for f in findings(xml, opts) if f.rule.code == code]
    return finding


def _fixed(xml: str, code: str) -> bytes:
    outcome = fix(xml, options(fix_select=(code,)), unsafe=True)
    assert [a.code for a in outcome.applied] == [code]
    return outcome.fixed


def _validates(data: bytes, tmp_path: Path) -> bool:
    if shutil.which("virt-xml-validate") is None:
        pytest.skip("virt-xml-validate is not installed")
    target = tmp_path / "domain.xml"
    target.write_bytes(data)
    return subprocess.run(["virt-xml-validate", str(target), "domain"], capture_output=True).returncode == 0


# -- CPU032: vCPUs of one domain on the same host CPUs ------------------------------------------

@pytest.mark.parametrize("pins, message", [
    ("<vcpupin vcpu='0' cpuset='4'/><vcpupin vcpu='1' cpuset='4'/>",
     "vCPUs 0-1 are pinned to host CPU 4: 2 vCPUs take turns on 1"),
    ("<vcpupin vcpu='0' cpuset='2-3'/><vcpupin vcpu='1' cpuset='2-3'/><vcpupin vcpu='2' cpuset='2'/>"
     "<vcpupin vcpu='3' cpuset='3'/>", "vCPUs 0-3 are pinned to host CPUs 2-3: 4 vCPUs take turns on 2"),
])
def test_cpu032_reports_vcpus_crowded_on_host_cpus_once(pins: str, message: str) -> None:
    xml = domain_xml(vcpus=4 if "'3'" in pins else 2, extra=f"<cputune>{pins}<emulatorpin cpuset='0'/></cputune>")
    finding = _only(xml, "CPU032")
    assert finding.severity is Severity.WARNING and finding.message == message and finding.fix is None
    assert finding.line == 10  # the <cputune> line of the template, where the pins are


@pytest.mark.parametrize("pins, vcpus", [
    ("<vcpupin vcpu='0' cpuset='2-5'/><vcpupin vcpu='1' cpuset='2-5'/>", "<vcpu>2</vcpu>"),  # a floating pin
    ("<vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/>", "<vcpu>2</vcpu>"),  # one CPU each
    # vCPU 1 is a hot-plug slot that does not run at boot: nothing shares CPU 2 yet
    ("<vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='2'/>",
     "<vcpu current='1'>2</vcpu><vcpus><vcpu id='0' enabled='yes'/><vcpu id='1' enabled='no'/></vcpus>"),
])
def test_cpu032_is_silent_where_each_vcpu_has_room(pins: str, vcpus: str) -> None:
    assert "CPU032" not in codes(domain_xml(vcpus=vcpus, extra=f"<cputune>{pins}<emulatorpin cpuset='0'/></cputune>"))


# -- CPU033 / CPU034: PCID and the cache information switched off -------------------------------

@pytest.mark.parametrize("feature", ["<feature policy='disable' name='pcid'/>",
                                     "<feature policy='forbid' name='invpcid'/>"])
def test_cpu033_removes_the_disabled_pcid_feature(feature: str) -> None:
    xml = domain_xml(cpu=f"<cpu mode='host-model'>\n    {feature}\n  </cpu>")
    finding = _only(xml, "CPU033")
    assert finding.severity is Severity.WARNING and finding.note == EXPLICIT
    assert str(finding.fix.safety) == "unsafe"  # type: ignore[union-attr]
    assert _fixed(xml, "CPU033") == xml.replace(f"<cpu mode='host-model'>\n    {feature}\n  </cpu>",
                                                "<cpu mode='host-model'/>").encode()
    assert fix(xml).fixed == xml.encode()  # a bare --fix leaves an explicit value alone


def test_cpu033_ignores_pcid_required_or_on_another_arch() -> None:
    assert "CPU033" not in codes(domain_xml(cpu="<cpu mode='host-model'><feature policy='require' name='pcid'/>"
                                                "</cpu>"))
    assert "CPU033" not in codes(domain_xml(arch="aarch64", machine="virt",
                                            cpu="<cpu mode='host-passthrough'><feature policy='disable' "
                                                "name='pcid'/></cpu>"))


def test_cpu034_removes_cache_disable_and_spares_one_vcpu() -> None:
    xml = domain_xml(cpu="<cpu mode='host-model'>\n    <cache mode='disable'/>\n  </cpu>")
    assert _only(xml, "CPU034").severity is Severity.WARNING
    assert _fixed(xml, "CPU034") == xml.replace("<cpu mode='host-model'>\n    <cache mode='disable'/>\n  </cpu>",
                                                "<cpu mode='host-model'/>").encode()
    assert "CPU034" not in codes(domain_xml(vcpus=1, cpu="<cpu mode='host-model'><cache mode='disable'/></cpu>"))
    assert "CPU034" not in codes(domain_xml(cpu="<cpu mode='host-model'><cache level='3' mode='emulate'/></cpu>"))


# -- CPU035: named models older than AVX2 --------------------------------------------------------

V3 = ("aes", "popcnt", "pni", "sse4.1", "sse4.2", "ssse3", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm",
      "movbe", "xsave")


def test_cpu035_offers_the_x86_64_v3_level_and_cpu001_accepts_it() -> None:
    xml = domain_xml(cpu="<cpu mode='custom' match='exact'>\n    <model fallback='allow'>Nehalem</model>\n"
                         "    <feature policy='optional' name='avx2'/>\n  </cpu>")
    finding = _only(xml, "CPU035")
    assert finding.message == "guest CPU model Nehalem hides AVX2 and AES-NI from the guest"
    assert finding.severity is Severity.WARNING and "migration" in (finding.note or "")
    added = "".join(f"\n    <feature name='{n}' policy='require'/>" for n in V3 if n != "avx2")
    expected = xml.replace("<model fallback='allow'>Nehalem</model>", "<model fallback='forbid'>qemu64</model>") \
        .replace("<feature policy='optional' name='avx2'/>", "<feature policy='require' name='avx2'/>" + added)
    fixed = _fixed(xml, "CPU035")
    assert fixed == expected.encode()
    assert not {"CPU001", "CPU035"} & set(codes(fixed, options(fix_all=True)))


@pytest.mark.parametrize("model, hidden", [("SandyBridge", "AVX2"), ("Westmere-IBRS", "AVX2"),
                                           ("Opteron_G3", "AVX2 and AES-NI"), ("Conroe", "AVX2 and AES-NI")])
def test_cpu035_names_what_each_generation_hides(model: str, hidden: str) -> None:
    xml = domain_xml(cpu=f"<cpu mode='custom' match='exact'><model>{model}</model></cpu>")
    assert _only(xml, "CPU035").message == f"guest CPU model {model} hides {hidden} from the guest"


@pytest.mark.parametrize("cpu", ["<cpu mode='custom' match='exact'><model>Haswell-noTSX</model></cpu>",
                                 "<cpu mode='custom' match='exact'><model>EPYC</model></cpu>",
                                 "<cpu mode='host-model'><model>Nehalem</model></cpu>",  # host-model's own
                                 "<cpu mode='custom' match='exact'><model>qemu64</model></cpu>"])  # CPU001's
def test_cpu035_is_silent_on_models_with_avx2_and_other_modes(cpu: str) -> None:
    assert "CPU035" not in codes(domain_xml(cpu=cpu))


def test_cpu035_on_a_stack_managed_guest_is_info_naming_the_clusters_setting() -> None:
    finding = _only((FIXTURES / "stacks" / "ovirt" / "vm-compat41.xml").read_bytes().decode(), "CPU035")
    assert finding.severity is Severity.INFO
    assert finding.note == ("managed by oVirt: cluster setting: CPU Type (REST cluster.cpu.type), the newest every "
                            "host of the cluster runs; the fleet's CPU baseline: raise it once every host the guest "
                            "may migrate to runs a newer model")


# -- LAT002: idle=poll on a direct-boot command line ---------------------------------------------

def test_lat002_removes_idle_poll_and_keeps_the_other_words() -> None:
    boot = "\n    <kernel>/boot/vmlinuz</kernel>\n    <cmdline>console=ttyS0 idle=poll quiet</cmdline>"
    xml = domain_xml(boot=boot)
    finding = _only(xml, "LAT002")
    assert finding.severity is Severity.WARNING and finding.line == 14
    assert finding.message == "guest kernel booted with idle=poll: idle vCPUs spin and burn host CPU other threads need"
    assert _fixed(xml, "LAT002") == xml.replace("console=ttyS0 idle=poll quiet", "console=ttyS0 quiet").encode()
    alone = domain_xml(boot="\n    <kernel>/boot/vmlinuz</kernel>\n    <cmdline>idle=poll</cmdline>")
    assert _fixed(alone, "LAT002") == alone.replace("\n    <cmdline>idle=poll</cmdline>", "").encode()


def test_lat002_is_info_on_dedicated_vcpus_and_silent_on_other_idle_values() -> None:
    pinned = "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/><emulatorpin cpuset='0'/></cputune>"
    xml = domain_xml(extra=pinned, boot="<kernel>/k</kernel><cmdline>idle=poll</cmdline>")
    assert _only(xml, "LAT002").severity is Severity.INFO
    for words in ("idle=halt", "idle=pollx", "xidle=poll"):
        assert "LAT002" not in codes(domain_xml(boot=f"<kernel>/k</kernel><cmdline>{words}</cmdline>"))


# -- DSK011 / NET009: virtio event_idx and ioeventfd off ----------------------------------------

def test_dsk011_event_idx_off_is_a_warning_fixed_by_removing_it() -> None:
    xml = domain_xml(devices=DISK.format(drv=" event_idx='off'", src="/var/lib/libvirt/images/a.img"))
    finding = _only(xml, "DSK011")
    assert finding.severity is Severity.WARNING and finding.note == EXPLICIT
    assert finding.message.startswith("virtio disk vda: event_idx off")
    assert _fixed(xml, "DSK011") == xml.replace(" event_idx='off'", "").encode()
    assert fix(xml).fixed == xml.encode()


def test_dsk011_ioeventfd_off_with_an_iothread_is_an_error() -> None:
    disk = DISK.format(drv=" iothread='1' ioeventfd='off'", src="/var/lib/libvirt/images/a.img")
    xml = domain_xml(extra="<iothreads>1</iothreads>", devices=disk
                     + "<controller type='scsi' index='0' model='virtio-scsi'><driver iothread='1' ioeventfd='off'/>"
                       "</controller>")
    found = [f for f in findings(xml) if f.rule.code == "DSK011"]
    assert [(f.severity, f.message) for f in found] == [
        (Severity.ERROR, "virtio disk vda is served by an I/O thread with ioeventfd off: QEMU refuses to start it "
                         "(ioeventfd is required for iothread)"),
        (Severity.ERROR, "virtio-scsi controller is served by an I/O thread with ioeventfd off: QEMU refuses to "
                         "start it (ioeventfd is required for iothread)")]
    without = domain_xml(devices=DISK.format(drv=" ioeventfd='off'", src="/var/lib/libvirt/images/a.img"))
    assert _only(without, "DSK011").severity is Severity.WARNING


def test_net009_and_the_switches_left_on() -> None:
    nic = "<interface type='bridge'><source bridge='br0'/><model type='virtio'/><driver {}/></interface>"
    xml = domain_xml(devices=nic.format("name='vhost' queues='2' event_idx='off' ioeventfd='off'"))
    assert [f.message for f in findings(xml) if f.rule.code == "NET009"] == [
        "virtio NIC: event_idx off: the guest and QEMU notify each other on every buffer, more interrupts and exits",
        "virtio NIC: ioeventfd off: every queue notification stops the vCPU until QEMU's main loop has handled it"]
    assert b"<driver name='vhost' queues='2'/>" in fix(xml, options(), unsafe=True).fixed
    assert "NET009" not in codes(domain_xml(devices=nic.format("name='vhost' event_idx='on'")))
    e1000 = "<interface type='bridge'><source bridge='br0'/><model type='e1000'/><driver ioeventfd='off'/></interface>"
    assert "NET009" not in codes(domain_xml(devices=e1000))


# -- DSK012: O_DIRECT on tmpfs ---------------------------------------------------------------------

def _policy(tmp_path: Path, **params: str) -> Path:
    lines = "".join(f"      {k}: {v}\n" for k, v in params.items())
    path = tmp_path / "host.yaml"
    path.write_text(f"name: host\nextends: default\nrules:\n  - select: [direct-io-on-tmpfs]\n    params:\n{lines}")
    return path


def test_dsk012_is_a_warning_when_the_kernel_is_unknown(tmp_path: Path) -> None:
    xml = domain_xml(devices=DISK.format(drv=" cache='none' io='native'", src="/dev/shm/scratch.img"))
    finding = _only(xml, "DSK012")
    assert finding.severity is Severity.WARNING
    assert finding.message == ("cache='none' (O_DIRECT) on an image in /dev/shm, tmpfs: host kernels before 6.6 "
                               "refuse to open it")
    # io='native' needs O_DIRECT (DSK001): it goes with the cache mode
    assert _fixed(xml, "DSK012") == xml.replace(" cache='none' io='native'", " cache='writeback'").encode()
    assert "DSK012" not in codes(domain_xml(devices=DISK.format(drv=" cache='none'", src="/var/lib/a.img")))
    assert "DSK012" not in codes(domain_xml(devices=DISK.format(drv=" cache='writeback'", src="/dev/shm/a.img")))
    assert "DSK012" not in codes(domain_xml(devices=DISK.format(drv=" cache='none'", src="/dev/shmx/a.img")))


def test_dsk012_from_the_host_kernel_policy_parameter(tmp_path: Path) -> None:
    image = domain_xml(devices=DISK.format(drv=" cache='directsync'", src="/tmp/scratch.img"))
    target = tmp_path / "vm.xml"
    target.write_text(image)
    old = run_vmtune("check", "--policy", str(_policy(tmp_path, host_kernel="6.1.0-18-amd64",
                                                      tmpfs_paths="/dev/shm,/tmp")), str(target))
    assert old.returncode == 1, old.stdout + old.stderr
    assert (f"{target}:26: DSK012 error cache='directsync' (O_DIRECT) on an image in /tmp, tmpfs: the host kernel "
            "6.1 refuses O_DIRECT there (6.6 accepts it), the guest does not start (direct-io-on-tmpfs) "
            "[unsafe fix]") in old.stdout.splitlines()
    new = run_vmtune("check", "--select", "DSK012", "--policy",
                     str(_policy(tmp_path, host_kernel="6.6.8", tmpfs_paths="/dev/shm,/tmp")), str(target))
    assert new.returncode == 0 and "0 finding(s)" in new.stdout
    default = run_vmtune("check", "--select", "DSK012", str(target))  # /tmp is not tmpfs unless the policy says so
    assert default.returncode == 0 and "0 finding(s)" in default.stdout


# -- DSK004 on USB disks, USB001 on pseries ------------------------------------------------------

USB_DISK = "<disk type='file' device='disk'><source file='/d.img'/><target dev='sdb' bus='usb'{}/>{}</disk>"
BOOT = "<disk type='file' device='disk'><source file='/boot.img'/><target dev='vda' bus='virtio'/></disk>"


def test_dsk004_moves_a_usb_disk_to_virtio(tmp_path: Path) -> None:
    xml = domain_xml(devices=BOOT + USB_DISK.format("", "<address type='usb' bus='0' port='1'/>")
                     + "<controller type='usb' model='qemu-xhci'/>")
    finding = _only(xml, "DSK004")
    assert finding.severity is Severity.WARNING and finding.message == "disk sdb is on the emulated usb bus"
    fixed = fix(xml, options(), unsafe=True).fixed
    assert fixed == xml.replace("<target dev='sdb' bus='usb'/><address type='usb' bus='0' port='1'/>",
                                "<target dev='vdb' bus='virtio'/>").encode()
    assert _validates(fixed, tmp_path)


def test_dsk004_reports_a_removable_usb_stick_at_info_without_fix() -> None:
    xml = domain_xml(devices=BOOT + USB_DISK.format(" removable='on'", ""))
    finding = _only(xml, "DSK004")
    assert finding.severity is Severity.INFO and finding.fix is None
    assert finding.note is not None and "removable" in finding.note


PSERIES_TABLET = ("<controller type='usb' index='0'{}/><input type='tablet' bus='usb'/>"
                  "<graphics type='vnc' port='-1'/>")


def test_usb001_judges_the_ohci_controller_of_a_pseries_guest(tmp_path: Path) -> None:
    xml = domain_xml(arch="ppc64le", machine="pseries", cpu="<cpu mode='host-model'/>",
                     clock="<clock offset='utc'/>", devices=PSERIES_TABLET.format(" model='pci-ohci'"))
    finding = _only(xml, "USB001")
    assert finding.message == "USB controller pci-ohci is polled (idle host CPU)"
    fixed = fix(xml, options(), unsafe=True).fixed
    assert fixed == xml.replace("model='pci-ohci'", "model='qemu-xhci' ports='15'").encode()
    assert _validates(fixed, tmp_path)
    default = domain_xml(arch="ppc64le", machine="pseries", cpu="<cpu mode='host-model'/>",
                         clock="<clock offset='utc'/>", devices=PSERIES_TABLET.format(""))
    assert _only(default, "USB001").message == "USB controller default pci-ohci is polled (idle host CPU)"
    aarch64 = domain_xml(arch="aarch64", machine="virt", cpu="<cpu mode='host-passthrough'/>",
                         clock="<clock offset='utc'/>", devices=PSERIES_TABLET.format(" model='pci-ohci'"))
    assert "USB001" not in codes(aarch64)  # other machines' controllers are not judged


def test_the_pseries_and_cmdline_fixes_define_on_the_test_driver(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """No ppc64 QEMU here: USB001's pseries fix is proven by libvirt's schema (above) and the test
    driver's define; LAT002's fixed command line is what libvirt keeps."""
    conn = libvirt_mod.open("test:///default")
    pseries = domain_xml(name="pseries", arch="ppc64le", machine="pseries", cpu="<cpu mode='host-model'/>",
                         clock="<clock offset='utc'/>", devices=PSERIES_TABLET.format(" model='pci-ohci'"))
    kept = conn.defineXML(fix(pseries, options(), unsafe=True).fixed.decode()).XMLDesc(0)
    assert "<controller type='usb' index='0' model='qemu-xhci' ports='15'/>" in kept
    direct = domain_xml(name="direct", boot="<kernel>/boot/vmlinuz</kernel><cmdline>console=ttyS0 idle=poll</cmdline>")
    kept = conn.defineXML(_fixed(direct, "LAT002").decode()).XMLDesc(0)
    assert "<cmdline>console=ttyS0</cmdline>" in kept
