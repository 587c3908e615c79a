"""Fixed guests still start: every fix of every rule, on a host without /dev/vhost-net.

Each definition is fixed as written (a KVM guest), then the original and the fixed text get
the same startable form (disks on a scratch raw file, NICs on a tap libvirt creates, no devices
that need a desktop, a daemon or host hardware, 256 MiB of RAM, TCG instead of KVM, whose
/dev/kvm on these machines runs only special guest kernels). Where libvirt's QEMU driver starts
the original, it must start the fixed one too. Guests start paused and are destroyed at once:
libvirt and QEMU check every device and property they were given (vhost-net, queue counts,
Hyper-V dependencies) before the first instruction runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from lxml import etree

from vmtune.fixer import FixOutcome

from conftest import CORPUS, DOMAINS, FIXTURES
from helpers import fix, options

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

UNSTARTABLE_HERE = ("graphics", "video", "sound", "audio", "redirdev", "smartcard", "tpm", "hostdev",
                    "filesystem", "channel[@type='spicevmc']", "shmem", "vsock", "iommu", "memory",
                    "crypto", "watchdog[@action='dump']")


def _samples() -> list[Path]:
    paths = sorted(DOMAINS.glob("*.xml")) + sorted((FIXTURES / "tuned").glob("*.xml"))
    paths += sorted((FIXTURES / "virt-install").glob("*.xml"))
    corpus = CORPUS / "domains"
    if corpus.is_dir():
        paths += [p for p in sorted(corpus.glob("*.xml")) if b"x86_64" in p.read_bytes()]
    return [p for p in paths if p.name != "xen-ballooned.xml"]


def _startable(data: bytes, scratch: Path) -> bytes | None:
    """The same guest with what this test host can give it; None when it is no KVM x86 guest."""
    root = etree.fromstring(data)
    if root.get("type") != "kvm" or root.find("os/type[@arch='x86_64']") is None:
        return None
    root.set("type", "qemu")
    # TCG refuses Hyper-V enlightenments ("kernel doesn't allow setting HyperV VP_INDEX"): both
    # sides lose them, and the Hyper-V fixes are proven by define and HV002's dependency table.
    for el in root.findall("features/hyperv") + root.findall("clock/timer[@name='hypervclock']"):
        el.getparent().remove(el)
    cpu = root.find("cpu")
    if cpu is not None and cpu.get("mode") in ("host-passthrough", "host-model"):
        cpu.set("mode", "maximum")
        for attr in ("migratable", "check"):
            cpu.attrib.pop(attr, None)
    for tag in ("memory", "currentMemory"):
        el = root.find(tag)
        if el is not None:
            el.text, el.attrib["unit"] = "256", "MiB"
    for el in root.findall("maxMemory") + root.findall("cpu/numa"):
        el.getparent().remove(el)
    devices = root.find("devices")
    if devices is None:
        return None
    for path in UNSTARTABLE_HERE:
        for el in devices.findall(path):
            devices.remove(el)
    # What the stacks write for their own hosts (fixtures/stacks): another distribution's QEMU
    # path and machine types, and serial logs and sockets in directories only they create.
    for el in devices.findall("emulator") + devices.findall("channel[@type='unix']"):
        devices.remove(el)
    for el in devices.findall("serial") + devices.findall("console"):
        for child in el.findall("log") + el.findall("source"):
            el.remove(child)
        el.set("type", "pty")
    os_type = root.find("os/type")
    if os_type is not None and "rhel" in os_type.get("machine", ""):
        os_type.set("machine", "q35" if "q35" in os_type.get("machine", "") else "pc")
    for index, disk in enumerate(devices.findall("disk")):
        if disk.get("device", "disk") not in ("disk", "cdrom"):
            devices.remove(disk)
            continue
        disk.set("type", "file")
        for child in disk.findall("source") + disk.findall("backingStore") + disk.findall("auth"):
            disk.remove(child)
        image = scratch / f"disk{index}.raw"  # one file per disk: QEMU locks each image
        if not image.exists():
            image.write_bytes(b"\0" * (1 << 20))
        etree.SubElement(disk, "source", file=str(image))
        driver = disk.find("driver")
        if driver is not None:
            driver.set("type", "raw")
    for nic in devices.findall("interface"):
        if nic.get("type") not in ("network", "bridge", "ethernet", "direct", "user"):
            devices.remove(nic)
            continue
        nic.set("type", "ethernet")
        for child in nic.findall("source") + nic.findall("virtualport") + nic.findall("target"):
            nic.remove(child)
    return etree.tostring(root)


def _starts(conn, libvirt, xml: bytes) -> str | None:  # type: ignore[no-untyped-def]
    """None when the guest started (paused), else libvirt's reason."""
    try:
        dom = conn.defineXML(xml.decode())
    except libvirt.libvirtError as exc:
        return f"define: {exc}"
    try:
        dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        dom.destroy()
        return None
    except libvirt.libvirtError as exc:
        return str(exc)
    finally:
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)


