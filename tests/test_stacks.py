"""What the management stacks write (fixtures/stacks, see its README for where each file came
from): the findings a user of nova, KubeVirt, oVirt, vagrant-libvirt or CloudStack relies on,
the OS inferred from their XML, and the advice in each stack's own terms."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmtune.facts.domain import Domain
from vmtune.manager_advice import KUBEVIRT, NO_KNOB, TABLES, advice
from vmtune.rules import BUILTIN_RULES
from vmtune.rules.base import Finding, FixSafety, Severity
from vmtune.xml.safe import parse_domain

from conftest import FIXTURES, domain_xml, run_vmtune
from helpers import findings, fix, inventory, options

STACKS = FIXTURES / "stacks"
ALL = sorted(STACKS.glob("*/*.xml"))


def _read(name: str) -> str:
    return (STACKS / name).read_text()


def _by_code(found: list[Finding], code: str) -> list[Finding]:
    return [f for f in found if f.rule.code == code]


def _domain(xml: str) -> Domain:
    return Domain(parse_domain(xml.encode(), "test.xml"), "test.xml")


def test_the_fixtures_say_where_they_came_from() -> None:
    readme = (STACKS / "README.md").read_text()
    assert len(ALL) >= 15
    for path in ALL:
        assert path.name in readme, f"{path.name} has no provenance in fixtures/stacks/README.md"


def _rendered_openstack() -> int:
    """The flavor × image pairs the OpenStack front end renders from the YAML a walk reads."""
    from vmtune.stacks.frontend import read_file
    from vmtune.stacks.openstack import frontend as nova
    from vmtune.stacks.openstack.detect import wants

    files = [read_file(str(p), p.read_bytes(), explicit=False) for p in sorted(STACKS.rglob("*.y*ml"))
             if wants(p.read_bytes(), str(p))]
    return len(nova.render(files)[0])


def test_every_stack_fixture_checks_without_crash_through_the_cli() -> None:
    result = run_vmtune("check", "--format", "json", str(STACKS))
    assert result.returncode in (0, 1), result.stderr
    assert result.stderr == ""
    # a walk checks every domain XML below, and the KubeVirt manifests too (#33): one VM each;
    # OpenStack flavors × images (#37) have a result on the flavor's file and may have one on the image's
    domains = sorted(STACKS.rglob("*.xml"))
    from vmtune.stacks.kubevirt.objects import find

    manifests = sum(len(find(list(yaml.safe_load_all(p.read_text()))).vmis) for p in STACKS.rglob("*.yaml"))
    pairs = _rendered_openstack()
    count = json.loads(result.stdout)["summary"]["domains"]
    assert len(domains) + manifests + pairs <= count <= len(domains) + manifests + 2 * pairs


# -- the seed incident on the stacks' Windows guests, without --os ----------------------------------

@pytest.mark.parametrize("name, codes", [
    ("nova/windows.xml", {"CLK002"}),  # nova's set: synic without stimer, HPET off
    ("nova/windows-timer-i686.xml", {"CLK002"}),
    ("kubevirt/vmi-windows.xml", {"CLK002", "HV001"}),
    ("ovirt/vm-sysprep-floppy.xml", {"CLK002", "HV001"}),
])
def test_the_stacks_windows_guests_get_the_timer_warnings_without_os(name: str, codes: set[str]) -> None:
    found = findings(_read(name))
    for code in codes:
        (finding,) = _by_code(found, code)
        assert finding.severity is Severity.WARNING
        assert finding.fix is not None and finding.fix.safety is FixSafety.SAFE
        assert "OS inferred as windows from Hyper-V enlightenments" in (finding.note or "")
        assert "give --os linux|windows" in (finding.note or "")


def test_nova_windows_gets_vpindex_synic_and_stimer_added(tmp_path: Path) -> None:
    outcome = fix(_read("nova/windows.xml"))
    text = outcome.fixed.decode()
    assert '<stimer state="on"/>' in text
    assert [a.code for a in outcome.applied] == ["CLK002"]
    assert "CLK002" not in [f.rule.code for f in findings(outcome.fixed)]


def test_libosinfo_wins_over_os_and_os_over_the_definitions_signals() -> None:
    nova = _read("nova/windows.xml")
    assert "CLK002" not in [f.rule.code for f in findings(nova, options(os="linux"))]  # the user said so
    (clk,) = _by_code(findings(nova, options(os="windows")), "CLK002")
    assert "inferred" not in (clk.note or "")  # said by --os, not inferred
    tagged = domain_xml(os="linux", hyperv="<hyperv><relaxed state='on'/></hyperv>")
    assert _domain(tagged).os_family == "linux"  # libosinfo's own declaration
    assert Domain(parse_domain(tagged.encode(), "t.xml"), "t.xml", "windows").os_family == "linux"


@pytest.mark.parametrize("signal, inferred", [
    ("<hyperv><relaxed state='on'/></hyperv>", True),
    ("<hyperv mode='passthrough'/>", True),
    ("<hyperv><relaxed state='off'/></hyperv>", False),  # switched off: no enlightenment in use
    ("<hyperv><vendor_id state='on' value='x'/></hyperv>", False),  # hides the hypervisor on any OS
    ("<kvm><hidden state='on'/></kvm>", False),  # GPU passthrough of any OS
])
def test_only_strong_signals_make_windows(signal: str, inferred: bool) -> None:
    xml = domain_xml(os=None, hyperv=signal)
    assert (_domain(xml).os_family == "windows") is inferred
    localtime = domain_xml(os=None, clock="<clock offset='localtime'/>")
    assert _domain(localtime).os_family is None  # dual-boot Linux keeps one too
    hypervclock = domain_xml(os=None, clock="<clock offset='utc'><timer name='hypervclock' present='yes'/></clock>")
    assert _domain(hypervclock).os_guess.evidence == ("a hypervclock timer",)
    kernel = domain_xml(os=None, hyperv="<hyperv><relaxed state='on'/></hyperv>").replace(
        "hvm</type>", "hvm</type>\n    <kernel>/boot/vmlinuz</kernel>")
    assert _domain(kernel).os_family is None


def test_windows_of_unknown_version_gets_the_safe_side() -> None:
    """USB001's xHCI needs a driver Windows 7 lacks: no fix when the version is unknown."""
    (usb,) = _by_code(findings(_read("nova/windows.xml")), "USB001")
    assert usb.fix is None and "Windows of unknown version" in (usb.note or "")
    assert "CPU016" not in [f.rule.code for f in findings(_read("nova/linux-default.xml"), options(os="windows"))]


