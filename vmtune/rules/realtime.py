"""Real-time and latency guests: real-time vCPU scheduling, the virtual PMU, the TSC clocksource."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset, parse_cpuset
from vmtune.patch.edits import Edit, ensure, path, step
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

RT_SCHEDULERS = frozenset({"fifo", "rr"})
INVTSC_ON = frozenset({"require", "force"})


def realtime_vcpus(domain: Domain) -> dict[int, etree._Element]:
    """vCPU id -> its <vcpusched> with a real-time scheduler (fifo, rr); no `vcpus` means all."""
    found: dict[int, etree._Element] = {}
    if domain.cputune is None:
        return found
    for sched in domain.children(domain.cputune, "vcpusched"):
        if sched.get("scheduler") not in RT_SCHEDULERS:
            continue
        ids = parse_cpuset(sched.get("vcpus")) if sched.get("vcpus") else frozenset(range(domain.max_vcpus))
        for vcpu in ids or ():
            if vcpu < domain.max_vcpus:
                found.setdefault(vcpu, sched)
    return found


def _cpus_of(domain: Domain, vcpu: int) -> frozenset[int] | None:
    """Where a vCPU may run: its pin, else <vcpu cpuset>; None means every host CPU."""
    return domain.vcpu_pins.get(vcpu) or domain.vcpu_cpuset


class RealtimeVcpuSharesCpu(Rule):
    """
    ## What it checks
    vCPUs given a real-time scheduler (`<vcpusched scheduler='fifo'|'rr'>`) that are not
    each pinned to a host CPU of their own: unpinned, pinned to several CPUs, sharing a CPU
    with another real-time vCPU, or sharing one with the emulator or an I/O thread (an
    emulator or I/O thread without a pin runs on any CPU the guest may use).

    ## Why it matters
    A SCHED_FIFO/RR vCPU that spins in the guest's idle loop or a busy workload never
    yields: whatever else must run on its CPU (QEMU's main loop, an I/O thread, vhost, a
    second vCPU) starves until the kernel's RT throttling steps in, and the guest stalls
    on its own I/O. libvirt's real-time guide pins each vCPU to a dedicated isolated core
    and the emulator threads to CPUs outside that set; nova refuses to start a real-time
    guest whose overhead threads have no CPU of their own (`hw:cpu_realtime_mask` or
    `hw:emulator_threads_policy`, else RealtimeMaskNotFoundOrInvalid).

    ## Example
    ```xml
    <cputune>
      <vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/>
      <vcpusched vcpus='0-1' scheduler='fifo' priority='1'/>
    </cputune>   <!-- no emulatorpin: the emulator shares CPUs 2-3 -->
    ```

    ## Fix
    None automatic: pin each real-time vCPU to its own isolated CPU and `<emulatorpin>`
    and `<iothreadpin>` to housekeeping CPUs (`vmtune plan` places guests so).

    ## Calibration
    Warning: libvirt's real-time guide and nova both document the starvation of what
    shares a CPU with a real-time vCPU, and nova refuses such a guest.
    Versions: none: the starvation is the Linux scheduler's (SCHED_FIFO/RR); libvirt 9.0 applies
    `<vcpusched>` as written without looking at what shares the CPU.

    ## References
    - https://libvirt.org/kbase/kvm-realtime.html
    - nova `doc/source/admin/real-time.rst`, `nova/virt/libvirt/driver.py`
      (RealtimeMaskNotFoundOrInvalid)
    - https://libvirt.org/formatdomain.html#cpu-tuning (`vcpusched`)
    """

    code = "CPU020"
    needs = "cputune"
    name = "realtime-vcpu-shares-cpu"
    severity = Severity.WARNING
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        rt = realtime_vcpus(domain)
        if not rt:
            return
        emulator = domain.emulator_pin or domain.vcpu_cpuset  # libvirt's default for unpinned threads
        problems: list[str] = []
        unpinned = sorted(v for v in rt if _cpus_of(domain, v) is None)
        if unpinned:
            problems.append(f"vCPU(s) {format_cpuset(frozenset(unpinned))} not pinned")
        multi = sorted(v for v in rt if (c := _cpus_of(domain, v)) is not None and len(c) > 1)
        if multi:
            problems.append(f"vCPU(s) {format_cpuset(frozenset(multi))} allowed on several CPUs")
        owners: dict[int, list[int]] = {}
        for vcpu in rt:
            for cpu in _cpus_of(domain, vcpu) or ():
                owners.setdefault(cpu, []).append(vcpu)
        shared = sorted(cpu for cpu, vcpus in owners.items() if len(vcpus) > 1)
        if shared:
            problems.append(f"host CPU(s) {format_cpuset(frozenset(shared))} shared by several real-time vCPUs")
        rt_cpus = frozenset(owners)
        if emulator is None or emulator & rt_cpus:
            where = "every CPU" if emulator is None else format_cpuset(emulator)
            problems.append(f"the emulator threads run on {where}")
        for thread in domain.iothread_ids:
            cpus = domain.iothread_pins.get(thread) or domain.vcpu_cpuset
            if cpus is None or cpus & rt_cpus:
                problems.append(f"I/O thread {thread} runs on {'every CPU' if cpus is None else format_cpuset(cpus)}")
        if problems:
            yield self.finding(domain, next(iter(rt.values())), "real-time vCPUs share CPUs: " + "; ".join(problems)
                               + " (what shares a CPU with a fifo/rr vCPU starves)")


class PmuOnLatencyGuest(Rule):
    """
    ## What it checks
    A real-time guest (`<vcpusched scheduler='fifo'|'rr'>`) whose virtual PMU is not
    switched off (`<features><pmu state='off'/>`). With the parameter `dedicated_guests`
    (the `latency` policy sets it), also every guest whose vCPUs each have a host CPU of
    their own.

    ## Why it matters
    With a vPMU KVM saves, restores and emulates the guest's performance counters around
    VM exits: nova documents that "for real time workloads, the emulation of a vPMU can
    introduce additional latency" (`hw:pmu`), libvirt's real-time guide disables it, and
    KubeVirt turns it off for every `realtime` guest. For other workloads nova notes the
    default (on) is right: `perf` inside the guest needs it.

    ## Example
    ```xml
    <cputune><vcpusched vcpus='0-3' scheduler='fifo' priority='1'/></cputune>
    <features><acpi/><apic/></features>
    ```

    ## Fix
    Adds `<pmu state='off'/>` to `<features>`. Unsafe: the guest loses its performance
    counters (`perf`, some profilers and databases' own metrics).

    ## Calibration
    Info: the latency cost is documented without a figure, and whether the counters
    matter is the guest owner's decision.
    Versions: none: a latency trade-off that does not depend on libvirt's or QEMU's version.

    ## References
    - https://libvirt.org/kbase/kvm-realtime.html
    - nova `doc/source/admin/libvirt-misc.rst` (Performance Monitoring Unit)
    - KubeVirt `pkg/virt-launcher/virtwrap/converter/vcpu/vcpu.go` (realtime: PMU off)
    - https://libvirt.org/formatdomain.html#hypervisor-features (`pmu`)
    """

    code = "CPU021"
    name = "pmu-on-latency-guest"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    params = {"dedicated_guests": False}
    param_docs = {"dedicated_guests": "also report guests whose vCPUs each have a dedicated host CPU"}

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        pmu = domain.feature("pmu")
        if pmu is not None and pmu.get("state") == "off":
            return
        realtime = bool(realtime_vcpus(domain))
        if not realtime and not (ctx.params.get("dedicated_guests") and domain.dedicated_pinning):
            return
        kind = "real-time" if realtime else "dedicated-CPU"
        edit: Edit = ensure(domain.root, path("features", "pmu"), {"state": "off"})
        where = pmu if pmu is not None else domain.features if domain.features is not None else domain.root
        yield self.finding(domain, where,
                           f"{kind} guest keeps its virtual PMU: counter emulation adds latency",
                           Fix("switch the vPMU off", (edit,), FixSafety.UNSAFE))


def _invtsc(domain: Domain) -> etree._Element | None:
    # cpu.find("feature[@name='invtsc']") without lxml's path engine (this runs for most domains)
    cpu = domain.cpu
    if cpu is None:
        return None
    return next((f for f in domain.children(cpu, "feature") if f.get("name") == "invtsc"), None)


def _tsc_frequency_edit(domain: Domain, hz: int) -> Edit:
    return ensure(domain.root, path("clock", step("timer", name="tsc")), {"frequency": str(hz)})


class InvtscWithoutTscFrequency(Rule):
    """
    ## What it checks
    A guest that requires the invariant TSC (`<cpu><feature policy='require'|'force'
    name='invtsc'/>`) without a fixed TSC frequency (`<clock><timer name='tsc'
    frequency='...'/>`).

    ## Why it matters
    QEMU registers a migration blocker for an invariant TSC whose frequency it was not
    given ("State blocked by non-migratable CPU device (invtsc flag)"): the guest cannot be
    live-migrated, and host maintenance means shutting it down. With `tsc-frequency` set it
    migrates to hosts of the same TSC frequency or with TSC scaling. KubeVirt writes the
    host's TSC frequency whenever a guest has invtsc; oVirt writes it with `+invtsc`.

    ## Example
    ```xml
    <cpu mode='host-passthrough'><feature policy='require' name='invtsc'/></cpu>
    ```

    ## Fix
    With host facts that give the host's TSC frequency (`<counter name='tsc'>` in
    `virsh capabilities`): adds `<timer name='tsc' frequency='HZ'/>`. Unsafe: the guest
    then starts only on hosts with that frequency or TSC scaling. Otherwise none.

    ## Calibration
    Info: a migration limit, not a speed cost.
    Versions: QEMU 7.2 (Debian 12) still registers the blocker unless a TSC frequency is set;
    libvirt 9.0 passes `<timer name='tsc' frequency=...>` to it.

    ## References
    - QEMU `target/i386/kvm/kvm.c` `kvm_arch_init_vcpu` (the invtsc migration blocker,
      registered only without a user-set TSC frequency)
    - KubeVirt `pkg/virt-controller/watch/topology/tsc.go` ("VMI with invtsc CPU feature
      must have tsc frequency defined"); oVirt `LibvirtVmXmlBuilder` (`writeCpu`, `writeClock`)
    - https://libvirt.org/formatdomain.html#time-keeping (`timer name='tsc'`)
    """

    code = "CLK008"
    name = "invtsc-without-tsc-frequency"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        feature = _invtsc(domain)
        tsc = domain.timers.get("tsc")
        if feature is None or feature.get("policy", "require") not in INVTSC_ON or \
                (tsc is not None and tsc.get("frequency")):
            return
        hz = ctx.host.tsc_frequency if ctx.host else None
        fix = Fix(f"fix the TSC frequency at {hz} Hz", (_tsc_frequency_edit(domain, hz),), FixSafety.UNSAFE) \
            if hz else None
        yield self.finding(domain, feature, "invariant TSC without a fixed TSC frequency: QEMU blocks live "
                           "migration", fix, note=None if fix else "give --host capabilities with the host's TSC "
                           "counter, or set <timer name='tsc' frequency='HZ'/> yourself")


class InvtscMissingOnDedicatedGuest(Rule):
    """
    ## What it checks
    A Linux guest whose vCPUs each have a host CPU of their own, without the invariant TSC
    (`<cpu><feature policy='require' name='invtsc'/>`).

    ## Why it matters
    Without invtsc the guest keeps kvm-clock as its clocksource. With it, Linux (since
    commit 7539b174 "x86: kvmguest: use TSC clocksource if invariant TSC is exposed")
    prefers the TSC, read without the pvclock indirection (its author, on the KVM list:
    "TSC clock_gettime() vdso is faster"). oVirt writes `+invtsc` with the host's TSC
    frequency, and KubeVirt requires that frequency for any guest with invtsc (see
    CLK008); it blocks live migration unless the frequency is fixed, which is why it is
    not a default.

    ## Example
    ```xml
    <cpu mode='host-passthrough'/>
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    With host facts that give the host's TSC frequency and list invtsc: adds
    `<feature policy='require' name='invtsc'/>` and `<timer name='tsc' frequency='HZ'/>`.
    Unsafe: the guest sees another CPU and clock, and migrates only to hosts of the same
    TSC frequency. Not offered without them, nor for a `<cpu>` that has neither a mode nor
    a model.

    ## Calibration
    Info: the gain is in time-stamp reads, a workload matter, and it costs migration
    freedom.
    Versions: none of libvirt's or QEMU's: both pass `invtsc` through; the gain needs a Linux
    guest carrying commit 7539b174.

    ## References
    - Linux commit 7539b174aef4 ("x86: kvmguest: use TSC clocksource if invariant TSC is
      exposed")
    - oVirt `LibvirtVmXmlBuilder` (`writeCpu`, `writeClock`); KubeVirt
      `pkg/virt-controller/watch/topology/tsc.go`
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology
    """

    code = "CLK009"
    needs = "cputune"
    name = "invtsc-missing-on-dedicated-guest"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    os = "linux"
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        feature = _invtsc(domain)
        if not domain.dedicated_pinning or (feature is not None and feature.get("policy", "require") in INVTSC_ON):
            return
        host = ctx.host
        hz = host.tsc_frequency if host else None
        offered = host is not None and (host.cpu_features is None or "invtsc" in host.cpu_features)
        cpu = domain.cpu
        usable_cpu = cpu is not None and (cpu.get("mode", "custom") != "custom" or domain.cpu_model is not None)
        fix = note = None
        if hz and offered and usable_cpu and cpu is not None:
            edits: list[Edit] = [ensure(cpu, path(step("feature", name="invtsc")), {"policy": "require"})]
            tsc = domain.timers.get("tsc")
            if tsc is None or not tsc.get("frequency"):
                edits.append(_tsc_frequency_edit(domain, hz))
            fix = Fix("require invtsc at a fixed TSC frequency", tuple(edits), FixSafety.UNSAFE)
        elif not usable_cpu:
            note = "no CPU mode or model to add the feature to"
        else:
            note = "give --host capabilities that list invtsc and the host's TSC counter"
        yield self.finding(domain, cpu if cpu is not None else domain.root, "dedicated Linux guest without the "
                           "invariant TSC: it keeps kvm-clock instead of the TSC clocksource", fix, note=note)


RULES: list[Rule] = [RealtimeVcpuSharesCpu(), PmuOnLatencyGuest(), InvtscWithoutTscFrequency(),
                     InvtscMissingOnDedicatedGuest()]
