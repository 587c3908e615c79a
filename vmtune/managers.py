"""Advice for domains whose XML another system owns (OpenStack nova, KubeVirt), in its own terms."""

from __future__ import annotations

NOVA = {
    "CPU001": "flavor/image: cpu_mode=host-passthrough in nova.conf [libvirt]",
    "CPU004": "flavor extra spec hw:emulator_threads_policy=isolate (or share)",
    "CPU005": "flavor extra spec hw:emulator_threads_policy=isolate",
    "CPU006": "flavor extra spec hw:cpu_policy=dedicated",
    "CPU007": "flavor extra spec hw:cpu_policy=dedicated",
    "CPU008": "flavor extra spec hw:numa_nodes=1",
    "CPU011": "flavor extra spec hw:numa_nodes=1 (nova binds memory to the node)",
    "MEM001": "flavor extra spec hw:mem_page_size=large",
    "MEM002": "nova.conf [libvirt] mem_stats_period_seconds=0 with hw:mem_page_size=large",
    "MEM007": "nova.conf [libvirt] mem_stats_period_seconds=0",
    "NET001": "image property hw_vif_multiqueue_enabled=true",
    "NET002": "image property hw_vif_multiqueue_enabled=true (nova caps queues at the tap limit)",
    "NET004": "image property hw_vif_model=virtio",
    "DSK004": "image property hw_disk_bus=virtio",
    "CLK002": "image property hw_time_hpet=true when the host lacks Hyper-V stimer; os_type=windows",
    "CLK003": "image property hw_time_hpet=false",
    "HV001": "image property os_type=windows (nova then enables the Hyper-V set)",
    "USB001": "image property hw_input_bus=virtio / hw_pointer_model=usbtablet off",
    "USB002": "image property hw_pointer_model unset (no tablet)",
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
    "CPU006": "spec.domain.cpu.dedicatedCpuPlacement: true",
    "CPU007": "spec.domain.cpu.dedicatedCpuPlacement: true",
    "CPU008": "spec.domain.cpu.numa.guestMappingPassthrough: {}",
    "MEM001": "spec.domain.memory.hugepages.pageSize: 2Mi",
    "NET001": "spec.domain.devices.networkInterfaceMultiqueue: true",
    "NET002": "spec.domain.devices.networkInterfaceMultiqueue: true",
    "NET004": "interfaces[].model: virtio",
    "DSK004": "disks[].disk.bus: virtio",
    "CLK002": "spec.domain.features.hyperv: {synic: {}, synictimer: {}, vpindex: {}}",
    "CLK003": "spec.domain.clock.timer.hpet.present: false",
    "HV001": "spec.domain.features.hyperv: {relaxed, vapic, spinlocks, vpindex, runtime, frequencies, tlbflush, ipi}",
    "HV002": "spec.domain.features.hyperv: enable the prerequisites (the webhook adds them)",
    "USB002": "spec.domain.devices.inputs: remove the tablet",
    "MEM007": "spec.domain.devices.autoattachMemBalloon: false",
    "MEM002": "spec.domain.devices.autoattachMemBalloon: false",
    "CPU016": "spec.domain.cpu: {sockets: 1, cores: N} (or a cores-preferring instancetype preference)",
    "CPU019": "spec.domain.cpu.numa.guestMappingPassthrough: {}",
    "CPU020": "spec.domain.cpu: {dedicatedCpuPlacement: true, isolateEmulatorThread: true, realtime: {}}",
    "CPU021": "spec.domain.cpu.realtime: {} (KubeVirt then switches the vPMU off)",
    "CLK008": "KubeVirt adds the TSC frequency to invtsc guests itself: schedule them on nodes labelled with one",
    "CLK009": "spec.domain.cpu.features: [{name: invtsc, policy: require}]",
    "DSK008": "disks[].cache: none",
    "HV008": "spec.domain.features.hyperv: {evmcs: {}, synictimer: {direct: {enabled: true}}}",
}


def advice(manager: str | None, code: str) -> str | None:
    if manager == "nova":
        hint = NOVA.get(code)
        return f"managed by OpenStack nova: {hint}" if hint else "managed by OpenStack nova: change the flavor/image"
    if manager == "kubevirt":
        hint = KUBEVIRT.get(code)
        return f"managed by KubeVirt: {hint}" if hint else "managed by KubeVirt: change the VirtualMachine spec"
    return None