# -- virtio variants and NET001 sizing ------------------------------------------------------------

def test_kubevirt_16_vcpus_single_queue_non_transitional_nic_gets_net001() -> None:
    xml = _read("kubevirt/vmi-linux-16cores.xml")  # KubeVirt's converter, no networkInterfaceMultiqueue
    (net,) = _by_code(findings(xml), "NET001")
    assert net.severity is Severity.WARNING and net.fix is not None and net.fix.safety is FixSafety.SAFE
    assert ('<model type="virtio-non-transitional"></model>\n\t\t\t<driver queues="16"/>\n'
            '\t\t\t<alias name="ua-default"></alias>') in fix(xml).fixed.decode()
    # Said to be Windows, where virtio-win measured 16 queues slower than one: a suggestion with an unsafe fix.
    (win,) = _by_code(findings(xml, options(os="windows")), "NET001")
    assert win.severity is Severity.INFO and win.fix is not None and win.fix.safety is FixSafety.UNSAFE
    assert "virtio-win measured" in (win.note or "")


# -- what KubeVirt's converter writes (fixtures/stacks/kubevirt/dump), and the knobs that change it ------

KUBEVIRT_DUMP = STACKS / "kubevirt" / "dump"


@pytest.mark.parametrize("name, codes", [
    ("vmi-windows.xml", ["CLK002", "CLK006", "DSK004", "HV001", "NET004"]),
    ("vmi-windows-tuned.xml", ["DSK004", "NET004"]),
    ("vmi-linux-16cores.xml", ["CLK004", "DSK003", "MEM001", "NET001"]),
    ("vmi-linux-16cores-multiqueue.xml", ["CLK004", "DSK003", "MEM001", "NET007"]),
    ("vmi-linux-dedicated.xml", ["CLK004", "CPU005", "MEM002", "NET007"]),
    ("vmi-linux-dedicated-supplemental.xml", ["CLK004", "MEM002", "NET007"]),
])
def test_kubevirt_generated_domains_get_advice_in_kubevirt_knobs(name: str, codes: list[str]) -> None:
    xml = _read(f"kubevirt/{name}")
    assert _domain(xml).manager == "kubevirt"
    found = findings(xml)
    assert sorted(f.rule.code for f in found) == codes
    for f in found:
        assert (f.note or "").startswith(f"managed by KubeVirt: {KUBEVIRT[f.rule.code]}"), f.rule.code


