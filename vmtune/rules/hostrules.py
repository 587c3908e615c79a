"""Host rules for `vmtune host`: KVM module parameters, hugepage pools, KSM, CPU isolation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset
from vmtune.rules.base import Context, DomainRef, Finding, RecordedFinding, Rule, Severity

if TYPE_CHECKING:
    from vmtune.host.system import HostSystem

HOST_REF = DomainRef("(host)", None)


class HostRule(Rule):
    engine_driven = True  # not run on domains

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        raise NotImplementedError

    def host_finding(self, where: str, message: str, note: str | None = None,
                     severity: Severity | None = None) -> RecordedFinding:
        return RecordedFinding(self, severity or self.severity, message, None, HOST_REF,  # type: ignore[arg-type]
                               None, note, None, where)


class EptDisabled(HostRule):
    """
    ## What it checks
    The KVM module's two-dimensional paging: `ept` of kvm_intel or `npt` of kvm_amd
    (`/sys/module/kvm_intel/parameters/ept`). An error when it is off.

    ## Why it matters
    Without EPT/NPT every guest falls back to shadow page tables: each guest page-table
    update exits to the hypervisor. Li, Cui and Li (2016) measured the cost on OpenStack.

    ## Example
    ```
    $ cat /sys/module/kvm_intel/parameters/ept
    N
    ```

    ## Fix
    None automatic: remove `ept=0`/`npt=0` from the module options (`/etc/modprobe.d`) and
    reload kvm_intel/kvm_amd with no guest running.

    ## Calibration
    Error: shadow paging slows every guest on the host by a documented large factor.
    Versions: none matter; the KVM module parameters `ept`/`npt` are read as the running
    kernel reports them.

    ## References
    - https://www.kernel.org/doc/html/latest/virt/kvm/x86/mmu.html
    - Li Guilin, Cui Guangzhang, Li Yongbao, "KVM virtual machine performance testing and
      optimisation in an OpenStack cloud", Internet of Things Technologies, 2016 (2)
    """

    code = "HOST001"
    name = "ept-disabled"
    severity = Severity.ERROR

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.ept is not None and system.ept.upper() in ("N", "0"):
            yield self.host_finding(system.ept_param or "", "two-dimensional paging (EPT/NPT) is disabled in KVM")


class HaltPollingOff(HostRule):
    """
    ## What it checks
    `halt_poll_ns` of the kvm module set to 0.

    ## Why it matters
    Halt polling lets a vCPU that just went idle spin briefly before the host deschedules
    it, so a wake-up shortly after (the next request) avoids a full schedule-out and IPI.
    With 0, idle-to-busy latency grows by tens of microseconds per wake-up (Alibaba Cloud's
    measurements, Yang Zhang, "KVM performance tuning").
    Guests with poll-control handle this themselves.

    ## Example
    ```
    $ cat /sys/module/kvm/parameters/halt_poll_ns
    0
    ```

    ## Fix
    None automatic: `echo 200000 > /sys/module/kvm/parameters/halt_poll_ns` (the kernel's
    default), or `kvm.halt_poll_ns=` on the kernel command line.

    ## Calibration
    Warning: the wake-up cost is documented by KVM's halt-polling documentation for
    every guest on the host.
    Versions: halt polling as documented for Linux 4.x and later
    (`Documentation/virt/kvm/halt-polling.rst`).

    ## References
    - https://www.kernel.org/doc/html/latest/virt/kvm/halt-polling.html
    - Yang Zhang (Alibaba Cloud), "KVM performance tuning"; https://lkml.org/lkml/2017/8/29/279
    """

    code = "HOST002"
    name = "halt-polling-off"
    severity = Severity.WARNING

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.halt_poll_ns == 0:
            yield self.host_finding("/sys/module/kvm/parameters/halt_poll_ns", "KVM halt polling is disabled")


class KsmRunning(HostRule):
    """
    ## What it checks
    KSM merging switched on (`/sys/kernel/mm/ksm/run` is 1).

    ## Why it matters
    ksmd scans guest memory continuously and merged pages break on write with a fault; on
    the host of the idle Windows 10 report (swap full) ksmd was among the busiest processes while
    guests crawled.
    Worth it on memory-starved hosts, a cost on hosts with latency-sensitive guests.

    ## Example
    ```
    $ cat /sys/kernel/mm/ksm/run
    1
    ```

    ## Fix
    None automatic: `echo 0 > /sys/kernel/mm/ksm/run` (or stop ksmtuned), or give sensitive
    guests `<memoryBacking><nosharepages/>`.

    ## Calibration
    Info: KSM trades CPU for density by design; whether that is wanted is the operator's
    call.
    Versions: none matter; KSM's knobs are read from the running kernel's sysfs.

    ## References
    - https://docs.kernel.org/admin-guide/mm/ksm.html
    - https://www.kernel.org/doc/html/latest/admin-guide/mm/ksm.html
    """

    code = "HOST003"
    name = "ksm-running"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.ksm_run == "1":
            yield self.host_finding("/sys/kernel/mm/ksm/run", "KSM is merging guest memory")


class NoHugepagePool(HostRule):
    """
    ## What it checks
    The hugepage pools per NUMA node, 2 MiB and 1 GiB: reported when no node has any, and
    shows each node's pools and free pages.

    ## Why it matters
    Guests with `<hugepages/>` need the pages reserved before they start; with no pool
    they do not start at all. Pools are per node: a guest bound to node 1 cannot use node
    0's pages.

    ## Example
    ```
    $ cat /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages
    0
    ```

    ## Fix
    None automatic: reserve pages per node
    (`/sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/nr_hugepages`) or with
    `hugepages=` on the kernel command line.

    ## Calibration
    Info: only hosts meant for hugepage-backed guests need a pool; MEM008 reports guests
    that would not start.
    Versions: none matter; the pool is read from the running kernel.

    ## References
    - https://docs.kernel.org/admin-guide/mm/hugetlbpage.html
    """

    code = "HOST004"
    name = "no-hugepage-pool"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if not system.hugepages:
            return
        summary = "; ".join(f"node {node}: " + ", ".join(f"{size // 1024} MiB pages {nr} reserved, {free} free"
                                                      for size, (nr, free) in sorted(sizes.items()))
                            for node, sizes in sorted(system.hugepages.items()))
        # A pool of any size (2 MiB or 1 GiB) is a pool: 1 GiB-only hosts are not "without hugepages".
        if not any(nr for sizes in system.hugepages.values() for nr, _ in sizes.values()):
            yield self.host_finding("/sys/devices/system/node", "no hugepages (2 MiB or 1 GiB) are reserved on "
                                    "any node", note=summary)


class NoCpuIsolation(HostRule):
    """
    ## What it checks
    No CPUs isolated from the host scheduler: neither `isolcpus=` nor `nohz_full=` on the
    kernel command line, and `/sys/devices/system/cpu/isolated` empty.

    ## Why it matters
    Pinning a guest to "dedicated" CPUs does not keep host tasks, kernel threads and timer
    ticks off them; for latency-sensitive guests the host side must be isolated too.

    ## Example
    ```
    $ cat /proc/cmdline
    BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet
    ```

    ## Fix
    None automatic: add `isolcpus=managed_irq,domain,LIST nohz_full=LIST` (the CPUs you
    give guests) to the kernel command line, or use cgroup cpusets (systemd `AllowedCPUs`).

    ## Calibration
    Info: isolation is for hosts with dedicated-CPU guests only.
    Versions: none matter; the kernel command line of the running host is read.

    ## References
    - https://docs.kernel.org/admin-guide/kernel-parameters.html
    """

    code = "HOST005"
    name = "no-cpu-isolation"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if not system.cmdline:
            return
        if system.kernel_param("isolcpus") or system.kernel_param("nohz_full") or system.isolated:
            return
        yield self.host_finding("/proc/cmdline", "no CPUs are isolated from the host scheduler")


class KvmDeviceMissing(HostRule):
    """
    ## What it checks
    `/dev/kvm` does not exist.

    ## Why it matters
    Without it every guest runs under TCG emulation, many times slower, or `type='kvm'`
    guests do not start at all.

    ## Example
    ```
    $ ls /dev/kvm
    ls: cannot access '/dev/kvm': No such file or directory
    ```

    ## Fix
    None automatic: enable virtualisation in the firmware and load kvm_intel or kvm_amd.

    ## Calibration
    Error: without `/dev/kvm` no guest runs with KVM.
    Versions: none matter; libvirt 9.0 refuses `type='kvm'` without `/dev/kvm`.

    ## References
    - https://www.linux-kvm.org/page/FAQ
    """

    code = "HOST006"
    name = "kvm-device-missing"
    severity = Severity.ERROR

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if not system.kvm_device and os.path.isdir(system.root / "dev"):  # os.path: False for a name too long
            yield self.host_finding("/dev/kvm", "/dev/kvm is missing: no hardware acceleration")


class VhostNetMissing(HostRule):
    """
    ## What it checks
    `/dev/vhost-net` does not exist (the vhost_net module is not loaded).

    ## Why it matters
    libvirt then runs every virtio NIC on a tap through QEMU's userspace virtio-net: each
    packet batch costs a round trip through QEMU's main loop, and throughput drops while
    host CPU rises. A guest whose definition asks for `<driver name='vhost'>` explicitly
    does not start at all ("vhost-net was requested for an interface, but is unavailable";
    vmtune's own fixes never write it for that reason).

    ## Example
    ```
    $ ls /dev/vhost-net
    ls: cannot access '/dev/vhost-net': No such file or directory
    ```

    ## Fix
    None automatic: `modprobe vhost_net`, and list it in `/etc/modules-load.d/`.

    ## Calibration
    Warning: the userspace backend's cost is documented (libvirt's formatdomain) and
    applies to every virtio NIC on the host.
    Versions: libvirt 9.0 falls back to userspace virtio-net without `/dev/vhost-net`.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    """

    code = "HOST008"
    name = "vhost-net-missing"
    severity = Severity.WARNING

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if not system.vhost_net_device and system.kvm_device:
            yield self.host_finding("/dev/vhost-net", "/dev/vhost-net is missing: virtio NICs run in QEMU's "
                                    "userspace, and guests that ask for vhost explicitly do not start")


class InterruptPostingOff(HostRule):
    """
    ## What it checks
    Interrupt virtualisation in the KVM module: APICv (`enable_apicv` of kvm_intel) or AVIC
    (`avic` of kvm_amd) off, or, on a host with `nohz_full` CPUs, posted timer interrupts
    (`pi_inject_timer` of kvm) off. APICv off on Intel is a warning, the rest info.

    ## Why it matters
    Without APICv/AVIC every interrupt the guest receives, every EOI and every IPI it sends
    costs a VM exit: the IPI and APIC-timer overhead Alibaba Cloud measured between idle
    and busy. With it, KVM can also post a guest's timer interrupt from a housekeeping CPU
    without interrupting the isolated one (the "exitless timer"); `pi_inject_timer=-1`, the
    default, turns that on exactly when the host has `nohz_full` CPUs, so a 0 there was set
    by hand. KVM posts timers only to guests whose HLT does not exit (QEMU
    `-overcommit cpu-pm=on`). AVIC is off by default in kvm_amd on many kernels.

    ## Example
    ```
    $ cat /sys/module/kvm_intel/parameters/enable_apicv
    N
    ```

    ## Fix
    None automatic. KVM also reads N when the CPU lacks APICv/AVIC (older Xeons), which no
    option changes. Otherwise remove `enable_apicv=0` (kvm_intel) or set `avic=1` (kvm_amd; check
    your CPU's errata first) in the module options and reload the module with no guest
    running; `kvm.pi_inject_timer=1` on the kernel command line or
    `echo 1 > /sys/module/kvm/parameters/pi_inject_timer`.

    ## Calibration
    Warning for APICv off on Intel (every interrupt to a guest exits, a documented
    cost); info for AVIC (off by default in many kernels) and for posted timers.
    Versions: the kvm_intel `enable_apicv` and kvm_amd `avic` parameters as in Linux 5.x and
    6.x.

    ## References
    - https://docs.kernel.org/admin-guide/kernel-parameters.html: `kvm.pi_inject_timer`,
      `kvm_intel.enable_apicv`, `kvm_amd.avic`
    - Linux `arch/x86/kvm/lapic.c` `kvm_can_post_timer_interrupt`
    - Yang Zhang (Alibaba Cloud), "KVM performance tuning"; https://lkml.org/lkml/2017/8/29/279
    """

    code = "HOST007"
    name = "interrupt-posting-off"
    severity = Severity.INFO
    other_severities = (Severity.WARNING,)

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        off = system.apicv is not None and system.apicv.upper() in ("N", "0")
        if off and system.apicv_param and "kvm_intel" in system.apicv_param:
            yield self.host_finding(system.apicv_param, "APICv is disabled: every guest interrupt, EOI and IPI "
                                    "costs a VM exit", severity=Severity.WARNING,
                                    note="KVM also reports N when the CPU has no APICv; without an "
                                         "enable_apicv=0 option that is the reason")
        elif off:
            yield self.host_finding(system.apicv_param or "", "AVIC is off: every guest interrupt and IPI costs "
                                    "a VM exit")
        elif system.pi_inject_timer == 0 and system.kernel_param("nohz_full"):
            yield self.host_finding("/sys/module/kvm/parameters/pi_inject_timer", "posted timer interrupts are "
                                    "off on a host with nohz_full CPUs: guest timer ticks interrupt them")


class TransparentHugepagesNever(HostRule):
    """
    ## What it checks
    Transparent hugepages switched off: `/sys/kernel/mm/transparent_hugepage/enabled` is
    `[never]`.

    ## Why it matters
    QEMU asks for huge pages on guest RAM (`madvise(MADV_HUGEPAGE)`), so with THP at
    `always` or `madvise` guests not backed by hugetlbfs still get 2 MiB pages and a
    two-level TLB miss walks far fewer tables. With `never` every such guest runs on 4 KiB
    pages; Red Hat's RHEL 6 Performance Tuning Guide (4.5.2) puts the THP gain for KVM
    guests at up to 20%, and tuned's `virtual-host` profile sets `always`.

    ## Example
    ```
    $ cat /sys/kernel/mm/transparent_hugepage/enabled
    always madvise [never]
    ```

    ## Fix
    None automatic: `echo madvise > /sys/kernel/mm/transparent_hugepage/enabled` (QEMU's
    advice then suffices), `transparent_hugepage=madvise` on the kernel command line, or
    tuned's `virtual-host` profile.

    ## Calibration
    Warning: the gain is documented for KVM guests, and every guest without hugetlbfs
    backing on this host loses it.
    Versions: none: a host kernel setting read from sysfs or /proc (all present in Debian 12's
    Linux 6.1).

    ## References
    - https://docs.kernel.org/admin-guide/mm/transhuge.html
    - Red Hat Enterprise Linux 6 Performance Tuning Guide, 4.5.2 "Transparent Huge Pages"
    - tuned `profiles/virtual-host/tuned.conf`
    """

    code = "HOST009"
    name = "transparent-hugepages-never"
    severity = Severity.WARNING

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.thp_enabled == "never":
            yield self.host_finding("/sys/kernel/mm/transparent_hugepage/enabled", "transparent hugepages are "
                                    "off: guests without hugetlbfs backing run on 4 KiB pages")


class NohzGovernorNotPerformance(HostRule):
    """
    ## What it checks
    A host with `nohz_full` CPUs (a real-time or dedicated-CPU host) whose CPU frequency
    governor is not `performance` on some of them
    (`/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor`).

    ## Why it matters
    A vCPU that wakes from idle on a CPU the governor slowed down runs its first
    microseconds at a low frequency and pays the frequency transition: latency jitter for
    exactly the guests the CPU was isolated for. tuned's `virtual-host` and
    `realtime-virtual-host` profiles set the `performance` governor (through
    `throughput-performance` and `latency-performance`), and nova's real-time guide asks
    to disable power management (P-states) on such hosts.

    ## Example
    ```
    $ cat /sys/devices/system/cpu/cpu4/cpufreq/scaling_governor
    powersave
    ```

    ## Fix
    None automatic: `cpupower frequency-set -g performance` (or tuned's
    `realtime-virtual-host` profile).

    ## Calibration
    Info: the cost is latency jitter without a figure in the anchors, and only for hosts
    that isolate CPUs.
    Versions: none: a host kernel setting read from sysfs or /proc (all present in Debian 12's
    Linux 6.1).

    ## References
    - tuned `profiles/virtual-host`, `profiles/realtime-virtual-host`
    - nova `doc/source/admin/real-time.rst`
    - https://docs.kernel.org/admin-guide/pm/cpufreq.html
    """

    code = "HOST010"
    name = "nohz-governor-not-performance"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        isolated = system.nohz_full
        slow = {cpu: gov for cpu, gov in system.governors.items() if cpu in isolated and gov != "performance"}
        if slow:
            names = ", ".join(sorted(set(slow.values())))
            yield self.host_finding("/sys/devices/system/cpu/cpufreq", f"nohz_full CPUs "
                                    f"{format_cpuset(frozenset(slow))} run the {names} governor, not performance")


class PleGapOnRealtimeHost(HostRule):
    """
    ## What it checks
    A host with `nohz_full` CPUs where kvm_intel's pause-loop exiting is on
    (`/sys/module/kvm_intel/parameters/ple_gap` not 0).

    ## Why it matters
    Pause-loop exiting makes a vCPU that spins on a lock exit to KVM so the lock holder can
    run. On dedicated CPUs the holder is already running, so the exit is pure latency;
    tuned's `realtime-virtual-host` profile sets `ple_gap=0` and its `verify()` reports any
    other value.

    ## Example
    ```
    $ cat /sys/module/kvm_intel/parameters/ple_gap
    128
    ```

    ## Fix
    None automatic: `options kvm_intel ple_gap=0` in `/etc/modprobe.d/`, then reload
    kvm_intel with no guest running (or tuned's `realtime-virtual-host`).

    ## Calibration
    Info: real-time tuning for hosts whose CPUs are dedicated; no figure in the anchors.
    Versions: none: a host kernel setting read from sysfs or /proc (all present in Debian 12's
    Linux 6.1).

    ## References
    - tuned `profiles/realtime-virtual-host/script.sh` (verify: ple_gap 0)
    - https://docs.kernel.org/virt/kvm/x86/ (kvm_intel module parameters)
    """

    code = "HOST011"
    name = "ple-gap-on-realtime-host"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.ple_gap and system.nohz_full:
            yield self.host_finding("/sys/module/kvm_intel/parameters/ple_gap", f"pause-loop exiting is on "
                                    f"(ple_gap={system.ple_gap}) on a host with nohz_full CPUs")


class KvmclockSyncOnRealtimeHost(HostRule):
    """
    ## What it checks
    A host with `nohz_full` CPUs where the kvm module's periodic kvmclock synchronisation
    is on (`/sys/module/kvm/parameters/kvmclock_periodic_sync` is `Y`).

    ## Why it matters
    With it KVM schedules a work item every five minutes that kicks every vCPU of every
    guest to refresh its kvmclock: an interruption of the isolated CPUs that real-time
    guests see as a latency spike. tuned's `realtime-virtual-host` profile sets it to 0 and
    its `verify()` reports it otherwise.

    ## Example
    ```
    $ cat /sys/module/kvm/parameters/kvmclock_periodic_sync
    Y
    ```

    ## Fix
    None automatic: `options kvm kvmclock_periodic_sync=0` in `/etc/modprobe.d/` (the
    parameter is read-only once loaded), then reload kvm with no guest running.

    ## Calibration
    Info: real-time tuning; no figure in the anchors.
    Versions: none: a host kernel setting read from sysfs or /proc (all present in Debian 12's
    Linux 6.1).

    ## References
    - tuned `profiles/realtime-virtual-host/script.sh` (verify: kvmclock_periodic_sync N)
    - Linux `arch/x86/kvm/x86.c` (`kvmclock_sync_fn`, KVMCLOCK_SYNC_PERIOD)
    """

    code = "HOST012"
    name = "kvmclock-sync-on-realtime-host"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.kvmclock_periodic_sync in ("Y", "1") and system.nohz_full:
            yield self.host_finding("/sys/module/kvm/parameters/kvmclock_periodic_sync", "periodic kvmclock "
                                    "sync kicks every vCPU on a host with nohz_full CPUs")


class IrqsOnIsolatedCpus(HostRule):
    """
    ## What it checks
    Device interrupts allowed on isolated CPUs (`isolcpus`, `nohz_full`):
    `/proc/irq/N/smp_affinity_list` naming any of them.

    ## Why it matters
    Isolation keeps tasks off those CPUs, not interrupts: a NIC or disk interrupt landing
    on a dedicated vCPU's CPU preempts the guest for the whole handler. tuned's
    `realtime-virtual-host` profile moves every IRQ off the isolated CPUs
    (`defirqaffinity.py remove`), and irqbalance does when told about them.

    ## Example
    ```
    $ cat /proc/irq/42/smp_affinity_list
    0-15          # CPUs 2-7 are isolated
    ```

    ## Fix
    None automatic: `isolcpus=managed_irq,...`, irqbalance with `IRQBALANCE_BANNED_CPULIST`,
    or writing the housekeeping CPUs into each `smp_affinity_list` (tuned's
    `realtime-virtual-host` does).

    ## Calibration
    Info: a latency matter only for dedicated-CPU guests; no figure in the anchors.
    Versions: none: a host kernel setting read from sysfs or /proc (all present in Debian 12's
    Linux 6.1).

    ## References
    - tuned `profiles/realtime-virtual-host` (`defirqaffinity.py`)
    - https://docs.kernel.org/core-api/irq/irq-affinity.html
    """

    code = "HOST013"
    name = "irqs-on-isolated-cpus"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        isolated = system.isolated_cpus
        if not isolated:
            return
        irqs = sorted(irq for irq, cpus in system.irq_affinity.items() if cpus & isolated)
        if irqs:
            shown = ", ".join(map(str, irqs[:8])) + (f" and {len(irqs) - 8} more" if len(irqs) > 8 else "")
            yield self.host_finding("/proc/irq", f"{len(irqs)} IRQ(s) may run on the isolated CPUs "
                                    f"{format_cpuset(isolated)} (IRQ {shown})")


class VhostNetZerocopyOff(HostRule):
    """
    ## What it checks
    vhost_net loaded with zero-copy transmit off
    (`/sys/module/vhost_net/parameters/experimental_zcopytx` is 0).

    ## Why it matters
    Without it vhost copies every large packet a guest sends into a host buffer; Red Hat's
    RHEL 7 Virtualization Tuning and Optimization Guide (5.4.1) says zero-copy transmit
    "reduces host CPU overhead by up to 15% when transmitting large packets". The parameter
    is marked experimental, and only large transmits gain.

    ## Example
    ```
    $ cat /sys/module/vhost_net/parameters/experimental_zcopytx
    0
    ```

    ## Fix
    None automatic: `options vhost_net experimental_zcopytx=1` in `/etc/modprobe.d/`, then
    reload vhost_net with no guest running.

    ## Calibration
    Info: the gain is for large-packet transmit workloads only and the feature is
    experimental.
    Versions: none: a host kernel setting read from sysfs or /proc (all present in Debian 12's
    Linux 6.1).

    ## References
    - Red Hat Enterprise Linux 7 Virtualization Tuning and Optimization Guide, 5.4.1
      "Bridge Zero Copy Transmit"
    - Linux `drivers/vhost/net.c` (`experimental_zcopytx`)
    """

    code = "HOST014"
    name = "vhost-net-zerocopy-off"
    severity = Severity.INFO

    def check_host(self, system: HostSystem) -> Iterator[RecordedFinding]:
        if system.zcopytx == 0:
            yield self.host_finding("/sys/module/vhost_net/parameters/experimental_zcopytx", "vhost-net zero-copy "
                                    "transmit is off: large packets from guests are copied")


RULES: list[Rule] = [EptDisabled(), HaltPollingOff(), KsmRunning(), NoHugepagePool(), NoCpuIsolation(),
                     KvmDeviceMissing(), InterruptPostingOff(), VhostNetMissing(), TransparentHugepagesNever(),
                     NohzGovernorNotPerformance(), PleGapOnRealtimeHost(), KvmclockSyncOnRealtimeHost(),
                     IrqsOnIsolatedCpus(), VhostNetZerocopyOff()]
HOST_RULES = [r for r in RULES if isinstance(r, HostRule)]
