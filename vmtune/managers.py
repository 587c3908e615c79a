"""Advice for domains whose XML another system owns (OpenStack nova, KubeVirt, oVirt,
CloudStack), in that system's own terms.

Each table maps a rule code to the knob that changes what the stack writes: a flavor extra
spec, an image property, a nova.conf option, a VirtualMachine(Instance) field, an engine
setting. A rule the stack offers no knob for gets NO_KNOB: a fix vmtune applied would be
overwritten the next time the stack regenerates the definition. Knob names were checked in
the stacks' sources: nova 34.0.0 (`nova/conf/libvirt.py`, `nova/conf/compute.py`,
`nova/api/validation/extra_specs/hw.py`, `nova/objects/image_meta.py`,
`nova/virt/libvirt/driver.py`), KubeVirt d923fdb (`staging/src/kubevirt.io/api/core/v1/schema.go`,
and what its converter writes for each knob: fixtures/stacks/kubevirt),
ovirt-engine (`LibvirtVmXmlBuilder`, the REST API model of ovirt-engine-sdk), CloudStack
(`VmDetailConstants`: VM and template details; `AgentProperties`: agent.properties).

Proxmox VE is not detected: it starts QEMU from its own configuration, not from libvirt
domain XML, so no libvirt definition it owns exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmtune.facts.domain import Domain

NO_KNOB = "no knob: ask the stack / accept"

NAMES = {"nova": "OpenStack nova", "kubevirt": "KubeVirt", "ovirt": "oVirt", "cloudstack": "Apache CloudStack"}

NOVA = {
    "CPU001": "nova.conf [libvirt] cpu_mode=host-passthrough (or host-model, or custom with cpu_models)",
    "CPU002": "no knob: nova pins every vCPU of a hw:cpu_policy=dedicated flavor or none",
    "CPU004": "flavor extra spec hw:emulator_threads_policy=isolate (or share with [compute] cpu_shared_set)",
    "CPU005": "flavor extra spec hw:emulator_threads_policy=isolate (nova pins the I/O thread with the "
              "emulator threads)",
    "CPU006": "no knob: nova never writes hint-dedicated",
    "CPU007": "flavor extra spec hw:cpu_policy=dedicated",
    "CPU008": "flavor extra spec hw:numa_nodes=1",
    "CPU011": "flavor extra spec hw:numa_nodes=1 (nova binds memory to the node)",
    "CPU012": "flavor extra spec hw:numa_nodes=N (a guest NUMA topology)",
    "LAT001": "no knob: nova never writes poll-control",
    "MEM001": "flavor extra spec hw:mem_page_size=large",
    "MEM002": "nova.conf [libvirt] mem_stats_period_seconds=0 (nova then writes memballoon model='none')",
    "MEM005": "no knob: nova writes nosharepages only for realtime flavors (hw:cpu_realtime=yes)",
    "MEM007": "nova.conf [libvirt] mem_stats_period_seconds=0 (nova then writes memballoon model='none')",
    "NET001": "image property hw_vif_multiqueue_enabled=true or flavor extra spec hw:vif_multiqueue_enabled=true",
    "NET002": "image property hw_vif_multiqueue_enabled (nova sizes queues to vCPUs, capped at the tap limit)",
    "NET004": "image property hw_vif_model=virtio",
    "DSK002": "nova.conf [libvirt] disk_cachemodes (e.g. block=none; nova then writes io='native' on volumes)",
    "DSK003": "no knob: nova always writes one I/O thread and never assigns disks to it",
    "DSK004": "image property hw_disk_bus=virtio",
    "DSK005": "nova.conf [libvirt] hw_disk_discard=unmap",
    "DSK006": "image property hw_machine_type or nova.conf [libvirt] hw_machine_type",
    "CLK001": "image property os_type=windows (nova then adds the hypervclock timer)",
    "CLK002": "no knob: nova never writes Hyper-V stimer (os_type=windows gives synic without it: driver.py "
              "_set_features); image property hw_time_hpet=true only gives Windows the HPET to fall back on, "
              "which this finding still reports; the cure needs a nova that writes stimer",
    "CLK003": "image property hw_time_hpet=false (nova's default)",
    "HV001": "image property os_type=windows (nova then enables its Hyper-V set)",
    "USB001": "image property hw_input_bus=virtio (a virtio tablet and keyboard: nova then writes USB "
              "model='none'), or nova.conf [DEFAULT] pointer_model=ps2mouse; hw_usb_model is ignored while nova "
              "adds its USB tablet (driver.py _guest_add_usb_root_controller writes no model then, which libvirt "
              "9.0 makes a piix3-uhci)",
    "USB002": "image property hw_input_bus=virtio, or nova.conf [DEFAULT] pointer_model=ps2mouse "
              "(hw_pointer_model accepts only usbtablet)",
    "USB003": "no knob needed: nova writes model='none' when no USB device is attached",
    "CPU016": "flavor extra spec hw:cpu_sockets=1 (or hw:cpu_max_sockets=2); nova's default is one socket per vCPU",
    "CPU019": "flavor extra spec hw:numa_nodes=1 (nova binds memory to the vCPUs' node)",
    "CPU020": "flavor extra spec hw:cpu_realtime_mask or hw:emulator_threads_policy=isolate",
    "CPU021": "flavor extra spec hw:pmu=false (image property hw_pmu=false)",
    "DSK007": "image property hw_scsi_model=virtio-scsi",
    "DSK008": "nova.conf [libvirt] disk_cachemodes=file=none (nova's default where O_DIRECT works)",
    "NET007": "nova.conf [libvirt] rx_queue_size=1024 (tx_queue_size=1024 for vhost-user)",
}
KUBEVIRT = {
    "CPU001": "spec.domain.cpu.model: host-passthrough",
    "CPU004": "spec.domain.cpu.isolateEmulatorThread: true",
    "CPU005": "spec.domain.ioThreadsPolicy: supplementalPool with spec.domain.ioThreads.supplementalPoolThreadCount: N "
              "(KubeVirt then pins every I/O thread to CPUs of its own; isolateEmulatorThread pins only I/O "
              "thread 1, next to the emulator thread, and leaves dedicatedIOThread threads floating)",
    "CPU006": "spec.domain.cpu.dedicatedCpuPlacement: true (KubeVirt then writes hint-dedicated)",
    "CPU007": "spec.domain.cpu.dedicatedCpuPlacement: true",
    "CPU008": "spec.domain.cpu.numa.guestMappingPassthrough: {}",
    "MEM001": "spec.domain.memory.hugepages.pageSize: 2Mi",
    "MEM002": "spec.domain.devices.autoattachMemBalloon: false",
    "MEM007": "spec.domain.devices.autoattachMemBalloon: false",
    "NET001": "spec.domain.devices.networkInterfaceMultiqueue: true",
    "NET002": "spec.domain.devices.networkInterfaceMultiqueue: true",
    "NET004": "spec.domain.devices.interfaces[].model: virtio",
    "NET007": "no knob: KubeVirt never writes rx_queue_size; accept, or rewrite the domain in a hook sidecar "
              "(annotation hooks.kubevirt.io/hookSidecars, feature gate Sidecar)",
    "DSK002": "spec.domain.devices.disks[].cache: none and disks[].io: native",
    "DSK003": "spec.domain.ioThreadsPolicy: shared|auto (or disks[].dedicatedIOThread: true)",
    "DSK004": "spec.domain.devices.disks[].disk.bus: virtio",
    "DSK006": "spec.domain.devices.blockMultiQueue: true",
    "CLK002": "spec.domain.features.hyperv: {synic: {}, synictimer: {}, vpindex: {}} (the webhook adds synic and "
              "vpindex to synictimer)",
    "CLK003": "spec.domain.clock.timer.hpet.present: false",
    "CLK004": "spec.domain.clock: {utc: {}, timer: {rtc: {tickPolicy: catchup}}} (a clock needs utc or timezone)",
    "CLK006": "spec.domain.clock.timezone: <the guest's zone> instead of utc: {} (KubeVirt has no localtime "
              "offset), or RealTimeIsUniversal=1 in the guest",
    "HV001": "spec.domain.features.hyperv: {relaxed: {}, vapic: {}, spinlocks: {}, vpindex: {}, runtime: {}, "
             "frequencies: {}, tlbflush: {}, ipi: {}}",
    "HV002": "spec.domain.features.hyperv: enable the prerequisites (the webhook adds them)",
    "USB001": "spec.domain.devices.inputs[].bus: virtio (KubeVirt writes no USB controller without a USB device)",
    "USB002": "spec.domain.devices.inputs: remove the tablet",
    "CPU016": "spec.domain.cpu: {sockets: 1, cores: N} (or a cores-preferring instancetype preference)",
    "CPU019": "spec.domain.cpu.numa.guestMappingPassthrough: {}",
    "CPU020": "spec.domain.cpu: {dedicatedCpuPlacement: true, isolateEmulatorThread: true, realtime: {}}",
    "CPU021": "spec.domain.cpu.realtime: {} (KubeVirt then switches the vPMU off)",
    "CLK008": "KubeVirt adds the TSC frequency to invtsc guests itself: schedule them on nodes labelled with one",
    "CLK009": "spec.domain.cpu.features: [{name: invtsc, policy: require}]",
    "DSK008": "spec.domain.devices.disks[].cache: none",
    "HV008": "spec.domain.features.hyperv: {evmcs: {}, synictimer: {direct: {enabled: true}}}",
}
OVIRT = {
    "CPU001": "VM setting: pass-through host CPU (REST cpu.mode=host_passthrough)",
    "CPU004": "VM type High Performance with CPU pinning, pinned NUMA and I/O threads (the engine then "
              "pins the emulator threads)",
    "CPU007": "VM setting: CPU pinning topology (REST cpu.cpu_tune.vcpu_pins)",
    "CPU008": "VM setting: NUMA pinning (virtual NUMA nodes pinned to host nodes)",
    "CPU011": "VM setting: NUMA pinning with tune mode strict (REST numa_tune_mode)",
    "MEM001": "VM custom property hugepages=<KiB size>",
    "MEM002": "VM setting: memory balloon device off (REST memory_policy.ballooning=false)",
    "MEM003": "VM setting: memory size = maximum memory, or memory balloon device off",
    "MEM005": "cluster setting: KSM off (REST cluster ksm.enabled=false)",
    "MEM007": "VM setting: memory balloon device off (REST memory_policy.ballooning=false)",
    "NET001": "VM setting: multi queues enabled (REST multi_queues_enabled; the engine caps at 4 queues)",
    "NET004": "vNIC type VirtIO",
    "DSK003": "VM setting: I/O threads (REST io.threads)",
    "DSK004": "disk interface VirtIO or VirtIO-SCSI (REST disk_attachment.interface)",
    "DSK005": "disk setting: enable discard (REST disk_attachment.pass_discard=true)",
    "CLK001": "VM operating system type Windows (the engine then writes the hypervclock timer)",
    "CLK002": "VM operating system type Windows on a cluster compatibility version with Hyper-V synic/stimer "
              "(LibvirtVmXmlBuilder: FeatureSupported.hyperVSynicStimerSupported)",
    "HV001": "VM operating system type Windows and a recent cluster compatibility version (the engine's "
             "Hyper-V set grows with it)",
    "USB001": "VM console setting: USB support off (no USB tablet, nothing polled)",
}
CLOUDSTACK = {
    "CPU001": "agent.properties guest.cpu.mode=host-passthrough (or host-model) on the KVM host, or the "
              "template/VM detail guest.cpu.mode",
    "NET001": "VM detail nic.multiqueue.number",
    "NET002": "VM detail nic.multiqueue.number",
    "NET004": "VM or template detail nicAdapter=virtio",
    "DSK003": "VM detail iothreads",
    "DSK002": "VM detail io.policy (native or io_uring)",
    "DSK004": "VM or template detail rootDiskController / dataDiskController=virtio",
}
TABLES = {"nova": NOVA, "kubevirt": KUBEVIRT, "ovirt": OVIRT, "cloudstack": CLOUDSTACK}


def knob(manager: str, code: str) -> str:
    """The knob for a rule in this stack's terms, or NO_KNOB."""
    return TABLES.get(manager, {}).get(code, NO_KNOB)