def _vmi_domain(name: str) -> dict[str, Any]:
    spec = yaml.safe_load((KUBEVIRT_DUMP / name).read_text())["spec"]["domain"]
    assert isinstance(spec, dict)
    return spec


@pytest.mark.parametrize("before, after, code, knob, is_set", [
    ("vmi-linux-16cores", "vmi-linux-16cores-multiqueue", "NET001",
     "spec.domain.devices.networkInterfaceMultiqueue: true",
     lambda d: d["devices"]["networkInterfaceMultiqueue"] is True),
    ("vmi-linux-dedicated", "vmi-linux-dedicated-supplemental", "CPU005",
     "spec.domain.ioThreadsPolicy: supplementalPool with spec.domain.ioThreads.supplementalPoolThreadCount: N",
     lambda d: d["ioThreadsPolicy"] == "supplementalPool" and d["ioThreads"]["supplementalPoolThreadCount"] > 0),
    ("vmi-windows", "vmi-windows-tuned", "CLK002", "synictimer: {}",
     lambda d: "synictimer" in d["features"]["hyperv"]),
    ("vmi-windows", "vmi-windows-tuned", "HV001",
     "{relaxed: {}, vapic: {}, spinlocks: {}, vpindex: {}, runtime: {}, frequencies: {}, tlbflush: {}, ipi: {}}",
     lambda d: {"relaxed", "vapic", "spinlocks", "vpindex", "runtime", "frequencies", "tlbflush",
                "ipi"} <= set(d["features"]["hyperv"])),
    ("vmi-windows", "vmi-windows-tuned", "CLK006", "spec.domain.clock.timezone: <the guest's zone> instead of utc: {}",
     lambda d: "timezone" in d["clock"] and "utc" not in d["clock"]),
])
def test_the_kubevirt_knob_vmtune_names_clears_the_finding_in_what_kubevirt_writes(
        before: str, after: str, code: str, knob: str, is_set: Callable[[dict[str, Any]], bool]) -> None:
    """The advice is checked against the converter: the VMI with the named knob set (the dump's YAML)
    converts to a domain without the finding."""
    (finding,) = _by_code(findings(_read(f"kubevirt/{before}.xml")), code)
    assert knob in (finding.note or "")
    assert is_set(_vmi_domain(f"{after}.yaml"))
    assert not _by_code(findings(_read(f"kubevirt/{after}.xml")), code)


def test_kubevirt_pins_only_the_first_io_thread_next_to_the_isolated_emulator_thread() -> None:
    """Why CPU005's KubeVirt advice is supplementalPool, not isolateEmulatorThread (already set here)."""
    assert _vmi_domain("vmi-linux-dedicated.yaml")["cpu"]["isolateEmulatorThread"] is True
    xml = _read("kubevirt/vmi-linux-dedicated.xml")
    assert '<iothreadpin iothread="1" cpuset="6"></iothreadpin>\n\t\t<emulatorpin cpuset="6"></emulatorpin>' in xml
    (cpu,) = _by_code(findings(xml), "CPU005")
    assert cpu.severity is Severity.WARNING and "I/O threads 2 float over" in cpu.message


