"""Advice for domains a tool wrote once (kcli, virt-lightning, minikube, CRC, multipass,
WebVirtCloud; they are recognised in vmtune.facts.creator), in the tool's own terms.

Unlike a manager (vmtune.manager_advice), these tools do not rewrite a definition they made: a fix
to the live domain lasts, until the tool itself recreates the domain from its template
(`minikube delete` then `minikube start`, `crc delete` then `crc start`). Each table maps a
rule to the creation-time setting that makes the tool write the fix for the next guest;
a rule missing from a table has no such setting ("no knob"). Knobs were read in each tool's
source (fixtures/tools/README.md gives the commits): kcli `Kvirt.create` parameters
(`kvirt/providers/kvm/__init__.py`), virt-lightning's `configure_domain` settings
(`virt_lightning.py`), minikube's `start` flags (`cmd/minikube/cmd/start_flags.go`,
`pkg/drivers/kvm/domain_definition_x86.go`), WebVirtCloud's settings
(`appsettings/migrations`, the create form's defaults in `instances/views.py`). CRC's libvirt
driver and multipass's libvirt backend write fixed templates with no setting for any rule.
"""

from __future__ import annotations

from vmtune.facts.creator import NAMES

KCLI = {
    "CPU001": "kcli parameter cpumodel: host-passthrough (kcli's default is host-model)",
    "CPU007": "kcli parameter cpupinning",
    "MEM001": "kcli parameter hugepages: true (or hugepages_1gb / hugepages_2mb)",
    "NET001": "kcli parameter nets: [{name: ..., multiqueues: N}]",
    "NET002": "kcli parameter nets: [{name: ..., multiqueues: N}]",
    "DSK004": "kcli parameter diskinterface: virtio (or a disk's interface: virtio)",
}
VIRT_LIGHTNING = {
    "DSK004": "virt-lightning setting default_bus_type: virtio (its default)",
    "NET004": "virt-lightning setting default_nic_model: virtio (its default)",
}
MINIKUBE = {
    "CLK007": "minikube start --kvm-hidden=false",
}
# WebVirtCloud's admin settings (Settings page; appsettings migrations): defaults for new instances
WEBVIRTCLOUD = {
    "CPU001": "WebVirtCloud setting INSTANCE_CPU_DEFAULT_MODE=host-passthrough (its default is host-model)",
    "DSK004": "WebVirtCloud setting INSTANCE_VOLUME_DEFAULT_BUS=virtio",
    "DSK007": "WebVirtCloud setting INSTANCE_VOLUME_DEFAULT_SCSI_CONTROLLER=virtio-scsi",
    "DSK008": "WebVirtCloud setting INSTANCE_VOLUME_DEFAULT_CACHE=none (its default is directsync)",
    "DSK002": "WebVirtCloud settings INSTANCE_VOLUME_DEFAULT_CACHE=none and INSTANCE_VOLUME_DEFAULT_IO=native",
    "DSK005": "WebVirtCloud setting INSTANCE_VOLUME_DEFAULT_DISCARD=unmap",
    "NET004": "WebVirtCloud setting INSTANCE_NIC_DEFAULT_TYPE=virtio",
}
TABLES: dict[str, dict[str, str]] = {"kcli": KCLI, "virt-lightning": VIRT_LIGHTNING, "minikube": MINIKUBE,
                                     "crc": {}, "multipass": {}, "webvirtcloud": WEBVIRTCLOUD}

# When the tool writes the domain again from its template, dropping a fix made to the live one.
RECREATED = {
    "minikube": "minikube delete then minikube start writes the domain again from its template",
    "crc": "crc delete then crc start writes the domain again from its template",
}


def advice(tool: str, code: str) -> str:
    """What a finding on a domain this tool wrote says about where the fix belongs."""
    knob = TABLES.get(tool, {}).get(code)
    said = f"created by {NAMES[tool]}: " + (f"{knob} for the next guest" if knob else f"no {NAMES[tool]} knob")
    recreated = RECREATED.get(tool)
    if recreated:
        return f"{said}; a fix to this definition lasts until {recreated}"
    return f"{said}; {NAMES[tool]} writes the domain once, so a fix to it lasts"
