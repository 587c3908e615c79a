"""Resource limits the user set: CFS bandwidth (`<cputune>` quotas) and `<memtune>` limits."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import human_kib, to_kib
from vmtune.rules.base import Context, Finding, Rule, Severity
from vmtune.rules.helpers import EXPLICIT

DEFAULT_PERIOD_US = 100_000  # the kernel's cpu.cfs_period_us default, which libvirt leaves in place
STARVING_SHARE = 10  # a group capped below 1/10 of a CPU stops for 90% of every period


def _starves(prefix: str, quota: int, period: int, vcpus: int) -> bool:
    """A quota that starves rather than limits: several vCPUs sharing one CPU's worth of time, or
    any group below a tenth of a CPU."""
    if prefix == "global_" and vcpus >= 2 and quota <= period:
        return True
    return quota * STARVING_SHARE < period
MAX_QUOTA_US = 17_592_186_044_415  # libvirt's upper bound for any *_quota


def _micros(element: etree._Element | None) -> int | None:
    """A period or quota in microseconds; None when absent, not a number or unlimited (< 0)."""
    text = (element.text or "").strip() if element is not None else ""
    if not text.lstrip("-").isdigit() or len(text) > 20:
        return None
    value = int(text)
    return value if 0 < value <= MAX_QUOTA_US else None


def _cpus(quota: int, period: int) -> str:
    """quota/period as a count of CPUs, as people say it: '1.5 CPUs', '50% of a CPU'."""
    share = quota / period
    if share < 1:
        return f"{share:.0%} of a CPU"
    return f"{share:.3g} CPU" + ("" if share == 1 else "s")


class CfsBandwidthBelowVcpus(Rule):
    """
    ## What it checks
    `<cputune>` CFS bandwidth limits that give a KVM guest less CPU time than its online
    vCPUs could use: `global_quota`/`global_period` (the whole guest) below the vCPU count,
    `quota`/`period` (each vCPU) below one CPU, or `emulator_quota`/`emulator_period` (the
    emulator threads) or `iothread_quota`/`iothread_period` (each I/O thread) below one CPU.
    Negative quotas mean unlimited and are not reported.

    ## Why it matters
    CFS bandwidth control does not slow a guest down evenly: once a period's quota is used,
    the kernel stops every thread of the group until the next period (`sched-bwc.rst`,
    "throttled"). A guest of 8 vCPUs limited to 2 CPUs runs all 8 for a quarter of each
    period and none for the rest, lock holders and interrupt handlers included, so its
    latency is that of the period (100 ms by default) and spinning vCPUs burn the quota
    waiting for a stopped lock holder. The same guest given 2 vCPUs gets the same CPU time
    without the stalls. A capped emulator thread stalls the disk and network I/O that QEMU's
    main loop serves; a capped I/O thread, the disks assigned to it.

    ## Example
    ```xml
    <vcpu>8</vcpu>
    <cputune><global_period>100000</global_period><global_quota>200000</global_quota></cputune>
    ```

    ## Fix
    None: the limit is a value the user wrote, usually a tenant's share of the host. Give the
    guest as many vCPUs as the CPUs its quota buys, or raise the quota.

    ## Calibration
    Warning where the quota starves: a guest of several vCPUs that all share one CPU's worth
    of time (every preempted lock holder or interrupt handler then stalls them all), or any
    group capped below a tenth of a CPU (an emulator thread at 2% stops for 98 ms of every
    100 ms period, and every disk and network request it serves waits with it). Info for
    the other caps (a per-vCPU limit or a tenant's share above those floors): a deliberate
    limit whose cost depends on the workload. The values are written explicitly, so the
    note says to suppress the finding with its reason if deliberate. Versions: libvirt 9.0 writes these values to
    the cgroup's `cpu.max` (cgroup v2) or `cpu.cfs_quota_us` (v1) per vCPU, emulator and
    whole-domain group.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning (`period`, `quota`, `global_quota`,
      `emulator_quota`, `iothread_quota`)
    - Linux `Documentation/scheduler/sched-bwc.rst` (throttling at quota exhaustion)
    """

    code = "CPU022"
    needs = "cputune"

    since = "0.2.0"
    name = "cfs-bandwidth-below-vcpus"
    severity = Severity.INFO
    other_severities = (Severity.WARNING,)
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        cputune = domain.cputune
        if cputune is None:
            return
        vcpus = len(domain.online_vcpu_ids)
        for prefix, scope, ceiling in (("global_", f"all {vcpus} vCPUs together", vcpus), ("", "each vCPU", 1),
                                       ("emulator_", "the emulator threads", 1), ("iothread_", "each I/O thread", 1)):
            quota_el = domain.child(cputune, f"{prefix}quota")
            quota = _micros(quota_el)
            if quota is None or quota_el is None:
                continue
            period = _micros(domain.child(cputune, f"{prefix}period")) or DEFAULT_PERIOD_US
            if quota >= ceiling * period:
                continue
            cost = {"emulator_": "stalls the I/O QEMU's main loop serves",
                    "iothread_": "stalls the disks the thread serves until the next period"}.get(
                prefix, "stops every vCPU until the next period once it is used")
            starves = _starves(prefix, quota, period, vcpus)
            yield self.finding(domain, quota_el, f"CFS quota gives {scope} {_cpus(quota, period)} per "
                               f"{period // 1000} ms period: {cost}",
                               note=EXPLICIT + ("; fewer vCPUs give the same CPU time without the stalls"
                                                if prefix == "global_" else ""),
                               severity=Severity.WARNING if starves else None)


def qemu_overhead_kib(domain: Domain) -> int:
    """A floor for what QEMU needs beside the guest's RAM, from KubeVirt's measured budget
    (pkg/virt-controller/services/renderresources.go): 30 MiB for QEMU itself ("the `ps` RSS
    for qemu, minus the RAM of its guest, minus the virtual page table"), the page tables
    (RAM/512), 8 MiB per vCPU and 8 MiB per I/O thread."""
    return 30 * 1024 + domain.memory_kib // 512 + 8 * 1024 * (domain.max_vcpus + domain.iothreads)


class MemtuneHardLimitTooLow(Rule):
    """
    ## What it checks
    `<memtune><hard_limit>` at or below the guest's RAM (`<memory>`), or below the RAM plus a
    floor for QEMU's own memory: 30 MiB, the guest's page tables (RAM/512), 8 MiB per vCPU
    and per I/O thread, KubeVirt's measured budget.

    ## Why it matters
    The hard limit caps the whole QEMU process, guest RAM included. When the guest uses its
    memory (a Linux guest fills it with page cache in time), the cgroup runs out and the
    kernel's OOM killer ends QEMU: the guest dies without a shutdown. libvirt's documentation
    says users of QEMU and KVM are "strongly advised not to set this limit as domain may get
    killed by the kernel if the guess is too low". Below the RAM itself the guest cannot
    use what it was given; between RAM and RAM plus overhead, QEMU's own allocations (device
    buffers, page tables, vCPU stacks) are what push it over.

    ## Example
    ```xml
    <memory unit='GiB'>8</memory>
    <memtune><hard_limit unit='GiB'>8</hard_limit></memtune>
    ```

    ## Fix
    None: how much QEMU needs is, in libvirt's words, undecidable. Raise the limit well above
    the RAM plus the overhead, or remove it where memory is not `<locked/>` (locked memory
    needs one: MEM004).

    ## Calibration
    Error at or below the RAM: the limit is reached by the guest's own memory, a documented
    way for the guest to be killed. Warning below RAM plus the overhead floor: QEMU's
    overhead is at least that much in KubeVirt's measurements, so the guest is killed once
    it uses its memory. Versions: libvirt 9.0 writes the value to the cgroup's `memory.max`
    (v2) or `memory.limit_in_bytes` (v1).

    ## References
    - https://libvirt.org/formatdomain.html#memory-tuning (`hard_limit`)
    - KubeVirt `pkg/virt-controller/services/renderresources.go` (`QemuOverhead`, 8 MiB per
      vCPU and I/O thread, page tables at RAM/512)
    """

    code = "MEM011"
    needs = "memtune"

    since = "0.2.0"
    name = "memtune-hard-limit-too-low"
    severity = Severity.WARNING
    other_severities = (Severity.ERROR,)
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        memtune = domain.top("memtune")
        limit_el = domain.child(memtune, "hard_limit") if memtune is not None else None
        if limit_el is None:
            return
        limit = to_kib((limit_el.text or "").strip(), limit_el.get("unit"))
        ram = domain.memory_kib
        if limit is None or not ram:
            return
        if limit <= ram:
            yield self.finding(domain, limit_el, f"memtune hard_limit {human_kib(limit)} is not above the guest's "
                               f"RAM ({human_kib(ram)}): QEMU is OOM-killed once the guest uses its memory",
                               severity=Severity.ERROR)
            return
        needed = ram + qemu_overhead_kib(domain)
        if limit < needed:
            yield self.finding(domain, limit_el, f"memtune hard_limit {human_kib(limit)} leaves QEMU less than "
                               f"{human_kib(needed - ram)} beside the guest's RAM: it is OOM-killed once the "
                               "guest uses its memory")


RULES: list[Rule] = [CfsBandwidthBelowVcpus(), MemtuneHardLimitTooLow()]
