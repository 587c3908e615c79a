"""Every rule with a domain that triggers it and a near-identical one that does not.

Each positive case is also fixed (unsafe fixes allowed) and must then no longer trigger
its rule whenever the rule offered a fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from vmtune.facts.host import load_host
from vmtune.rules import BUILTIN_RULES

from conftest import DOMAINS, FULL_HYPERV, ROOT, TUNED_CLOCK, domain_xml, run_vmtune
from helpers import codes, findings, fix, host, inventory, options

PINNED_2 = "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>"
PINNED_2_EMU = ("<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/>"
                "<emulatorpin cpuset='0'/></cputune>")
VIRTIO_DISK = ("<disk type='file' device='disk'><driver name='qemu' type='raw'{drv}/>"
               "<source file='/var/lib/libvirt/images/a.img'/><target dev='vda' bus='virtio'/></disk>")
NO_RTC_CLOCK = "<clock offset='utc'><timer name='pit' tickpolicy='delay'/><timer name='hpet' present='no'/></clock>"
NIC = "<interface type='bridge'><source bridge='br0'/><model type='{model}'/>{driver}</interface>"


@dataclass
class Case:
    code: str
    bad: dict[str, Any]
    good: dict[str, Any]
    policies: tuple[str, ...] = ("default",)
    caps: str | None = None
    domcaps: str | None = None
    fix_resolves: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    others: tuple[dict[str, Any], ...] = ()  # other domains on the same host


def hv(*features: str) -> str:
    return "<hyperv>" + "".join(features) + "</hyperv>"


WIN = {"os": "windows"}
WIN11 = {"os": None, "clock": TUNED_CLOCK["windows"], "metadata": (
    "<libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>"
    "<libosinfo:os id='http://microsoft.com/win/11'/></libosinfo:libosinfo>")}
PINNED_NODE1 = ("<cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/>"
                "<emulatorpin cpuset='4'/></cputune>")
RT_SCHED = "<vcpusched vcpus='0-1' scheduler='fifo' priority='1'/>"
SCSI_PAIR = (VIRTIO_DISK.format(drv=" cache='none' iothread='1'")
             + VIRTIO_DISK.format(drv=" cache='none'").replace("dev='vda' bus='virtio'", "dev='sda' bus='scsi'")
             + "<controller type='scsi' index='0' model='virtio-scsi'>{ctl}</controller>")
VIRTIOFS = ("<filesystem type='mount' accessmode='passthrough'><driver type='virtiofs'/>"
            "<source dir='/srv/share'/><target dir='share'/></filesystem>")
TUNED_LINUX_CLOCK = TUNED_CLOCK["linux"]
ARM = {"arch": "aarch64", "machine": "virt", "features": "<features><acpi/><gic version='2'/></features>"}
NODE0_PINS = ("<cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='2'/>"
              "<emulatorpin cpuset='0'/></cputune>")  # intel-2node: node 0 is CPUs 0-3 and 8-11
CROSSED_CELLS = ("<cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='5'/>"
                 "<emulatorpin cpuset='0,4'/></cputune>"
                 "<numatune><memnode cellid='0' mode='strict' nodeset='1'/>"
                 "<memnode cellid='1' mode='strict' nodeset='1'/></numatune>")
NUMA_CELLS = ("<cpu mode='host-passthrough'><numa><cell id='0' cpus='0' memory='2' unit='GiB'/>"
              "<cell id='1' cpus='1' memory='2' unit='GiB'/></numa></cpu>")
CASES = [
    Case("CLK001", {**WIN, "clock": "<clock offset='localtime'><timer name='hpet' present='yes'/></clock>"}, WIN),
    Case("CLK002", {**WIN, "hyperv": hv("<relaxed state='on'/>")}, WIN),
    Case("CLK003", {"clock": "<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/>"
                             "<timer name='pit' tickpolicy='delay'/></clock>"}, {}),
    Case("CLK004", {**WIN, "clock": "<clock offset='utc'><timer name='pit' tickpolicy='delay'/>"
                                     "<timer name='hpet' present='no'/></clock>"}, WIN),
    Case("CLK005", {"clock": "<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/>"
                             "<timer name='pit' tickpolicy='discard'/><timer name='hpet' present='no'/></clock>"},
         {"clock": "<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/>"
                   "<timer name='hpet' present='no'/></clock>"}, fix_resolves=False),
    Case("CLK006", {**WIN, "clock": "<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/>"
                                    "<timer name='pit' tickpolicy='delay'/><timer name='hpet' present='no'/>"
                                    "<timer name='hypervclock' present='yes'/></clock>"}, WIN, fix_resolves=False),
    Case("HV001", {**WIN, "hyperv": FULL_HYPERV.replace("<tlbflush state='on'/>", "")}, WIN),
    Case("HV002", {**WIN, "hyperv": FULL_HYPERV.replace("<synic state='on'/>", "")}, WIN),
    Case("HV003", {**WIN, "hyperv": FULL_HYPERV.replace("retries='8191'", "retries='1024'")}, WIN),
    Case("HV004", {**WIN, "hyperv": FULL_HYPERV.replace("</hyperv>", "<evmcs state='on'/></hyperv>")},
         {**WIN, "hyperv": FULL_HYPERV.replace("</hyperv>", "<evmcs state='on'/></hyperv>")},
         caps="amd-1node.xml", extra={"good_caps": "intel-1node.xml"}),
    Case("HV005", {**WIN, "hyperv": FULL_HYPERV.replace("</hyperv>", "<reenlightenment state='on'/></hyperv>")},
         WIN),
    Case("HV006", {**WIN, "hyperv": "<hyperv mode='passthrough'/>"}, WIN, fix_resolves=False),
    Case("CPU001", {"cpu": "<cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>"},
         {"cpu": "<cpu mode='custom' match='exact'><model>Skylake-Server</model></cpu>"}),
    Case("CPU002", {"vcpus": 4, "extra": PINNED_2}, {"vcpus": 2, "extra": PINNED_2_EMU}, fix_resolves=False),
    Case("CPU003", {"vcpus": 2, "extra": "<cputune><vcpupin vcpu='5' cpuset='2'/></cputune>"},
         {"vcpus": 2, "extra": PINNED_2_EMU}),
    Case("CPU004", {"extra": PINNED_2}, {"extra": PINNED_2_EMU}, caps="intel-1node.xml"),
    Case("CPU005", {"extra": "<iothreads>1</iothreads>" + PINNED_2_EMU},
         {"extra": "<iothreads>1</iothreads>"
                   + PINNED_2_EMU.replace("</cputune>", "<iothreadpin iothread='1' cpuset='0'/></cputune>")},
         caps="intel-1node.xml"),
    Case("CPU006", {"extra": PINNED_2_EMU},
         {"extra": PINNED_2_EMU, "features": "<features><acpi/><apic/><kvm><hint-dedicated state='on'/></kvm>"
                                             "</features>"}),
    Case("CPU007", {}, {"extra": PINNED_2_EMU}, policies=("latency",), caps="intel-2node.xml",
         others=({"name": "busy", "extra": PINNED_2_EMU},)),
    Case("CPU013", {"extra": PINNED_2_EMU}, {"extra": PINNED_2_EMU.replace("'2'", "'6'").replace("'3'", "'7'")},
         others=({"name": "twin", "extra": PINNED_2_EMU},), fix_resolves=False),
    Case("CPU014", {"extra": PINNED_2_EMU.replace("cpuset='0'", "cpuset='5'")}, {"extra": PINNED_2_EMU},
         others=({"name": "neighbour", "extra": PINNED_2_EMU.replace("'2'", "'5'").replace("'3'", "'6'")},),
         fix_resolves=False),
    Case("MEM008", {"memory": "<memory unit='GiB'>6</memory>", "extra": "<memoryBacking><hugepages/></memoryBacking>"
                    "<numatune><memory mode='strict' nodeset='0'/></numatune>"},
         {"memory": "<memory unit='GiB'>2</memory>", "extra": "<memoryBacking><hugepages/></memoryBacking>"
          "<numatune><memory mode='strict' nodeset='0'/></numatune>"},
         caps="intel-2node.xml", fix_resolves=False,
         others=({"name": "zz-big", "memory": "<memory unit='GiB'>4</memory>",
                  "extra": "<memoryBacking><hugepages/></memoryBacking>"},)),
    Case("MEM009", {"name": "a-first", "memory": "<memory unit='GiB'>20</memory>"},
         {"name": "a-first", "memory": "<memory unit='GiB'>8</memory>"}, caps="intel-2node.xml", fix_resolves=False,
         others=({"name": "b-second", "memory": "<memory unit='GiB'>16</memory>"},)),
    Case("CPU008", {"extra": "<cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='5'/>"
                             "<emulatorpin cpuset='0'/></cputune>"},
         {"extra": "<cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='2'/>"
                   "<emulatorpin cpuset='0'/></cputune>"}, caps="intel-2node.xml", fix_resolves=False),
    Case("CPU009", {}, {}, caps="nokvm-1node.xml", fix_resolves=False, extra={"good_caps": "intel-1node.xml"}),
    Case("CPU010", {"dtype": "qemu"}, {"dtype": "qemu"}, caps="intel-1node.xml",
         extra={"good_caps": "nokvm-1node.xml"}),
    Case("CPU011", {"extra": "<cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/>"
                             "<emulatorpin cpuset='4'/></cputune>"},
         {"extra": "<cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/>"
                   "<emulatorpin cpuset='4'/></cputune><numatune><memory mode='strict' nodeset='1'/></numatune>"},
         caps="intel-2node.xml"),
    Case("CPU012", {"memory": "<memory unit='GiB'>20</memory>"}, {"memory": "<memory unit='GiB'>12</memory>"},
         caps="intel-2node.xml", fix_resolves=False),
    Case("MEM001", {"memory": "<memory unit='GiB'>8</memory>"}, {"memory": "<memory unit='GiB'>6</memory>"},
         caps="intel-2node.xml"),
    Case("MEM002", {"extra": "<memoryBacking><hugepages/></memoryBacking>",
                    "devices": "<memballoon model='virtio'><stats period='10'/></memballoon>"},
         {"extra": "<memoryBacking><hugepages/></memoryBacking>", "devices": "<memballoon model='none'/>"}),
    Case("MEM003", {"memory": "<memory unit='GiB'>4</memory><currentMemory unit='GiB'>2</currentMemory>"},
         {"memory": "<memory unit='GiB'>4</memory><currentMemory unit='GiB'>4</currentMemory>"}),
    Case("MEM004", {"extra": "<memoryBacking><locked/></memoryBacking>"},
         {"extra": "<memtune><hard_limit unit='GiB'>5</hard_limit></memtune>"
                   "<memoryBacking><locked/></memoryBacking>"}, fix_resolves=False),
    Case("MEM005", {}, {"extra": "<memoryBacking><nosharepages/></memoryBacking>"}, policies=("latency",)),
    Case("MEM006", {"dtype": "xen", "features": "<features><acpi/><hap state='off'/></features>"},
         {"dtype": "kvm", "features": "<features><acpi/><hap state='off'/></features>"}),
    Case("MEM007", {"devices": "<memballoon model='virtio'/>"}, {"devices": "<memballoon model='none'/>"},
         policies=("latency",)),
    Case("CPU015", {"machine": "pc-q35-7.2"}, {"machine": "pc-q35-6.1"}, caps="intel-1node-qemu61.xml",
         fix_resolves=False),
    Case("CPU016", {**WIN, "vcpus": 8}, {**WIN, "vcpus": 8, "cpu": "<cpu mode='host-passthrough'><topology "
                                                          "sockets='1' dies='1' cores='8' threads='1'/></cpu>"}),
    Case("CPU017", {"vcpus": 32}, {"vcpus": 16}, caps="intel-2node.xml", fix_resolves=False),
    Case("CPU018", {"cpu": "<cpu mode='host-passthrough'><topology sockets='1' dies='1' cores='1' threads='2'/></cpu>",
                    "extra": "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>"},
         {"cpu": "<cpu mode='host-passthrough'><topology sockets='1' dies='1' cores='1' threads='2'/></cpu>",
          "extra": "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='10'/></cputune>"},
         caps="intel-2node.xml", fix_resolves=False),
    Case("HV007", {**WIN}, {**WIN, "hyperv": FULL_HYPERV.replace("</hyperv>", "<avic state='on'/></hyperv>")},
         caps="intel-2node.xml", domcaps="domcaps-full.xml"),
    Case("CLK007", {"features": "<features><acpi/><kvm><hidden state='on'/></kvm></features>"}, {},
         fix_resolves=False),
    Case("DSK006", {"machine": "pc-q35-4.2", "devices": VIRTIO_DISK.format(drv="")},
         {"machine": "pc-q35-7.2", "devices": VIRTIO_DISK.format(drv="")}),
    Case("NET005", {"devices": "<interface type='vhostuser'><source type='unix' path='/run/vhu0' mode='client'/>"
                               "<model type='virtio'/></interface>"},
         {"extra": "<memoryBacking><access mode='shared'/></memoryBacking>",
          "devices": "<interface type='vhostuser'><source type='unix' path='/run/vhu0' mode='client'/>"
                     "<model type='virtio'/></interface>"}),
    Case("VAL001", {"vcpus": "<vcpu>\u00b2</vcpu>"}, {}, fix_resolves=False),
    Case("LAT001", {"extra": PINNED_2_EMU, "cpu": "<cpu mode='host-model'/>"},
         {"extra": PINNED_2_EMU, "cpu": "<cpu mode='host-model'/>",
          "features": "<features><acpi/><kvm><hint-dedicated state='on'/><poll-control state='on'/></kvm></features>"},
         policies=("latency",)),
    Case("NET001", {"vcpus": 4, "devices": NIC.format(model="virtio", driver="")},
         {"vcpus": 1, "devices": NIC.format(model="virtio", driver="")}),
    Case("NET002", {"vcpus": 2, "devices": NIC.format(model="virtio", driver="<driver name='vhost' queues='4'/>")},
         {"vcpus": 4, "devices": NIC.format(model="virtio", driver="<driver name='vhost' queues='4'/>")}),
    Case("NET003", {"devices": NIC.format(model="virtio", driver="<driver name='qemu' queues='2'/>")},
         {"devices": NIC.format(model="virtio", driver="<driver name='vhost' queues='2'/>")}),
    Case("NET004", {"devices": NIC.format(model="e1000", driver="")},
         {"devices": NIC.format(model="virtio", driver="<driver name='vhost' queues='2'/>")}),
    Case("DSK001", {"extra": "<iothreads>1</iothreads>",
                    "devices": VIRTIO_DISK.format(drv=" cache='writeback' io='native' iothread='1'")},
         {"extra": "<iothreads>1</iothreads>",
          "devices": VIRTIO_DISK.format(drv=" cache='none' io='native' iothread='1'")}),
    Case("DSK002", {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(drv=" iothread='1'").replace(
        "type='file'", "type='block'").replace("source file", "source dev")},
         {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(
             drv=" cache='none' io='native' iothread='1'").replace("type='file'", "type='block'").replace(
             "source file", "source dev")}),
    Case("DSK003", {"devices": VIRTIO_DISK.format(drv="")},
         {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(drv=" iothread='1'")}),
    Case("DSK004", {"devices": VIRTIO_DISK.format(drv="").replace("dev='vda' bus='virtio'", "dev='sda' bus='sata'")},
         {"devices": VIRTIO_DISK.format(drv="").replace("dev='vda' bus='virtio'", "dev='sda' bus='sata'")
          .replace("device='disk'", "device='cdrom'")}),
    Case("DSK005", {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(drv=" iothread='1'")
         .replace("type='raw'", "type='qcow2'")},
         {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(drv=" iothread='1' discard='unmap'")
          .replace("type='raw'", "type='qcow2'")}),
    Case("USB001", {"machine": "pc", "devices": "<controller type='usb' model='piix3-uhci'/>"
                                                "<input type='tablet' bus='usb'/><graphics type='vnc'/>"},
         {"machine": "pc", "devices": "<controller type='usb' model='qemu-xhci'/>"
                                      "<input type='tablet' bus='usb'/><graphics type='vnc'/>"}),
    Case("USB002", {"devices": "<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>"},
         {"devices": "<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>"
                     "<graphics type='vnc'/>"}),
    Case("USB003", {"devices": "<controller type='usb' model='qemu-xhci' ports='15'/>"},
         {"devices": "<controller type='usb' model='none'/>"}),
    Case("SUP003", {"clock": "<!-- vmtune: ignore[NET999] reason='x' -->\n  " + NO_RTC_CLOCK}, {},
         fix_resolves=False),
    Case("SUP001", {"clock": "<!-- vmtune: ignore[CLK004] -->\n  " + NO_RTC_CLOCK},
         {"clock": "<!-- vmtune: ignore[CLK004] reason='the guest keeps its own time' -->\n  " + NO_RTC_CLOCK},
         fix_resolves=False),
    Case("SUP002", {"clock": "<!-- vmtune: ignore[NET001] reason='x' -->\n  " + NO_RTC_CLOCK.replace(
        "<timer", "<timer name='rtc' tickpolicy='catchup'/><timer", 1)},
         {**WIN, "clock": "<!-- vmtune: ignore[CLK004] reason='x' -->\n  " + NO_RTC_CLOCK}, fix_resolves=False),
    Case("DSK007", {"devices": VIRTIO_DISK.format(drv="").replace("dev='vda' bus='virtio'", "dev='sda' bus='scsi'")
                    + "<controller type='scsi' index='0' model='lsilogic'/>"},
         {"devices": VIRTIO_DISK.format(drv="").replace("dev='vda' bus='virtio'", "dev='sda' bus='scsi'")
          + "<controller type='scsi' index='0' model='virtio-scsi'/>"}),
    Case("DSK008", {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(drv=" iothread='1'")},
         {"extra": "<iothreads>1</iothreads>", "devices": VIRTIO_DISK.format(drv=" cache='none' iothread='1'")}),
    Case("DSK009", {"extra": "<iothreads>1</iothreads>", "devices": SCSI_PAIR.format(ctl="")},
         {"extra": "<iothreads>1</iothreads>", "devices": SCSI_PAIR.format(ctl="<driver iothread='1'/>")}),
    Case("CPU019", {"extra": PINNED_NODE1 + "<numatune><memory mode='strict' nodeset='0'/></numatune>"},
         {"extra": PINNED_NODE1 + "<numatune><memory mode='strict' nodeset='1'/></numatune>"},
         caps="intel-2node.xml"),
    Case("CPU020", {"extra": PINNED_2.replace("</cputune>", RT_SCHED + "</cputune>")},
         {"extra": PINNED_2_EMU.replace("</cputune>", RT_SCHED + "</cputune>")}, fix_resolves=False),
    Case("CPU021", {"extra": PINNED_2_EMU.replace("</cputune>", RT_SCHED + "</cputune>")},
         {"extra": PINNED_2_EMU.replace("</cputune>", RT_SCHED + "</cputune>"),
          "features": "<features><acpi/><apic/><pmu state='off'/></features>"}),
    Case("CLK008", {"cpu": "<cpu mode='host-passthrough'><feature policy='require' name='invtsc'/></cpu>"},
         {"cpu": "<cpu mode='host-passthrough'><feature policy='require' name='invtsc'/></cpu>",
          "clock": NO_RTC_CLOCK.replace("</clock>", "<timer name='tsc' frequency='2596126000'/></clock>")},
         caps="intel-1node-tsc.xml"),
    Case("CLK009", {"extra": PINNED_2_EMU},
         {"extra": PINNED_2_EMU, "cpu": "<cpu mode='host-passthrough'><feature policy='require' name='invtsc'/>"
                                        "</cpu>",
          "clock": TUNED_LINUX_CLOCK.replace("</clock>", "<timer name='tsc' frequency='2596126000'/></clock>")},
         caps="intel-1node-tsc.xml"),
    Case("MEM010", {"devices": VIRTIOFS}, {"extra": "<memoryBacking><source type='memfd'/><access mode='shared'/>"
                                                    "</memoryBacking>", "devices": VIRTIOFS}),
    Case("NET006", {"devices": NIC.format(model="virtio", driver="<driver queues='2'><host csum='off'/>"
                                                                 "<guest tso4='off'/></driver>")},
         {"devices": NIC.format(model="virtio", driver="<driver queues='2'><host csum='on'/></driver>")}),
    Case("NET007", {"devices": NIC.format(model="virtio", driver="<driver queues='2'/>")},
         {"devices": NIC.format(model="virtio", driver="<driver queues='2' rx_queue_size='1024'/>")}),
    Case("HV008", {**WIN11, "hyperv": FULL_HYPERV}, {**WIN11, "hyperv": FULL_HYPERV.replace(
        "<stimer state='on'/>", "<stimer state='on'><direct state='on'/></stimer>").replace(
        "</hyperv>", "<evmcs state='on'/></hyperv>")}, caps="intel-2node.xml", domcaps="domcaps-full.xml"),
    Case("CPU022", {"vcpus": 4, "extra": "<cputune><global_period>100000</global_period>"
                                          "<global_quota>200000</global_quota></cputune>"},
         {"vcpus": 4, "extra": "<cputune><global_period>100000</global_period>"
                               "<global_quota>400000</global_quota></cputune>"}, fix_resolves=False),
    Case("CPU023", {"features": "<features><acpi/><apic/><pvspinlock state='off'/></features>"},
         {"features": "<features><acpi/><apic/><pvspinlock state='off'/></features>", "extra": PINNED_2_EMU}),
    Case("CPU024", {"features": "<features><acpi/><apic/><kvm><hint-dedicated state='on'/></kvm></features>"},
         {"features": "<features><acpi/><apic/><kvm><hint-dedicated state='on'/></kvm></features>",
          "extra": PINNED_2_EMU}),
    Case("CPU025", {"dtype": "qemu"}, {"dtype": "qemu", "cpu": "<cpu mode='maximum'/>"}),
    Case("CPU031", {"features": "<features><acpi/><apic eoi='off'/></features>"},
         {"features": "<features><acpi/><apic eoi='on'/></features>"}),
    Case("CPU032", {"extra": "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='2'/></cputune>"},
         {"extra": "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>"},
         fix_resolves=False),
    Case("CPU033", {"cpu": "<cpu mode='host-model'><feature policy='disable' name='pcid'/></cpu>"},
         {"cpu": "<cpu mode='host-model'><feature policy='require' name='pcid'/></cpu>"}),
    Case("CPU034", {"cpu": "<cpu mode='host-passthrough'><cache mode='disable'/></cpu>"},
         {"cpu": "<cpu mode='host-passthrough'><cache mode='passthrough'/></cpu>"}),
    Case("CPU035", {"cpu": "<cpu mode='custom' match='exact'><model>Westmere</model></cpu>"},
         {"cpu": "<cpu mode='custom' match='exact'><model>Haswell-noTSX</model></cpu>"}),
    Case("LAT002", {"boot": "<kernel>/k</kernel><cmdline>console=ttyS0 idle=poll</cmdline>"},
         {"boot": "<kernel>/k</kernel><cmdline>console=ttyS0 idle=halt</cmdline>"}),
    Case("DSK011", {"devices": VIRTIO_DISK.format(drv=" event_idx='off'")},
         {"devices": VIRTIO_DISK.format(drv=" event_idx='on'")}),
    Case("NET009", {"devices": NIC.format(model="virtio", driver="<driver name='vhost' ioeventfd='off'/>")},
         {"devices": NIC.format(model="virtio", driver="<driver name='vhost' ioeventfd='on'/>")}),
    Case("DSK012", {"devices": "<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'/>"
                               "<source file='/dev/shm/a.img'/><target dev='vda' bus='virtio'/></disk>"},
         {"devices": "<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'/>"
                     "<source file='/dev/shmem/a.img'/><target dev='vda' bus='virtio'/></disk>"}),
    Case("MEM011", {"extra": "<memtune><hard_limit unit='MiB'>4120</hard_limit></memtune>"},
         {"extra": "<memtune><hard_limit unit='MiB'>4200</hard_limit></memtune>"}, fix_resolves=False),
    Case("NET008", {"devices": "<interface type='user'><model type='virtio'/></interface>"},
         {"devices": NIC.format(model="virtio", driver="<driver name='vhost' queues='2'/>")}, fix_resolves=False),
    Case("VAL002", {"devices": "<disk type='file' device='cdrom'><target dev='hda' bus='ide'/></disk>"},
         {"devices": "<disk type='file' device='cdrom'><target dev='sda' bus='sata'/></disk>"}, fix_resolves=False),
    Case("DSK010", {"vcpus": 8, "devices": VIRTIO_DISK.format(drv=" queues='2'")},
         {"vcpus": 8, "devices": VIRTIO_DISK.format(drv=" queues='4'")}),
    Case("CPU026", {**ARM, "vcpus": 16}, {**ARM, "vcpus": 8}),
    Case("CPU027", {**ARM}, {**ARM, "features": "<features><acpi/><gic version='3'/></features>"},
         domcaps="domcaps-aarch64-gicv3.xml"),
    Case("CPU028", {"cpu": NUMA_CELLS, "extra": CROSSED_CELLS},
         {"cpu": NUMA_CELLS, "extra": CROSSED_CELLS.replace("cellid='0' mode='strict' nodeset='1'",
                                                            "cellid='0' mode='strict' nodeset='0'")},
         caps="intel-2node.xml"),
    Case("CPU029", {"extra": NODE0_PINS + "<numatune><memory mode='interleave' nodeset='0-1'/></numatune>"},
         {"extra": NODE0_PINS + "<numatune><memory mode='strict' nodeset='0'/></numatune>"},
         caps="intel-2node.xml", fix_resolves=False),
    Case("CPU030", {"extra": NODE0_PINS.replace("cpuset='0'", "cpuset='4'")
                    + "<numatune><memory mode='strict' nodeset='0'/></numatune>"},
         {"extra": NODE0_PINS + "<numatune><memory mode='strict' nodeset='0'/></numatune>"},
         caps="intel-2node.xml", fix_resolves=False),
    Case("PCI001", {"devices": "<controller type='pci' index='0' model='pcie-root'/>"
                               "<controller type='pci' index='1' model='pcie-root-port'/>"
                               "<interface type='bridge'><source bridge='br0'/><model type='virtio'/>"
                               "<driver name='vhost' queues='2'/>"
                               "<address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>"
                               "</interface>"},
         {"devices": "<controller type='pci' index='0' model='pcie-root'/>"
                     "<controller type='pci' index='1' model='pcie-root-port'/>"
                     "<controller type='pci' index='2' model='pcie-root-port'/>"
                     "<interface type='bridge'><source bridge='br0'/><model type='virtio'/>"
                     "<driver name='vhost' queues='2'/>"
                     "<address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>"}),
]


def _options(case: Case, good: bool = False, fixing: bool = False):  # type: ignore[no-untyped-def]
    caps = case.extra.get("good_caps", case.caps) if good else case.caps
    others = inventory(*(domain_xml(**o) for o in case.others)) if case.others else None
    return options(case.policies, host(caps, case.domcaps), others=others, fix_select=(case.code,) if fixing else ())


def test_every_rule_has_a_case() -> None:
    # Host rules (HOST*) judge sysfs, not domains: tests/test_host.py has their cases; stack-source
    # rules (STK*) judge manifests and flavors: tests/test_kubevirt_*.py and test_openstack_*.py.
    assert sorted(c.code for c in CASES) == sorted(r.code for r in BUILTIN_RULES if r.area not in ("HOST", "STK"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.code)
def test_rule_fires_on_bad_domain(case: Case) -> None:
    assert case.code in codes(domain_xml(**case.bad), _options(case))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.code)
def test_rule_silent_on_good_domain(case: Case) -> None:
    assert case.code not in codes(domain_xml(**case.good), _options(case, good=True))


@pytest.mark.parametrize("case", [c for c in CASES if c.fix_resolves], ids=lambda c: c.code)
def test_fix_resolves_the_finding(case: Case) -> None:
    outcome = fix(domain_xml(**case.bad), _options(case, fixing=True), unsafe=True)
    assert outcome.changed
    assert case.code in {a.code for a in outcome.applied}
    assert case.code not in [f.rule.code for f in outcome.findings]


@pytest.mark.parametrize("case", [c for c in CASES if not c.fix_resolves], ids=lambda c: c.code)
def test_rules_without_fix_leave_the_file_alone(case: Case) -> None:
    outcome = fix(domain_xml(**case.bad), options(case.policies, host(case.caps), select=[case.code]), unsafe=True)
    assert not outcome.changed


@pytest.mark.parametrize("consumer", [
    "<input type='keyboard' bus='usb'/>",
    "<disk type='file' device='disk'><source file='/a.img'/><target dev='sda' bus='usb'/></disk>",
    "<redirdev bus='usb' type='spicevmc'/>",
    "<hub type='usb'/>",
    "<smartcard mode='passthrough' type='spicevmc'/>",
    "<controller type='ccid'/>",
    "<serial type='pty'><target type='usb-serial'/></serial>",
    "<hostdev mode='subsystem' type='usb'><source><vendor id='0x1234'/><product id='0xbeef'/></source></hostdev>",
    "<sound model='usb'/>",
    "<panic model='isa'><address type='usb' bus='0' port='1'/></panic>",
])
def test_usb_controller_that_a_device_needs_is_not_unused(consumer: str) -> None:
    """libvirt rejects model='none' with any of these ("USB is disabled for this domain"; checked
    against the embedded QEMU driver for the ccid controller and usb-serial)."""
    assert "USB003" not in codes(domain_xml(devices="<controller type='usb' model='qemu-xhci'/>" + consumer))


def test_cpu001_fix_for_a_domain_without_cpu_is_plain_host_passthrough() -> None:
    """No migratable='on': libvirt rejects it where the QEMU binary lacks it (qemu-system-i386 on Debian 12)."""
    xml = domain_xml(cpu="", arch="i686", machine="pc")
    outcome = fix(xml.encode(), options(select=["CPU001"]), unsafe=True)
    assert "\n  <cpu mode='host-passthrough' check='none'/>\n" in outcome.fixed.decode()


@pytest.mark.parametrize("interface, expected", [
    ("<interface type='bridge'><source bridge='br0'/><model type='virtio'/><driver queues='16'/></interface>", "8"),
    ("<interface type='vdpa'><source dev='/dev/vhost-vdpa-0'/><model type='virtio'/><driver queues='16'/>"
     "</interface>", "12"),
])
def test_net002_clamps_to_the_tap_limit_only_on_taps(interface: str, expected: str, tmp_path: Path) -> None:
    policy = tmp_path / "tap8.yaml"
    policy.write_text("name: tap8\nextends: default\nrules:\n  - select: [NET002]\n    params: {max_queues: 8}\n")
    outcome = fix(domain_xml(vcpus=12, devices=interface).encode(),
                  options((str(policy),), select=["NET002"], fix_select=("NET002",)), unsafe=True)
    assert f"<driver queues='{expected}'/>" in outcome.fixed.decode()


SATA_DISK = ("<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='/{name}.img'/>"
             "<target dev='{dev}' bus='sata'/>{boot}</disk>")


def test_dsk004_gives_no_fix_for_a_windows_boot_disk_but_moves_its_data_disk() -> None:
    devices = (SATA_DISK.format(name="data", dev="sdb", boot="") +
               SATA_DISK.format(name="system", dev="sda", boot="<boot order='1'/>"))
    xml = domain_xml(os="windows", devices=devices)
    found = [f for f in findings(xml, options(select=["DSK004"]))]
    by_dev = {f.message.split()[1]: f for f in found}
    assert by_dev["sda"].fix is None and by_dev["sda"].note is not None
    assert "boot once with a small extra virtio disk" in by_dev["sda"].note
    assert by_dev["sdb"].fix is not None
    fixed = fix(xml.encode(), options(select=["DSK004"]), unsafe=True).fixed.decode()
    assert "<target dev='vda' bus='virtio'/>" in fixed and "<target dev='sda' bus='sata'/>" in fixed


def test_dsk004_moves_a_linux_boot_disk_as_an_unsafe_fix() -> None:
    xml = domain_xml(devices=SATA_DISK.format(name="system", dev="sda", boot=""))
    fixed = fix(xml.encode(), options(select=["DSK004"]), unsafe=True).fixed.decode()
    assert "<target dev='vda' bus='virtio'/>" in fixed


def test_hv002_tlbflush_direct_needs_vapic_and_extended_needs_tlbflush() -> None:
    direct = FULL_HYPERV.replace("<vapic state='on'/>", "").replace(
        "<tlbflush state='on'/>", "<tlbflush state='on'><direct state='on'/></tlbflush>")
    xml = domain_xml(os="windows", hyperv=direct)
    found = [f for f in findings(xml, options(select=["HV002"]))]
    assert [f.message for f in found] == ["QEMU will refuse to start the guest: tlbflush direct requires vapic"]
    fixed = fix(xml.encode(), options(select=["HV002"])).fixed.decode()
    assert "<vapic state='on'/>" in fixed and "HV002" not in codes(fixed, options(select=["HV002"]))

    extended = FULL_HYPERV.replace("<tlbflush state='on'/>", "<tlbflush state='off'><extended state='on'/></tlbflush>")
    found = [f for f in findings(domain_xml(os="windows", hyperv=extended), options(select=["HV002"]))]
    assert [(f.message, f.fix, f.note) for f in found] == [(
        "QEMU will refuse to start the guest: tlbflush extended requires tlbflush", None,
        "tlbflush is explicitly off: not patched")]


def test_lat001_is_silent_on_host_passthrough_which_has_poll_control() -> None:
    """QEMU's -cpu host exposes kvm-poll-control already."""
    assert "LAT001" not in codes(domain_xml(extra=PINNED_2_EMU), options(("latency",)))


