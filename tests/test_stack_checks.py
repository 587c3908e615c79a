"""The checks the management stacks make (issue 22): each rule's edges, its exact fix, and
that its fixed domain is one libvirt accepts."""

from __future__ import annotations

import pytest

from vmtune.rules.base import Severity

from conftest import FULL_HYPERV, TUNED_CLOCK, domain_xml
from helpers import findings, fix, host, options

WIN = {"os": "windows"}
WIN11_META = ("<libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>"
              "<libosinfo:os id='http://microsoft.com/win/{version}'/></libosinfo:libosinfo>")
SCSI_DISK = ("<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'/>"
             "<source file='/{name}.img'/><target dev='{dev}' bus='scsi'/></disk>")
VIRTIO_DISK = ("<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'{extra}/>"
               "<source file='/v.img'/><target dev='vda' bus='virtio'/></disk>")
PINNED_NODE1 = "<cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/><emulatorpin cpuset='4'/>"


def only(code: str, xml: str, opts=None):  # type: ignore[no-untyped-def]
    found = [f for f in findings(xml, opts) if f.rule.code == code]
    assert len(found) <= 1, found
    return found[0] if found else None


def fixed(code: str, xml: str, opts=None) -> str:  # type: ignore[no-untyped-def]
    outcome = fix(xml, opts or options(fix_select=(code,)), unsafe=True)
    assert code in {a.code for a in outcome.applied}, (outcome.withheld, outcome.applied)
    return outcome.fixed.decode()


# -- CPU016: explicit topologies of more sockets than Windows client editions use ----------------
@pytest.mark.parametrize("topology, expected", [
    ("<topology sockets='8' cores='1' threads='1'/>", "<topology sockets='1' cores='8' threads='1'/>"),
    ("<topology sockets='4' dies='1' cores='1' threads='2'/>",
     "<topology sockets='1' dies='1' cores='4' threads='2'/>"),
])
def test_cpu016_folds_an_explicit_many_socket_topology_into_one_socket(topology: str, expected: str) -> None:
    xml = domain_xml(**WIN, vcpus=8, cpu=f"<cpu mode='host-passthrough'>{topology}</cpu>")
    finding = only("CPU016", xml)
    assert finding is not None and finding.severity is Severity.WARNING
    assert finding.message.startswith(f"topology of {topology.split(chr(39))[1]} sockets: Windows 10 uses 2")
    assert expected in fixed("CPU016", xml)


@pytest.mark.parametrize("kwargs", [
    {**WIN, "cpu": "<cpu mode='host-passthrough'><topology sockets='2' cores='4' threads='1'/></cpu>"},
    {"os": None, "metadata": WIN11_META.format(version="2k22"), "hyperv": FULL_HYPERV,
     "clock": TUNED_CLOCK["windows"], "cpu": "<cpu mode='host-passthrough'><topology sockets='8' cores='1'/></cpu>"},
], ids=["two-sockets", "server"])
def test_cpu016_accepts_two_sockets_and_server_editions(kwargs: dict[str, str]) -> None:
    assert only("CPU016", domain_xml(vcpus=8, **kwargs)) is None


# -- DSK007: SCSI disks on emulated host adapters -------------------------------------------------
def test_dsk007_adds_the_controller_libvirt_would_otherwise_default_to_lsilogic() -> None:
    xml = domain_xml(devices=SCSI_DISK.format(name="a", dev="sda"))
    finding = only("DSK007", xml)
    assert finding is not None and finding.message == "1 SCSI disk(s) on an emulated host adapter (libvirt's " \
                                                      "default (lsilogic))"
    assert "<controller type='scsi' index='0' model='virtio-scsi'/>" in fixed("DSK007", xml, options())


def test_dsk007_names_megasas_and_leaves_a_windows_boot_disk_to_the_user() -> None:
    devices = SCSI_DISK.format(name="c", dev="sda") + "<controller type='scsi' index='0' model='lsisas1078'/>"
    finding = only("DSK007", domain_xml(**WIN, devices=devices))
    assert finding is not None and "MegaRAID SAS (megasas)" in finding.message and finding.fix is None
    assert finding.note is not None and finding.note.startswith("Windows boots from it: install virtio-win")
    data_disk = VIRTIO_DISK.format(extra="") + devices  # boots from vda, the first disk
    assert only("DSK007", domain_xml(**WIN, devices=data_disk)).fix is not None  # type: ignore[union-attr]


