"""The throwaway copy `apply` starts before it calls a CPU or accelerator change verified: what the
copy keeps (what decides whether QEMU creates the vCPUs) and leaves out (anything the guest owns),
and what apply says where the driver cannot start a paused copy (the libvirt test driver).

The copy started by QEMU, failing and starting: tests/test_embed_apply.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import domain_xml

GUEST = """<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>db</name><uuid>7f1a2c3e-0000-4000-8000-000000000010</uuid><title>t</title>
  <memory unit='GiB'>64</memory><currentMemory unit='GiB'>64</currentMemory>
  <maxMemory slots='4' unit='GiB'>128</maxMemory>
  <memoryBacking><hugepages/><locked/></memoryBacking>
  <vcpu placement='static' cpuset='2-5'>4</vcpu>
  <iothreads>1</iothreads>
  <cputune><vcpupin vcpu='0' cpuset='2'/><cachetune vcpus='0-3'><cache id='0' level='3' type='both' size='3'
    unit='MiB'/></cachetune></cputune>
  <numatune><memory mode='strict' nodeset='0'/></numatune>
  <os firmware='efi'><type arch='x86_64' machine='q35'>hvm</type>
    <loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE.fd</loader>
    <nvram>/var/lib/libvirt/qemu/nvram/db_VARS.fd</nvram><kernel>/boot/vmlinuz</kernel><boot dev='hd'/></os>
  <features><acpi/><apic/><!-- a comment --></features>
  <cpu mode='host-passthrough' check='none'><topology sockets='1' cores='4' threads='1'/><feature policy='disable'
    name='vmx'/><numa><cell id='0' cpus='0-3' memory='64' unit='GiB'/></numa></cpu>
  <clock offset='utc'><timer name='hpet' present='no'/></clock>
  <on_crash>destroy</on_crash>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'><source file='/var/lib/libvirt/images/db.qcow2'/><target dev='vda'/></disk>
    <interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='br0'/></interface>
    <hostdev mode='subsystem' type='pci'><source><address domain='0' bus='3' slot='0' function='0'/></source></hostdev>
    <serial type='file'><source path='/var/log/db.log'/></serial>
    <filesystem type='mount'><driver type='virtiofs'/><source dir='/srv'/><target dir='srv'/></filesystem>
    <shmem name='shared'><model type='ivshmem-plain'/></shmem>
    <tpm model='tpm-crb'><backend type='emulator'/></tpm>
  </devices>
  <seclabel type='dynamic' model='selinux'/>
  <qemu:commandline><qemu:arg value='-drive'/></qemu:commandline>
</domain>"""


def test_the_copy_keeps_what_creates_the_vcpus_and_nothing_the_guest_owns() -> None:
    """No disk, interface, host device, log, shared directory or memory, TPM state, firmware
    variables, kernel, hugepages or pass-through argument: nothing the guest (running or not) or
    another guest uses; the accelerator, machine, CPU, features, clock and vCPU pinning as they are."""
    from vmtune.live.trial import throwaway_copy

    assert throwaway_copy(GUEST, "vmtune-trial-x", "00000000-0000-4000-8000-000000000001") == (
        '<domain type="kvm"><name>vmtune-trial-x</name><uuid>00000000-0000-4000-8000-000000000001</uuid>'
        '<memory unit="MiB">256</memory><vcpu placement="static" cpuset="2-5">4</vcpu><iothreads>1</iothreads>'
        '<cputune><vcpupin vcpu="0" cpuset="2"/></cputune><os><type arch="x86_64" machine="q35">hvm</type>\n'
        '    <boot dev="hd"/></os><features><acpi/><apic/></features><cpu mode="host-passthrough" check="none">'
        '<topology sockets="1" cores="4" threads="1"/><feature policy="disable" name="vmx"/></cpu>'
        '<clock offset="utc"><timer name="hpet" present="no"/></clock><on_crash>destroy</on_crash>'
        '<seclabel type="dynamic" model="selinux"/><devices><emulator>/usr/bin/qemu-system-x86_64</emulator>'
        '<memballoon model="none"/></devices></domain>')


@pytest.mark.parametrize(("old", "new", "changed"), [
    ("<domain type='qemu'><cpu mode='maximum'/></domain>", "<domain type='kvm'><cpu mode='maximum'/></domain>",
     ["the accelerator (qemu -> kvm)"]),
    ("<domain type='kvm'><cpu mode='custom'><model>qemu64</model></cpu></domain>",
     "<domain type='kvm'><cpu mode='host-passthrough'/></domain>",
     ["the CPU mode (custom -> host-passthrough)", "the CPU model (qemu64 -> none)"]),
    ("<domain type='kvm'><cpu mode='host-model'/></domain>",
     "<domain type='kvm'><cpu mode='host-model'><feature policy='require' name='x2apic'/></cpu></domain>",
     ["the CPU features"]),
    ("<domain type='kvm'><cpu mode='host-model'/><clock offset='utc'/></domain>",
     "<domain type='kvm'><cpu mode='host-model'><topology sockets='1' cores='2' threads='1'/></cpu>"
     "<clock offset='utc'><timer name='hpet' present='no'/></clock></domain>", []),
])
def test_what_makes_apply_start_a_copy(old: str, new: str, changed: list[str]) -> None:
    from vmtune.live.trial import start_relevant

    assert start_relevant(old, new) == changed


def test_qemus_reason_on_one_line_without_its_timestamps() -> None:
    from vmtune.live.trial import one_line

    reason = ("internal error: qemu unexpectedly closed the monitor: 2026-12-02T11:10:42.427545Z qemu-system-x86_64: "
              "error: failed to set MSR 0x10a to 0x69\nqemu-system-x86_64: kvm.c:3183: kvm_buf_set_msrs: Assertion "
              "failed.\n")
    assert one_line(reason) == ("internal error: qemu unexpectedly closed the monitor: qemu-system-x86_64: error: "
                                "failed to set MSR 0x10a to 0x69; qemu-system-x86_64: kvm.c:3183: kvm_buf_set_msrs: "
                                "Assertion failed.")
    assert len(one_line("x" * 5000)) == 400


def test_a_driver_that_cannot_start_a_paused_copy_leaves_the_start_unverified(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The test driver has no paused start: apply says it could not check, defines (libvirt took
    the definition) and does not call the start verified."""
    from vmtune.live.apply import apply_domain
    from vmtune.live.connection import open_connection

    from helpers import options

    conn = open_connection("test:///default")
    conn.defineXML(domain_xml(name="custom-cpu", cpu="<cpu mode='custom'><model>qemu64</model></cpu>"))
    lines: list[str] = []
    try:
        code = apply_domain(conn, "custom-cpu", options(fix_select=("CPU001",)), unsafe=True, yes=True,
                            state_root=tmp_path, confirm=lambda q: False, out=lines.append)
    finally:
        conn.lookupByName("custom-cpu").undefine()
        conn.close()
    assert code == 0, lines
    assert ("warning: not verified that it starts: the new definition changes the CPU mode (custom -> "
            "host-passthrough) and the CPU model (qemu64 -> none), and this connection cannot start a paused copy to "
            "check it (unsupported flags (0x1) in function testDomainCreateXML)") in lines, lines
    assert "verified: all 1 fix(es) persisted in the new definition libvirt accepted (not verified: that the guest " \
           "starts with it)" in lines, lines