# Where the stack's knob depends on the domain it wrote: nova refuses hw:emulator_threads_policy=isolate
# without hw:cpu_policy=dedicated (hardware.py: BadRequirementEmulatorThreadsPolicy), and a shared-CPU
# flavor with hw:numa_nodes gets vCPUs and emulator threads pinned to the same node's CPUs.
NOVA_SHARED_CPUS = ("no knob for a shared-CPU flavor: nova refuses hw:emulator_threads_policy=isolate without "
                    "hw:cpu_policy=dedicated (BadRequirementEmulatorThreadsPolicy), and with hw:numa_nodes it pins "
                    "vCPUs and emulator threads to the same node's CPUs; isolation needs a dedicated flavor")
CONTEXTUAL: dict[tuple[str, str], Callable[[Domain], str | None]] = {
    ("nova", "CPU004"): lambda d: None if d.dedicated_pinning else NOVA_SHARED_CPUS,
    ("nova", "CPU005"): lambda d: None if d.dedicated_pinning else NOVA_SHARED_CPUS,
}


def advice(manager: str | None, code: str, domain: Domain | None = None) -> str | None:
    """The stack's knob for a finding of this rule, said as "managed by STACK: ..."; for some
    rules it depends on what the stack wrote (the domain)."""
    if manager is None or manager not in TABLES:
        return None
    said = CONTEXTUAL[manager, code](domain) if domain is not None and (manager, code) in CONTEXTUAL else None
    return f"managed by {NAMES[manager]}: {said or knob(manager, code)}"