def combination(outcome: FixOutcome) -> frozenset[tuple[str, str]]:
    """What a fixed guest exercises: the fixes applied, each as its rule and what it did (numbers
    left out: 'set 4 queues' and 'set 8 queues' take the same path)."""
    return frozenset((a.code, re.sub(r"\d+", "N", a.description)) for a in outcome.applied)


def _start_fixed(conn, libvirt, paths: list[Path], scratch: Path) -> tuple[int, list[str]]:  # type: ignore[no-untyped-def]
    """Every fix of every rule of each guest this host can start: how many fixed guests were
    tried, and which did not start. Host facts only change Hyper-V fixes, which a TCG start cannot
    judge: no host is given.

    One guest per combination of applied fixes is started: what a start adds to define is QEMU
    refusing a device, property or combination the fixes made, and another guest with the same
    fixes goes through the same path. The first in `paths` whose fixed form starts, or else whose
    original starts, stands for its combination (the project's fixtures come before the corpus),
    so no combination that some startable guest has is left out.

    The fixed guest is started first: when it starts, the original's start cannot make a problem
    of it, and is skipped (a start is most of this test's time). Only a fixed guest that does not
    start needs its original started, to tell a broken fix from a guest this host never starts."""
    opts = options(("default",), fix_all=True)
    started = 0
    tried: set[frozenset[tuple[str, str]]] = set()
    problems: list[str] = []
    for path in paths:
        data = path.read_bytes()
        outcome = fix(data, opts, unsafe=True)
        original = _startable(data, scratch)
        if not outcome.changed or original is None or combination(outcome) in tried:
            continue
        fixed = _startable(outcome.fixed, scratch)
        assert fixed is not None
        reason = _starts(conn, libvirt, fixed)
        if reason is not None and _starts(conn, libvirt, original) is not None:
            continue  # not a guest this host can start before any fix either
        tried.add(combination(outcome))
        if reason is not None:
            problems.append(f"{path.name} ({', '.join(a.code for a in outcome.applied)}): {reason}")
        started += 1
    return started, problems


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
def test_fixed_guests_start_where_the_originals_did(embed_conn, libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    started, problems = _start_fixed(embed_conn, libvirt_mod, _samples(), tmp_path)
    print(f"\n{started} fixed guests started, one per combination of fixes")
    assert problems == []
    # 29 combinations with the corpus (of 116 fixed guests), 10 or more from the project's fixtures alone
    assert started >= (10 if not (CORPUS / "domains").is_dir() else 25), started


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
def test_fixed_stack_guests_start_where_the_originals_did(embed_conn, libvirt_mod,  # type: ignore[no-untyped-def]
                                                          tmp_path: Path) -> None:
    """What nova, KubeVirt, oVirt, vagrant-libvirt and CloudStack write (fixtures/stacks)."""
    started, problems = _start_fixed(embed_conn, libvirt_mod, sorted((FIXTURES / "stacks").glob("*/*.xml")),
                                     tmp_path)
    assert problems == []
    assert started >= 5, started


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
def test_cpu025_fixes_a_tcg_guest_libvirt_refuses_to_start(embed_conn, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """CPU025's error is what libvirt 9.0 says: a host-passthrough TCG guest defines but does
    not start; its fix (mode='maximum') starts."""
    from conftest import domain_xml

    original = domain_xml(dtype="qemu", memory="<memory unit='MiB'>256</memory>").encode()
    assert "host-passthrough" in (_starts(embed_conn, libvirt_mod, original) or "")
    outcome = fix(original, options(("default",), fix_select=("CPU025",)), unsafe=True)
    assert [a.code for a in outcome.applied] == ["CPU025"]
    assert b"<cpu mode='maximum'/>" in outcome.fixed
    assert _starts(embed_conn, libvirt_mod, outcome.fixed) is None


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
def test_dsk010_fix_gives_a_queue_per_vcpu_and_the_guest_starts(embed_conn, libvirt_mod,  # type: ignore[no-untyped-def]
                                                                 tmp_path: Path) -> None:
    """DSK010's unsafe fix (queues = online vCPUs) on a virtio disk and a virtio-scsi controller:
    libvirt passes it to QEMU as num-queues and the guest starts, as the original did."""
    from conftest import domain_xml

    image = tmp_path / "disk.raw"
    image.write_bytes(b"\0" * 1024 * 1024)
    devices = (f"<disk type='file' device='disk'><driver name='qemu' type='raw' queues='1'/>"
               f"<source file='{image}'/><target dev='vda' bus='virtio'/></disk>"
               "<controller type='scsi' index='0' model='virtio-scsi'><driver queues='1'/></controller>")
    original = domain_xml(name="dsk010", dtype="qemu", cpu="<cpu mode='maximum'/>", vcpus=4, devices=devices,
                          memory="<memory unit='MiB'>256</memory>").encode()
    assert _starts(embed_conn, libvirt_mod, original) is None
    outcome = fix(original, options(("default",), fix_select=("DSK010",)), unsafe=True)
    assert [a.code for a in outcome.applied] == ["DSK010", "DSK010"]
    assert b"<driver name='qemu' type='raw' queues='4'/>" in outcome.fixed
    assert b"<controller type='scsi' index='0' model='virtio-scsi'><driver queues='4'/></controller>" in outcome.fixed
    assert _starts(embed_conn, libvirt_mod, outcome.fixed) is None


def _kvm_fixed_then_tcg(xml: str, code: str) -> tuple[bytes, bytes]:
    """A KVM guest's fix of one rule, and both texts as TCG guests with 256 MiB (what starts here)."""
    outcome = fix(xml, options(("default",), fix_select=(code,)), unsafe=True)
    assert [a.code for a in outcome.applied] == [code]
    return (xml.replace("<domain type='kvm'>", "<domain type='qemu'>").encode(),
            outcome.fixed.replace(b"<domain type='kvm'>", b"<domain type='qemu'>"))


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
@pytest.mark.parametrize("code, cpu", [
    ("CPU033", "<cpu mode='custom' match='exact'><model fallback='forbid'>Haswell-noTSX</model>"
               "<feature policy='disable' name='pcid'/></cpu>"),
    ("CPU034", "<cpu mode='custom' match='exact'><model fallback='forbid'>Haswell-noTSX</model>"
               "<cache mode='disable'/></cpu>"),
    ("CPU035", "<cpu mode='custom' match='exact'><model fallback='forbid'>Nehalem</model></cpu>"),
])
def test_guest_cpu_fixes_start_where_the_originals_did(embed_conn, libvirt_mod, code: str,  # type: ignore[no-untyped-def]
                                                       cpu: str) -> None:
    """The removed pcid policy, the removed cache mode and the x86-64-v3 level (qemu64 with AVX2,
    which QEMU 7.2's TCG emulates) start under TCG as the originals did."""
    from conftest import domain_xml

    original, fixed = _kvm_fixed_then_tcg(domain_xml(name=code.lower(), cpu=cpu,
                                                     memory="<memory unit='MiB'>256</memory>"), code)
    assert _starts(embed_conn, libvirt_mod, original) is None
    assert _starts(embed_conn, libvirt_mod, fixed) is None


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
def test_dsk011_ioeventfd_off_with_an_iothread_does_not_start_and_its_fix_does(  # type: ignore[no-untyped-def]
        embed_conn, libvirt_mod, tmp_path: Path) -> None:
    """DSK011's error is QEMU's refusal, for virtio-blk and virtio-scsi alike."""
    from conftest import domain_xml

    image = tmp_path / "disk.raw"
    image.write_bytes(b"\0" * 1024 * 1024)
    devices = (f"<disk type='file' device='disk'><driver name='qemu' type='raw' iothread='1' ioeventfd='off'/>"
               f"<source file='{image}'/><target dev='vda' bus='virtio'/></disk>"
               "<controller type='scsi' index='0' model='virtio-scsi'><driver iothread='1' ioeventfd='off'/>"
               "</controller>")
    original = domain_xml(name="dsk011", dtype="qemu", cpu="<cpu mode='maximum'/>", devices=devices,
                          extra="<iothreads>1</iothreads>", memory="<memory unit='MiB'>256</memory>").encode()
    assert "ioeventfd is required for iothread" in (_starts(embed_conn, libvirt_mod, original) or "")
    outcome = fix(original, options(("default",)), unsafe=True)  # errors are fixed by a bare --fix --unsafe-fixes
    assert [a.code for a in outcome.applied] == ["DSK011", "DSK011"]
    assert outcome.fixed == original.replace(b" ioeventfd='off'", b"")
    assert _starts(embed_conn, libvirt_mod, outcome.fixed) is None


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="/dev/kvm is not usable")
def test_a_host_model_tcg_guest_starts_so_cpu025_leaves_it_alone(embed_conn, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """Issue 48 asked for an error on TCG with host-model too: libvirt 9.0 and QEMU 7.2 start
    it (libvirt computes host-model from what TCG offers), so CPU025 judges host-passthrough only."""
    from conftest import domain_xml
    from helpers import codes

    xml = domain_xml(name="tcg-host-model", dtype="qemu", cpu="<cpu mode='host-model'/>",
                     memory="<memory unit='MiB'>256</memory>")
    assert _starts(embed_conn, libvirt_mod, xml.encode()) is None
    assert "CPU025" not in codes(xml)
