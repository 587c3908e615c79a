"""Domains written once by tools that are not managers (fixtures/tools, see its README for how
each was rendered by the tool's own code): the tool is recognised, the OS it implies is used,
and the notes name the tool's creation-time knob and when the tool recreates the domain."""

from __future__ import annotations

import pytest

from vmtune.facts.domain import Domain
from vmtune.rules.base import Finding
from vmtune.xml.safe import parse_domain

from conftest import FIXTURES, run_vmtune
from helpers import findings, options

TOOLS = FIXTURES / "tools"
ALL = sorted(TOOLS.glob("*.xml"))


def _domain(name: str) -> Domain:
    return Domain(parse_domain((TOOLS / name).read_bytes(), name), name)


def _one(found: list[Finding], code: str) -> Finding:
    hits = [f for f in found if f.rule.code == code]
    assert len(hits) == 1, [f.rule.code for f in found]
    return hits[0]


def test_the_fixtures_say_where_they_came_from() -> None:
    readme = (TOOLS / "README.md").read_text()
    assert len(ALL) == 9
    for path in ALL:
        assert f"`{path.name}`" in readme, f"{path.name} has no provenance in fixtures/tools/README.md"


@pytest.mark.parametrize("name, tool, family", [
    ("minikube.xml", "minikube", "linux"),
    ("minikube-kvm-hidden.xml", "minikube", "linux"),
    ("crc.xml", "crc", "linux"),
    ("multipass.xml", "multipass", "linux"),
    ("kcli-ubuntu.xml", "kcli", "linux"),
    ("kcli-win2k22.xml", "kcli", "windows"),
    ("virt-lightning-ubuntu.xml", "virt-lightning", "linux"),
    ("webvirtcloud.xml", "webvirtcloud", None),
    ("webvirtcloud-sata.xml", "webvirtcloud", None),
])
def test_each_tools_domain_is_recognised_with_the_os_it_implies(name: str, tool: str, family: str | None) -> None:
    domain = _domain(name)
    assert domain.creator is not None and domain.creator[0] == tool
    assert (domain.os_family, domain.os_guess.source) == (family, "tool" if family else None)


@pytest.mark.parametrize("name, why", [
    ("minikube.xml", "minikube's kvm2 driver, whose ISO is Linux"),
    ("crc.xml", "CRC, whose VM runs Red Hat CoreOS"),
    ("multipass.xml", "multipass, which launches Ubuntu images"),
    ("kcli-ubuntu.xml", "kcli's image 'ubuntu2404'"),
])
def test_the_tools_linux_guests_get_the_hpet_warning_saying_how_the_os_was_known(name: str, why: str) -> None:
    hpet = _one(findings((TOOLS / name).read_text()), "CLK003")
    assert hpet.message == "HPET is exposed to the guest by default"
    assert hpet.note is not None
    assert hpet.note.endswith(f"OS inferred as linux from {why} (no libosinfo metadata); if wrong, give --os "
                              "linux|windows")


def test_a_kcli_windows_guest_gets_the_hyperv_and_timer_checks() -> None:
    found = findings((TOOLS / "kcli-win2k22.xml").read_text())
    codes = {f.rule.code for f in found}
    assert {"HV001", "CLK001", "CLK002"} <= codes
    assert "CLK003" not in codes  # the Linux HPET warning is not given to Windows
    assert _one(found, "HV001").note == (
        "created by kcli: no kcli knob; kcli writes the domain once, so a fix to it lasts; OS inferred as windows "
        "from kcli's image 'win2k22.qcow2' (no libosinfo metadata); if wrong, give --os linux|windows")


def test_the_note_names_the_verified_knob_and_when_minikube_recreates_the_domain() -> None:
    hidden = _one(findings((TOOLS / "minikube-kvm-hidden.xml").read_text()), "CLK007")
    assert hidden.note == (
        "created by minikube: minikube start --kvm-hidden=false for the next guest; a fix to this definition lasts "
        "until minikube delete then minikube start writes the domain again from its template; OS inferred as linux "
        "from minikube's kvm2 driver, whose ISO is Linux (no libosinfo metadata); if wrong, give --os linux|windows")


def test_kcli_multiqueue_names_the_nets_parameter() -> None:
    queues = _one(findings((TOOLS / "kcli-ubuntu.xml").read_text()), "NET001")
    assert queues.note is not None
    assert queues.note.startswith("created by kcli: kcli parameter nets: [{name: ..., multiqueues: N}] for the next "
                                  "guest; kcli writes the domain once, so a fix to it lasts")


def test_crc_says_no_knob_and_when_it_recreates() -> None:
    hpet = _one(findings((TOOLS / "crc.xml").read_text()), "CLK003")
    assert hpet.note is not None
    assert hpet.note.startswith("created by CRC: no CRC knob; a fix to this definition lasts until crc delete then "
                                "crc start writes the domain again from its template; ")