def test_cpu002_and_cpu007_accept_a_vcpu_cpuset_or_numad_placement() -> None:
    partial = "<cputune><vcpupin vcpu='0' cpuset='2'/></cputune>"
    for vcpu in ("<vcpu cpuset='2-5'>2</vcpu>", "<vcpu placement='auto'>2</vcpu>"):
        assert "CPU002" not in codes(domain_xml(vcpus=vcpu, extra=partial))
        assert "CPU007" not in codes(domain_xml(vcpus=vcpu), options(("latency",)))
    assert "CPU002" in codes(domain_xml(extra=partial))


def test_cpu009_an_aarch64_kvm_guest_on_an_x86_64_host() -> None:
    (finding,) = [f for f in findings(domain_xml(arch="aarch64", machine="virt"), options(host_facts=host(
        "intel-2node.xml"))) if f.rule.code == "CPU009"]
    assert finding.message == "the host offers no emulator for aarch64 guests"


def test_cpu015_names_the_newest_machine_of_the_same_kind() -> None:
    (finding,) = [f for f in findings(domain_xml(machine="pc-q35-7.2"), options(host_facts=host(
        "intel-1node-qemu61.xml"))) if f.rule.code == "CPU015"]
    assert finding.message == ("machine type pc-q35-7.2 is not offered by this host's QEMU (newest of its kind: "
                               "pc-q35-6.1)")