def test_kubevirt_findings_without_a_kubevirt_knob_say_so() -> None:
    (net,) = _by_code(findings(_read("kubevirt/vmi-linux-dedicated.xml")), "NET007")
    assert (net.note or "").startswith("managed by KubeVirt: no knob: KubeVirt never writes rx_queue_size")
    assert "rx_queue_size='1024'" not in (net.note or "")


VALIDATE = shutil.which("virt-xml-validate")


@pytest.mark.skipif(VALIDATE is None, reason="virt-xml-validate (libvirt-clients) not installed")
@pytest.mark.parametrize("name", [p.name for p in sorted((STACKS / "kubevirt").glob("vmi-*.xml"))])
def test_kubevirt_generated_domains_meet_libvirts_schema_but_for_kubevirts_empty_sysinfo(
        name: str, tmp_path: Path) -> None:
    """KubeVirt always writes empty <bios>, <baseBoard> and <chassis> under <sysinfo>, which libvirt's
    parser accepts and its 9.0 schema does not (it wants an entry); nothing else is off schema but the
    per-disk <iothreads> of supplementalPool, a libvirt 10.0 element."""
    def validate(text: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / name
        path.write_text(text)
        return subprocess.run([str(VALIDATE), str(path), "domain"], capture_output=True, text=True, check=False)

    xml = _read(f"kubevirt/{name}")
    assert "element bios: Relax-NG validity error" in validate(xml).stderr
    plain = re.sub(r"\s*<(bios|baseBoard|chassis)></\1>", "", xml)
    assert plain.count("<sysinfo") == 1 and "<bios>" not in plain
    result = validate(plain)
    if "<iothreads>\n\t\t\t\t\t<iothread id=" in xml:
        assert result.returncode != 0 and "element devices: Relax-NG validity error" in result.stderr
        assert validate(re.sub(r"\s*<iothreads>(\s*<iothread id=\"\d+\"></iothread>)+\s*</iothreads>",
                               "", plain)).returncode == 0
    else:
        assert result.returncode == 0, result.stderr


def test_net001_sizes_by_online_vcpus() -> None:
    assert "NET001" not in [f.rule.code for f in findings(_read("ovirt/vm-sysprep-floppy.xml"))]  # 1 of 16 online
    hosted = _read("ovirt/hostedengine.xml")  # current='2' of 16
    (net,) = _by_code(findings(hosted), "NET001")
    assert net.severity is Severity.INFO and "2 vCPUs online (of 16)" in net.message
    out = fix(hosted, options(select=["NET001"], fix_select=("NET001",))).fixed.decode()
    assert "queues='2'" in out and "queues='16'" not in out


# -- the false positives, on what the stacks write -----------------------------------------------

def test_mem005_leaves_hugepage_and_shared_memory_guests_alone() -> None:
    latency = options(("latency",))
    assert "MEM005" not in [f.rule.code for f in findings(_read("cloudstack/i-2-33-VM-dpdk.xml"), latency)]
    assert "MEM005" not in [f.rule.code for f in findings(_read("nova/pinned-realtime-hugepages.xml"), latency)]
    assert "MEM005" in [f.rule.code for f in findings(_read("nova/pinned.xml"), latency)]  # 4 KiB, private


def test_usb001_needs_a_usb_device_and_keeps_a_lone_controllers_address() -> None:
    for name in ("ovirt/vm-sysprep-floppy.xml", "ovirt/hostedengine.xml", "ovirt/vm-compat41.xml"):
        assert "USB001" not in [f.rule.code for f in findings(_read(name))], name  # piix3-uhci, nothing on it
    dpdk = _read("cloudstack/i-2-33-VM-dpdk.xml")  # piix3-uhci at 00:01.2 with a USB tablet
    out = fix(dpdk, options(os="linux"), unsafe=True).fixed.decode()
    assert ("<controller type='usb' index='0' model='qemu-xhci' ports='15'>\n      <alias name='usb'/>\n"
            "      <address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x2'/>") in out


def test_cpu006_not_for_windows_nor_hidden_kvm_and_any_cpu_mode() -> None:
    pinned = _read("nova/pinned.xml")  # host-model, as nova writes: libvirt 9.0 takes the hint there
    assert "CPU006" in [f.rule.code for f in findings(pinned)]
    assert "CPU006" not in [f.rule.code for f in findings(pinned, options(os="windows"))]
    # what nova writes for hw:hide_hypervisor_id
    hidden = pinned.replace("<acpi/>", "<acpi/>\n    <kvm>\n      <hidden state=\"on\"/>\n    </kvm>")
    assert hidden != pinned and "CPU006" not in [f.rule.code for f in findings(hidden)]


def test_mem003_is_a_suggestion_when_the_balloon_gives_memory_back() -> None:
    nova = _read("nova/linux-default.xml")  # nova's balloon: autodeflate and freePageReporting on
    ballooned = nova.replace("<memory>6144</memory>", "<memory>6144</memory>\n  <currentMemory>4096</currentMemory>")
    (mem,) = _by_code(findings(ballooned), "MEM003")
    assert mem.severity is Severity.INFO and "autodeflate and freePageReporting" in (mem.note or "")
    plain = ballooned.replace(' autodeflate="on" freePageReporting="on"', "")
    (mem,) = _by_code(findings(plain), "MEM003")
    assert mem.severity is Severity.WARNING


def test_cpu002_skips_hot_plug_slots_and_cpu004_reads_vcpu_cpuset() -> None:
    nova = _read("nova/pinned.xml")
    slots = nova.replace("<vcpu>2</vcpu>", "<vcpu current='2'>3</vcpu>\n  <vcpus>\n    <vcpu id='0' enabled='yes'/>\n"
                         "    <vcpu id='1' enabled='yes'/>\n    <vcpu id='2' enabled='no' hotpluggable='yes'/>\n"
                         "  </vcpus>").replace('<vcpupin vcpu="2" cpuset="0"/>\n', "").replace(
                         '<vcpupin vcpu="3" cpuset="1"/>\n', "")
    assert slots.count("vcpupin") == 2
    assert "CPU002" not in [f.rule.code for f in findings(slots)]
    assert "CPU002" in [f.rule.code for f in findings(slots.replace("enabled='no'", "enabled='yes'"))]
    vagrant = _read("vagrant-libvirt/domain-all-settings.xml")  # <vcpu cpuset='1-4,^3,6'>, vCPU 0 on CPU 0
    assert "CPU004" not in [f.rule.code for f in findings(vagrant)]
    assert "CPU004" in [f.rule.code for f in findings(vagrant.replace("cpuset='1-4,^3,6'>1", "cpuset='0-4'>1"))]


def test_dsk003_reads_the_per_disk_iothreads_mapping_and_dsk002_keeps_io_uring() -> None:
    nova = _read("nova/linux-default.xml")
    mapped = nova.replace('<driver name="qemu" type="qcow2" cache="none"/>',
                          '<driver name="qemu" type="qcow2" cache="none"><iothreads><iothread id="1"/></iothreads>'
                          '</driver>', 1)
    assert "DSK003" in [f.rule.code for f in findings(nova)]
    assert "DSK003" not in [f.rule.code for f in findings(mapped)]
    block = _read("nova/block-cachemodes.xml")
    uring = block.replace('cache="writethrough" io="threads"', 'cache="none" io="io_uring"')
    assert uring != block and "DSK002" not in [f.rule.code for f in findings(uring)]
    half = block.replace('cache="writethrough" io="threads"', 'cache="writeback" io="io_uring"')
    assert '<driver name="qemu" type="raw" cache="none" io="io_uring"/>' in fix(half, unsafe=True).fixed.decode()


def test_net005_is_a_warning_and_not_for_cloudstack_dpdk_guests() -> None:
    dpdk = _read("cloudstack/i-2-33-VM-dpdk.xml")  # hugepages, memAccess='shared' cells
    assert "NET005" not in [f.rule.code for f in findings(dpdk)]
    (net,) = _by_code(findings(dpdk.replace(" memAccess='shared'", "")), "NET005")
    assert net.severity is Severity.WARNING


def test_clk002_is_a_warning_with_hpet_on() -> None:
    nova = _read("nova/windows.xml").replace('<timer name="hpet" present="no"/>', '<timer name="hpet" present="yes"/>')
    (clk,) = _by_code(findings(nova), "CLK002")  # what hw_time_hpet=true writes for a Windows image
    assert clk.severity is Severity.WARNING and clk.fix is not None and clk.fix.safety is FixSafety.SAFE


def test_clk003_warns_for_linux_guests_only() -> None:
    hpet = _read("nova/linux-hpet.xml")  # hw_time_hpet=true
    (clk,) = _by_code(findings(hpet, options(os="linux")), "CLK003")
    assert clk.severity is Severity.WARNING and clk.fix is not None and clk.fix.safety is FixSafety.UNSAFE
    assert "CLK003" not in [f.rule.code for f in findings(hpet)]  # OS unknown: not judged


def test_mem009_counts_running_domains_and_leaves_a_lone_one_to_cpu012() -> None:
    from vmtune.host.inventory import DomainUsage, Inventory

    from helpers import host

    big = domain_xml(name="a-first", memory="<memory unit='GiB'>20</memory>")  # the host has 32 GiB
    other = domain_xml(name="b-second", memory="<memory unit='GiB'>16</memory>")
    caps = host("intel-2node.xml")
    assert "MEM009" in [f.rule.code for f in findings(big, options(host_facts=caps, others=inventory(other)))]
    stopped = Inventory([DomainUsage.of(_domain(other), active=False)])  # a shut-off definition
    assert "MEM009" not in [f.rule.code for f in findings(big, options(host_facts=caps, others=stopped))]
    huge = domain_xml(name="a-first", memory="<memory unit='GiB'>40</memory>")  # alone: CPU012's error
    found = [f.rule.code for f in findings(huge, options(host_facts=caps, others=Inventory()))]
    assert "MEM009" not in found and "CPU012" in found


# -- managed stacks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, manager", [
    ("nova/windows.xml", "nova"), ("kubevirt/vmi-windows.xml", "kubevirt"),
    ("kubevirt/vmi-linux-16cores.xml", "kubevirt"),
    ("ovirt/hostedengine.xml", "ovirt"), ("ovirt/vm-sysprep-floppy.xml", "ovirt"),
    ("cloudstack/i-6-6-VM.xml", "cloudstack"), ("cloudstack/i-2-33-VM-dpdk.xml", "cloudstack"),
    ("vagrant-libvirt/domain-defaults.xml", None),  # vagrant defines once and never rewrites
])
def test_stacks_are_recognised_as_managers(name: str, manager: str | None) -> None:
    assert _domain(_read(name)).manager == manager