def test_webvirtcloud_names_its_setting_and_an_unknown_os_boot_disk_switch_says_what_to_do_first() -> None:
    """WebVirtCloud implies no OS: its SATA boot disk keeps the unsafe fix, never as if harmless."""
    bus = _one(findings((TOOLS / "webvirtcloud-sata.xml").read_text()), "DSK004")
    assert bus.message == "disk sda is on the emulated sata bus"
    assert bus.fix is not None and bus.fix.safety.value == "unsafe"
    assert bus.note == (
        "created by WebVirtCloud: WebVirtCloud setting INSTANCE_VOLUME_DEFAULT_BUS=virtio for the next guest; "
        "WebVirtCloud writes the domain once, so a fix to it lasts; OS unknown: if this is Windows, load viostor "
        "before moving its boot disk")


def test_a_long_or_hostile_image_name_is_cut_and_escaped_in_the_note() -> None:
    xml = (TOOLS / "kcli-ubuntu.xml").read_text().replace(
        "<kvirt:image>ubuntu2404</kvirt:image>", "<kvirt:image>ubuntu&#x202e;&#10;" + "x" * 500 + "</kvirt:image>")
    result = run_vmtune("check", "-", stdin=xml.encode())
    assert result.returncode == 1 and result.stderr == ""
    notes = [line for line in result.stdout.splitlines() if "kcli's image" in line]
    assert notes and all(line.startswith("    note: ") for line in notes)
    # 80 characters at most (ubuntu, the override, the newline, 72 x), then an ellipsis; escaped
    assert "OS inferred as linux from kcli's image 'ubuntu\\u202e\\n" + "x" * 72 + "...' (no libosinfo" in notes[0]


def test_libosinfo_and_os_still_win_over_the_tool() -> None:
    xml = (TOOLS / "kcli-win2k22.xml").read_text()
    assert "HV001" not in {f.rule.code for f in findings(xml, options(os="linux"))}


@pytest.mark.parametrize("name, family", [
    ("win2k22.qcow2", "windows"), ("windows-server-2022", "windows"), ("win10", "windows"),
    ("Win11_23H2.iso", "windows"), ("ubuntu2404", "linux"), ("centos-stream-9", "linux"),
    ("rhcos-4.16", "linux"), ("fedora-40", "linux"), ("freebsd-14", "other"),
    ("darwin", None), ("twinkle", None), ("mytemplate", None),
])
def test_family_from_an_image_or_distro_name(name: str, family: str | None) -> None:
    from vmtune.facts.creator import family_from_name

    assert family_from_name(name) == family


@pytest.mark.parametrize("folder", ["stacks", "tuned", "virt-install", "domains"])
def test_no_other_fixture_is_taken_for_a_tools_domain(folder: str) -> None:
    """Precision: nothing the stacks, virt-install or hand-tuned files write is read as a tool's."""
    for path in sorted((FIXTURES / folder).rglob("*.xml")):
        try:
            domain = Domain(parse_domain(path.read_bytes(), str(path)), str(path))
        except Exception:  # fixtures that are not domains (hosts, broken on purpose)
            continue
        assert domain.creator is None, path


def test_the_tools_fixtures_check_without_crash_through_the_cli() -> None:
    result = run_vmtune("check", "--format", "json", str(TOOLS))
    assert result.returncode in (0, 1), result.stderr
    assert result.stderr == ""
    assert f'"domains": {len(ALL)}' in result.stdout


# -- an unknown OS: the boot-disk switch is never offered as if it were harmless -------------------

_SCSI_BOOT = """<domain type='kvm'><name>d</name><memory>1048576</memory><os><type arch='x86_64'>hvm</type></os>
<devices><controller type='scsi' index='0' model='lsilogic'/>
<disk type='file' device='disk'><source file='/var/lib/libvirt/images/d.qcow2'/>
<target dev='sda' bus='scsi'/><boot order='1'/></disk></devices></domain>"""


def test_dsk007_offers_the_unknown_os_boot_disk_fix_with_what_to_do_first() -> None:
    hba = _one(findings(_SCSI_BOOT), "DSK007")
    assert hba.fix is not None
    assert hba.note == "OS unknown: if this is Windows, load vioscsi before moving its boot disk"


def test_dsk007_on_a_known_linux_guest_says_nothing_extra() -> None:
    hba = _one(findings(_SCSI_BOOT, options(os="linux")), "DSK007")
    assert hba.fix is not None and hba.note is None


# -- what the tools wrote, and vmtune's fixes of it, is what libvirt's QEMU driver defines -------------

@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_each_fixture_and_its_fixed_version_define(path, embed_conn, libvirt_mod, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / path.name
    target.write_bytes(path.read_bytes())
    result = run_vmtune("check", "--fix", "--unsafe-fixes", "--fail-on", "info", str(target))
    assert result.returncode in (0, 1) and result.stderr == "", result.stderr
    # every one had something to fix but virt-lightning's (HPET off, no disk before it attaches one)
    assert (target.read_bytes() == path.read_bytes()) == (path.name == "virt-lightning-ubuntu.xml")
    for xml in (path.read_text(), target.read_text()):
        dom = embed_conn.defineXML(xml)
        try:
            assert dom.name()
        finally:
            dom.undefineFlags(libvirt_mod.VIR_DOMAIN_UNDEFINE_NVRAM)