def test_windows_server_and_legacy_windows_get_their_own_advice() -> None:
    server = domain_xml(os="windows", vcpus=8).replace("win/10", "win/2k22")
    assert "CPU016" not in codes(server)
    usb = "<controller type='usb' model='piix3-uhci'/><input type='tablet' bus='usb'/>"
    xp = domain_xml(os="windows", hyperv="<hyperv/>", clock="<clock offset='localtime'/>",
                    machine="pc", devices=usb).replace("win/10", "win/xp")
    found = {f.rule.code: f for f in findings(xp)}
    assert not {"HV001", "CLK001", "CLK002"} & set(found)  # no Hyper-V before Vista/2008
    assert found["USB001"].fix is None and "no in-box xHCI driver" in (found["USB001"].note or "")


def test_usb001_sees_the_controller_libvirt_adds_to_an_i440fx_guest() -> None:
    tablet = "<input type='tablet' bus='usb'/>"
    for machine in ("pc", ""):
        xml = domain_xml(machine=machine, devices=tablet).replace(" machine=''", "")
        outcome = fix(xml, options(), unsafe=True)
        assert "<controller type='usb' index='0' model='qemu-xhci' ports='15'/>" in outcome.fixed.decode()
        assert "USB001" not in codes(domain_xml(machine=machine).replace(" machine=''", ""))  # nothing to poll
    assert "USB001" not in codes(domain_xml(machine="q35", devices=tablet))