def test_cloudstack_is_recognised_by_its_instance_name_when_its_sysinfo_is_customised() -> None:
    custom = _read("cloudstack/i-6-6-VM.xml").replace("CloudStack KVM Hypervisor", "ACME Cloud").replace(
        "Apache Software Foundation", "ACME")
    assert _domain(custom).manager == "cloudstack"
    assert _domain(domain_xml(name="i-like-VMs")).manager is None


@pytest.mark.parametrize("manager, code, knob", [
    ("nova", "DSK005", "nova.conf [libvirt] hw_disk_discard=unmap"),
    ("nova", "DSK002", "nova.conf [libvirt] disk_cachemodes"),
    ("nova", "CPU001", "nova.conf [libvirt] cpu_mode=host-passthrough"),
    ("nova", "CPU001", "cpu_models"),
    ("nova", "CLK002", "no knob: nova never writes Hyper-V stimer"),
    ("nova", "CPU006", "no knob"),
    ("nova", "USB001", "image property hw_input_bus=virtio"),  # hw_usb_model is ignored with nova's tablet
    ("nova", "DSK003", "nova always writes one I/O thread and never assigns disks to it"),
    ("nova", "MEM007", "mem_stats_period_seconds=0"),
    ("kubevirt", "DSK003", "ioThreadsPolicy"),
    ("kubevirt", "DSK003", "dedicatedIOThread"),
    ("kubevirt", "DSK002", "disks[].cache"),
    ("kubevirt", "DSK002", "disks[].io"),
    ("kubevirt", "CLK004", "spec.domain.clock: {utc: {}, timer: {rtc: {tickPolicy: catchup}}}"),
    ("kubevirt", "CLK006", "spec.domain.clock.timezone"),
    ("kubevirt", "CPU005", "ioThreadsPolicy: supplementalPool"),
    ("kubevirt", "NET007", "no knob: KubeVirt never writes rx_queue_size"),
    ("kubevirt", "NET001", "networkInterfaceMultiqueue"),
    ("ovirt", "NET001", "multi_queues_enabled"),
    ("ovirt", "DSK005", "pass_discard"),
    ("ovirt", "MEM007", "memory_policy.ballooning=false"),
    ("ovirt", "CLK002", "hyperVSynicStimerSupported"),
    ("cloudstack", "CPU001", "guest.cpu.mode"),
    ("cloudstack", "NET001", "nic.multiqueue.number"),
    ("cloudstack", "DSK004", "rootDiskController"),
    ("cloudstack", "DSK002", "io.policy"),
    ("cloudstack", "CLK002", NO_KNOB),
])
def test_the_managed_tables_name_the_stacks_knob(manager: str, code: str, knob: str) -> None:
    assert knob in (advice(manager, code) or "")


