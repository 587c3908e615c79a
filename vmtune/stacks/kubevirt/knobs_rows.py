"""KubeVirt's knobs: for each rule, the field of the VMI spec (below `spec` of a VMI,
`spec.template.spec` of a VirtualMachine, …) that cures its finding, then the preference or
instancetype field that sets the same default. Field names and values checked against
kubevirt d923fdb (staging/src/kubevirt.io/api/core/v1/schema.go, instancetype/v1beta1/types.go)
and proven by rendering: tests/test_kubevirt_render.py renders a VMI with each first row set
and asserts its finding is gone.

`value` None: the cure depends on the guest or the workload (advice only, never a fix).
"""

from __future__ import annotations

from vmtune.stacks.knob_table import Knob

_HYPERV_BASE: dict[str, object] = {"relaxed": {}, "vapic": {}, "spinlocks": {}, "vpindex": {}, "runtime": {}, "frequencies": {},  # noqa: E501
                "tlbflush": {}, "ipi": {}}
_SYNIC: dict[str, object] = {"synic": {}, "synictimer": {}, "vpindex": {}}


def _vmi(path: tuple[str, ...], value: object, text: str) -> Knob:
    return Knob("vmi", path, value, text)


def _pref(path: tuple[str, ...], value: object, text: str) -> Knob:
    return Knob("preference", path, value, text)


def _it(path: tuple[str, ...], value: object, text: str) -> Knob:
    return Knob("instancetype", path, value, text)


# What KubeVirt's validating webhook requires with these knobs (admitters, d923fdb): written as a
# fix alone they would make the VM one KubeVirt refuses, so these rows are advice (value None).
_NUMA_NEEDS = ("; KubeVirt refuses it without dedicatedCpuPlacement and hugepages: advice only, a fix alone "
               "would make a VM KubeVirt rejects")
_REALTIME_NEEDS = ("; KubeVirt refuses realtime without dedicatedCpuPlacement, hugepages and "
                   "numa.guestMappingPassthrough: advice only, a fix alone would make a VM KubeVirt rejects")
_DEV = ("domain", "devices")
_CPU = ("domain", "cpu")