@pytest.mark.parametrize("case", [c for c in CASES if c.policies == ("default",)], ids=lambda c: c.code)
def test_findings_stay_within_the_severities_and_fix_safety_the_rule_declares(case: Case) -> None:
    """`vmtune rules` and docs/rules.md show each rule's range; its findings may not leave it."""
    for found in findings(domain_xml(**case.bad), _options(case)):
        rule = found.rule
        if rule.code.startswith("XORG"):
            continue
        assert found.severity in {rule.severity, *rule.other_severities}, (rule.code, found.severity)
        if found.fix is not None:
            assert found.fix.safety in {rule.fix_safety, rule.other_fix_safety}, (rule.code, found.fix.safety)


def test_clk002_respects_synthetic_timers_the_user_turned_off() -> None:
    """HPET on and `<stimer state='off'/>` written on purpose: info with the cost said, no fix;
    the same guest with stimer simply absent is the documented warning with the safe fix."""
    hpet_on = "<clock offset='localtime'><timer name='hpet' present='yes'/></clock>"
    chosen = domain_xml(os="windows", clock=hpet_on, hyperv=FULL_HYPERV.replace(
        "<stimer state='on'/>", "<stimer state='off'/>"))
    (clk,) = [f for f in findings(chosen) if f.rule.code == "CLK002"]
    assert (str(clk.severity), clk.fix) == ("info", None)
    assert clk.note == ("stimer written explicitly: if deliberate, suppress it with its reason; the HPET is on as "
                        "the fallback clock")
    absent = domain_xml(os="windows", clock=hpet_on, hyperv=FULL_HYPERV.replace("<stimer state='on'/>", ""))
    (clk,) = [f for f in findings(absent) if f.rule.code == "CLK002"]
    assert str(clk.severity) == "warning" and clk.fix is not None and clk.fix.safety.value == "safe"