def test_every_rule_has_advice_in_every_stack() -> None:
    for manager in TABLES:
        for rule in BUILTIN_RULES:
            said = advice(manager, rule.code) or ""
            assert said.startswith("managed by "), (manager, rule.code)
        assert all(code in {r.code for r in BUILTIN_RULES} for code in TABLES[manager]), manager
    assert "hw_pointer_model=usbtablet off" not in str(TABLES["nova"])  # not a value nova accepts


def test_managed_findings_say_what_to_change_in_the_stack() -> None:
    (clk,) = _by_code(findings(_read("ovirt/vm-sysprep-floppy.xml")), "CLK002")
    assert (clk.note or "").startswith("managed by oVirt: VM operating system type Windows")
    for f in findings(_read("cloudstack/i-6-6-VM.xml")):
        assert (f.note or "").startswith("managed by Apache CloudStack: ")


@pytest.mark.libvirt
@pytest.mark.parametrize("name", ["ovirt/hostedengine.xml", "cloudstack/i-6-6-VM.xml"])
def test_apply_refuses_ovirt_and_cloudstack_domains_without_force(libvirt_mod, name: str,  # type: ignore[no-untyped-def]
                                                                    tmp_path: Path) -> None:
    from vmtune.errors import VmtuneError
    from vmtune.live.apply import apply_domain
    from vmtune.live.connection import open_connection

    from conftest import TESTNODE_URI

    conn = open_connection(TESTNODE_URI)  # the test driver forgets the definition when it closes
    try:
        xml = _read(name).replace("type='kvm'", "type='test'").replace('type="kvm"', 'type="test"')
        dom = conn.defineXML(xml)
        with pytest.raises(VmtuneError, match="rewrites the definition"):
            apply_domain(conn, dom.name(), options(), state_root=tmp_path, confirm=lambda q: False,
                         out=lambda line: None, yes=True)
        code = apply_domain(conn, dom.name(), options(), state_root=tmp_path, confirm=lambda q: False,
                            out=lambda line: None, yes=True, force=True)
        assert code == 0
    finally:
        conn.close()


