"""Patched domains are accepted by a real libvirt QEMU driver, and the fixes survive define."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS, DOMAINS, FIXTURES, domain_xml
from helpers import findings, fix, host, options

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]
STACKS = sorted((FIXTURES / "stacks").glob("*/*.xml"))  # see fixtures/stacks/README.md


def _samples() -> list[Path]:
    paths = sorted(DOMAINS.glob("*.xml")) + sorted((FIXTURES / "tuned").glob("*.xml"))
    paths += sorted((FIXTURES / "virt-install").glob("*.xml"))
    corpus = CORPUS / "domains"
    if corpus.is_dir():
        paths += [p for p in sorted(corpus.glob("*.xml")) if any(
            f"arch={q}{arch}{q}".encode() in p.read_bytes() for arch in ("x86_64", "i686") for q in "'\"")]
    return paths


def _define_and_read(conn, libvirt, xml: str) -> tuple[str | None, str]:  # type: ignore[no-untyped-def]
    """The definition as libvirt keeps it, or None and libvirt's reason."""
    try:
        dom = conn.defineXML(xml)
    except libvirt.libvirtError as exc:
        return None, str(exc)
    try:
        return str(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)), ""
    finally:
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)


SETUPS = pytest.mark.parametrize("policy, caps, domcaps", [
    ("default", None, None), ("default", "intel-2node.xml", "domcaps-full.xml"),
    ("default", "intel-2node.xml", "domcaps-no-stimer.xml"), ("latency", "intel-2node.xml", None)],
    ids=["default", "hyperv-host", "no-stimer-host", "latency-host"])


def _define_patched(conn, libvirt, paths: list[Path], policy: str,  # type: ignore[no-untyped-def]
                    caps: str | None, domcaps: str | None) -> tuple[int, list[str]]:
    """Every fix of every rule (--fail-on info --unsafe-fixes) of each definable domain: how many
    patched domains libvirt defined, and what went wrong."""
    opts = options((policy,), host(caps, domcaps) if caps else None, fix_all=True)
    defined = 0
    problems: list[str] = []
    for path in paths:
        if path.name == "xen-ballooned.xml":
            continue  # a Xen guest: not for the QEMU driver
        original = path.read_bytes()
        if _define_and_read(conn, libvirt, original.decode())[0] is None:
            continue  # libvirt 9.0 here does not accept the original either (newer schema, other arch)
        outcome = fix(original, opts, unsafe=True)
        if not outcome.changed:
            continue
        after, reason = _define_and_read(conn, libvirt, outcome.fixed.decode())
        if after is None:
            problems.append(f"{path.name}: libvirt rejected the patched domain "
                            f"({', '.join(a.code for a in outcome.applied)}): {reason}")
            continue
        defined += 1
        # Dropped: libvirt's normalised definition would need the same fix again.
        fixed_codes = {a.code for a in outcome.applied}
        lost = fixed_codes & {a.code for a in fix(after, opts, unsafe=True).applied}
        if lost:
            problems.append(f"{path.name}: libvirt dropped the fixes of {sorted(lost)}")
    return defined, problems


@SETUPS
def test_patched_domains_define_and_keep_their_fixes(embed_conn, libvirt_mod, policy: str,  # type: ignore[no-untyped-def]
                                                     caps: str | None, domcaps: str | None) -> None:
    """A definable domain stays definable. The latency policy with a host adds pinning, NUMA
    binding, hint-dedicated and the balloon fixes."""
    defined, problems = _define_patched(embed_conn, libvirt_mod, _samples(), policy, caps, domcaps)
    assert problems == []
    assert defined >= (20 if not (CORPUS / "domains").is_dir() else 80), defined


@SETUPS
def test_patched_stack_domains_define_and_keep_their_fixes(embed_conn, libvirt_mod, policy: str,  # type: ignore[no-untyped-def]
                                                           caps: str | None, domcaps: str | None) -> None:
    """The same for what nova, KubeVirt, oVirt, vagrant-libvirt and CloudStack write."""
    defined, problems = _define_patched(embed_conn, libvirt_mod, STACKS, policy, caps, domcaps)
    assert problems == []
    assert defined >= 8, defined