def test_cpu016_counts_only_sockets_that_hold_vcpus_online_at_boot() -> None:
    """KubeVirt's CPU hot-plug writes `<vcpu current='4'>16` with sockets='4' cores='4': the four
    vCPUs that boot sit in socket 0, which Windows uses. Online vCPUs in three sockets still count."""
    topology = "<cpu mode='host-passthrough'><topology sockets='4' dies='1' cores='4' threads='1'/></cpu>"
    headroom = domain_xml(os="windows", vcpus="<vcpu placement='static' current='4'>16</vcpu>", cpu=topology)
    assert "CPU016" not in codes(headroom)
    spread = domain_xml(os="windows", vcpus="<vcpu placement='static' current='9'>16</vcpu>", cpu=topology)
    (cpu016,) = [f for f in findings(spread) if f.rule.code == "CPU016"]
    assert cpu016.message == "topology of 4 sockets: Windows 10 uses 2 at most"
    one_per_socket = domain_xml(os="windows", vcpus="<vcpu placement='static' current='2'>8</vcpu>")
    assert "CPU016" not in codes(one_per_socket)  # two online vCPUs, two sockets
    assert "CPU016" in codes(domain_xml(os="windows", vcpus="<vcpu placement='static' current='3'>8</vcpu>"))


def _only(xml: str, code: str):  # type: ignore[no-untyped-def]
    return [f for f in findings(xml) if f.rule.code == code]


def test_cpu022_names_the_cap_each_scope_gets() -> None:
    def tuned(cputune: str, vcpus: int | str = 8) -> list[str]:
        return [f.message for f in _only(domain_xml(vcpus=vcpus, extra=f"<cputune>{cputune}</cputune>"), "CPU022")]

    assert tuned("<global_quota>200000</global_quota>") == [
        "CFS quota gives all 8 vCPUs together 2 CPUs per 100 ms period: stops every vCPU until the next period "
        "once it is used"]
    assert tuned("<period>10000</period><quota>5000</quota>") == [
        "CFS quota gives each vCPU 50% of a CPU per 10 ms period: stops every vCPU until the next period once it "
        "is used"]
    assert tuned("<emulator_quota>50000</emulator_quota>") == [
        "CFS quota gives the emulator threads 50% of a CPU per 100 ms period: stalls the I/O QEMU's main loop "
        "serves"]
    # unlimited (-1), enough for every online vCPU, or for the 4 online of 16: nothing to say
    assert tuned("<global_quota>-1</global_quota><quota>-1</quota>") == []
    assert tuned("<global_quota>800000</global_quota><quota>100000</quota>") == []
    assert tuned("<global_quota>400000</global_quota>", "<vcpu current='4'>16</vcpu>") == []
    (finding,) = _only(domain_xml(vcpus=8, extra="<cputune><global_quota>200000</global_quota></cputune>"), "CPU022")
    assert (str(finding.severity), finding.fix, finding.note) == (
        "info", None, "written explicitly: if deliberate, suppress it with its reason; fewer vCPUs give the same CPU "
                      "time without the stalls")


@pytest.mark.parametrize("vcpus, cputune, severity", [
    (8, "<global_quota>100000</global_quota>", "warning"),  # 8 vCPUs share one CPU's worth: starves
    (8, "<global_quota>100001</global_quota>", "info"),  # a tenant's share above one CPU
    (1, "<global_quota>50000</global_quota>", "info"),  # one vCPU at half a CPU: a limit, nobody waits on it
    (2, "<emulator_quota>2000</emulator_quota>", "warning"),  # the emulator at 2%: every I/O waits 98 ms
    (2, "<emulator_quota>10000</emulator_quota>", "info"),  # a tenth of a CPU: the floor itself
    (2, "<iothread_quota>9999</iothread_quota>", "warning"),
    (2, "<quota>50000</quota>", "info"),  # a per-vCPU cap at half a CPU: a deliberate limit
    (2, "<quota>5000</quota>", "warning"),  # each vCPU at 5%: starved
])
def test_cpu022_warns_where_the_quota_starves(vcpus: int, cputune: str, severity: str) -> None:
    (finding,) = _only(domain_xml(vcpus=vcpus, extra=f"<cputune>{cputune}</cputune>"), "CPU022")
    assert str(finding.severity) == severity and finding.note is not None
    assert finding.note.startswith("written explicitly: if deliberate, suppress it with its reason")


def test_mem011_is_an_error_at_the_guests_ram_and_a_warning_below_qemus_overhead() -> None:
    def judged(limit: str, vcpus: int = 2) -> list[tuple[str, str]]:
        xml = domain_xml(vcpus=vcpus, extra=f"<memtune><hard_limit{limit}</hard_limit></memtune>")
        return [(str(f.severity), f.message) for f in _only(xml, "MEM011")]

    assert judged(">4194304") == [("error", "memtune hard_limit 4 GiB is not above the guest's RAM (4 GiB): QEMU is "
                                             "OOM-killed once the guest uses its memory")]
    # 4 GiB of RAM and 2 vCPUs: at least 30 MiB + 8 MiB of page tables + 2 x 8 MiB = 54 MiB beside it
    assert judged(" unit='MiB'>4140") == [("warning", "memtune hard_limit 4.0 GiB leaves QEMU less than 54 MiB beside "
                                                      "the guest's RAM: it is OOM-killed once the guest uses its "
                                                      "memory")]
    assert judged(" unit='MiB'>4150") == []
    assert judged(" unit='MiB'>4150", vcpus=8) != []  # 6 more vCPUs, 48 MiB more
    assert judged(" unit='KiB'>not-a-number") == []  # VAL001's business, not a limit


def test_paravirt_promises_are_judged_against_the_pins() -> None:
    pvspin = "<features><acpi/><apic/><pvspinlock state='off'/></features>"
    (spin,) = _only(domain_xml(features=pvspin), "CPU023")
    assert str(spin.severity) == "warning" and spin.line is not None
    assert spin.note == "written explicitly: if deliberate, suppress it with its reason"
    assert not fix(domain_xml(features=pvspin)).changed  # an explicit value: not by a bare --fix
    assert "<pvspinlock state='on'/>" in fix(domain_xml(features=pvspin), options(fix_select=("CPU023",)),
                                            unsafe=True).fixed.decode()
    assert not _only(domain_xml(vcpus=1, features=pvspin), "CPU023")  # one vCPU: no lock to wait on
    assert not _only(domain_xml(os="windows", features=pvspin), "CPU023")  # Windows spins with Hyper-V's help
    hint = "<features><acpi/><apic/><kvm><hint-dedicated state='on'/></kvm></features>"
    overlapping = "<cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='2'/></cputune>"
    (shared,) = _only(domain_xml(features=hint, extra=overlapping), "CPU024")
    assert (str(shared.severity), shared.message) == (
        "warning", "kvm hint-dedicated promises vCPUs that are never preempted, but they share host CPUs")
    fixed = fix(domain_xml(features=hint), options(fix_select=("CPU024",)), unsafe=True).fixed.decode()
    assert "<kvm><hint-dedicated state='off'/></kvm>" in fixed
    assert not _only(domain_xml(features=hint.replace("'on'", "'off'")), "CPU024")