def test_ovirt_is_recognised_by_its_tune_metadata_alone() -> None:
    """Definitions that VDSM writes for older clusters carry only `<ovirt-tune:qos/>`: still the
    engine's, so advice names the engine's knob instead of a hand edit the engine overwrites."""
    tune_only = domain_xml(os="windows", hyperv="<hyperv><relaxed state='on'/></hyperv>",
                           metadata="<ovirt-tune:qos xmlns:ovirt-tune='http://ovirt.org/vm/tune/1.0'/>")
    assert _domain(tune_only).manager == "ovirt"
    (clk,) = _by_code(findings(tune_only), "CLK002")
    assert (clk.note or "").startswith("managed by oVirt: VM operating system type Windows")
    assert _domain(domain_xml(metadata="<x:qos xmlns:x='http://example.org/ovirt.org/vm/tune/1.0'/>")).manager is None


def test_a_vcpu_placed_on_a_cell_is_not_a_dedicated_cpu_for_cpu004_and_cpu005() -> None:
    """nova pins every vCPU of a shared-CPU flavor with hw:numa_nodes or hw:mem_page_size to its
    whole NUMA cell, emulator and I/O thread to the same CPUs (driver.py _get_guest_numa_config):
    placement, no CPU of a vCPU's own to isolate. Was a CPU004 and CPU005 warning on nova's XML
    of every such flavor, which the flavor itself did not get."""
    oracle = STACKS / "nova" / "oracle"
    for case in ("numa-nodes-1", "numa-nodes-2", "numa-nodes-2-hugepages", "mem-page-size-large",
                 "mem-page-size-1gb", "hugepages-no-balloon"):
        codes = {f.rule.code for f in findings((oracle / f"{case}.xml").read_text())}
        assert not {"CPU004", "CPU005"} & codes, case
    # the mixed policy: the dedicated vCPUs (2, 3 on host CPUs 10, 11) share them with the emulator
    mixed = (oracle / "cpu-policy-mixed.xml").read_text()
    (cpu004,) = _by_code(findings(mixed), "CPU004")
    assert cpu004.severity is Severity.WARNING
    assert (cpu004.note or "").startswith("managed by OpenStack nova: flavor extra spec "
                                          "hw:emulator_threads_policy=isolate")
    # a vCPU sharing its one CPU with another vCPU has none of its own either
    shared_one = domain_xml(extra="<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='2'/>"
                                  "<emulatorpin cpuset='2'/></cputune>")
    assert "CPU004" not in {f.rule.code for f in findings(shared_one)}
    own = shared_one.replace("<vcpupin vcpu='1' cpuset='2'/>", "<vcpupin vcpu='1' cpuset='3'/>")
    assert "CPU004" in {f.rule.code for f in findings(own)}
    assert "hw_usb_model" not in (advice("nova", "USB001") or "").split(";")[0]


