"""The knob inventory: what vmtune says about each element and attribute of libvirt's domain schema.

One source, as docs/rules.md is rendered from the rules' docstrings: every path of the domain XML
(from `<domain>`, `@` for attributes) is matched here by an entry that names the rules judging it,
or says why no rule does and where that reason comes from. docs/knobs.md is rendered from this data
(`python -m vmtune.schema_knobs > docs/knobs.md`), and tests/test_knobs.py walks the schema libvirt
installed (vmtune.rngwalk) and fails when a path is matched by no entry, so a libvirt upgrade shows
its new knobs; an entry that matches nothing is stale.

Patterns: segments separated by `/`; `*` matches any part of one segment (`@thread_pool_*`), `**` any
number, none included, so `devices/disk/source/**` matches the element and everything under it. A
path belongs to the most specific entry that matches it: compared segment by segment from the left,
a literal beats a glob, which beats `**` (`devices/hostdev/**` owns `devices/hostdev/address/@bus`
over `devices/*/address/**`).

Statuses of an entry without rules: `no-cost` (no performance effect: identification, addressing,
security, boot-time only), `workload` (performance-relevant, but the right value depends on the
workload or host and no default or common value has a documented cost), `indirect` (a rule judges
the knob that matters; the reason names it), `candidate` (a documented cost and no rule yet: the
rules still missing), `other-hypervisor` (Xen, LXC, ppc64, s390, Arm: vmtune's rules judge x86 KVM).

This module is data and string formatting only; it is never imported on the check path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

FORMATDOMAIN = "https://libvirt.org/formatdomain.html#"  # libvirt's domain XML format, by section
DISK = FORMATDOMAIN + "hard-drives-floppy-disks-cdroms"
CHR = FORMATDOMAIN + "consoles-serial-parallel-channel-devices"
KVM_CPUID = "https://docs.kernel.org/virt/kvm/x86/cpuid.html"
KVM_MSR = "https://docs.kernel.org/virt/kvm/x86/msr.html"
CGROUP_V2 = "https://docs.kernel.org/admin-guide/cgroup-v2.html"
KVM_PV = "https://www.qemu.org/docs/master/system/i386/kvm-pv.html"
CFS_BW = "https://docs.kernel.org/scheduler/sched-bwc.html"
QCOW2_CACHE = "https://github.com/qemu/qemu/blob/master/docs/qcow2-cache.txt"

# Top-level elements rendered together in docs/knobs.md; the others go under "domain (other elements)".
SECTIONS = {
    "vcpu": "vcpu, vcpus", "vcpus": "vcpu, vcpus",
    "iothreads": "iothreads, iothreadids", "iothreadids": "iothreads, iothreadids",
    "defaultiothread": "iothreads, iothreadids",
    "memory": "memory, currentMemory, maxMemory", "currentMemory": "memory, currentMemory, maxMemory",
    "maxMemory": "memory, currentMemory, maxMemory",
    **{name: name for name in ("cputune", "memoryBacking", "memtune", "numatune", "blkiotune", "resource", "cpu",
                               "os", "features", "clock", "devices")},
}

DEVICE_SECTIONS = ("disk", "controller", "interface", "memballoon", "rng", "watchdog", "input", "video", "sound",
                   "serial", "channel", "console")

STATUSES = {
    "judged": "judged by a rule",
    "indirect": "covered through another knob's rule",
    "candidate": "documented cost, no rule yet",
    "workload": "performance-relevant, workload-specific: no documented cost of a default",
    "no-cost": "not performance-relevant",
    "other-hypervisor": "not a KVM knob",
}


@dataclass(frozen=True)
class Knob:
    path: str
    rules: tuple[str, ...] = ()
    status: str = "judged"  # one of STATUSES; "judged" iff rules
    reason: str = ""  # why no rule (or, for a judged knob, what the rules read)
    source: str = ""  # where the reason comes from
    gap: str = ""  # for a judged knob: a value with a documented cost that its rules do not judge
    gap_source: str = ""

    @property
    def section(self) -> str:
        head = self.path.split("/")
        if head[0] == "devices":
            if len(head) == 1 or "*" in head[1] or head[1] == "emulator":
                return "devices (every device)"
            return f"devices/{head[1]}" if head[1] in DEVICE_SECTIONS else "devices (other devices)"
        return SECTIONS.get(head[0], "domain (other elements)")


def judged(path: str, *rules: str, note: str = "", gap: str = "", gap_source: str = "") -> Knob:  # reads as a table
    """A knob judged by `rules` (`gap`: what they leave out that has a documented cost)."""
    return Knob(path, tuple(rules), "judged", note, gap=gap, gap_source=gap_source)


def unjudged(path: str, status: str, reason: str, source: str) -> Knob:
    """A knob no rule judges, with the reason and its source."""
    return Knob(path, (), status, reason, source)


NOT_PERF = "no-cost"
WORKLOAD = "workload"
INDIRECT = "indirect"
CANDIDATE = "candidate"
OTHER = "other-hypervisor"

KNOBS: tuple[Knob, ...] = (
    # --- the domain element and identity -------------------------------------------------------
    judged("@type", "CPU009", "CPU010", "CPU025", note="kvm or qemu (TCG); most rules apply to kvm only"),
    unjudged("@id", NOT_PERF, "runtime id libvirt assigns", FORMATDOMAIN + "element-and-attribute-overview"),
    unjudged("name", NOT_PERF, "identification", FORMATDOMAIN + "general-metadata"),
    unjudged("uuid", NOT_PERF, "identification", FORMATDOMAIN + "general-metadata"),
    unjudged("genid", NOT_PERF, "VM generation id for the guest, identification", FORMATDOMAIN + "general-metadata"),
    unjudged("title", NOT_PERF, "identification", FORMATDOMAIN + "general-metadata"),
    unjudged("description", NOT_PERF, "identification", FORMATDOMAIN + "general-metadata"),
    unjudged("metadata/**", NOT_PERF, "free-form application data (vmtune reads libosinfo and stack metadata from it)",
      FORMATDOMAIN + "general-metadata"),
    unjudged("bootloader", OTHER, "Xen/bhyve host bootloader", FORMATDOMAIN + "host-bootloader"),
    unjudged("bootloader_args", OTHER, "Xen/bhyve host bootloader", FORMATDOMAIN + "host-bootloader"),
    unjudged("datacenterpath", OTHER, "VMware ESX datacenter path", FORMATDOMAIN + "element-and-attribute-overview"),
    unjudged("sysinfo/**", NOT_PERF, "SMBIOS strings shown to the guest", FORMATDOMAIN + "smbios-system-information"),
    unjudged("on_*", NOT_PERF, "lifecycle actions", FORMATDOMAIN + "events-configuration"),
    unjudged("pm/**", NOT_PERF, "guest suspend to RAM/disk permission", FORMATDOMAIN + "power-management"),
    unjudged("perf/**", WORKLOAD, "host perf counters libvirt reads for statistics; their overhead depends on the "
      "events chosen and nothing is enabled by default", FORMATDOMAIN + "performance-monitoring-events"),
    unjudged("idmap/**", OTHER, "LXC user namespace maps", FORMATDOMAIN + "container-boot"),
    unjudged("seclabel/**", NOT_PERF, "security labelling", FORMATDOMAIN + "security-label"),
    unjudged("keywrap/**", OTHER, "s390 crypto key wrapping", FORMATDOMAIN + "key-wrap"),
    unjudged("launchSecurity/**", WORKLOAD, "SEV/S390-PV memory encryption: a security choice with a cost (bounce "
      "buffers, locked memory) the operator accepts when asking for it", FORMATDOMAIN + "launch-security"),
    unjudged("commandline/**", NOT_PERF, "QEMU pass-through arguments (qemu namespace): vmtune cannot interpret them",
      "https://libvirt.org/drvqemu.html#pass-through-of-arbitrary-qemu-commands"),
    unjudged("capabilities/**", NOT_PERF, "QEMU capability overrides for tests (qemu namespace)",
      "https://libvirt.org/drvqemu.html#overriding-properties-of-qemu-devices"),
    unjudged("override/**", NOT_PERF, "QEMU device property overrides (qemu namespace), unsupported by libvirt",
      "https://libvirt.org/drvqemu.html#overriding-properties-of-qemu-devices"),
    unjudged("deprecation/**", NOT_PERF, "QEMU deprecation behaviour (qemu namespace)",
      "https://libvirt.org/drvqemu.html#control-of-qemu-deprecation-warnings"),
    unjudged("namespace/**", OTHER, "LXC namespace sharing", FORMATDOMAIN + "container-boot"),

    # --- vcpu / vcpus ---------------------------------------------------------------------------
    judged("vcpu", "CPU002", "CPU004", "CPU016", "CPU017", "NET001", "NET002", "DSK006", "MEM011", "CPU022",
      "CPU026", "DSK010", note="the vCPU count"),
    judged("vcpu/@current", "CPU002", "CPU016", "NET001", "CPU022", "CPU023", note="vCPUs online at boot"),
    judged("vcpu/@cpuset", "CPU002", "CPU007", "CPU011", "CPU019", "CPU028", "CPU029"),
    judged("vcpu/@placement", "CPU002", "CPU007"),
    judged("vcpus", "CPU002", "CPU016"),
    judged("vcpus/vcpu", "CPU002", "CPU016"),
    judged("vcpus/vcpu/@id", "CPU002", "CPU016"),
    judged("vcpus/vcpu/@enabled", "CPU002", "CPU016", note="hot-plug slots marked enabled='no' do not count"),
    unjudged("vcpus/vcpu/@hotpluggable", NOT_PERF, "hot-plug bookkeeping", FORMATDOMAIN + "cpu-allocation"),
    unjudged("vcpus/vcpu/@order", NOT_PERF, "hot-plug order", FORMATDOMAIN + "cpu-allocation"),

    # --- iothreads ----------------------------------------------------------------------------
    judged("iothreads", "CPU005", "DSK003", "MEM011"),
    judged("iothreadids", "CPU005"),
    judged("iothreadids/iothread", "CPU005"),
    judged("iothreadids/iothread/@id", "CPU005", "DSK003"),
    unjudged("iothreadids/iothread/@thread_pool_*", WORKLOAD, "bounds of the thread pool serving `io='threads'`; "
      "QEMU sizes it on demand and documents no cost of its default", FORMATDOMAIN + "iothreads-allocation"),
    unjudged("defaultiothread/**", WORKLOAD, "thread pool bounds of the main loop, as above",
             FORMATDOMAIN + "iothreads-allocation"),

    # --- cputune ------------------------------------------------------------------------------
    judged("cputune", "CPU002", "CPU004", "CPU005", "CPU007"),
    judged("cputune/vcpupin/**", "CPU002", "CPU003", "CPU004", "CPU005", "CPU006", "CPU007", "CPU008", "CPU011",
      "CPU013", "CPU032", "LAT002", "CPU018", "CPU019", "CPU020", "CPU023", "CPU024", "CPU028", "CPU029", "LAT001"),
    judged("cputune/emulatorpin/**", "CPU004", "CPU014", "CPU020", "CPU030"),
    judged("cputune/iothreadpin/**", "CPU005", "CPU014", "CPU020", "CPU030"),
    unjudged("cputune/shares", WORKLOAD, "a relative CFS weight against other guests: only meaningful against the "
      "host's other cgroups, no absolute value is wrong", FORMATDOMAIN + "cpu-tuning"),
    judged("cputune/period", "CPU022"),
    judged("cputune/quota", "CPU022"),
    judged("cputune/global_period", "CPU022"),
    judged("cputune/global_quota", "CPU022"),
    judged("cputune/emulator_period", "CPU022"),
    judged("cputune/emulator_quota", "CPU022"),
    judged("cputune/iothread_period", "CPU022"),
    judged("cputune/iothread_quota", "CPU022"),
    judged("cputune/vcpusched", "CPU020", "CPU021"),
    judged("cputune/vcpusched/@scheduler", "CPU020", "CPU021"),
    judged("cputune/vcpusched/@vcpus", "CPU020", "CPU021"),
    unjudged("cputune/vcpusched/@priority", WORKLOAD, "real-time priority relative to the host's other real-time "
      "threads: the real-time design's choice", FORMATDOMAIN + "cpu-tuning"),
    unjudged("cputune/emulatorsched/**", WORKLOAD, "a real-time policy for the emulator thread; its pin is CPU020's "
      "concern, the priority is the real-time design's", FORMATDOMAIN + "cpu-tuning"),
    unjudged("cputune/iothreadsched/**", WORKLOAD, "a real-time policy for I/O threads, as above",
             FORMATDOMAIN + "cpu-tuning"),
    unjudged("cputune/cachetune/**", WORKLOAD, "Intel RDT cache allocation (CAT): partitions L3 between workloads",
      "https://docs.kernel.org/arch/x86/resctrl.html"),
    unjudged("cputune/memorytune/**", WORKLOAD, "Intel RDT memory bandwidth allocation (MBA)",
      "https://docs.kernel.org/arch/x86/resctrl.html"),

    # --- memory -------------------------------------------------------------------------------
    judged("memory", "MEM001", "MEM003", "MEM008", "MEM009", "MEM011", "CPU012"),
    judged("memory/@unit", "MEM001", "MEM003", "MEM011", "CPU012"),
    unjudged("memory/@dumpCore", NOT_PERF, "whether guest RAM goes into QEMU core dumps",
             FORMATDOMAIN + "memory-allocation"),
    judged("currentMemory/**", "MEM003"),
    unjudged("maxMemory/**", NOT_PERF, "memory hot-plug ceiling and slots; nothing is allocated until a DIMM is added",
      FORMATDOMAIN + "memory-allocation"),

    # --- memoryBacking ------------------------------------------------------------------------
    judged("memoryBacking", "MEM001", "MEM005"),
    judged("memoryBacking/hugepages", "MEM001", "MEM002", "MEM005", "MEM008"),
    judged("memoryBacking/hugepages/page", "MEM008"),
    judged("memoryBacking/hugepages/page/@size", "MEM008"),
    judged("memoryBacking/hugepages/page/@unit", "MEM008"),
    unjudged("memoryBacking/hugepages/page/@nodeset", WORKLOAD, "page size per guest NUMA cell; MEM008 counts the "
      "guest's first page size for all of it", FORMATDOMAIN + "memory-backing"),
    judged("memoryBacking/locked", "MEM004"),
    judged("memoryBacking/nosharepages", "MEM005"),
    judged("memoryBacking/access/**", "MEM005", "MEM010", "NET005"),
    unjudged("memoryBacking/source/**", INDIRECT, "anonymous, file or memfd backing: MEM010 and NET005 judge whether "
      "shared memory is there (their fixes add memfd)", FORMATDOMAIN + "memory-backing"),
    unjudged("memoryBacking/allocation/**", WORKLOAD, "`immediate` pre-faults all memory (slower start, no first-touch "
      "faults later); the right choice depends on start-time versus latency needs", FORMATDOMAIN + "memory-backing"),
    unjudged("memoryBacking/discard", WORKLOAD, "returns freed guest memory of file/hugepage backings to the host at "
      "the cost of re-faulting it", FORMATDOMAIN + "memory-backing"),

    # --- memtune ------------------------------------------------------------------------------
    judged("memtune", "MEM004", "MEM011"),
    judged("memtune/hard_limit/**", "MEM004", "MEM011"),
    unjudged("memtune/soft_limit/**", WORKLOAD, "reclaim target under host memory contention only; its right value "
      "is the host's overcommit policy", CGROUP_V2 + " (memory.low/high)"),
    unjudged("memtune/swap_hard_limit/**", WORKLOAD, "caps swap use; whether the guest may swap is a host policy",
      FORMATDOMAIN + "memory-tuning"),
    unjudged("memtune/min_guarantee/**", OTHER, "honoured by the VMware ESX and OpenVZ drivers only",
      FORMATDOMAIN + "memory-tuning"),

    # --- numatune -----------------------------------------------------------------------------
    judged("numatune", "CPU011", "CPU019", "CPU028"),
    judged("numatune/memory", "CPU011", "CPU012", "CPU019", "CPU029", "CPU030", "MEM008"),
    judged("numatune/memory/@nodeset", "CPU011", "CPU012", "CPU019", "CPU029", "CPU030", "MEM008"),
    judged("numatune/memory/@mode", "CPU029", note="CPU029 judges `interleave` for vCPUs on one node; strict versus "
      "preferred (OOM versus remote access) is the workload's"),
    unjudged("numatune/memory/@placement", INDIRECT, "`auto` asks numad for the nodeset; CPU002 and CPU007 read "
      "`<vcpu placement='auto'>`, which it follows", FORMATDOMAIN + "numa-node-tuning"),
    judged("numatune/memnode", "CPU019", "CPU028", "CPU030", note="CPU019 leaves guests bound per cell to CPU028"),
    judged("numatune/memnode/@*", "CPU028", "CPU030"),

    # --- blkiotune and resource ------------------------------------------------------------------
    unjudged("blkiotune/**", WORKLOAD, "cgroup I/O weights and per-device throttles: limits and shares the operator "
      "sets against other guests, no default cost", FORMATDOMAIN + "block-i-o-tuning"),
    unjudged("resource", NOT_PERF, "container element of the cgroup partition", FORMATDOMAIN + "resource-partitioning"),
    unjudged("resource/partition", WORKLOAD, "the cgroup the guest runs in: its limits are the host's design",
      FORMATDOMAIN + "resource-partitioning"),
    unjudged("resource/fibrechannel/**", NOT_PERF, "Fibre Channel VMID tag for the SAN",
             FORMATDOMAIN + "fibre-channel-vmid"),

    # --- cpu ----------------------------------------------------------------------------------
    judged("cpu", "CPU001", "CPU016"),
    judged("cpu/@mode", "CPU001", "CPU025", "LAT001", note="host-passthrough, host-model, custom, maximum"),
    unjudged("cpu/@match", NOT_PERF, "how strictly a custom model must match", FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/@check", NOT_PERF, "how libvirt verifies the CPU QEMU created",
             FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/@migratable", WORKLOAD, "`off` exposes non-migratable host features: a migration-versus-features "
      "choice", FORMATDOMAIN + "cpu-model-and-topology"),
    judged("cpu/model", "CPU001", "CPU035", "LAT001"),
    unjudged("cpu/model/@fallback", NOT_PERF, "whether libvirt may pick a close model",
             FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/model/@vendor_id", NOT_PERF, "the CPUID vendor string", FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/vendor", NOT_PERF, "a requirement on the host vendor", FORMATDOMAIN + "cpu-model-and-topology"),
    judged("cpu/feature", "CLK008", "CLK009", "CPU033", "CPU035", note="invtsc, pcid and invpcid; the x86-64-v3 "
      "level"),
    judged("cpu/feature/@name", "CLK008", "CLK009", "CPU033", "CPU035", note="invtsc, pcid and invpcid"),
    judged("cpu/feature/@policy", "CLK008", "CLK009", "CPU033", "CPU035", note="`disable`/`forbid` of invtsc, "
      "pcid, invpcid"),
    judged("cpu/topology", "CPU016", "CPU018"),
    judged("cpu/topology/@sockets", "CPU016"),
    judged("cpu/topology/@dies", "CPU016"),
    judged("cpu/topology/@cores", "CPU016"),
    judged("cpu/topology/@threads", "CPU016", "CPU018"),
    judged("cpu/cache/**", "CPU034", note="`mode='disable'` (QEMU's l3-cache=off: reschedule IPIs between vCPUs); "
      "`emulate` and `passthrough` show a cache and cost nothing"),
    unjudged("cpu/maxphysaddr/**", NOT_PERF, "physical address bits shown to the guest: a correctness and migration "
      "setting (large-memory guests need enough bits)", FORMATDOMAIN + "cpu-model-and-topology"),
    judged("cpu/numa", "CPU008", "CPU012", "CPU019", "MEM005", "MEM010", "NET005"),
    judged("cpu/numa/cell", "CPU008", "CPU012", "CPU028", "MEM005", "MEM010", "NET005"),
    judged("cpu/numa/cell/@memAccess", "MEM005", "MEM010", "NET005"),
    unjudged("cpu/numa/cell/@id", NOT_PERF, "cell number", FORMATDOMAIN + "cpu-model-and-topology"),
    judged("cpu/numa/cell/@cpus", "CPU028", note="which vCPUs a cell holds: CPU028 binds the cell's memory to "
      "their node"),
    judged("cpu/numa/cell/@memory", "CPU012", "CPU028", note="the guest's total against a host node (CPU012), a "
      "cell's size against the node CPU028 would bind it to"),
    judged("cpu/numa/cell/@unit", "CPU012", "CPU028", note="unit of the cell size, as above"),
    unjudged("cpu/numa/cell/@discard", WORKLOAD, "discard of a cell's file-backed memory, as memoryBacking/discard",
      FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/numa/cell/distances/**", WORKLOAD, "SLIT distances the guest scheduler reads; they should mirror the "
      "host, which vmtune does not compare", FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/numa/cell/cache/**", WORKLOAD, "HMAT memory-side caches shown to the guest",
      FORMATDOMAIN + "cpu-model-and-topology"),
    unjudged("cpu/numa/interconnects/**", WORKLOAD, "HMAT latencies and bandwidths shown to the guest",
      FORMATDOMAIN + "cpu-model-and-topology"),

    # --- os -----------------------------------------------------------------------------------
    unjudged("os", NOT_PERF, "container of the boot settings", FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/type", NOT_PERF, "guest kind (hvm, xen, exe)", FORMATDOMAIN + "operating-system-booting"),
    judged("os/type/@arch", "CPU009", "CPU015", note="and x86-only rules skip other architectures"),
    judged("os/type/@machine", "CPU015", "DSK006", "USB001", "PCI001"),
    unjudged("os/@firmware", NOT_PERF, "BIOS or UEFI: boot-time only, no run-time cost",
             FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/firmware/**", NOT_PERF, "firmware feature selection (secure boot, enrolled keys)",
      FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/loader/**", NOT_PERF, "firmware image", FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/nvram/**", NOT_PERF, "UEFI variable store", FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/boot/**", NOT_PERF, "boot device order", FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/bootmenu/**", NOT_PERF, "boot menu and its timeout (boot time only)",
             FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/bios/**", NOT_PERF, "serial BIOS output and reboot timeout",
             FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/smbios/**", NOT_PERF, "where SMBIOS strings come from", FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/acpi/**", NOT_PERF, "extra ACPI tables", FORMATDOMAIN + "operating-system-booting"),
    unjudged("os/kernel", NOT_PERF, "direct kernel boot", FORMATDOMAIN + "direct-kernel-boot"),
    unjudged("os/initrd", NOT_PERF, "direct kernel boot", FORMATDOMAIN + "direct-kernel-boot"),
    judged("os/cmdline", "LAT002", note="`idle=poll`; the other guest kernel options are the guest's own tuning"),
    unjudged("os/dtb", NOT_PERF, "device tree of a direct boot", FORMATDOMAIN + "direct-kernel-boot"),
    unjudged("os/init*/**", OTHER, "container init (LXC)", FORMATDOMAIN + "container-boot"),
    unjudged("os/root", OTHER, "container root (LXC, test driver)", FORMATDOMAIN + "container-boot"),

    # --- features -----------------------------------------------------------------------------
    judged("features", "HV001", "CLK002"),
    unjudged("features/acpi", NOT_PERF, "ACPI tables: needed for shutdown and hot-plug, not a speed knob",
      FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/apic", NOT_PERF, "the APIC itself", FORMATDOMAIN + "hypervisor-features"),
    judged("features/apic/@eoi", "CPU031"),
    unjudged("features/pae", NOT_PERF, "physical address extension, a guest requirement",
             FORMATDOMAIN + "hypervisor-features"),
    judged("features/hap/**", "MEM006", note="Xen only; KVM always uses EPT/NPT (HOST001)"),
    unjudged("features/viridian", OTHER, "Xen's Hyper-V enlightenments", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/privnet", OTHER, "LXC private network namespace", FORMATDOMAIN + "hypervisor-features"),
    judged("features/pvspinlock/**", "CPU023"),
    judged("features/pmu/**", "CPU021"),
    unjudged("features/vmport/**", NOT_PERF, "VMware backdoor I/O port (VMware tools)",
             FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/smm/**", WORKLOAD, "System Management Mode, required by UEFI secure boot; SMIs cost exits, but "
      "only firmware variable access uses them", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/ioapic/**", WORKLOAD, "`driver='qemu'` (split irqchip) is required by an intel-iommu with "
      "interrupt remapping; libvirt and QEMU document it as a requirement, not a cost",
      FORMATDOMAIN + "hypervisor-features"),
    judged("features/gic/**", "CPU026", "CPU027"),
    unjudged("features/hpt/**", OTHER, "ppc64 pSeries hash page table", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/htm/**", OTHER, "ppc64 pSeries transactional memory", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/nested-hv/**", OTHER, "ppc64 pSeries nested HV", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/ccf-assist/**", OTHER, "ppc64 pSeries count cache flush assist",
             FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/cfpc/**", OTHER, "ppc64 pSeries cache flush on privilege change",
             FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/sbbc/**", OTHER, "ppc64 pSeries speculation barrier", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/ibs/**", OTHER, "ppc64 pSeries indirect branch speculation",
             FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/capabilities/**", OTHER, "LXC container capabilities", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/msrs/**", NOT_PERF, "handling of unknown MSRs (correctness)",
             FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/vmcoreinfo/**", NOT_PERF, "guest crash-dump information", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/tcg/**", WORKLOAD, "TCG translation cache size: only for `type='qemu'` guests, and its "
      "best size depends on the guest's code footprint", FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/xen/**", OTHER, "Xen e820 and passthrough", FORMATDOMAIN + "hypervisor-features"),
    judged("features/hyperv", "HV001", "HV002", "CLK002"),
    judged("features/hyperv/@mode", "HV006"),
    judged("features/hyperv/relaxed/**", "HV001"),
    judged("features/hyperv/vapic/**", "HV001", "HV002", "HV008"),
    judged("features/hyperv/spinlocks/**", "HV001", "HV003"),
    judged("features/hyperv/vpindex/**", "HV001", "HV002", "CLK002"),
    judged("features/hyperv/runtime/**", "HV001"),
    judged("features/hyperv/synic/**", "HV002", "HV007", "CLK002"),
    judged("features/hyperv/stimer/**", "CLK002", "HV002", "HV008"),
    unjudged("features/hyperv/reset/**", NOT_PERF, "guest-initiated reset through a Hyper-V MSR",
             FORMATDOMAIN + "hypervisor-features"),
    unjudged("features/hyperv/vendor_id/**", NOT_PERF, "Hyper-V vendor string (hides KVM from drivers that check it)",
      FORMATDOMAIN + "hypervisor-features"),
    judged("features/hyperv/frequencies/**", "HV001"),
    judged("features/hyperv/reenlightenment/**", "HV005"),
    judged("features/hyperv/tlbflush/**", "HV001", "HV002"),
    judged("features/hyperv/ipi/**", "HV001", "HV002"),
    judged("features/hyperv/evmcs/**", "HV002", "HV004", "HV008"),
    judged("features/hyperv/avic/**", "HV007"),
    judged("features/kvm", "CLK007", "CPU006", "LAT001"),
    judged("features/kvm/hidden/**", "CLK007", "CPU006"),
    judged("features/kvm/hint-dedicated/**", "CPU006", "CPU024", "LAT001"),
    judged("features/kvm/poll-control/**", "LAT001"),
    judged("features/kvm/pv-ipi/**", "CPU031"),
    unjudged("features/kvm/dirty-ring/**", WORKLOAD, "dirty-page tracking for live migration: ring size trades "
      "migration convergence against memory", FORMATDOMAIN + "hypervisor-features"),

    # --- clock --------------------------------------------------------------------------------
    judged("clock", "CLK001", "CLK006"),
    judged("clock/@offset", "CLK006"),
    unjudged("clock/@adjustment", NOT_PERF, "initial offset of the guest clock", FORMATDOMAIN + "time-keeping"),
    unjudged("clock/@basis", NOT_PERF, "UTC or localtime base of a variable offset", FORMATDOMAIN + "time-keeping"),
    unjudged("clock/@start", OTHER, "VMware clock start", FORMATDOMAIN + "time-keeping"),
    unjudged("clock/@timezone", NOT_PERF, "guest time zone", FORMATDOMAIN + "time-keeping"),
    judged("clock/timer", "CLK001", "CLK002", "CLK003", "CLK004", "CLK005", "CLK007", "CLK008", "HV005"),
    judged("clock/timer/@name", "CLK001", "CLK002", "CLK003", "CLK004", "CLK005", "CLK007", "CLK008", "HV005"),
    judged("clock/timer/@present", "CLK002", "CLK003", "CLK007"),
    judged("clock/timer/@tickpolicy", "CLK004", "CLK005"),
    judged("clock/timer/@frequency", "CLK008", "HV005"),
    unjudged("clock/timer/@track", NOT_PERF, "which clock the RTC follows (correctness of guest time)",
             FORMATDOMAIN + "time-keeping"),
    unjudged("clock/timer/@mode", OTHER, "TSC mode: only libvirt's Xen driver reads it (libxl's tsc_mode); the "
      "QEMU driver passes nothing for it (libvirt 9.0's command line is the same with and without "
      "`<timer name='tsc' mode='emulate'/>`)", FORMATDOMAIN + "time-keeping"),
    unjudged("clock/timer/catchup/**", NOT_PERF, "catch-up limits of tickpolicy='catchup' (time correctness)",
      FORMATDOMAIN + "time-keeping"),

    # --- devices: common parts ------------------------------------------------------------------
    unjudged("devices", NOT_PERF, "container of the devices", FORMATDOMAIN + "devices"),
    unjudged("devices/*/address/**", NOT_PERF, "bus address of the device; PCI001 reads root-port addresses",
      FORMATDOMAIN + "device-addresses"),
    unjudged("devices/*/alias/**", NOT_PERF, "device alias", FORMATDOMAIN + "devices"),
    unjudged("devices/*/acpi/**", NOT_PERF, "ACPI index (NIC naming)", FORMATDOMAIN + "devices"),
    unjudged("devices/*/boot/**", NOT_PERF, "per-device boot order", FORMATDOMAIN + "devices"),
    unjudged("devices/*/driver/@page_per_vq", NOT_PERF, "legacy virtio notification layout",
             FORMATDOMAIN + "virtio-related-options"),
    unjudged("devices/*/driver/@iommu", WORKLOAD, "virtio DMA through the vIOMMU: needed for SEV and nested device "
      "assignment, costs translations otherwise; the need decides", FORMATDOMAIN + "virtio-related-options"),
    unjudged("devices/*/driver/@ats", WORKLOAD, "address translation services of a device behind the vIOMMU",
      FORMATDOMAIN + "virtio-related-options"),
    unjudged("devices/*/driver/@packed", WORKLOAD, "packed virtqueues: fewer cache misses where the backend supports "
      "them; QEMU 7.2 keeps split queues by default and documents no cost of them",
      FORMATDOMAIN + "virtio-related-options"),
    judged("devices/*/driver/@ioeventfd", "DSK011", "NET009", note="`off`: a synchronous exit per notification; "
      "an error with an I/O thread (QEMU refuses it)"),
    judged("devices/*/driver/@event_idx", "DSK011", "NET009", note="`off`: more interrupts and exits"),
    judged("devices/emulator", "CPU015", note="the QEMU binary: it must exist on the host for the architecture"),

    # --- disk ---------------------------------------------------------------------------------
    judged("devices/disk", "DSK003", "DSK004", "DSK008"),
    judged("devices/disk/@type", "DSK002", "DSK008", note="block, file, volume"),
    judged("devices/disk/@device", "DSK004", "DSK008", note="cdrom and lun are left alone"),
    unjudged("devices/disk/@model", NOT_PERF, "virtio transitional or not: which guest drivers bind, not speed",
      DISK),
    unjudged("devices/disk/@rawio", NOT_PERF, "raw SCSI I/O permission of a LUN", DISK),
    unjudged("devices/disk/@sgio", NOT_PERF, "SG_IO filtering of a LUN", DISK),
    unjudged("devices/disk/@snapshot", NOT_PERF, "default snapshot behaviour", DISK),
    judged("devices/disk/driver", "DSK001", "DSK002", "DSK003", "DSK005", "DSK006", "DSK008"),
    unjudged("devices/disk/driver/@name", NOT_PERF, "always `qemu` for QEMU", DISK),
    judged("devices/disk/driver/@type", "DSK005", note="qcow2 needs discard='unmap' to shrink"),
    judged("devices/disk/driver/@cache", "DSK001", "DSK002", "DSK008", "DSK012"),
    judged("devices/disk/driver/@io", "DSK001", "DSK002"),
    judged("devices/disk/driver/@iothread", "DSK003", "DSK009"),
    judged("devices/disk/driver/@queues", "DSK006", "DSK010"),
    unjudged("devices/disk/driver/@queue_size", WORKLOAD, "virtqueue depth: QEMU 7.2's default of 256 is sized for "
      "common NVMe queue depths; deeper only helps high-iodepth workloads", DISK),
    judged("devices/disk/driver/@discard", "DSK005"),
    unjudged("devices/disk/driver/@detect_zeroes", WORKLOAD, "scans every write for zeroes (CPU per write) to save "
      "space or unmap: a space-versus-CPU choice, off by default", DISK),
    unjudged("devices/disk/driver/@copy_on_read", WORKLOAD, "copies read data from the backing image into the top one",
      DISK),
    unjudged("devices/disk/driver/@error_policy", NOT_PERF, "what a write error does", DISK),
    unjudged("devices/disk/driver/@rerror_policy", NOT_PERF, "what a read error does", DISK),
    unjudged("devices/disk/driver/metadata_cache/**", WORKLOAD, "qcow2 L2 cache: QEMU's default covers images up to "
      "a size (256 GiB with 64 KiB clusters on Linux), but the image's size is not in the XML", QCOW2_CACHE),
    unjudged("devices/disk/source/**", INDIRECT, "where the data lives (file, device, network protocol, auth, TLS): "
      "the disk's `type` tells DSK002 and DSK008 how it is reached", DISK),
    judged("devices/disk/source/@file", "DSK012", note="an image on tmpfs (O_DIRECT refused before Linux 6.6)"),
    unjudged("devices/disk/backingStore/**", NOT_PERF, "the backing chain libvirt records", DISK),
    unjudged("devices/disk/mirror/**", NOT_PERF, "state of a block copy job", DISK),
    unjudged("devices/disk/auth/**", NOT_PERF, "credentials", DISK),
    unjudged("devices/disk/encryption/**", WORKLOAD, "LUKS encryption: a security choice whose CPU cost the operator "
      "accepts", DISK),
    unjudged("devices/disk/privateData/**", NOT_PERF, "libvirt's runtime state", DISK),
    judged("devices/disk/target", "DSK004", "DSK007", "USB001"),
    judged("devices/disk/target/@bus", "DSK003", "DSK004", "DSK006", "DSK007", "DSK009", "DSK011", "USB001"),
    unjudged("devices/disk/target/@dev", NOT_PERF, "guest device name hint", DISK),
    unjudged("devices/disk/target/@rotation_rate", WORKLOAD, "tells the guest a disk is rotational or not (I/O "
      "scheduler choice); only on emulated buses, which DSK004 reports", DISK),
    unjudged("devices/disk/target/@removable", NOT_PERF, "removable flag of USB/SCSI disks", DISK),
    unjudged("devices/disk/target/@tray", NOT_PERF, "CD-ROM tray state", DISK),
    unjudged("devices/disk/iotune/**", WORKLOAD, "per-disk I/O throttling: a limit the operator sets",
      DISK),
    unjudged("devices/disk/blockio/**", WORKLOAD, "block sizes shown to the guest; alignment with the backing "
      "storage matters, which the XML does not show", DISK),
    unjudged("devices/disk/geometry/**", NOT_PERF, "legacy CHS geometry", DISK),
    judged("devices/disk/readonly", "DSK005", "DSK008", note="read-only disks are left alone"),
    judged("devices/disk/shareable", "DSK008", note="shareable disks are left alone"),
    unjudged("devices/disk/transient/**", NOT_PERF, "discard changes at shutdown", DISK),
    unjudged("devices/disk/serial", NOT_PERF, "identification", DISK),
    unjudged("devices/disk/wwn", NOT_PERF, "identification", DISK),
    unjudged("devices/disk/vendor", NOT_PERF, "identification", DISK),
    unjudged("devices/disk/product", NOT_PERF, "identification", DISK),
    unjudged("devices/disk/backenddomain/**", OTHER, "Xen driver domain", DISK),

    # --- controller ---------------------------------------------------------------------------
    judged("devices/controller", "DSK007", "DSK009", "USB001", "USB003", "PCI001"),
    judged("devices/controller/@type", "DSK007", "DSK009", "USB001", "USB003", "PCI001"),
    judged("devices/controller/@model", "DSK006", "DSK007", "DSK009", "USB001", "USB003", "PCI001",
      note="SCSI HBA, USB generation, pcie-root-port"),
    judged("devices/controller/@index", "PCI001", "USB001"),
    unjudged("devices/controller/@ports", NOT_PERF, "ports of a USB controller (USB001's fix writes 15)",
      FORMATDOMAIN + "usb-controller"),
    unjudged("devices/controller/@vectors", WORKLOAD, "MSI-X vectors of a virtio-serial controller",
             FORMATDOMAIN + "controllers"),
    unjudged("devices/controller/@maxGrantFrames", OTHER, "Xen grant frames", FORMATDOMAIN + "controllers"),
    unjudged("devices/controller/@maxEventChannels", OTHER, "Xen event channels", FORMATDOMAIN + "controllers"),
    judged("devices/controller/driver", "DSK006", "DSK009"),
    judged("devices/controller/driver/@iothread", "DSK009"),
    judged("devices/controller/driver/@queues", "DSK006", "DSK010"),
    unjudged("devices/controller/driver/@cmd_per_lun", WORKLOAD, "virtio-scsi queue depth per LUN",
             FORMATDOMAIN + "controllers"),
    unjudged("devices/controller/driver/@max_sectors", WORKLOAD, "virtio-scsi maximum request size",
             FORMATDOMAIN + "controllers"),
    unjudged("devices/controller/master/**", NOT_PERF, "wiring of ich9 companion controllers; USB001 judges their "
      "models", FORMATDOMAIN + "usb-controller"),
    unjudged("devices/controller/model/**", NOT_PERF, "the QEMU device of a PCI controller",
             FORMATDOMAIN + "controllers"),
    unjudged("devices/controller/target/**", NOT_PERF, "PCI controller chassis, port, bus numbers, hot-plug, NUMA node "
      "of an expander bus", FORMATDOMAIN + "controllers"),
    unjudged("devices/controller/pcihole64/**", NOT_PERF, "64-bit PCI hole size", FORMATDOMAIN + "controllers"),

    # --- interface ----------------------------------------------------------------------------
    judged("devices/interface", "NET001", "NET004"),
    judged("devices/interface/@type", "NET001", "NET005", "NET007", "NET008", note="tap backends, vhostuser, user"),
    unjudged("devices/interface/@managed", NOT_PERF, "whether libvirt manages a tap or hostdev",
             FORMATDOMAIN + "network-interfaces"),
    unjudged("devices/interface/@trustGuestRxFilters", NOT_PERF, "whether MAC/filter changes from the guest are "
      "applied on the host", FORMATDOMAIN + "network-interfaces"),
    judged("devices/interface/model/**", "NET001", "NET003", "NET004", "NET006", "NET007"),
    judged("devices/interface/driver", "NET001", "NET003", "NET006", "NET007"),
    judged("devices/interface/driver/@name", "NET003", note="vhost or qemu"),
    judged("devices/interface/driver/@queues", "NET001", "NET002", "NET007"),
    judged("devices/interface/driver/@rx_queue_size", "NET007"),
    judged("devices/interface/driver/@tx_queue_size", "NET007"),
    unjudged("devices/interface/driver/@txmode", WORKLOAD, "transmit scheduling of the userspace backend; with vhost "
      "(NET003) it does not apply", FORMATDOMAIN + "setting-nic-driver-specific-options"),
    unjudged("devices/interface/driver/@rss*", WORKLOAD, "eBPF receive-side scaling and hash reports", FORMATDOMAIN +
      "setting-nic-driver-specific-options"),
    judged("devices/interface/driver/host/**", "NET006"),
    judged("devices/interface/driver/guest/**", "NET006"),
    judged("devices/interface/backend", "NET008"),
    judged("devices/interface/backend/@type", "NET008", note="passt"),
    unjudged("devices/interface/backend/@tap", NOT_PERF, "path of the tun device",
             FORMATDOMAIN + "setting-nic-driver-specific-options"),
    unjudged("devices/interface/backend/@vhost", NOT_PERF, "path of the vhost-net device (HOST008 checks it exists)",
      FORMATDOMAIN + "setting-nic-driver-specific-options"),
    unjudged("devices/interface/backend/@logFile", NOT_PERF, "passt's log", FORMATDOMAIN + "userspace-connection"),
    unjudged("devices/interface/tune/**", WORKLOAD, "tap send buffer size: a bound against a flooding guest; QEMU's "
      "default is unlimited", FORMATDOMAIN + "setting-nic-driver-specific-options"),
    unjudged("devices/interface/coalesce/**", WORKLOAD, "receive interrupt coalescing: latency against interrupt rate",
      FORMATDOMAIN + "coalesce-settings"),
    unjudged("devices/interface/bandwidth/**", WORKLOAD, "traffic shaping: a limit the operator sets",
      FORMATDOMAIN + "quality-of-service"),
    unjudged("devices/interface/mtu/**", WORKLOAD, "MTU: jumbo frames help only if the whole path carries them",
      FORMATDOMAIN + "mtu-configuration"),
    unjudged("devices/interface/source/**", INDIRECT, "what the NIC connects to (bridge, network, macvtap mode, "
      "vhost-user socket): NET001 and NET005 judge the interface type", FORMATDOMAIN + "network-interfaces"),
    unjudged("devices/interface/filterref/**", WORKLOAD, "nwfilter rules: a security choice whose per-packet cost "
      "grows with the rules", "https://libvirt.org/formatnwfilter.html"),
    unjudged("devices/interface/virtualport/**", NOT_PERF, "Open vSwitch/802.1Qbg port parameters",
      FORMATDOMAIN + "network-interfaces"),
    unjudged("devices/interface/vlan/**", NOT_PERF, "VLAN tags",
             FORMATDOMAIN + "setting-vlan-tag-on-supported-network-types-only"),
    unjudged("devices/interface/teaming/**", NOT_PERF, "virtio/hostdev failover pairing",
      FORMATDOMAIN + "teaming-a-virtio-hostdev-nic-pair"),
    unjudged("devices/interface/rom/**", NOT_PERF, "option ROM (PXE)",
             FORMATDOMAIN + "interface-rom-bios-configuration"),
    unjudged("devices/interface/link/**", NOT_PERF, "link state", FORMATDOMAIN + "modifying-virtual-link-state"),
    unjudged("devices/interface/port/**", NOT_PERF, "port isolation",
      FORMATDOMAIN + "isolating-guests-s-network-traffic-from-each-other"),
    unjudged("devices/interface/mac/**", NOT_PERF, "identification", FORMATDOMAIN + "network-interfaces"),
    unjudged("devices/interface/ip/**", NOT_PERF, "addresses", FORMATDOMAIN + "ip-configuration"),
    unjudged("devices/interface/route/**", NOT_PERF, "routes", FORMATDOMAIN + "ip-configuration"),
    unjudged("devices/interface/guest/**", NOT_PERF, "guest-side device name (LXC)",
             FORMATDOMAIN + "network-interfaces"),
    unjudged("devices/interface/target/**", NOT_PERF, "host-side tap name",
             FORMATDOMAIN + "overriding-the-target-element"),
    unjudged("devices/interface/script/**", NOT_PERF, "host setup script",
             FORMATDOMAIN + "generic-ethernet-connection"),
    unjudged("devices/interface/downscript/**", NOT_PERF, "host teardown script",
             FORMATDOMAIN + "generic-ethernet-connection"),
    unjudged("devices/interface/portForward/**", NOT_PERF, "passt port forwarding",
             FORMATDOMAIN + "userspace-connection"),
    unjudged("devices/interface/backenddomain/**", OTHER, "Xen driver domain", FORMATDOMAIN + "network-interfaces"),

    # --- memballoon ---------------------------------------------------------------------------
    judged("devices/memballoon", "MEM002", "MEM003", "MEM007"),
    judged("devices/memballoon/@model", "MEM002", "MEM003", "MEM007", note="model='none' is no balloon"),
    judged("devices/memballoon/@autodeflate", "MEM003"),
    judged("devices/memballoon/@freePageReporting", "MEM003"),
    unjudged("devices/memballoon/stats/**", WORKLOAD, "statistics polling period: one small request per period",
      FORMATDOMAIN + "memory-balloon-device"),
    unjudged("devices/memballoon/driver", NOT_PERF, "container of the virtio options",
             FORMATDOMAIN + "memory-balloon-device"),

    # --- rng ----------------------------------------------------------------------------------
    unjudged("devices/rng", WORKLOAD, "a virtio RNG feeds the guest's entropy pool; current guest kernels no longer "
      "block on entropy", FORMATDOMAIN + "random-number-generator-device"),
    unjudged("devices/rng/@model", NOT_PERF, "virtio (transitional or not)",
             FORMATDOMAIN + "random-number-generator-device"),
    unjudged("devices/rng/rate/**", WORKLOAD, "rate limit the operator sets to protect the host's source",
      FORMATDOMAIN + "random-number-generator-device"),
    unjudged("devices/rng/backend/**", WORKLOAD, "host entropy source (/dev/urandom, builtin, EGD socket)",
      FORMATDOMAIN + "random-number-generator-device"),
    unjudged("devices/rng/driver", NOT_PERF, "container of the virtio options",
             FORMATDOMAIN + "random-number-generator-device"),

    # --- watchdog, input, video, sound, serial, channel, console ------------------------------
    unjudged("devices/watchdog/**", NOT_PERF, "a guest hang detector and its action",
             FORMATDOMAIN + "watchdog-devices"),
    judged("devices/input", "USB001", "USB002", "USB003"),
    judged("devices/input/@type", "USB002", note="tablet"),
    judged("devices/input/@bus", "USB001", "USB002", "USB003"),
    unjudged("devices/input/@model", NOT_PERF, "virtio input variant", FORMATDOMAIN + "input-devices"),
    unjudged("devices/input/source/**", NOT_PERF, "host evdev passed through", FORMATDOMAIN + "input-devices"),
    unjudged("devices/input/driver", NOT_PERF, "container of the virtio options", FORMATDOMAIN + "input-devices"),
    unjudged("devices/video/**", WORKLOAD, "display adapter, its memory and 3D acceleration: console performance, "
      "which vmtune does not measure", FORMATDOMAIN + "video-devices"),
    judged("devices/sound", "USB001", "USB003", note="a model='usb' sound card is a USB device"),
    judged("devices/sound/@model", "USB001", "USB003"),
    unjudged("devices/sound/codec/**", NOT_PERF, "HDA codec", FORMATDOMAIN + "sound-devices"),
    unjudged("devices/sound/audio/**", NOT_PERF, "which audio backend it plays to", FORMATDOMAIN + "sound-devices"),
    judged("devices/serial", "USB001", "USB003", note="a usb-serial target is a USB device"),
    judged("devices/serial/target", "USB001", "USB003"),
    judged("devices/serial/target/@type", "USB001", "USB003"),
    unjudged("devices/serial/@*", NOT_PERF, "character device backend", CHR),
    unjudged("devices/serial/target/@port", NOT_PERF, "port number", CHR),
    unjudged("devices/serial/target/model/**", NOT_PERF, "QEMU serial device", CHR),
    unjudged("devices/serial/source/**", NOT_PERF, "character device backend", CHR),
    unjudged("devices/serial/log/**", NOT_PERF, "output log file", CHR),
    unjudged("devices/serial/protocol/**", NOT_PERF, "TCP protocol (raw, telnet)", CHR),
    unjudged("devices/channel/**", NOT_PERF, "host-guest channels (guest agent, SPICE)", FORMATDOMAIN + "channel"),
    judged("devices/console", "USB001", "USB003", note="a usb-serial console target is a USB device"),
    judged("devices/console/target", "USB001", "USB003"),
    judged("devices/console/target/@type", "USB001", "USB003"),
    unjudged("devices/console/target/@port", NOT_PERF, "port number", CHR),
    unjudged("devices/console/target/model/**", NOT_PERF, "QEMU console device", CHR),
    unjudged("devices/console/@*", NOT_PERF, "character device backend", CHR),
    unjudged("devices/console/source/**", NOT_PERF, "character device backend", CHR),
    unjudged("devices/console/log/**", NOT_PERF, "output log file", CHR),
    unjudged("devices/console/protocol/**", NOT_PERF, "TCP protocol", CHR),
    unjudged("devices/parallel/**", NOT_PERF, "parallel port", CHR),

    # --- other devices ------------------------------------------------------------------------
    judged("devices/graphics", "USB002", "USB003", note="their presence: a tablet without graphics"),
    unjudged("devices/graphics/**", NOT_PERF, "remote display protocol settings",
             FORMATDOMAIN + "graphical-framebuffers"),
    judged("devices/hub", "USB001", "USB003", note="a USB hub is a USB device"),
    judged("devices/hub/@type", "USB001", "USB003"),
    judged("devices/redirdev", "USB001", "USB003", note="a redirected USB device"),
    unjudged("devices/redirdev/**", NOT_PERF, "USB redirection channel", FORMATDOMAIN + "redirected-devices"),
    unjudged("devices/redirfilter/**", NOT_PERF, "USB redirection filter", FORMATDOMAIN + "redirected-devices"),
    judged("devices/smartcard", "USB001", "USB003", note="a CCID smartcard reader is a USB device"),
    unjudged("devices/smartcard/**", NOT_PERF, "smartcard backend", FORMATDOMAIN + "smartcard-devices"),
    judged("devices/hostdev", "USB001", "USB003", note="a USB host device needs a controller"),
    judged("devices/hostdev/@type", "USB001", "USB003"),
    unjudged("devices/hostdev/**", WORKLOAD, "device assignment (VFIO): the fastest path for the device it assigns; "
      "its ROM, addresses and options are correctness settings", FORMATDOMAIN + "host-device-assignment"),
    judged("devices/filesystem", "MEM010"),
    judged("devices/filesystem/driver/@type", "MEM010", note="virtiofs needs shared memory"),
    unjudged("devices/filesystem/**", WORKLOAD, "shared folders (virtiofs, 9p): cache mode, queue size and thread "
      "pool trade consistency and memory against speed per workload", FORMATDOMAIN + "filesystems"),
    unjudged("devices/memory/**", WORKLOAD, "hot-pluggable memory (DIMMs, virtio-mem, NVDIMM)",
             FORMATDOMAIN + "memory-devices"),
    unjudged("devices/iommu/**", WORKLOAD, "a virtual IOMMU: needed for nested assignment or SEV, costs DMA "
      "translations otherwise; the need decides", FORMATDOMAIN + "iommu-devices"),
    unjudged("devices/shmem/**", WORKLOAD, "ivshmem shared memory between guests",
             FORMATDOMAIN + "shared-memory-device"),
    unjudged("devices/audio/**", NOT_PERF, "audio backends", FORMATDOMAIN + "audio-backends"),
    unjudged("devices/tpm/**", NOT_PERF, "TPM emulation or passthrough", FORMATDOMAIN + "tpm-device"),
    unjudged("devices/nvram/**", OTHER, "pSeries NVRAM", FORMATDOMAIN + "nvram-device"),
    unjudged("devices/panic/**", NOT_PERF, "guest panic notifier", FORMATDOMAIN + "panic-device"),
    unjudged("devices/vsock/**", NOT_PERF, "host-guest socket (its vhost backend is the only one)",
             FORMATDOMAIN + "vsock"),
    unjudged("devices/lease/**", NOT_PERF, "lock manager leases", FORMATDOMAIN + "device-leases"),
)


def _score(pattern: str) -> tuple[int, ...]:
    """How specific a pattern is, segment by segment: literal 3, glob 2, `**` 0; ending (1) beats `**`."""
    return (*(0 if s == "**" else 2 if "*" in s else 3 for s in pattern.split("/")), 1)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    """The pattern as a regex over "/" + path: `**` is any number of segments, `*` any part of one."""
    pieces = ["(?:/[^/]+)*" if seg == "**" else "/" + "[^/]*".join(map(re.escape, seg.split("*")))
              for seg in pattern.split("/")]
    return re.compile("".join(pieces))


def matches(pattern: str, path: str) -> bool:
    return _regex(pattern).fullmatch("/" + path) is not None


@cache
def owner(path: str, knobs: tuple[Knob, ...] = KNOBS) -> Knob | None:
    """The most specific entry matching a schema path, or None."""
    found = [k for k in knobs if matches(k.path, path)]
    return max(found, key=lambda k: _score(k.path)) if found else None


def unmatched(paths: list[str], knobs: tuple[Knob, ...] = KNOBS) -> list[str]:
    """Schema paths no entry matches: the knobs a libvirt upgrade added."""
    return [p for p in paths if owner(p, knobs) is None]


def stale(paths: list[str], knobs: tuple[Knob, ...] = KNOBS) -> list[str]:
    """Entries that own no schema path: removed from the schema, misspelt, or shadowed by another entry."""
    owned = {k.path for p in paths if (k := owner(p, knobs)) is not None}
    return [k.path for k in knobs if k.path not in owned]


CODE = re.compile(r"\b(?:CLK|HV|CPU|MEM|LAT|NET|DSK|USB|PCI|SUP|HOST|VAL)\d{3}\b")


def cited_codes(knob: Knob) -> set[str]:
    """Rule codes an entry names: its rules and any code in its reason."""
    return set(knob.rules) | set(CODE.findall(knob.reason)) | set(CODE.findall(knob.gap))


def _rule_link(code: str) -> str:
    from vmtune.rules import BY_CODE

    return f"[{code}](rules.md#{code.lower()}-{BY_CODE[code].name})"


def _link(match: re.Match[str]) -> str:
    url = match.group(0)
    label = url.removeprefix("https://").removeprefix("libvirt.org/").removeprefix("docs.kernel.org/")
    return f"[{label}]({url})"


def _source_link(source: str) -> str:
    return re.sub(r"https://[^\s()]+", _link, source)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(knobs: tuple[Knob, ...] = KNOBS) -> str:
    out = [
        "# The knob inventory",
        "",
        "Every element and attribute of libvirt 9.0's domain schema (`domain.rng`) is matched here by",
        "an entry: the rules that judge it, or why no rule does and where that comes from. Generated",
        "from `vmtune/schema_knobs.py` by `python -m vmtune.schema_knobs > docs/knobs.md`; do not edit by hand. A test",
        "walks the installed schema and fails when a path has no entry, so a libvirt upgrade shows its new",
        "knobs. Paths start below `<domain>`; `@` marks an attribute, `*` one step, `**` any depth; the",
        "most specific entry wins. VAL001 also checks the numbers of every knob a rule reads.",
        "",
        "| status | meaning | entries |",
        "|---|---|---|",
    ]
    for status, meaning in STATUSES.items():
        out.append(f"| {status} | {meaning} | {sum(k.status == status for k in knobs)} |")
    out += ["", "## Candidates for new rules", "",
            "Knobs, or values of judged knobs, with a documented cost that no rule judges yet:", ""]
    listed = len(out)
    for knob in knobs:
        if knob.status == "candidate":
            out.append(f"- `{knob.path}`: {knob.reason} ({_source_link(knob.source)})")
        elif knob.gap:
            out.append(f"- `{knob.path}` (judged by {', '.join(knob.rules)} otherwise): {knob.gap} "
                       f"({_source_link(knob.gap_source)})")
    if len(out) == listed:
        out.append("None at present.")
    sections: dict[str, list[Knob]] = {}
    for knob in knobs:
        sections.setdefault(knob.section, []).append(knob)
    for section, entries in sections.items():
        out += ["", f"## {section}", "", "| knob | judged by | reason | source |", "|---|---|---|---|"]
        for knob in entries:
            out.append(_row(knob))
    return "\n".join(out).rstrip() + "\n"


def _row(knob: Knob) -> str:
    judged = ", ".join(_rule_link(c) for c in knob.rules) if knob.rules else f"no rule ({knob.status})"
    reason = f"{knob.reason}; not judged: {knob.gap}" if knob.gap else knob.reason
    return (f"| `{_cell(knob.path)}` | {judged} | {_cell(reason)} | "
            f"{_source_link(knob.source) if knob.source else ''} |")


if __name__ == "__main__":
    print(render_markdown(), end="")