def test_cpu025_only_for_host_passthrough_under_tcg() -> None:
    assert not _only(domain_xml(dtype="qemu", cpu="<cpu mode='host-model'/>"), "CPU025")  # libvirt 9.0 starts it
    assert not _only(domain_xml(dtype="kvm"), "CPU025")
    (tcg,) = _only(domain_xml(dtype="qemu", cpu="<cpu mode='host-passthrough' check='none' migratable='on'/>"),
                   "CPU025")
    assert str(tcg.severity) == "error"


def test_dsk008_warns_on_synchronous_cache_modes_and_reads_pool_volumes() -> None:
    def disk(kind: str, driver: str) -> str:
        source = "<source pool='default' volume='a.qcow2'/>" if kind == "volume" else "<source file='/a.img'/>"
        return (f"<disk type='{kind}' device='disk'>{driver}{source}<target dev='vda' bus='virtio'/></disk>"
                "<iothreads>1</iothreads>")

    for mode in ("writethrough", "directsync"):
        xml = domain_xml(devices=disk("file", f"<driver name='qemu' type='raw' cache='{mode}'/>"))
        (dsk,) = _only(xml, "DSK008")
        assert (str(dsk.severity), dsk.message) == (
            "warning", f"image-file disk vda flushes every write (cache mode {mode}, O_DSYNC)")
        fixed = fix(xml, options(fix_select=("DSK008",)), unsafe=True).fixed.decode()
        assert "<driver name='qemu' type='raw' cache='none'/>" in fixed
    (vol,) = _only(domain_xml(devices=disk("volume", "<driver name='qemu' type='qcow2'/>")), "DSK008")
    assert (str(vol.severity), vol.message) == (
        "info", "pool-volume disk vda goes through the host page cache: cache mode writeback, QEMU's default")
    assert not _only(domain_xml(devices=disk("volume", "<driver name='qemu' type='qcow2' cache='none'/>")), "DSK008")


def test_clk004_leaves_linux_guests_that_keep_time_with_kvmclock() -> None:
    no_rtc = "<clock offset='utc'><timer name='pit' tickpolicy='delay'/><timer name='hpet' present='no'/>{}</clock>"
    assert "CLK004" not in codes(domain_xml(clock=no_rtc.format("")))
    assert "CLK004" not in codes(domain_xml(clock=no_rtc.format("<timer name='kvmclock' present='yes'/>")))
    assert "CLK004" in codes(domain_xml(clock=no_rtc.format("<timer name='kvmclock' present='no'/>")))
    assert "CLK004" in codes(domain_xml(os=None, clock=no_rtc.format("")))  # unknown OS: still said


def test_net001_shares_queues_out_over_many_nics_and_leaves_realtime_guests_alone() -> None:
    nic = NIC.format(model="virtio", driver="")
    ten = domain_xml(vcpus=8, devices=nic * 10)
    found = _only(ten, "NET001")
    assert len(found) == 10 and {f.fix.description for f in found if f.fix} == {"set 2 queues"}
    assert found[0].note == "2 queues, not 8: 10 virtio NICs share about two queues per vCPU"
    fixed = fix(ten, options(fix_select=("NET001",))).fixed.decode()
    assert fixed.count("<driver queues='2'/>") == 10
    two = _only(domain_xml(vcpus=16, devices=nic * 2), "NET001")
    assert [f.fix.description for f in two if f.fix] == ["set 16 queues"] * 2 and two[0].note is None
    realtime = domain_xml(vcpus=8, devices=nic, extra="<cputune><vcpusched vcpus='1-7' scheduler='fifo' "
                                                      "priority='1'/></cputune>")
    (rt,) = _only(realtime, "NET001")
    assert (str(rt.severity), rt.fix) == ("info", None)
    assert rt.note == ("no fix: real-time vCPUs (vcpusched fifo/rr) would take the queues' interrupts; add queues "
                       "only with the guest's IRQ affinity kept off them")


def test_net004_says_what_the_guest_needs_before_virtio() -> None:
    e1000 = NIC.format(model="e1000", driver="")
    notes = {os: _only(domain_xml(os=os, devices=e1000), "NET004")[0].note for os in ("windows", "linux", None)}
    assert notes["windows"] == ("before switching: install the virtio-win network driver (NetKVM), or Windows "
                                "loses this network")
    assert notes["linux"] is None
    assert notes[None] is not None and notes[None].startswith("before switching: the guest needs a virtio-net driver")
    freebsd = domain_xml(os=None, devices=e1000, metadata=(
        "<libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>"
        "<libosinfo:os id='http://freebsd.org/freebsd/13.1'/></libosinfo:libosinfo>"))
    assert "vtnet0" in (_only(freebsd, "NET004")[0].note or "")


def test_clk003_keeps_the_hpet_while_kvmclock_is_off() -> None:
    clock = "<clock offset='utc'><timer name='rtc' tickpolicy='catchup'/><timer name='kvmclock' present='no'/></clock>"
    (hpet,) = _only(domain_xml(clock=clock), "CLK003")
    assert hpet.fix is None and hpet.note == ("no fix while kvmclock is off: the HPET may be the guest's clock "
                                              "source; turn kvmclock on first (CLK007)")
    with_kvmclock = clock.replace("present='no'", "present='yes'")
    assert _only(domain_xml(clock=with_kvmclock), "CLK003")[0].fix is not None


def test_emulator_and_iothread_pins_stay_on_the_guests_numa_node() -> None:
    """On intel-2node the housekeeping CPUs are each node's first core (0,8 and 4,12): a guest
    living on node 1 gets its threads pinned to 4,12, not a set spanning both nodes."""
    node1 = "<iothreads>1</iothreads><cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/></cputune>"
    opts = options(host_facts=host("intel-2node.xml"), fix_select=("CPU004", "CPU005"))
    outcome = fix(domain_xml(extra=node1), opts, unsafe=True)
    applied = {a.code: a.description for a in outcome.applied}
    assert (applied["CPU004"], applied["CPU005"]) == ("pin emulator threads to 4,12", "pin I/O threads to 4,12")
    spanning = node1.replace("cpuset='6'", "cpuset='2'")  # vCPUs on both nodes: every housekeeping CPU
    assert "pin emulator threads to 0,4,8,12" in {a.description for a in fix(domain_xml(extra=spanning), opts,
                                                                               unsafe=True).applied}
    crowded = node1.replace("cpuset='5'", "cpuset='4'").replace("cpuset='6'", "cpuset='12'")
    (cpu004,) = [f for f in findings(domain_xml(extra=crowded), opts) if f.rule.code == "CPU004"]
    assert cpu004.fix is None and cpu004.note == ("no housekeeping CPU free on NUMA node 1, where the guest runs: "
                                                  "name one in the policy parameter housekeeping_cpus")


def test_cpu001_says_what_host_passthrough_costs_migration_and_keeps_migrating_guests_portable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    generic = "<cpu mode='custom' match='exact'><model>qemu64</model></cpu>"
    (local,) = _only(domain_xml(cpu=generic), "CPU001")
    assert local.fix is not None and local.fix.description == (
        "use host-passthrough (live migration then needs hosts with the same CPU; policy parameter migrating_fleet "
        "for host-model)")
    assert local.note is None
    rbd = ("<disk type='network' device='disk'><driver name='qemu' type='raw' cache='none'/>"
           "<source protocol='rbd' name='pool/vm'><host name='mon1'/></source><target dev='vda' bus='virtio'/></disk>")
    shared = domain_xml(cpu=generic, devices=rbd)
    fixed = fix(shared, options(fix_select=("CPU001",)), unsafe=True).fixed.decode()
    assert "<cpu mode='host-model' check='none'/>" in fixed
    policy = tmp_path / "fleet.yaml"
    policy.write_text("extends: default\nrules:\n  - select: [cpu-model-generic]\n    params:\n"
                      "      migrating_fleet: true\n")
    (fleet,) = [f for f in findings(domain_xml(cpu=generic), options((str(policy),))) if f.rule.code == "CPU001"]
    assert fleet.fix is not None and fleet.fix.description.startswith("use host-model (live migration to hosts")