def test_dsk007_ignores_cdroms_and_virtio_scsi() -> None:
    cdrom = SCSI_DISK.format(name="iso", dev="sda").replace("device='disk'", "device='cdrom'")
    assert only("DSK007", domain_xml(devices=cdrom)) is None
    virtio = SCSI_DISK.format(name="a", dev="sda") + "<controller type='scsi' index='0' model='virtio-scsi'/>"
    assert only("DSK007", domain_xml(devices=virtio)) is None


# -- DSK008: image files through the host page cache ----------------------------------------------
@pytest.mark.parametrize("disk", [
    VIRTIO_DISK.format(extra="").replace(" cache='none'", " cache='writeback' io='native'"),  # DSK001's
    VIRTIO_DISK.format(extra="").replace(" cache='none'", "").replace("</disk>", "<shareable/></disk>"),
    VIRTIO_DISK.format(extra="").replace(" cache='none'", "").replace("</disk>", "<readonly/></disk>"),
    VIRTIO_DISK.format(extra="").replace(" cache='none'", " cache='unsafe'"),
])
def test_dsk008_leaves_shared_read_only_unsafe_and_native_disks_alone(disk: str) -> None:
    assert only("DSK008", domain_xml(devices=disk)) is None


def test_dsk008_adds_a_driver_where_there_is_none() -> None:
    xml = domain_xml(devices="<disk type='file' device='disk'><source file='/a.img'/>"
                             "<target dev='vda' bus='virtio'/></disk>")
    assert "<driver name='qemu' cache='none'/>" in fixed("DSK008", xml)


# -- CPU011 / CPU019: memory binding against the vCPUs' node --------------------------------------
def test_cpu011_sees_vcpus_confined_to_one_node_by_a_vcpu_cpuset() -> None:
    opts = options(host_facts=host("intel-2node.xml"))
    xml = domain_xml(vcpus="<vcpu placement='static' cpuset='4-7'>2</vcpu>")
    finding = only("CPU011", xml, opts)
    assert finding is not None and finding.message == "vCPUs run on NUMA node 1 (vcpu cpuset) but memory is not " \
                                                      "bound to it"
    assert "<numatune>\n    <memory mode='strict' nodeset='1'/>\n  </numatune>" in fixed("CPU011", xml, opts)
    assert only("CPU011", domain_xml(vcpus="<vcpu placement='static' cpuset='3-4'>2</vcpu>"), opts) is None


def test_cpu019_rebinds_memory_to_the_vcpus_node_and_gives_no_fix_when_it_cannot_hold_it() -> None:
    opts = options(host_facts=host("intel-2node.xml"))
    xml = domain_xml(extra=PINNED_NODE1 + "</cputune><numatune><memory mode='preferred' nodeset='0'/></numatune>")
    assert "<memory mode='preferred' nodeset='1'/>" in fixed("CPU019", xml, opts)
    big = xml.replace("<memory unit='GiB'>4</memory>", "<memory unit='GiB'>20</memory>")  # nodes: 16 GiB
    finding = only("CPU019", big, opts)
    assert finding is not None and finding.fix is None and "re-place the guest" in (finding.note or "")
    spread = xml.replace("nodeset='0'", "nodeset='0-1'")
    assert only("CPU019", spread, opts) is None


# -- CPU020 / CPU021: real-time guests --------------------------------------------------------------
RT = "<vcpusched vcpus='0-1' scheduler='fifo' priority='1'/>"


@pytest.mark.parametrize("cputune, problem", [
    ("<vcpupin vcpu='0' cpuset='2'/><emulatorpin cpuset='0'/>" + RT, "vCPU(s) 1 not pinned"),
    ("<vcpupin vcpu='0' cpuset='2-3'/><vcpupin vcpu='1' cpuset='4'/><emulatorpin cpuset='0'/>" + RT,
     "vCPU(s) 0 allowed on several CPUs"),
    ("<vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='2'/><emulatorpin cpuset='0'/>" + RT,
     "host CPU(s) 2 shared by several real-time vCPUs"),
    ("<vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/><emulatorpin cpuset='0'/>"
     "<iothreadpin iothread='1' cpuset='3'/>" + RT, "I/O thread 1 runs on 3"),
])
def test_cpu020_names_what_shares_a_cpu_with_a_realtime_vcpu(cputune: str, problem: str) -> None:
    xml = domain_xml(extra=f"<iothreads>1</iothreads><cputune>{cputune}</cputune>")
    finding = only("CPU020", xml)
    assert finding is not None and problem in finding.message