ROWS: dict[str, tuple[Knob, ...]] = {
    "CPU001": (_vmi((*_CPU, "model"), "host-passthrough", "spec.domain.cpu.model: host-passthrough"),
               _it(("cpu", "model"), "host-passthrough", "instancetype spec.cpu.model: host-passthrough")),
    "CPU004": (_vmi((*_CPU, "isolateEmulatorThread"), True, "spec.domain.cpu.isolateEmulatorThread: true"),
               _it(("cpu", "isolateEmulatorThread"), True, "instancetype spec.cpu.isolateEmulatorThread: true")),
    "CPU005": (_vmi(("domain", "ioThreadsPolicy"), None,
                    "spec.domain.ioThreadsPolicy: supplementalPool with spec.domain.ioThreads.supplementalPoolThreadCount"  # noqa: E501
                    ": N (KubeVirt then pins every I/O thread to CPUs of its own; isolateEmulatorThread pins only I/O "
                    "thread 1, next to the emulator thread, and leaves dedicatedIOThread threads floating)"),
               _it(("ioThreadsPolicy",), None, "instancetype spec.ioThreadsPolicy: supplementalPool with "
                                             "spec.ioThreads.supplementalPoolThreadCount: N")),
    "CPU006": (_vmi((*_CPU, "dedicatedCpuPlacement"), True,
                    "spec.domain.cpu.dedicatedCpuPlacement: true (KubeVirt then writes hint-dedicated)"),
               _it(("cpu", "dedicatedCPUPlacement"), True, "instancetype spec.cpu.dedicatedCPUPlacement: true")),
    "CPU007": (_vmi((*_CPU, "dedicatedCpuPlacement"), True, "spec.domain.cpu.dedicatedCpuPlacement: true"),
               _it(("cpu", "dedicatedCPUPlacement"), True, "instancetype spec.cpu.dedicatedCPUPlacement: true")),
    "CPU008": (_vmi((*_CPU, "numa", "guestMappingPassthrough"), None,
                    "spec.domain.cpu.numa.guestMappingPassthrough: {}" + _NUMA_NEEDS),
               _it(("cpu", "numa", "guestMappingPassthrough"), None,
                   "instancetype spec.cpu.numa.guestMappingPassthrough: {}" + _NUMA_NEEDS)),
    "MEM001": (_vmi(("domain", "memory", "hugepages", "pageSize"), "2Mi", "spec.domain.memory.hugepages.pageSize: 2Mi"),
               _it(("memory", "hugepages", "pageSize"), "2Mi", "instancetype spec.memory.hugepages.pageSize: 2Mi")),
    "MEM002": (_vmi((*_DEV, "autoattachMemBalloon"), False, "spec.domain.devices.autoattachMemBalloon: false"),
               _pref(("devices", "preferredAutoattachMemBalloon"), False,
                     "preference spec.devices.preferredAutoattachMemBalloon: false")),
    "MEM007": (_vmi((*_DEV, "autoattachMemBalloon"), False, "spec.domain.devices.autoattachMemBalloon: false"),
               _pref(("devices", "preferredAutoattachMemBalloon"), False,
                     "preference spec.devices.preferredAutoattachMemBalloon: false")),
    "NET001": (_vmi((*_DEV, "networkInterfaceMultiqueue"), True, "spec.domain.devices.networkInterfaceMultiqueue: true"),  # noqa: E501
               _pref(("devices", "preferredNetworkInterfaceMultiQueue"), True,
                     "preference spec.devices.preferredNetworkInterfaceMultiQueue: true")),
    "NET002": (_vmi((*_DEV, "networkInterfaceMultiqueue"), True, "spec.domain.devices.networkInterfaceMultiqueue: true"),  # noqa: E501
               _pref(("devices", "preferredNetworkInterfaceMultiQueue"), True,
                     "preference spec.devices.preferredNetworkInterfaceMultiQueue: true")),
    "NET004": (_vmi((*_DEV, "interfaces", "[]", "model"), "virtio", "spec.domain.devices.interfaces[].model: virtio"),
               _pref(("devices", "preferredInterfaceModel"), "virtio",
                     "preference spec.devices.preferredInterfaceModel: virtio")),
    "DSK002": (_vmi((*_DEV, "disks", "[]"), {"cache": "none", "io": "native"},
                    "spec.domain.devices.disks[].cache: none and disks[].io: native"),
               _pref(("devices",), {"preferredDiskCache": "none", "preferredDiskIO": "native"},
                     "preference spec.devices.preferredDiskCache: none and preferredDiskIO: native")),
    "DSK003": (_vmi(("domain", "ioThreadsPolicy"), "shared",
                    "spec.domain.ioThreadsPolicy: shared|auto (or disks[].dedicatedIOThread: true)"),
               _it(("ioThreadsPolicy",), "shared", "instancetype spec.ioThreadsPolicy: shared|auto")),
    "DSK004": (_vmi((*_DEV, "disks", "[]", "disk", "bus"), "virtio", "spec.domain.devices.disks[].disk.bus: virtio"),
               _pref(("devices", "preferredDiskBus"), "virtio", "preference spec.devices.preferredDiskBus: virtio")),
    # blockMultiQueue queues the disks but not the virtio-scsi controller KubeVirt always adds: on
    # KubeVirt's own XML (oracle/knob/) the finding stays on the controller, so it is advice only;
    # the current machine type gives both one queue per vCPU.
    "DSK006": (_vmi(("domain", "machine", "type"), "q35",
                    "spec.domain.machine.type: q35 (the current machine type: QEMU then queues virtio disks and the "
                    "virtio-scsi controller per vCPU; blockMultiQueue: true queues only the disks)"),
               _pref(("machine", "preferredMachineType"), "q35", "preference spec.machine.preferredMachineType: q35"),
               _vmi((*_DEV, "blockMultiQueue"), None, "spec.domain.devices.blockMultiQueue: true (the disks only)"),
               _pref(("devices", "preferredBlockMultiQueue"), None,
                     "preference spec.devices.preferredBlockMultiQueue: true (the disks only)")),
    "DSK008": (_vmi((*_DEV, "disks", "[]", "cache"), "none", "spec.domain.devices.disks[].cache: none"),
               _pref(("devices", "preferredDiskCache"), "none", "preference spec.devices.preferredDiskCache: none")),
    # present: true, not {}: a fix merges into the manifest, so it also undoes an explicit present: false
    "CLK001": (_vmi(("domain", "clock"), {"utc": {}, "timer": {"hyperv": {"present": True}}},
                    "spec.domain.clock: {utc: {}, timer: {hyperv: {present: true}}} (a clock needs utc or timezone)"),
               _pref(("clock", "preferredTimer", "hyperv", "present"), True,
                     "preference spec.clock.preferredTimer.hyperv.present: true")),
    "CLK002": (_vmi(("domain", "features", "hyperv"), _SYNIC,
                    "spec.domain.features.hyperv: {synic: {}, synictimer: {}, vpindex: {}} (the webhook adds synic and "
                    "vpindex to synictimer)"),
               _pref(("features", "preferredHyperv"), _SYNIC,
                     "preference spec.features.preferredHyperv: {synic: {}, synictimer: {}, vpindex: {}}")),
    "CLK003": (_vmi(("domain", "clock", "timer", "hpet", "present"), False,
                    "spec.domain.clock.timer.hpet.present: false"),
               _pref(("clock", "preferredTimer", "hpet", "present"), False,
                     "preference spec.clock.preferredTimer.hpet.present: false")),
    "CLK004": (_vmi(("domain", "clock"), {"utc": {}, "timer": {"rtc": {"tickPolicy": "catchup"}}},
                    "spec.domain.clock: {utc: {}, timer: {rtc: {tickPolicy: catchup}}} (a clock needs utc or timezone)"),  # noqa: E501
               _pref(("clock", "preferredTimer", "rtc", "tickPolicy"), "catchup",
                     "preference spec.clock.preferredTimer.rtc.tickPolicy: catchup")),
    "CLK006": (_vmi(("domain", "clock", "timezone"), None,
                    "spec.domain.clock.timezone: <the guest's zone> instead of utc: {} (KubeVirt has no localtime "
                    "offset), or RealTimeIsUniversal=1 in the guest"),),
    "HV001": (_vmi(("domain", "features", "hyperv"), _HYPERV_BASE,
                   "spec.domain.features.hyperv: {relaxed: {}, vapic: {}, spinlocks: {}, vpindex: {}, runtime: {}, "
                   "frequencies: {}, tlbflush: {}, ipi: {}}"),
              _pref(("features", "preferredHyperv"), _HYPERV_BASE,
                    "preference spec.features.preferredHyperv: {relaxed: {}, vapic: {}, spinlocks: {}, vpindex: {}, "
                    "runtime: {}, frequencies: {}, tlbflush: {}, ipi: {}}")),
    "HV002": (_vmi(("domain", "features", "hyperv"), None,
                   "spec.domain.features.hyperv: enable the prerequisites (the webhook adds them)"),),
    "USB001": (_vmi((*_DEV, "inputs", "[]", "bus"), "virtio",
                    "spec.domain.devices.inputs[].bus: virtio (KubeVirt writes no USB controller without a USB device)"),  # noqa: E501
               _pref(("devices", "preferredInputBus"), "virtio", "preference spec.devices.preferredInputBus: virtio")),
    "USB002": (_vmi((*_DEV, "inputs"), None, "spec.domain.devices.inputs: remove the tablet"),),
    "CPU016": (_vmi(_CPU, None, "spec.domain.cpu: {sockets: 1, cores: N} (or a cores-preferring instancetype "
                                "preference)"),
               _pref(("cpu", "preferredCPUTopology"), "cores", "preference spec.cpu.preferredCPUTopology: cores")),
    # The model is the cluster's migration baseline (virt-handler labels each node with the models
    # it runs; the KubeVirt CR's spec.configuration.cpuModel is the cluster-wide default): advice.
    "CPU035": (_vmi((*_CPU, "model"), None,
                    "spec.domain.cpu.model: a model every node the VM may migrate to runs (Haswell-noTSX or newer "
                    "leaves AVX2 and AES-NI to the guest), or remove it for the cluster's default (host-model unless "
                    "the KubeVirt CR's spec.configuration.cpuModel says otherwise)"),
               _it(("cpu", "model"), None, "instancetype spec.cpu.model: a model every node runs (Haswell-noTSX or "
                                           "newer)")),
    "CPU019": (_vmi((*_CPU, "numa", "guestMappingPassthrough"), None,
                    "spec.domain.cpu.numa.guestMappingPassthrough: {}" + _NUMA_NEEDS),
               _it(("cpu", "numa", "guestMappingPassthrough"), None,
                   "instancetype spec.cpu.numa.guestMappingPassthrough: {}" + _NUMA_NEEDS)),
    "CPU020": (_vmi(_CPU, None,
                    "spec.domain.cpu: {dedicatedCpuPlacement: true, isolateEmulatorThread: true, realtime: {}, "
                    "numa: {guestMappingPassthrough: {}}} with spec.domain.memory.hugepages" + _REALTIME_NEEDS),),
    "CPU021": (_vmi((*_CPU, "realtime"), None,
                    "spec.domain.cpu.realtime: {} (KubeVirt then switches the vPMU off)" + _REALTIME_NEEDS),
               _it(("cpu", "realtime"), None, "instancetype spec.cpu.realtime: {}" + _REALTIME_NEEDS)),
    "CLK008": (_vmi((*_CPU, "features"), None,
                    "KubeVirt adds the TSC frequency to invtsc guests itself on nodes that report one (virt-handler "
                    "labels those with an invariant TSC)"),),
    "CLK009": (_vmi((*_CPU, "features"), None, "spec.domain.cpu.features: [{name: invtsc, policy: require}]"),
               _pref(("cpu", "preferredCPUFeatures"), None,
                     "preference spec.cpu.preferredCPUFeatures: [{name: invtsc, policy: require}]")),
    "HV005": (_vmi(("domain", "features", "hyperv", "reenlightenment"), {"enabled": False},
                   "spec.domain.features.hyperv.reenlightenment: {enabled: false} (or run it on nodes that report "
                   "their TSC frequency: virt-handler labels those with an invariant TSC, KubeVirt then writes "
                   "it, and the guest migrates)"),
              _pref(("features", "preferredHyperv", "reenlightenment"), {"enabled": False},
                    "preference spec.features.preferredHyperv.reenlightenment: {enabled: false}")),
    "HV008": (_vmi(("domain", "features", "hyperv"), {"evmcs": {}, "synictimer": {"direct": {"enabled": True}}},
                   "spec.domain.features.hyperv: {evmcs: {}, synictimer: {direct: {enabled: true}}}"),),
}

NO_KNOB: dict[str, str] = {
    "NET007": "no knob: KubeVirt never writes rx_queue_size; accept, or rewrite the domain in a hook sidecar "
              "(annotation hooks.kubevirt.io/hookSidecars, feature gate Sidecar)",
}
