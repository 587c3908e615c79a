"""Advice for domains whose XML another system owns (OpenStack nova, KubeVirt, oVirt,
CloudStack), in that system's own terms.

Each table maps a rule code to the knob that changes what the stack writes: a flavor extra
spec, an image property, a nova.conf option, a VirtualMachine(Instance) field, an engine
setting. nova's and KubeVirt's come from their rows in the structured knob table
(vmtune/stacks/<stack>/knobs_rows.py), the same rows that place findings on flavors, images and
manifests and write their fixes; oVirt's and CloudStack's are text, as vmtune reads no source of theirs.
A rule the stack offers no knob for gets NO_KNOB: a fix vmtune applied would be
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

NO_KNOB = "no knob: ask the stack / accept"

NAMES = {"nova": "OpenStack nova", "kubevirt": "KubeVirt", "ovirt": "oVirt", "cloudstack": "Apache CloudStack"}

def _from_rows(stack: str) -> dict[str, str]:
    """A stack's advice by rule code, from its rows in the one knob table (vmtune.stacks.knob_table):
    the first knob's sentence, or why the stack has none."""
    from vmtune.stacks.knob_table import rows

    knobs, none = rows(stack)
    return {**{code: alternatives[0].text for code, alternatives in knobs.items() if alternatives}, **none}


NOVA = _from_rows("openstack")  # nova is the manager of the domains the OpenStack front end renders
KUBEVIRT = _from_rows("kubevirt")
OVIRT = {
    "CPU001": "VM setting: pass-through host CPU (REST cpu.mode=host_passthrough)",
    "CPU035": "cluster setting: CPU Type (REST cluster.cpu.type), the newest every host of the cluster runs",
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
    "CPU035": "agent.properties guest.cpu.model on the KVM host (with guest.cpu.mode=custom)",
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


def advice(manager: str | None, code: str) -> str | None:
    """The stack's knob for a finding of this rule, said as "managed by STACK: ..."."""
    if manager is None or manager not in TABLES:
        return None
    return f"managed by {NAMES[manager]}: {knob(manager, code)}"