def test_cpu020_accepts_libvirts_realtime_example_layout() -> None:
    xml = domain_xml(extra="<iothreads>1</iothreads><cputune><emulatorpin cpuset='0-1'/><vcpupin vcpu='0' "
                           "cpuset='2'/><vcpupin vcpu='1' cpuset='3'/><iothreadpin iothread='1' cpuset='0-1'/>"
                           f"{RT}</cputune>")
    assert only("CPU020", xml) is None
    assert only("CPU020", xml.replace("fifo", "other")) is None


def test_cpu021_reports_dedicated_guests_only_under_the_latency_policy() -> None:
    xml = domain_xml(extra="<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/>"
                           "<emulatorpin cpuset='0'/></cputune>")
    assert only("CPU021", xml) is None
    finding = only("CPU021", xml, options(("latency",)))
    assert finding is not None and finding.severity is Severity.INFO
    assert finding.message == "dedicated-CPU guest keeps its virtual PMU: counter emulation adds latency"
    assert "</kvm>\n    <pmu state='off'/>\n" in fixed("CPU021", xml, options(("latency",), fix_select=("CPU021",)))


# -- NET006 / NET007: virtio-net driver settings ----------------------------------------------------
NIC = "<interface type='{kind}'><source {source}/><model type='virtio'/>{driver}</interface>"
BRIDGE = {"kind": "bridge", "source": "bridge='br0'"}


@pytest.mark.parametrize("offloads, rsc", [("<guest csum='off'/>", True), ("<host tso4='off'/>", False),
                                           ("<guest ecn='off'/>", False)])
def test_net006_is_a_warning_and_names_windows_rsc_where_it_disables_it(offloads: str, rsc: bool) -> None:
    """Offloads off cost CPU per packet on every guest (issue 48: an explicit value keeps its
    severity, the fix is unsafe); on Windows the guest switches also disable RSC."""
    xml = domain_xml(**WIN, devices=NIC.format(**BRIDGE, driver=f"<driver queues='2'>{offloads}</driver>"))
    finding = only("NET006", xml)
    assert finding is not None and finding.severity is Severity.WARNING
    assert ("receive segment coalescing" in finding.message) is rsc
    assert finding.note == "written explicitly: if deliberate, suppress it with its reason"
    linux = domain_xml(devices=NIC.format(**BRIDGE, driver=f"<driver queues='2'>{offloads}</driver>"))
    assert only("NET006", linux).severity is Severity.WARNING  # type: ignore[union-attr]
    assert not fix(linux).changed  # a bare --fix keeps the explicit value


def test_net007_sizes_both_rings_on_vhost_user_and_leaves_the_userspace_backend_alone() -> None:
    vhu = NIC.format(kind="vhostuser", source="type='unix' path='/run/vhu0' mode='client'", driver="")
    xml = domain_xml(extra="<memoryBacking><access mode='shared'/></memoryBacking>", devices=vhu)
    assert "<driver rx_queue_size='1024' tx_queue_size='1024'/>" in fixed("NET007", xml)
    qemu = domain_xml(devices=NIC.format(**BRIDGE, driver="<driver name='qemu'/>"))
    assert only("NET007", qemu) is None


@pytest.mark.parametrize("model", ["virtio-non-transitional", "virtio-transitional"])
def test_net006_net007_read_every_virtio_variant_as_virtio(model: str) -> None:
    """KubeVirt writes virtio-non-transitional by default: the driver rules count it as virtio."""
    nic = NIC.format(**BRIDGE, driver="<driver queues='2'><host tso4='off'/></driver>")
    xml = domain_xml(devices=nic.replace("type='virtio'", f"type='{model}'"))
    assert only("NET006", xml) is not None and only("NET007", xml) is not None


# -- MEM010: virtiofs and vhost-user disks ----------------------------------------------------------
def test_mem010_vhost_user_disk_on_hugepages_only_needs_shared_access() -> None:
    disk = ("<disk type='vhostuser' device='disk'><driver name='qemu' type='raw'/><source type='unix' "
            "path='/run/vblk.sock'><reconnect enabled='yes' timeout='10'/></source>"
            "<target dev='vda' bus='virtio'/></disk>")
    xml = domain_xml(extra="<memoryBacking><hugepages/></memoryBacking>", devices=disk)
    finding = only("MEM010", xml)
    assert finding is not None and finding.severity is Severity.ERROR
    assert finding.message == "vhost-user disk on a guest whose memory is not shared: libvirt refuses the definition"
    assert "<memoryBacking><hugepages/>\n    <access mode='shared'/></memoryBacking>" in fixed("MEM010", xml, options())


