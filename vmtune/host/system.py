"""Host-side settings that domain XML cannot show, read from sysfs and /proc.

`root` is "/" on the host itself, or a directory holding a copy of the same paths
(`sys/module/kvm/parameters/halt_poll_ns`, `proc/cmdline`...) for offline checks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from vmtune.errors import VmtuneError
from vmtune.facts.units import parse_cpuset
from vmtune.inputs import read_bytes

# sysfs gives a page at most; /proc/cmdline 4 KiB (COMMAND_LINE_SIZE is 2-4 KiB).
MAX_HOST_FILE_BYTES = 64 * 1024


def _read(root: Path, relative: str) -> str | None:
    """A setting's text, or None when there is none to read. A --root copy is input: a FIFO in it
    (open() would block for good), a device, a non-UTF-8 file or a name too long to look up is
    read as absent, as a missing file is, not a traceback or a hang."""
    try:
        data = read_bytes(root / relative, relative, "host setting", MAX_HOST_FILE_BYTES)
        return data.decode("utf-8").strip()
    except (VmtuneError, UnicodeDecodeError):
        return None


def _number(name: str, prefix: str) -> int | None:
    """N of a directory named PREFIX<N> (cpu12, node0); None for another name (cpu12x)."""
    digits = name[len(prefix):]
    return int(digits) if name.startswith(prefix) and re.fullmatch(r"[0-9]{1,9}", digits) else None


def _vendor_param(root: Path, intel: str, amd: str) -> tuple[str | None, str | None]:
    """A parameter of whichever of kvm_intel / kvm_amd is loaded: (value, its /sys path)."""
    for module, param in (("kvm_intel", intel), ("kvm_amd", amd)):
        value = _read(root, f"sys/module/{module}/parameters/{param}")
        if value is not None:
            return value, f"/sys/module/{module}/parameters/{param}"
    return None, None


@dataclass
class HostSystem:
    root: Path
    ept: str | None = None  # kvm_intel ept or kvm_amd npt: Y/N/1/0, None when the module is not loaded
    ept_param: str | None = None
    halt_poll_ns: int | None = None
    ksm_run: str | None = None
    cmdline: str = ""
    isolated: str = ""
    hugepages: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)  # node -> size KiB -> (nr, free)
    kvm_device: bool = False
    vhost_net_device: bool = False
    apicv: str | None = None  # kvm_intel enable_apicv or kvm_amd avic: Y/N/1/0, None when not loaded
    apicv_param: str | None = None
    pi_inject_timer: int | None = None  # kvm: -1 auto (resolved at load: on with nohz_full), 0 off, 1 on
    thp_enabled: str | None = None  # the bracketed choice of transparent_hugepage/enabled: always/madvise/never
    governors: dict[int, str] = field(default_factory=dict)  # CPU -> cpufreq scaling_governor
    nohz_full_sysfs: str = ""  # /sys/devices/system/cpu/nohz_full
    ple_gap: int | None = None  # kvm_intel pause-loop exiting window; 0 disables it
    kvmclock_periodic_sync: str | None = None  # kvm: Y/N (read-only after load)
    irq_affinity: dict[int, frozenset[int]] = field(default_factory=dict)  # IRQ -> smp_affinity_list
    zcopytx: int | None = None  # vhost_net experimental_zcopytx, None when vhost_net is not loaded

    @classmethod
    def read(cls, root: Path) -> HostSystem:
        system = cls(root)
        system.ept, system.ept_param = _vendor_param(root, "ept", "npt")
        system.apicv, system.apicv_param = _vendor_param(root, "enable_apicv", "avic")
        timer = _read(root, "sys/module/kvm/parameters/pi_inject_timer")
        system.pi_inject_timer = _signed(timer)
        halt = _read(root, "sys/module/kvm/parameters/halt_poll_ns")
        system.halt_poll_ns = _signed(halt)
        system.ksm_run = _read(root, "sys/kernel/mm/ksm/run")
        system.cmdline = _read(root, "proc/cmdline") or ""
        system.isolated = _read(root, "sys/devices/system/cpu/isolated") or ""
        system.kvm_device = os.path.exists(root / "dev" / "kvm")  # False, not OSError, for a name too long
        thp = _read(root, "sys/kernel/mm/transparent_hugepage/enabled")
        chosen = re.search(r"\[(\w+)\]", thp or "")
        system.thp_enabled = chosen.group(1) if chosen else None
        for governor in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
            value = _read(governor.parent, "scaling_governor")
            cpu = _number(governor.parent.parent.name, "cpu")
            if value and cpu is not None:
                system.governors[cpu] = value
        system.nohz_full_sysfs = _read(root, "sys/devices/system/cpu/nohz_full") or ""
        system.ple_gap = _signed(_read(root, "sys/module/kvm_intel/parameters/ple_gap"))
        system.kvmclock_periodic_sync = _read(root, "sys/module/kvm/parameters/kvmclock_periodic_sync")
        system.zcopytx = _signed(_read(root, "sys/module/vhost_net/parameters/experimental_zcopytx"))
        for irq_dir in (root / "proc/irq").glob("[0-9]*"):
            cpus = parse_cpuset(_read(irq_dir, "smp_affinity_list"))
            if cpus is not None and irq_dir.name.isdigit():
                system.irq_affinity[int(irq_dir.name)] = cpus
        system.vhost_net_device = os.path.exists(root / "dev" / "vhost-net")
        for node_dir in sorted((root / "sys/devices/system/node").glob("node[0-9]*")):
            node = _number(node_dir.name, "node")
            if node is None:
                continue
            pools: dict[int, tuple[int, int]] = {}
            for pool in sorted(node_dir.glob("hugepages/hugepages-*kB")):
                size = _number(pool.name.removesuffix("kB"), "hugepages-")
                if size is None:
                    continue
                nr = _signed(_read(pool, "nr_hugepages"))
                free = _signed(_read(pool, "free_hugepages"))
                pools[size] = (nr or 0, free or 0)
            system.hugepages[node] = pools
        return system

    @property
    def nohz_full(self) -> frozenset[int]:
        """CPUs without the scheduler tick: the kernel's own list, else the command line's."""
        return _cpulist(self.nohz_full_sysfs) or _cpulist(self.kernel_param("nohz_full") or "")

    @property
    def isolated_cpus(self) -> frozenset[int]:
        """CPUs kept for guests: isolcpus (sysfs or command line) and nohz_full."""
        return _cpulist(self.isolated) | _cpulist(self.kernel_param("isolcpus") or "") | self.nohz_full

    def kernel_param(self, name: str) -> str | None:
        for word in self.cmdline.split():
            if word == name or word.startswith(name + "="):
                return word.partition("=")[2]
        return None


def _signed(text: str | None) -> int | None:
    """A module parameter such as -1 or 200000 (ASCII digits only)."""
    if text is None or not re.fullmatch(r"-?[0-9]{1,20}", text.strip()):
        return None
    return int(text)


def _cpulist(text: str) -> frozenset[int]:
    """A CPU list as the kernel writes it, after any isolcpus flags (managed_irq,domain,2-7)."""
    words = [w for w in text.split(",") if w and (w[0].isdigit())]
    return parse_cpuset(",".join(words)) or frozenset() if words else frozenset()