def test_a_vcpus_list_without_current_counts_the_enabled_vcpus_as_libvirt_does() -> None:
    """KubeVirt's default LiveUpdate rollout writes `<vcpu>8</vcpu>` and a `<vcpus>` list with 2
    enabled and no `current`; libvirt 9.0's test driver reads that as current='2'. Was: NET001
    'one queue for 8 vCPUs' on a 2-vCPU guest (fixtures/stacks/kubevirt/oracle/live-update)."""
    path = STACKS / "kubevirt" / "oracle" / "live-update" / "cit-rhel-9-u1-large.xml"
    domain = Domain(parse_domain(path.read_bytes(), path.name), path.name)
    assert (domain.vcpus, domain.max_vcpus) == (2, 8)
    assert [f.message for f in _by_code(findings(path.read_text()), "NET001")] == [
        "virtio NIC has one queue for 2 vCPUs online (of 8)"]

def test_stack_sources_load_with_the_collector_off_and_leave_it_as_it_was() -> None:
    """check_stack_sources makes the sources' nodes with the cyclic GC off (frontend._lasting),
    then turns it back on only if it was on: a caller that runs with it off keeps it off."""
    import gc

    from vmtune.stacks.frontend import _lasting

    was = gc.isenabled()
    try:
        for before in (True, False):
            gc.enable() if before else gc.disable()
            with _lasting():
                assert not gc.isenabled()
            assert gc.isenabled() is before
    finally:
        gc.enable() if was else gc.disable()