# -- CLK008 / CLK009: invariant TSC ----------------------------------------------------------------
def test_invtsc_rules_without_the_hosts_tsc_counter_say_what_they_need() -> None:
    pinned = "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/><emulatorpin cpuset='0'/></cputune>"
    missing = only("CLK009", domain_xml(extra=pinned), options(host_facts=host("intel-2node.xml")))
    assert missing is not None and missing.fix is None and "TSC counter" in (missing.note or "")
    required = domain_xml(cpu="<cpu mode='host-passthrough'><feature policy='require' name='invtsc'/></cpu>")
    finding = only("CLK008", required)
    assert finding is not None and finding.fix is None
    assert only("CLK008", required.replace("require", "disable")) is None


# -- HV008: nested enlightenments for Windows 11 / Server 2022 on Intel ------------------------------
def _win(version: str, hyperv: str = FULL_HYPERV) -> str:
    return domain_xml(os=None, metadata=WIN11_META.format(version=version), hyperv=hyperv,
                      clock=TUNED_CLOCK["windows"])


def test_hv008_asks_only_for_what_the_host_offers_on_intel() -> None:
    assert only("HV008", _win("11"), options(host_facts=host("amd-1node.xml", "domcaps-full.xml"))) is None
    assert only("HV008", _win("10"), options(host_facts=host("intel-2node.xml", "domcaps-full.xml"))) is None
    no_stimer = options(host_facts=host("intel-2node.xml", "domcaps-no-stimer.xml"))
    assert only("HV008", _win("2k22"), no_stimer) is None
    vapic_off = _win("11", FULL_HYPERV.replace("<vapic state='on'/>", "<vapic state='off'/>"))
    finding = only("HV008", vapic_off, options(host_facts=host("intel-2node.xml", "domcaps-full.xml")))
    assert finding is not None and finding.message.endswith("on Intel without stimer direct mode")


# -- every new fix is one libvirt accepts -----------------------------------------------------------
NEW_CODES = ("CPU016", "CPU011", "CPU019", "CPU021", "CLK008", "CLK009", "DSK007", "DSK008", "DSK009", "MEM010",
             "NET006", "NET007", "HV008")


# Fixes that take another path than the rule's case in tests/test_rules.py.
EDGE_FIXES = [
    ("DSK007", domain_xml(devices=SCSI_DISK.format(name="a", dev="sda") + SCSI_DISK.format(name="b", dev="sdb"))),
    ("CPU016", domain_xml(**WIN, vcpus=8, cpu="<cpu mode='host-passthrough'><topology sockets='4' dies='1' "
                                              "cores='1' threads='2'/></cpu>")),
    ("NET007", domain_xml(extra="<memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>",
                          devices=NIC.format(kind="vhostuser", source="type='unix' path='/run/vhu0' mode='client'",
                                             driver=""))),
    ("DSK008", domain_xml(devices="<disk type='file' device='disk'><source file='/a.img'/>"
                                  "<target dev='vda' bus='virtio'/></disk>")),
]