def test_cpu022_reads_io_thread_quotas_and_cpu026_turns_paravirt_features_back_on() -> None:
    capped = domain_xml(extra="<iothreads>1</iothreads><cputune><iothread_quota>20000</iothread_quota></cputune>")
    assert [f.message for f in _only(capped, "CPU022")] == [
        "CFS quota gives each I/O thread 20% of a CPU per 100 ms period: stalls the disks the thread serves until "
        "the next period"]
    off = domain_xml(features="<features><acpi/><apic eoi='off'/><kvm><pv-ipi state='off'/></kvm></features>")
    assert [(str(f.severity), f.message, f.note) for f in _only(off, "CPU031")] == [
        ("info", "paravirtual end-of-interrupt off: every interrupt's EOI exits to the host",
         "written explicitly: if deliberate, suppress it with its reason"),
        ("info", "paravirtual IPIs off: an IPI exits once per destination vCPU",
         "written explicitly: if deliberate, suppress it with its reason")]
    fixed = fix(off, options(fix_select=("CPU031",)), unsafe=True).fixed.decode()
    assert "<features><acpi/><apic eoi='on'/><kvm><pv-ipi state='on'/></kvm></features>" in fixed
    assert not _only(domain_xml(os="windows", features="<features><acpi/><apic eoi='off'/></features>"), "CPU031")


def test_dsk010_names_the_share_and_fixes_disks_and_virtio_scsi_controllers() -> None:
    disk = VIRTIO_DISK.format(drv=" queues='1'")
    xml = domain_xml(vcpus=16, devices=disk + "<controller type='scsi' index='0' model='virtio-scsi'>"
                                              "<driver queues='4'/></controller>")
    found = _only(xml, "DSK010")
    assert [(str(f.severity), f.message) for f in found] == [
        ("warning", "virtio disk vda has 1 queue for 16 vCPUs: vCPUs share queues and their completions arrive on "
                    "other vCPUs"),  # 16 vCPUs on one queue
        ("info", "virtio-scsi controller has 4 queues for 16 vCPUs: vCPUs share queues and their completions arrive "
                 "on other vCPUs")]  # 4 vCPUs a queue: the cost depends on the guest's parallel I/O
    assert found[0].note == ("written explicitly: if deliberate, suppress it with its reason; without a value QEMU "
                             "5.2+ gives one queue per vCPU")
    assert [str(f.severity) for f in _only(domain_xml(vcpus=8, devices=disk), "DSK010")] == ["warning"]
    assert [str(f.severity) for f in _only(domain_xml(vcpus=7, devices=disk), "DSK010")] == ["info"]
    fixed = fix(xml, options(fix_select=("DSK010",)), unsafe=True).fixed.decode()
    assert "<driver name='qemu' type='raw' queues='16'/>" in fixed
    assert "<controller type='scsi' index='0' model='virtio-scsi'><driver queues='16'/></controller>" in fixed
    assert not fix(xml, options(fix_select=("DSK010",))).changed  # unsafe: not without --unsafe-fixes


@pytest.mark.parametrize("vcpus, queues", [(3, "1"), (8, "4"), (16, "8"), (16, "abc")])
def test_dsk010_leaves_small_guests_and_shares_of_two_vcpus_alone(vcpus: int, queues: str) -> None:
    assert not _only(domain_xml(vcpus=vcpus, devices=VIRTIO_DISK.format(drv=f" queues='{queues}'")), "DSK010")


def test_dsk010_offers_no_fix_where_queues_are_mapped_or_served_by_a_vhost_user_backend() -> None:
    mapped = ("<disk type='file' device='disk'><driver name='qemu' type='raw' queues='2'><iothreads>"
              "<iothread id='1'><queue id='0'/></iothread><iothread id='2'><queue id='1'/></iothread></iothreads>"
              "</driver><source file='/a.img'/><target dev='vda' bus='virtio'/></disk>")
    (found,) = _only(domain_xml(vcpus=8, extra="<iothreads>2</iothreads>", devices=mapped), "DSK010")
    assert found.fix is None
    assert found.note == ("written explicitly: if deliberate, suppress it with its reason; without a value QEMU 5.2+ "
                          "gives one queue per vCPU; no fix: the queues are mapped to I/O threads, map the new ones "
                          "too")
    vhost_user = ("<disk type='vhostuser' device='disk'><driver name='qemu' type='raw' queues='1'/>"
                  "<source type='unix' path='/run/vhost-blk.sock'><reconnect enabled='yes' timeout='10'/></source>"
                  "<target dev='vda' bus='virtio'/></disk>")
    (found,) = _only(domain_xml(vcpus=8, devices=vhost_user), "DSK010")
    assert found.fix is None
    assert found.note == ("written explicitly: if deliberate, suppress it with its reason; without a value QEMU 5.2+ "
                          "gives one queue per vCPU; no fix: the vhost-user backend sets how many queues it serves")


def _gic_findings(xml: str, domcaps: str | Path | None = None) -> list[tuple[str, str, str | None, str | None]]:
    facts = load_host(None, str(domcaps)) if isinstance(domcaps, Path) else host(domcaps=domcaps) if domcaps else None
    return [(f.rule.code, f.message, f.note, f.fix.description if f.fix else None)
            for f in findings(xml, options(host_facts=facts)) if f.rule.code in ("CPU026", "CPU027")]


def _arm_domcaps(tmp_path: Path, versions: str, domain: str = "kvm", arch: str = "aarch64") -> Path:
    path = tmp_path / "domcaps.xml"
    values = "".join(f"<value>{v}</value>" for v in versions)
    path.write_text(f"<domainCapabilities><domain>{domain}</domain><arch>{arch}</arch><features>"
                    f"<gic supported='yes'><enum name='version'>{values}</enum></gic></features></domainCapabilities>")
    return path


def test_cpu026_gicv2_beyond_eight_vcpus(tmp_path: Path) -> None:
    sixteen = domain_xml(**{**ARM, "vcpus": 16})
    assert _gic_findings(sixteen) == [
        ("CPU026", "GICv2 addresses at most 8 CPUs, the guest has 16: QEMU refuses to start it",
         "the fix assumes a host that offers GICv3 (give --domcaps to know)", "GIC version 3")]
    fixed = fix(sixteen, options(fix_select=("CPU026",)), unsafe=True).fixed.decode()
    assert "<features><acpi/><gic version='3'/></features>" in fixed
    # Hot-plug slots count: QEMU checks maxcpus.
    assert _gic_findings(domain_xml(**{**ARM, "vcpus": "<vcpu current='4'>12</vcpu>"}))[0][0] == "CPU026"
    assert _gic_findings(domain_xml(**{**ARM, "vcpus": 8})) == []
    v2_only = _arm_domcaps(tmp_path, "2")
    assert _gic_findings(sixteen, v2_only) == [
        ("CPU026", "GICv2 addresses at most 8 CPUs, the guest has 16: QEMU refuses to start it",
         "the host's domain capabilities offer no GICv3: give the guest at most 8 vCPUs", None)]
    # x86 guests have no GIC; a <gic> there is libvirt's to refuse, not this rule's.
    assert _gic_findings(domain_xml(vcpus=16, features="<features><acpi/><gic version='2'/></features>")) == []


def test_cpu027_gic_version_the_host_does_not_offer(tmp_path: Path) -> None:
    two = domain_xml(**ARM)
    assert _gic_findings(two, "domcaps-aarch64-gicv3.xml") == [
        ("CPU027", "GIC version 2 is not offered by the host (its domain capabilities list: 3): the guest does not "
                   "start", None, "GIC version 3")]
    opts = options(host_facts=host(domcaps="domcaps-aarch64-gicv3.xml"), fix_select=("CPU027",))
    assert "<gic version='3'/>" in fix(two, opts, unsafe=True).fixed.decode()
    three = two.replace("version='2'", "version='3'")
    assert _gic_findings(three, _arm_domcaps(tmp_path, "2")) == [
        ("CPU027", "GIC version 3 is not offered by the host (its domain capabilities list: 2): the guest does not "
                   "start", None, "GIC version 2")]
    sixteen = domain_xml(**{**ARM, "vcpus": 16, "features": "<features><gic version='3'/></features>"})
    assert ("CPU027", "GIC version 3 is not offered by the host (its domain capabilities list: 2): the guest does "
            "not start", "no GIC version the host offers holds the guest's vCPUs", None) in _gic_findings(
        sixteen, _arm_domcaps(tmp_path, "2"))
    # Not judged: version='host' (libvirt picks), domain capabilities of another domain type or of x86.
    assert _gic_findings(two.replace("version='2'", "version='host'"), "domcaps-aarch64-gicv3.xml") == []
    assert _gic_findings(two, _arm_domcaps(tmp_path, "3", domain="qemu")) == []
    assert _gic_findings(two, _arm_domcaps(tmp_path, "3", arch="x86_64")) == []
    assert _gic_findings(two, "domcaps-full.xml") == []


def test_domcapabilities_gic_versions_are_read_for_arm_hosts_only() -> None:
    arm = host(domcaps="domcaps-aarch64-gicv3.xml")
    assert arm is not None and (arm.gic_versions, arm.domcaps_type) == (frozenset({"3"}), "kvm")
    x86 = host(domcaps="domcaps-full.xml")
    assert x86 is not None and x86.gic_versions is None


