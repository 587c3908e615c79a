"""The child order libvirt writes (virDomainDefFormat and friends), so inserted elements
land where `virsh dumpxml` would show them."""

from __future__ import annotations

CHILD_ORDER: dict[str, tuple[str, ...]] = {
    "domain": (
        "name", "uuid", "genid", "title", "description", "metadata", "maxMemory", "memory",
        "currentMemory", "blkiotune", "memtune", "memoryBacking", "vcpu", "vcpus", "iothreads",
        "iothreadids", "defaultiothread", "cputune", "numatune", "resource", "sysinfo",
        "bootloader", "bootloader_args", "os", "idmap", "throttlegroups", "features", "cpu",
        "clock", "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm", "perf",
        "devices", "seclabel", "keywrap", "launchSecurity",
    ),
    "features": (
        "acpi", "apic", "pae", "hap", "viridian", "privnet", "hyperv", "kvm", "xen",
        "pvspinlock", "pmu", "vmport", "gic", "smm", "ioapic", "hpt", "vmcoreinfo", "htm",
        "nested-hv", "msrs", "ccf-assist", "cfpc", "sbbc", "ibs", "tcg", "async-teardown",
        "ras", "ps2", "aia",
    ),
    "hyperv": (
        "relaxed", "vapic", "spinlocks", "vpindex", "runtime", "synic", "stimer", "reset",
        "vendor_id", "frequencies", "reenlightenment", "tlbflush", "ipi", "evmcs", "avic",
        "emsr_bitmap", "xmm_input",
    ),
    "kvm": ("hidden", "hint-dedicated", "poll-control", "pv-ipi", "dirty-ring"),
    "memoryBacking": ("hugepages", "nosharepages", "locked", "source", "access", "allocation", "discard"),
    "cputune": (
        "shares", "period", "quota", "global_period", "global_quota", "emulator_period",
        "emulator_quota", "iothread_period", "iothread_quota", "vcpupin", "emulatorpin",
        "iothreadpin", "vcpusched", "iothreadsched", "emulatorsched", "cachetune", "memorytune",
    ),
    "numatune": ("memory", "memnode"),
    "devices": (
        "emulator", "disk", "controller", "lease", "filesystem", "interface", "smartcard",
        "serial", "parallel", "console", "channel", "input", "tpm", "graphics", "sound",
        "audio", "video", "hostdev", "redirdev", "redirfilter", "hub", "watchdog",
        "memballoon", "rng", "panic", "shmem", "memory", "iommu", "vsock", "crypto", "pstore",
    ),
    "interface": (
        "mac", "source", "vlan", "virtualport", "ip", "route", "script", "downscript",
        "backenddomain", "target", "guest", "model", "driver", "backend", "filterref",
        "tune", "teaming", "link", "mtu", "coalesce", "acpi", "alias", "rom", "address",
        "boot",
    ),
    "disk": (
        "driver", "source", "backingStore", "target", "iotune", "boot", "readonly",
        "shareable", "transient", "serial", "wwn", "vendor", "product", "encryption",
        "blockio", "alias", "address",
    ),
}


def rank(parent: str, child: str) -> int | None:
    order = CHILD_ORDER.get(parent)
    if order is None or child not in order:
        return None
    return order.index(child)


# Attributes libvirt's schema requires on an element; a fix that has to create the element
# writes libvirt's default so a schema-valid file stays valid (a bare <clock> is rejected).
REQUIRED_ATTRIBUTES: dict[str, tuple[tuple[str, str], ...]] = {
    "clock": (("offset", "utc"),),
}
