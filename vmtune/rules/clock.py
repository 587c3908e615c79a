"""Clock and timer rules."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT, hyperv_fix_description, hyperv_on, timer
from vmtune.rules.hyperv import HOST_UPGRADE

REF_FORMATDOMAIN_TIME = "https://libvirt.org/formatdomain.html#time-keeping"
REF_QEMU_HYPERV = "https://www.qemu.org/docs/master/system/i386/hyperv.html"


class WindowsHypervclockMissing(Rule):
    """
    ## What it checks
    A Windows guest on KVM whose `<clock>` has no `hypervclock` timer.

    ## Why it matters
    Without the Hyper-V reference TSC page Windows reads time through emulated devices
    (ACPI PM timer, HPET), which exits to QEMU on every read. The synthetic timers that cure
    idle CPU burn also depend on it.

    ## Example
    ```xml
    <clock offset='localtime'>
      <timer name='rtc' tickpolicy='catchup'/>
    </clock>
    ```

    ## Fix
    Adds `<timer name='hypervclock' present='yes'/>`. Safe: virt-install, nova and
    Proxmox all set it for Windows. Without the host's domain capabilities the fix's
    description says it assumes a host that offers Hyper-V (HV001).

    ## Calibration
    Warning: without the reference TSC page Windows reads its clock through exiting
    devices, a documented cost for every Windows guest on KVM. Safe: it adds what virt-
    install, nova and Proxmox write. Info, without a fix, when the host's domain
    capabilities say Hyper-V is unsupported: the advice is for the host.
    Versions: libvirt 9.0 and QEMU 7.2 define and start the added `hypervclock` (hv-time).

    ## References
    - https://libvirt.org/formatdomain.html#time-keeping
    - virt-manager `virtinst/domain/clock.py`
    """

    code = "CLK001"
    name = "windows-hypervclock-missing"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.SAFE
    os = "windows"
    enlightened_windows = True
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        present = domain.timer_present("hypervclock")
        if present:
            return
        element = domain.timers.get("hypervclock", domain.clock)
        if present is False:
            yield self.finding(domain, element, "hypervclock timer is explicitly disabled for a Windows guest",
                               note="explicit present='no' is left as written")
            return
        if ctx.host is not None and not ctx.host.offers_hyperv:
            yield self.finding(domain, element, "Windows guest has no hypervclock timer, which this host cannot "
                               "offer (its domain capabilities say Hyper-V is unsupported)",
                               severity=Severity.INFO, note=HOST_UPGRADE)
            return
        yield self.finding(domain, element, "Windows guest has no hypervclock timer",
                           Fix(hyperv_fix_description("add hypervclock timer", ctx.host),
                               (timer(domain, "hypervclock", present="yes"),)))


class WindowsSyntheticTimersMissing(Rule):
    """
    ## What it checks
    A Windows guest on KVM without Hyper-V synthetic timers (`stimer`), with HPET disabled
    (the measured incident) or on (where Windows falls back to it).

    ## Why it matters
    This is the configuration Debian 12's `virt-install --osinfo win10` writes on hosts
    without synthetic-timer support: `hpet present='no'`, `hypervclock` on, no `stimer`.
    Windows then drives its clock events through the RTC and the local APIC timer: an idle
    Windows 10 burned 130% host CPU, mostly `sys`, with a storm of IO_INSTRUCTION and MSR
    exits in `perf kvm stat`. Enabling `synic`+`stimer` (with `vpindex`) brought it to
    about 7% (another report: 30-40% to 1-3%).

    ## Example
    ```xml
    <hyperv><relaxed state='on'/><vapic state='on'/></hyperv>
    <clock offset='localtime'>
      <timer name='hpet' present='no'/>
      <timer name='hypervclock' present='yes'/>
    </clock>
    ```

    ## Fix
    Adds `vpindex`, `synic` and `stimer` to `<hyperv>` (and `hypervclock`, which `stimer`
    needs). Safe. When the host's domain capabilities do not list those features, QEMU
    would refuse to start the guest, so the fix is HPET on instead; that changes an
    explicit value and is unsafe. Without them the fix's description says it assumes a
    host that offers Hyper-V (HV001).

    ## Calibration
    Warning with HPET off: the idle CPU burn was measured for exactly this configuration
    (130% to about 7%; another report 30-40% to 1-3%). Warning with HPET on too: QEMU's
    Hyper-V documentation says that without `hv-stimer` Windows falls back to the HPET and
    RTC "extensively", with "significant CPU consumption, even when virtual CPU is idle".
    Info, without a fix, with HPET on and `stimer`, `synic` or `vpindex` written `state='off'`:
    the configuration carries the remedy itself (the HPET is there as Windows' fallback
    clock, the documented cure where the host lacks the synthetic timers), and the note
    says the value was written explicitly. Info, without a fix, when the
    host cannot offer the timers (its domain capabilities say Hyper-V is unsupported) or
    `<hyperv mode='passthrough'>` is written. Adding the synthetic timers changes no value
    the user wrote, so that fix is safe (libvirt 9.0 defines it; QEMU since 5.1 checks the
    hv-stimer dependencies the fix adds); the HPET fallback changes an explicit value and
    is unsafe. nova writes this configuration for every
    `os_type=windows` image (synic without stimer, HPET off), KubeVirt's `vmi-windows`
    example and oVirt's Windows guests before compatibility 4.4 too; the OS is inferred
    from their Hyper-V enlightenments when they carry no libosinfo metadata.

    ## References
    - https://www.qemu.org/docs/master/system/i386/hyperv.html ("hv-stimer")
    - QEMU commit c686193 "hv-stimer requires hv-time and hv-synic"
    - nova `nova/virt/libvirt/driver.py` `_set_features`, `_set_kvm_timers`
    - An operator's report of an idle Windows 10 guest on KVM: `qemu-system-x86` at 146%
      host CPU in `top`, 130% in total, about 7% with `synic`+`stimer`
    """

    code = "CLK002"
    name = "windows-synthetic-timers-missing"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    other_fix_safety = FixSafety.UNSAFE
    fixable = True
    fix_safety = FixSafety.SAFE
    os = "windows"
    enlightened_windows = True
    hypervisors = frozenset({"kvm"})
    x86_only = True

    NEEDED = ("vpindex", "synic", "stimer")

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.hyperv_on("stimer"):
            return
        if domain.timer_present("hpet") is not False:
            yield from self._hpet_on(domain, ctx)
            return
        hpet = domain.timers["hpet"]
        message = "Windows guest has HPET off and no Hyper-V synthetic timers (stimer): idle host CPU burn"
        blocked = [f for f in self.NEEDED if domain.hyperv_explicitly_off(f)]
        unsupported = [f for f in self.NEEDED if ctx.host and not ctx.host.supports_hyperv(f)]
        hpet_on = Fix("enable HPET (host cannot offer synthetic timers)",
                      (timer(domain, "hpet", present="yes"),), FixSafety.UNSAFE)
        if domain.hyperv_mode == "passthrough":
            yield self.finding(domain, hpet, message, hpet_on,
                               note="<hyperv mode='passthrough'> gets no children; HPET on instead")
        elif blocked:
            yield self.finding(domain, hpet, message, hpet_on,
                               note=f"{', '.join(blocked)} explicitly off; not flipped, HPET on instead")
        elif unsupported:
            yield self.finding(domain, hpet, message, hpet_on,
                               note=f"host does not offer Hyper-V {', '.join(unsupported)}; HPET on instead")
        else:
            yield self.finding(domain, hpet, message, self._stimer_fix(domain, ctx))

    def _stimer_fix(self, domain: Domain, ctx: Context) -> Fix:
        edits = tuple(hyperv_on(domain, f) for f in self.NEEDED)
        if not domain.timer_present("hypervclock"):
            edits += (timer(domain, "hypervclock", present="yes"),)
        return Fix(hyperv_fix_description("enable vpindex, synic and stimer", ctx.host), edits)

    def _hpet_on(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        """QEMU's Hyper-V doc: without stimer Windows uses the HPET and RTC extensively, with
        significant CPU consumption even when idle: a documented cost, so a warning."""
        if domain.hyperv_mode == "passthrough" or (ctx.host is not None and not ctx.host.offers_hyperv):
            return
        element = domain.timers.get("hpet", domain.clock if domain.clock is not None else domain.root)
        message = ("Windows guest without Hyper-V synthetic timers (stimer) drives its clock events through the "
                   "HPET and RTC: idle host CPU")
        chosen = [f for f in self.NEEDED if domain.hyperv_explicitly_off(f)]
        if chosen:  # the user wrote this choice (HPET on, stimer off): respected, its cost said
            yield self.finding(domain, element, message, None, severity=Severity.INFO,
                               note=f"{', '.join(chosen)} {EXPLICIT}; the HPET is on as the fallback clock")
            return
        possible = not any(ctx.host and not ctx.host.supports_hyperv(f) for f in self.NEEDED)
        yield self.finding(domain, element, message, self._stimer_fix(domain, ctx) if possible else None,
                           note=None if possible else "no fix: the host does not offer a synthetic-timer prerequisite")


class HpetEnabled(Rule):
    """
    ## What it checks
    An x86 KVM Linux or Windows guest that exposes an HPET (listed with `present='yes'` or
    not listed, so QEMU's default applies). On Windows only when synthetic timers are on.
    Other guests (FreeBSD, older systems) are not judged: without kvmclock the HPET may be
    their best clock source.

    ## Why it matters
    Every HPET access is an exit to QEMU's userspace emulation. Linux guests use kvmclock
    and Windows guests with `stimer` use Hyper-V timers, so the HPET only costs when
    something in the guest still reads it. virt-install, KubeVirt and Proxmox disable it.

    ## Example
    ```xml
    <clock offset='utc'/>
    ```

    ## Fix
    Adds `<timer name='hpet' present='no'/>`, or changes an explicit `present='yes'`.
    Unsafe: the HPET disappears from the guest's ACPI tables, which changes guest-visible
    hardware. None for a Linux guest whose kvmclock is off: the HPET may then be its clock
    source, and without it the guest falls back to the ACPI PM timer, which exits on every
    read too; kvmclock comes back first (CLK007).

    ## Calibration
    Warning for Linux guests: idle CPU use measured at about 9% with the HPET and 0.6%
    without it on kvm-clock Linux guests (systemd/mkosi PR #3811, the same change in
    systemd #38147; another report 7-8% of a core), Proxmox turned the HPET off for Linux
    guests on machine types from 10.1 on after a QEMU HPET change and upstream advice
    (qemu-server commit 3a4e0144), and virt-install drops it as "unneeded and has a
    performance penalty". vmtune's own effect run saw no difference, but it ran under TCG,
    where every timer is emulated anyway (docs/effects.md). Info for Windows guests with
    synthetic timers, where no cost was measured. Removing a device the guest sees is
    unsafe; libvirt 9.0 defines `present='no'` on any x86 guest.

    ## References
    - https://libvirt.org/formatdomain.html#time-keeping
    - virt-manager `virtinst/domain/clock.py`
    - https://github.com/systemd/mkosi/pull/3811; Proxmox qemu-server
      `src/PVE/QemuServer/Cfg2Cmd/Timer.pm` (commit 3a4e0144)
    """

    code = "CLK003"
    name = "hpet-enabled"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True
    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        present = domain.timer_present("hpet")
        if present is False or domain.os_family not in ("linux", "windows"):
            return
        if domain.is_windows and not domain.hyperv_on("stimer"):
            return  # CLK002's territory: HPET is Windows' fallback timer
        # Without kvmclock a Linux guest may be keeping time with the HPET: removing it leaves the
        # ACPI PM timer, which exits on every read too. kvmclock comes back first (CLK007).
        kvmclock_off = domain.is_linux and domain.timer_present("kvmclock") is False
        yield self.finding(
            domain, domain.timers.get("hpet", domain.clock if domain.clock is not None else domain.root),
            "HPET is exposed to the guest" + (" explicitly" if present else " by default"),
            None if kvmclock_off else Fix("disable HPET", (timer(domain, "hpet", present="no"),), FixSafety.UNSAFE),
            note="no fix while kvmclock is off: the HPET may be the guest's clock source; turn kvmclock on first "
                 "(CLK007)" if kvmclock_off else None,
            severity=Severity.WARNING if domain.is_linux else Severity.INFO,
        )


class _TickPolicy(Rule):
    timer_name: str
    policy: str
    qemu_default: str  # QEMU's lost_tick_policy for the device when libvirt passes none
    kvmclock_keeps_linux_time = False  # Linux guests with kvmclock do not count this timer's ticks
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if self.kvmclock_keeps_linux_time and domain.is_linux and domain.timer_present("kvmclock") is not False:
            return
        element = domain.timers.get(self.timer_name)
        current = element.get("tickpolicy") if element is not None else None
        if current == self.policy or (element is not None and element.get("present") == "no"):
            return
        if current is not None:
            yield self.finding(domain, element, f"{self.timer_name} timer tickpolicy is '{current}', "
                               f"not '{self.policy}'", note="explicit tickpolicy left as written")
            return
        if self.qemu_default == self.policy:
            return  # no tickpolicy gives the same behaviour
        yield self.finding(
            domain, element if element is not None else (domain.clock if domain.clock is not None else domain.root),
            f"{self.timer_name} timer has no tickpolicy='{self.policy}'",
            Fix(f"set {self.timer_name} tickpolicy={self.policy}",
                (timer(domain, self.timer_name, tickpolicy=self.policy),)),
        )


class RtcTickpolicy(_TickPolicy):
    """
    ## What it checks
    An x86 KVM guest whose `rtc` timer has no `tickpolicy`, unless it is a Linux guest that
    keeps time with kvmclock.

    ## Why it matters
    With `catchup` (QEMU `-rtc driftfix=slew`), RTC interrupts missed while the vCPU was
    descheduled are delivered faster afterwards; QEMU's default (`discard`, shown by
    `qemu-system-x86_64 -device mc146818rtc,help`) drops them. Guests that count RTC
    interrupts for time (Windows) drift and resynchronise in bursts. virt-install and nova
    set `catchup`. Other explicit values are reported only.

    ## Example
    ```xml
    <clock offset='utc'/>
    ```

    ## Fix
    Adds `<timer name='rtc' tickpolicy='catchup'/>` (and `<clock offset='utc'>` when the
    domain has no clock, libvirt's default offset, which its schema requires). Safe: it
    adds what virt-install writes and changes no value the user wrote.

    ## Calibration
    Info: the drift is a correctness nuisance on busy hosts, not a measured speed cost.
    Linux guests keep time with kvmclock, so they are not reported unless kvmclock is off.
    Applied only when asked (`--select CLK004`).
    Versions: QEMU 7.2's mc146818rtc defaults to `lost_tick_policy=discard`; libvirt 9.0
    defines the added timer.

    ## References
    - https://libvirt.org/formatdomain.html#time-keeping
    """

    code = "CLK004"
    name = "rtc-tickpolicy-missing"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.SAFE
    timer_name = "rtc"
    policy = "catchup"
    qemu_default = "discard"
    kvmclock_keeps_linux_time = True
    reads_os = True


class PitTickpolicy(_TickPolicy):
    """
    ## What it checks
    An x86 KVM guest whose `pit` timer has an explicit `tickpolicy` other than `delay`.
    A `pit` timer without `tickpolicy` is not reported.

    ## Why it matters
    `delay` keeps PIT ticks at their normal rate after a descheduled period instead of
    replaying them, which is what guests that use the PIT expect. QEMU's in-kernel PIT
    (`kvm-pit`) already defaults to `delay` (`qemu-system-x86_64 -device kvm-pit,help`
    on QEMU 7.2 shows `lost_tick_policy ... default: "delay"`), so virt-install's explicit
    `tickpolicy='delay'` changes nothing and its absence is not a finding.

    ## Example
    ```xml
    <clock offset='utc'><timer name='pit' tickpolicy='discard'/></clock>
    ```

    ## Fix
    None: an explicit tickpolicy is the user's choice and is left as written (setting a
    missing one to `delay` would be a no-op).

    ## Calibration
    Info: no measured cost; it points out an explicit policy different from what every
    management stack writes.
    Versions: QEMU 7.2's kvm-pit defaults to `delay`, so no version changes the verdict.

    ## References
    - https://libvirt.org/formatdomain.html#time-keeping
    - QEMU `hw/i386/kvm/i8254.c` (`lost_tick_policy` default)
    """

    code = "CLK005"
    name = "pit-tickpolicy-missing"
    severity = Severity.INFO
    timer_name = "pit"
    policy = "delay"
    qemu_default = "delay"


class WindowsClockUtc(Rule):
    """
    ## What it checks
    A Windows guest whose `<clock offset='utc'>`.

    ## Why it matters
    Windows keeps the RTC in local time; with a UTC offset its clock is off by the time
    zone until a time sync corrects it, and corrections cause time jumps. Not a speed issue,
    but the usual companion of timer trouble.

    ## Example
    ```xml
    <clock offset='utc'/>
    ```

    ## Fix
    None: changing the offset shifts the guest's wall clock. Set `offset='localtime'` (or
    the RealTimeIsUniversal registry key in the guest) yourself.

    ## Calibration
    Info: not a speed cost; the wall clock is the user's decision.
    Versions: none matter; Windows has kept the RTC in local time in every release (Microsoft
    KB 2687252, cited by nova).

    ## References
    - https://libvirt.org/formatdomain.html#time-keeping
    """

    code = "CLK006"
    name = "windows-clock-utc"
    severity = Severity.INFO
    os = "windows"

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.clock is not None and domain.clock.get("offset") == "utc":
            yield self.finding(domain, domain.clock, "Windows guest clock offset is 'utc'",
                               note="advice only: changing it shifts the guest's wall clock")


class LinuxParavirtClockOff(Rule):
    """
    ## What it checks
    A Linux guest on KVM with `<timer name='kvmclock' present='no'/>`, or with
    `<kvm><hidden state='on'/>`, which hides KVM from the guest altogether.

    ## Why it matters
    Without kvmclock Linux keeps time with the TSC when it trusts it, else with the HPET or
    ACPI PM timer, and each read of those exits to QEMU, which emulates them: every
    `clock_gettime()` becomes a VM exit. A guest trusts its TSC when the CPU model gives it
    the invariant-TSC flag (`invtsc`); without it the TSC clocksource must be verified
    against the HPET or ACPI PM timer (`CLOCK_SOURCE_MUST_VERIFY` in `arch/x86/kernel/tsc.c`),
    and a preempted vCPU makes the watchdog mark it unstable, leaving the emulated timers.
    QEMU hides `invtsc` unless the CPU is not migratable, so most guests lack it. Hiding KVM goes
    further: the guest also loses steal time, paravirtual EOI, TLB flush and spinlocks, and
    its scheduler no longer knows when a vCPU was preempted. `hidden` exists to get
    vendor GPU drivers to load; a guest without such a device gains nothing from it.

    ## Example
    ```xml
    <clock offset='utc'><timer name='kvmclock' present='no'/></clock>
    <features><kvm><hidden state='on'/></kvm></features>
    ```

    ## Fix
    None: both are explicit values, often set on purpose (GPU passthrough, a clocksource
    experiment); remove them yourself.

    ## Calibration
    Warning for `hidden`: the loss of every paravirtual feature is a documented cost for
    any Linux guest. Warning for kvmclock off on a CPU without `invtsc`: the guest's clock
    is then an emulated timer, or a TSC it distrusts, and each read of an emulated timer is
    an exit (Linux made kvmclock step aside only for an invariant TSC, commit 7539b174
    "x86: kvmguest: use TSC clocksource if invariant TSC is exposed"). Info when the CPU
    requires `invtsc` or is `host-passthrough` with `migratable='off'` (which passes the
    host's `invtsc`): Linux then keeps time with the TSC without exits.
    Versions: libvirt 9.0 passes `kvm=off` / `-kvmclock` to QEMU 7.2 as written; the
    paravirtual features lost are those of Linux's KVM guest support (4.x and later);
    QEMU 7.2 filters `invtsc` out of migratable CPUs.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - Linux `Documentation/virt/kvm/x86/cpuid.rst` (KVM paravirtual features)
    """

    code = "CLK007"
    name = "linux-paravirt-clock-off"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    os = "linux"
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        hidden = domain.kvm_features.get("hidden")
        if hidden is not None and hidden.on:
            yield self.finding(domain, hidden.element, "KVM is hidden from a Linux guest: no kvmclock, steal time "
                               "or other paravirtual feature")
        if domain.timer_present("kvmclock") is False:
            if _invariant_tsc(domain):
                yield self.finding(domain, domain.timers["kvmclock"], "kvmclock is off for a Linux guest",
                                   note="the CPU gives the guest an invariant TSC, which Linux reads without exits",
                                   severity=Severity.INFO)
            else:
                yield self.finding(domain, domain.timers["kvmclock"], "kvmclock is off for a Linux guest without "
                                   "an invariant TSC: its clock reads exit to QEMU's emulated timers")


def _invariant_tsc(domain: Domain) -> bool:
    """Whether the guest CPU has the invariant-TSC flag: `<feature policy='require'|'force'
    name='invtsc'/>`, or host-passthrough with migratable='off' (QEMU then passes the host's)."""
    cpu = domain.cpu
    if cpu is None:
        return False
    if domain.cpu_mode == "host-passthrough" and cpu.get("migratable") == "off":
        return True
    return any(f.get("name") == "invtsc" and f.get("policy") in ("require", "force")
               for f in domain.children(cpu, "feature"))


RULES: list[Rule] = [WindowsHypervclockMissing(), WindowsSyntheticTimersMissing(), HpetEnabled(),
                     RtcTickpolicy(), PitTickpolicy(), WindowsClockUtc(), LinuxParavirtClockOff()]