DISK = ("<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='/d.img'/>"
        "<target dev='{dev}' bus='{bus}'{target}/>{extra}</disk>")


@pytest.mark.parametrize("bus, target, extra, message", [
    ("ide", "", "<wwn>5000c50015ea71ac</wwn>", "Only ide and scsi disk support wwn"),
    ("sata", " rotation_rate='1'", "", "rotation rate is only valid for SCSI/IDE/SATA bus"),
    ("ide", "", "<geometry cyls='1024' heads='16' secs='63' trans='lba'/>",
     "CHS translation mode can only be set for 'ide' bus"),
])
def test_what_dsk004_keeps_from_virtio_is_what_libvirt_rejects(embed_conn, libvirt_mod, bus: str,  # type: ignore[no-untyped-def]
                                                               target: str, extra: str, message: str) -> None:
    """The naive move to virtio is refused with libvirt's own message; vmtune's fix (none, or
    the move without `trans`) defines. IDE needs the i440fx machine."""
    machine = "pc" if bus == "ide" else "q35"
    dev = "hda" if bus == "ide" else "sda"
    emulated = domain_xml(name="dsk004", machine=machine, devices=DISK.format(dev=dev, bus=bus, target=target,
                                                                              extra=extra))
    assert _define_and_read(embed_conn, libvirt_mod, emulated)[0] is not None
    naive = domain_xml(name="dsk004", machine=machine, devices=DISK.format(dev="vda", bus="virtio", target=target,
                                                                           extra=extra))
    assert message in _define_and_read(embed_conn, libvirt_mod, naive)[1]
    outcome = fix(emulated, options(), unsafe=True)
    assert _define_and_read(embed_conn, libvirt_mod, outcome.fixed.decode())[0] is not None


@pytest.mark.parametrize("name", [p.name for p in STACKS if p.parent.name == "kubevirt"])
def test_kubevirt_generated_domains_define_as_written(embed_conn, libvirt_mod, name: str) -> None:  # type: ignore[no-untyped-def]
    """What KubeVirt's converter wrote (fixtures/stacks/kubevirt/dump) defines here, so the stack test
    above checks the fixes on them instead of skipping them as undefinable."""
    xml = (FIXTURES / "stacks" / "kubevirt" / name).read_text()
    after, reason = _define_and_read(embed_conn, libvirt_mod, xml)
    assert after is not None, reason


def test_usb001_reads_a_modelless_q35_controller_as_libvirt_does(embed_conn, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """libvirt 9.0 turns `<controller type='usb'/>` into a piix3-uhci on q35 too (only a q35 guest
    with no controller written gets a qemu-xhci): USB001 says so, and its fix defines as xHCI."""
    tablet = "<input type='tablet' bus='usb'/><graphics type='vnc'/>"
    written = domain_xml(name="usb001", devices="<controller type='usb'/>" + tablet)
    kept, reason = _define_and_read(embed_conn, libvirt_mod, written)
    assert kept is not None and "model='piix3-uhci'" in kept, reason
    (usb,) = [f for f in findings(written) if f.rule.code == "USB001"]
    assert usb.message == "USB controller default piix3-uhci is polled (idle host CPU)"
    fixed = fix(written, options(fix_select=("USB001",)), unsafe=True).fixed.decode()
    assert "<controller type='usb' model='qemu-xhci' ports='15'/>" in fixed
    kept, reason = _define_and_read(embed_conn, libvirt_mod, fixed)
    assert kept is not None and "model='qemu-xhci'" in kept, reason
    unwritten = domain_xml(name="usb001", devices=tablet)
    kept, reason = _define_and_read(embed_conn, libvirt_mod, unwritten)
    assert kept is not None and "model='qemu-xhci'" in kept, reason
    assert "USB001" not in [f.rule.code for f in findings(unwritten)]