@pytest.mark.libvirt
@pytest.mark.slow
def test_the_new_fixes_define_and_keep_their_changes(embed_conn, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """Each new rule's bad case (tests/test_rules.py), fixed with unsafe fixes: libvirt's QEMU driver
    defines it, and its normalised definition does not draw the same finding again."""
    from test_rules import CASES, _options

    checked = []
    cases = [(c.code, domain_xml(**c.bad), _options(c, fixing=True), _options(c)) for c in CASES if c.code in NEW_CODES]
    cases += [(code, xml, options(fix_select=(code,)), options()) for code, xml in EDGE_FIXES]
    for code, xml, fixing, checking in cases:
        outcome = fix(xml, fixing, unsafe=True)
        try:
            dom = embed_conn.defineXML(outcome.fixed.decode())
        except libvirt_mod.libvirtError as exc:
            pytest.fail(f"{code}: libvirt rejected the fixed domain: {exc}")
        try:
            after = dom.XMLDesc(libvirt_mod.VIR_DOMAIN_XML_INACTIVE)
        finally:
            dom.undefine()
        assert code not in [f.rule.code for f in findings(after, checking)], code
        checked.append(code)
    assert sorted(set(checked)) == sorted(NEW_CODES)


@pytest.mark.libvirt
@pytest.mark.slow
def test_the_new_fixes_start_where_the_original_did(embed_conn, libvirt_mod, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """As tests/test_embed_start.py (TCG, scratch disks, taps), for the new rules' own cases:
    wherever libvirt starts the original, it starts the fixed guest too."""
    import os

    from test_embed_start import _startable, _starts
    from test_rules import CASES, _options

    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        pytest.skip("/dev/kvm is not usable")
    cases = [(c.code, domain_xml(**c.bad), _options(c, fixing=True)) for c in CASES if c.code in NEW_CODES]
    cases += [(code, xml, options(fix_select=(code,))) for code, xml in EDGE_FIXES]
    # The CPU021 case asks for SCHED_FIFO, which this machine may refuse: a dedicated guest under
    # the latency policy instead, on CPUs every machine has.
    dedicated = domain_xml(extra="<cputune><vcpupin vcpu='0' cpuset='0'/><vcpupin vcpu='1' cpuset='1'/></cputune>")
    cases.append(("CPU021", dedicated, options(("latency",), select=["CPU021"], fix_select=("CPU021",))))
    started, problems = [], []
    for code, xml, opts in cases:
        original = _startable(xml.encode(), tmp_path)
        if original is None:
            continue
        # The fixed guest first: the original is started only to judge a fixed guest that did not start.
        reason = _starts(embed_conn, libvirt_mod, _startable(fix(xml, opts, unsafe=True).fixed, tmp_path))
        if reason is not None and _starts(embed_conn, libvirt_mod, original) is not None:
            continue  # the original does not start here either
        if reason is not None:
            problems.append(f"{code}: {reason}")
        started.append(code)
    assert problems == []
    assert {"DSK007", "DSK008", "DSK009", "CPU016", "CPU021", "NET006", "NET007"} <= set(started), started


@pytest.mark.parametrize("version, reported", [("2k22", True), ("2k12r2", True), ("2k8r2", False)])
def test_cpu016_holds_windows_server_to_its_64_sockets(version: str, reported: bool) -> None:
    xml = domain_xml(os=None, metadata=WIN11_META.format(version=version), hyperv=FULL_HYPERV,
                     clock=TUNED_CLOCK["windows"], vcpus=96)
    finding = only("CPU016", xml)
    assert (finding is not None) is reported
    if finding is not None:
        assert finding.message == f"96 vCPUs as 96 sockets: Windows {version} uses 64 at most"
        assert "<topology sockets='1' dies='1' cores='96' threads='1'/>" in fixed("CPU016", xml, options())


def test_dsk007_switches_a_windows_data_hba_when_the_boot_disk_is_on_virtio_scsi() -> None:
    devices = (SCSI_DISK.format(name="c", dev="sda") + SCSI_DISK.format(name="d", dev="sdb").replace(
        "</disk>", "<address type='drive' controller='1' bus='0' target='0' unit='0'/></disk>")
        + "<controller type='scsi' index='0' model='virtio-scsi'/><controller type='scsi' index='1' model='lsilogic'/>")
    xml = domain_xml(**WIN, devices=devices)
    assert "<controller type='scsi' index='1' model='virtio-scsi'/>" in fixed("DSK007", xml, options())


# -- DSK009: a virtio-scsi controller on the main loop beside virtio-blk disks with I/O threads ----
def test_dsk009_reads_libvirt_10s_per_queue_iothread_mapping_of_the_virtio_blk_disks() -> None:
    """`<driver><iothreads><iothread id='2'>` names an I/O thread as `iothread='2'` does: the
    controller is given that thread (exact patched element)."""
    mapped = ("<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none' queues='2'>"
              "<iothreads><iothread id='2'><queue id='0'/><queue id='1'/></iothread></iothreads></driver>"
              "<source file='/v.img'/><target dev='vda' bus='virtio'/></disk>")
    devices = mapped + SCSI_DISK.format(name="a", dev="sda") + "<controller type='scsi' index='0' model='virtio-scsi'/>"
    xml = domain_xml(extra="<iothreads>2</iothreads>", devices=devices)
    finding = only("DSK009", xml)
    assert finding is not None and finding.fix is not None
    assert finding.fix.description == "assign the controller to I/O thread 2"
    assert "<controller type='scsi' index='0' model='virtio-scsi'>\n  <driver iothread='2'/>\n</controller>" in \
        fixed("DSK009", xml)
    # Without any I/O thread on the virtio-blk disk, the controller is not singled out.
    plain = devices.replace("<iothreads><iothread id='2'><queue id='0'/><queue id='1'/></iothread></iothreads>", "")
    assert only("DSK009", domain_xml(extra="<iothreads>2</iothreads>", devices=plain)) is None