def _numa_findings(xml: str, code: str) -> list[tuple[str, str, str | None, str | None]]:
    opts = options(host_facts=host("intel-2node.xml"))
    return [(str(f.severity), f.message, f.note, f.fix.description if f.fix else None)
            for f in findings(xml, opts) if f.rule.code == code]


def test_cpu028_binds_each_cells_memory_to_its_vcpus_node() -> None:
    xml = domain_xml(cpu=NUMA_CELLS, extra=CROSSED_CELLS)
    assert _numa_findings(xml, "CPU028") == [
        ("warning", "guest NUMA cell 0's memory is bound to node(s) 1 but its vCPUs run on node(s) 0: all its memory "
                    "is remote", None, "bind cell 0's memory to node(s) 0")]
    opts = options(host_facts=host("intel-2node.xml"), fix_select=("CPU028",))
    fixed = fix(xml, opts, unsafe=True).fixed.decode()
    assert ("<numatune><memnode cellid='0' mode='strict' nodeset='0'/><memnode cellid='1' mode='strict' "
            "nodeset='1'/></numatune>") in fixed
    huge = domain_xml(cpu=NUMA_CELLS.replace("memory='2'", "memory='20'"), extra=CROSSED_CELLS,
                      memory="<memory unit='GiB'>40</memory>")
    assert _numa_findings(huge, "CPU028")[0][2:] == ("node(s) 0 cannot hold the cell's memory: re-place the cell",
                                                     None)
    # A cell whose vCPU is unpinned may run anywhere: not judged.
    loose = CROSSED_CELLS.replace("<vcpupin vcpu='0' cpuset='1'/>", "")
    assert _numa_findings(domain_xml(cpu=NUMA_CELLS, extra=loose), "CPU028") == []
    assert "CPU028" not in codes(xml)  # without host facts
    # Nodes intel-2node does not have: a definition for another host, not a remote binding.
    elsewhere = domain_xml(cpu=NUMA_CELLS, extra=CROSSED_CELLS.replace("nodeset='1'", "nodeset='3'"))
    assert _numa_findings(elsewhere, "CPU028") == []


def test_cpu029_interleave_for_vcpus_on_one_node() -> None:
    xml = domain_xml(extra=NODE0_PINS + "<numatune><memory mode='interleave' nodeset='0-1'/></numatune>")
    assert _numa_findings(xml, "CPU029") == [
        ("warning", "memory is interleaved over nodes 0-1 but the vCPUs run on node 0 alone: 1 of every 2 pages "
                    "are remote", "written explicitly: if deliberate, suppress it with its reason: interleaving pays "
                    "off only for a workload bound by memory bandwidth", None)]
    spread = NODE0_PINS.replace("cpuset='2'", "cpuset='5'")
    assert _numa_findings(domain_xml(extra=spread + "<numatune><memory mode='interleave' nodeset='0-1'/>"
                                                    "</numatune>"), "CPU029") == []
    # Interleaving away from the vCPUs' node entirely is CPU019's warning, not this rule's.
    away = domain_xml(extra=NODE0_PINS + "<numatune><memory mode='interleave' nodeset='1'/></numatune>")
    assert _numa_findings(away, "CPU029") == [] and _numa_findings(away, "CPU019")


def test_cpu030_emulator_and_iothreads_away_from_the_memory() -> None:
    pins = ("<iothreads>1</iothreads><cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='2'/>"
            "<emulatorpin cpuset='4'/><iothreadpin iothread='1' cpuset='12'/></cputune>")
    xml = domain_xml(extra=pins + "<numatune><memory mode='strict' nodeset='0'/></numatune>")
    assert _numa_findings(xml, "CPU030") == [
        ("warning", "emulator threads pinned on node(s) 1, the guest's memory is on node(s) 0: every access they "
                    "make to it is remote", "written explicitly: if deliberate, suppress it with its reason", None),
        ("warning", "I/O thread 1 pinned on node(s) 1, the guest's memory is on node(s) 0: every access they make "
                    "to it is remote", "written explicitly: if deliberate, suppress it with its reason", None)]
    # Per-cell bindings count as the guest's memory; threads on a node that holds some of it are left alone.
    cells = domain_xml(cpu=NUMA_CELLS, extra=pins + "<numatune><memnode cellid='0' mode='strict' nodeset='0'/>"
                                                    "<memnode cellid='1' mode='strict' nodeset='1'/></numatune>")
    assert _numa_findings(cells, "CPU030") == []
    assert _numa_findings(domain_xml(extra=pins), "CPU030") == []  # no binding: memory follows the vCPUs
    assert _numa_findings(domain_xml(extra=pins + "<numatune><memory mode='strict' nodeset='2-3'/></numatune>"),
                          "CPU030") == []  # nodes intel-2node does not have


@pytest.mark.parametrize("cpu, severity, message", [
    ("<cpu mode='host-passthrough'/>", "warning",
     "kvmclock is off for a Linux guest without an invariant TSC: its clock reads exit to QEMU's emulated timers"),
    ("<cpu mode='host-model'><feature policy='require' name='invtsc'/></cpu>", "info",
     "kvmclock is off for a Linux guest"),
    ("<cpu mode='host-passthrough' migratable='off'/>", "info", "kvmclock is off for a Linux guest"),
    ("<cpu mode='host-model'><feature policy='disable' name='invtsc'/></cpu>", "warning",
     "kvmclock is off for a Linux guest without an invariant TSC: its clock reads exit to QEMU's emulated timers"),
])
def test_clk007_kvmclock_off_warns_without_an_invariant_tsc(cpu: str, severity: str, message: str) -> None:
    clock = "<clock offset='utc'><timer name='kvmclock' present='no'/><timer name='hpet' present='no'/></clock>"
    (found,) = _only(domain_xml(cpu=cpu, clock=clock), "CLK007")
    assert (str(found.severity), found.message, found.fix) == (severity, message, None)
    assert found.note == (None if severity == "warning" else
                          "the CPU gives the guest an invariant TSC, which Linux reads without exits")


def test_hyperv_fixes_say_what_they_assume_without_domcaps() -> None:
    """Only the fix's description (shown with --show-fixes, in JSON and after --fix) says it: a
    note would be printed by every text report of every Windows guest."""
    bare = domain_xml(os="windows", hyperv="<hyperv><relaxed state='on'/></hyperv>", clock=NO_RTC_CLOCK)
    assumed = " (assumes a host that offers Hyper-V enlightenments: --domcaps checks)"
    unknown = {f.rule.code: (f.fix.description if f.fix else None, f.note) for f in findings(bare)}
    assert unknown["HV001"] == ("enable Hyper-V vapic, spinlocks, vpindex, runtime, frequencies, tlbflush, ipi"
                                + assumed, None)
    assert unknown["CLK001"] == ("add hypervclock timer" + assumed, None)
    known = {f.rule.code: f.fix.description for f in findings(bare, options(host_facts=host(
        "intel-2node.xml", "domcaps-full.xml"))) if f.fix}
    assert known["HV001"] == "enable Hyper-V vapic, spinlocks, vpindex, runtime, frequencies, tlbflush, ipi"
    assert known["CLK001"] == "add hypervclock timer"


def test_hyperv_rules_never_add_enlightenments_to_tcg_guests() -> None:
    broken = hv("<stimer state='on'/>")
    tcg = domain_xml(dtype="qemu", os="windows", cpu="<cpu mode='maximum'/>", hyperv=broken)
    assert [f for f in findings(tcg) if f.rule.code.startswith("HV") or f.rule.code in ("CLK001", "CLK002")] == []
    applied = {a.code for a in fix(tcg, options(fix_all=True), unsafe=True).applied}
    assert not applied & {"HV001", "HV002", "CLK001", "CLK002"}
    assert "HV002" in codes(domain_xml(os="windows", hyperv=broken))  # KVM: QEMU refuses it
    synic = domain_xml(dtype="qemu", os="windows", cpu="<cpu mode='maximum'/>", hyperv=FULL_HYPERV)
    with_host = options(host_facts=host("intel-2node.xml", "domcaps-full.xml"))
    assert "HV007" not in codes(synic, with_host)
    assert "HV007" in codes(synic.replace("<domain type='qemu'>", "<domain type='kvm'>"), with_host)


def test_cpu010_says_kvm_is_listed_by_libvirt_not_that_it_runs_the_guest(tmp_path: Path) -> None:
    """Before: "the host has KVM", from capabilities alone; on a kvm-pvm host /dev/kvm opens (so
    libvirt lists kvm) but runs only special guests, and the fixed guest then failed to start."""
    domain = tmp_path / "tcg.xml"
    domain.write_text((DOMAINS / "linux-tuned.xml").read_text().replace('<domain type="kvm">', '<domain type="qemu">'))
    done = run_vmtune("check", "--isolated", "--host", str(ROOT / "fixtures" / "hosts" / "intel-2node.xml"),
                      str(domain))
    assert f"{domain}:1: CPU010 warning guest uses TCG emulation although libvirt lists KVM for this host (its " \
        "capabilities only: not proof that KVM can run this guest) (tcg-on-kvm-host) [unsafe fix]" in \
        done.stdout.splitlines()
