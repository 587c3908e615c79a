"""Hyper-V enlightenment rules (Windows guests on KVM)."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import uint_or_none
from vmtune.patch.edits import Edit, Remove, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import hyperv_fix_description, hyperv_on, timer

# What virt-install and nova enable for Windows (synic/stimer are CLK002's business).
BASELINE: dict[str, dict[str, str]] = {
    "relaxed": {}, "vapic": {}, "spinlocks": {"retries": "8191"}, "vpindex": {},
    "runtime": {}, "frequencies": {}, "tlbflush": {}, "ipi": {},
}

# feature -> prerequisites QEMU enforces (target/i386/kvm.c kvm_hyperv_properties[].dependencies).
# "hypervclock" is the <timer name='hypervclock'>, QEMU's hv-time.
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "synic": ("vpindex",),
    "stimer": ("synic", "vpindex", "hypervclock"),
    "tlbflush": ("vpindex",),
    "ipi": ("vpindex",),
    "evmcs": ("vapic",),
}
# Sub-features written as children (<stimer state='on'><direct state='on'/></stimer>): what each needs.
SUB_DEPENDENCIES: dict[tuple[str, str], tuple[str, ...]] = {
    ("stimer", "direct"): ("stimer",),
    ("tlbflush", "direct"): ("tlbflush", "vapic"),
    ("tlbflush", "extended"): ("tlbflush",),
}


# Why a host lists few or no Hyper-V features: libvirt asks QEMU, which asks KVM.
HOST_UPGRADE = ("upgrade the host: libvirt lists the enlightenments that QEMU (5.1+) and the host kernel "
                "(KVM_GET_SUPPORTED_HV_CPUID, Linux 5.0+) report; QEMU refuses to start a guest asking for others")


class HypervBaselineMissing(Rule):
    """
    ## What it checks
    A Windows guest on KVM missing any of the Hyper-V enlightenments every management
    stack enables: `relaxed`, `vapic`, `spinlocks` (retries 8191), `vpindex`, `runtime`,
    `frequencies`, `tlbflush`, `ipi`. Features the host's domain capabilities do not list
    are not asked for; when it lists none of the missing ones, the finding says what the
    host lacks and what to upgrade instead.

    ## Why it matters
    Without them Windows runs its own watchdogs, spins on contended locks instead of
    yielding, sends TLB flushes and IPIs as one exit per vCPU, and writes the APIC through
    emulated MMIO. Each missing one adds exits under load; `tlbflush` and `ipi` matter
    most on guests with many vCPUs.

    ## Example
    ```xml
    <features><acpi/><apic/><hyperv><relaxed state='on'/></hyperv></features>
    ```

    ## Fix
    Adds the missing features with `state='on'` in libvirt's order. Safe. A feature set
    `state='off'` explicitly is never flipped, `<hyperv mode='passthrough'>` (which
    enables everything) gains no children, and a feature the host does not offer is not
    added (QEMU would refuse to start the guest). Without the host's domain capabilities
    the fix assumes a host that offers them, and its description says so: kernels built
    without `CONFIG_KVM_HYPERV` (Linux 6.8+) and some nested hosts offer none.

    ## Calibration
    Warning: each missing enlightenment adds documented exits under load for every
    Windows guest on KVM. Safe: it adds what virt-install and nova write, only features
    the host offers, and never flips an explicit value. Info, without a fix, when the
    host offers none of the missing features: the advice is then for the host.
    Versions: libvirt 9.0 and QEMU 7.2 define and start every added feature where the host's
    domain capabilities list it (QEMU 5.1 and later refuse unlisted ones).

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - https://www.qemu.org/docs/master/system/i386/hyperv.html
    - virt-manager `virtinst/domain/features.py`; nova `nova/virt/libvirt/driver.py`
    """

    code = "HV001"
    name = "hyperv-baseline-missing"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.SAFE
    os = "windows"
    enlightened_windows = True
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.hyperv_mode == "passthrough":
            return
        missing = [f for f in BASELINE if f not in domain.hyperv_features]
        if not missing:
            return
        # Never add a feature whose prerequisite the user switched off: QEMU would refuse it.
        blocked = {f for f in missing if any(domain.hyperv_explicitly_off(d) for d in DEPENDENCIES.get(f, ()))}
        supported = [f for f in missing if f not in blocked and (ctx.host is None or ctx.host.supports_hyperv(f))]
        element = domain.hyperv if domain.hyperv is not None else domain.features
        if not supported and not blocked and ctx.host is not None:
            yield self._host_lacks(domain, element, missing, ctx)
            return
        fix = None
        if supported:
            fix = Fix(hyperv_fix_description(f"enable Hyper-V {', '.join(supported)}", ctx.host),
                      tuple(hyperv_on(domain, f, **BASELINE[f]) for f in supported))
        notes = []
        if blocked:
            notes.append(f"{', '.join(sorted(blocked))} not added: a prerequisite is explicitly off")
        unsupported = sorted(set(missing) - set(supported) - blocked)
        if unsupported:
            notes.append(f"host does not offer {', '.join(unsupported)}")
        yield self.finding(domain, element, f"Windows guest lacks Hyper-V {', '.join(missing)}", fix,
                           note="; ".join(notes) or None)


    def _host_lacks(self, domain: Domain, element: etree._Element | None, missing: list[str],
                    ctx: Context) -> Finding:
        """Nothing to change in the domain: the advice is for the host."""
        offered = sorted(ctx.host.hyperv_features or ()) if ctx.host else []
        listed = f"list only {', '.join(offered)}" if offered else "offer no Hyper-V"
        return self.finding(domain, element, f"Windows guest lacks Hyper-V {', '.join(missing)}, which this host "
                            f"cannot offer (its domain capabilities {listed})", severity=Severity.INFO,
                            note=HOST_UPGRADE)


class HypervDependencyBroken(Rule):
    """
    ## What it checks
    Hyper-V features enabled without the features they depend on: `synic` without
    `vpindex`; `stimer` without `synic`, `vpindex` or the `hypervclock` timer; `tlbflush`
    or `ipi` without `vpindex`; `evmcs` without `vapic`; `stimer direct` without `stimer`;
    `tlbflush direct` without `tlbflush` or `vapic`; `tlbflush extended` without `tlbflush`.

    ## Why it matters
    QEMU checks these dependencies when the guest starts and refuses to run it
    ("Hyper-V synthetic timers (hv-stimer) requires Hyper-V clocksources (hv-time)").
    The domain defines fine and fails at the next cold boot.

    ## Example
    ```xml
    <hyperv><stimer state='on'/></hyperv>
    ```

    ## Fix
    Adds the missing prerequisites. Safe. When a prerequisite is explicitly `off`, or the
    host does not offer it, nothing is patched and the finding says why. Without the
    host's domain capabilities the fix's description says it assumes a host that offers
    them (HV001).

    ## Calibration
    Error: QEMU refuses to start the guest. Adding a missing prerequisite changes no
    value the user wrote, so the fix is safe; when one is explicitly off, no fix.
    Versions: QEMU 5.1 and later (7.2 here) enforce the dependencies
    (`kvm_hyperv_properties[].dependencies`) in its KVM code (`target/i386/kvm/kvm.c`):
    KVM guests only, so `type='qemu'` (TCG) guests are not reported or patched.

    ## References
    - https://www.qemu.org/docs/master/system/i386/hyperv.html
    - QEMU commit c686193 "i386/kvm: hv-stimer requires hv-time and hv-synic"
    """

    code = "HV002"
    name = "hyperv-dependency-broken"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def _on(self, domain: Domain, feature: str) -> bool:
        if feature == "hypervclock":
            return bool(domain.timer_present("hypervclock"))
        return domain.hyperv_on(feature)

    def _enabled(self, domain: Domain) -> Iterator[tuple[str, tuple[str, ...]]]:
        """Each enabled feature or sub-feature ('tlbflush direct') with what it depends on."""
        for feature, deps in DEPENDENCIES.items():
            if domain.hyperv_on(feature):
                yield feature, deps
        for (parent, child), deps in SUB_DEPENDENCIES.items():
            switch = domain.hyperv_features.get(parent)
            sub = domain.child(switch.element, child) if switch is not None else None
            if sub is not None and sub.get("state") == "on":
                yield f"{parent} {child}", deps

    def _enable(self, domain: Domain, ctx: Context, dep: str) -> Edit | str:
        """The edit that turns a prerequisite on, or why it must not be patched."""
        if dep == "hypervclock":
            if domain.timer_present("hypervclock") is False:
                return "hypervclock is explicitly off"
            if ctx.host and not ctx.host.offers_hyperv:
                return "host offers no Hyper-V enlightenment (hypervclock)"
            return timer(domain, "hypervclock", present="yes")
        if domain.hyperv_explicitly_off(dep):
            return f"{dep} is explicitly off"
        if ctx.host and not ctx.host.supports_hyperv(dep):
            return f"host does not offer {dep}"
        return hyperv_on(domain, dep)

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.hyperv is None or domain.hyperv_mode == "passthrough":
            return
        broken = {feature: missing for feature, deps in self._enabled(domain)
                  if (missing := [d for d in deps if not self._on(domain, d)])}
        if not broken:
            return
        needs = list(dict.fromkeys(dep for missing in broken.values() for dep in missing))
        message = "; ".join(f"{feature} requires {' and '.join(deps)}" for feature, deps in broken.items())
        outcomes = [self._enable(domain, ctx, dep) for dep in needs]
        blockers = [o for o in outcomes if isinstance(o, str)]
        fix = None if blockers else Fix(hyperv_fix_description(f"enable {', '.join(needs)}", ctx.host),
                                        tuple(o for o in outcomes if not isinstance(o, str)))
        yield self.finding(domain, domain.hyperv, f"QEMU will refuse to start the guest: {message}", fix,
                           note="; ".join(blockers) + ": not patched" if blockers else None)


class HypervSpinlocksRetries(Rule):
    """
    ## What it checks
    `<spinlocks state='on'>` without `retries` or with fewer than 4095 retries.

    ## Why it matters
    libvirt refuses to define such a domain: libvirt 9.0's QEMU driver rejects spinlocks
    without `retries` and below 4095 ("HyperV spinlock retry count must be at least 4095").
    The retry count tells Windows how long to spin before yielding a contended lock to the
    hypervisor; 8191 is what virt-install, nova and Proxmox use.

    ## Example
    ```xml
    <spinlocks state='on' retries='1024'/>
    ```

    ## Fix
    Sets `retries='8191'`. Safe when `retries` is missing (it only adds what libvirt
    requires); unsafe when it raises a value the user wrote.

    ## Calibration
    Error: libvirt refuses the definition, so this domain cannot be defined as written.
    Versions: libvirt 9.0 refuses retries below 4095.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - libvirt `src/conf/domain_conf.c` (`virDomainFeaturesHyperVDefParse`), checked with
      libvirt 9.0's QEMU driver
    """

    code = "HV003"
    name = "hyperv-spinlocks-retries"
    severity = Severity.ERROR
    other_fix_safety = FixSafety.UNSAFE
    fixable = True
    fix_safety = FixSafety.SAFE
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        spin = domain.hyperv_features.get("spinlocks")
        if spin is None or not spin.on:
            return
        retries = spin.element.get("retries")
        count = uint_or_none(retries)
        if count is not None and count >= 4095:
            return
        yield self.finding(domain, spin.element,
                           f"Hyper-V spinlocks retries is {retries or 'unset'}: libvirt refuses the domain "
                           "(it needs >= 4095; use 8191)",
                           Fix("set spinlocks retries=8191", (set_attrs(spin.element, {"retries": "8191"}),),
                               FixSafety.SAFE if retries is None else FixSafety.UNSAFE))


class HypervEvmcsOnAmd(Rule):
    """
    ## What it checks
    `<evmcs state='on'>` on a host whose CPU vendor is AMD (from `--host` capabilities or
    the live connection).

    ## Why it matters
    Enlightened VMCS is an Intel VMX feature. On AMD QEMU cannot provide it and the guest
    does not start; nova dropped evmcs from its defaults after it broke AMD hosts.

    ## Example
    ```xml
    <hyperv><vapic state='on'/><evmcs state='on'/></hyperv>
    ```

    ## Fix
    Removes the `evmcs` element. Unsafe: it removes what the user declared (the guest
    cannot have had it on this host, but the same definition may be meant for Intel hosts).

    ## Calibration
    Error: QEMU refuses to start the guest on this host.
    Versions: QEMU 7.2 refuses hv-evmcs on AMD hosts.

    ## References
    - https://www.qemu.org/docs/master/system/i386/hyperv.html
    - nova `nova/virt/libvirt/driver.py` (evmcs dropped from the defaults after it broke AMD)
    """

    code = "HV004"
    name = "hyperv-evmcs-on-amd"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE
    x86_only = True
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if ctx.host is None or ctx.host.cpu_vendor != "AMD":  # the host first: one test for a whole batch
            return
        evmcs = domain.hyperv_features.get("evmcs")
        if evmcs is None or not evmcs.on:
            return
        yield self.finding(domain, evmcs.element, "evmcs is an Intel-only feature; this host is AMD",
                           Fix("remove evmcs", (Remove(evmcs.element),), FixSafety.UNSAFE))


class HypervReenlightenment(Rule):
    """
    ## What it checks
    `<reenlightenment state='on'>` on a guest whose TSC frequency is not fixed (no
    `<timer name='tsc' frequency='...'/>`).

    ## Why it matters
    Re-enlightenment notifications are for nested Hyper-V after migration to a host with a
    different TSC frequency. QEMU blocks migration of guests that have it unless the TSC
    frequency is set explicitly; nova removed it from its defaults because it broke
    migration.

    ## Example
    ```xml
    <hyperv><reenlightenment state='on'/></hyperv>
    ```

    ## Fix
    Removes the element. Unsafe: a guest running nested Hyper-V may rely on it.

    ## Calibration
    Warning: the migration block is documented by QEMU and applies to this configuration.
    Removing a declared feature is unsafe.
    Versions: QEMU 7.2 blocks migration of hv-reenlightenment without a TSC frequency.

    ## References
    - https://www.qemu.org/docs/master/system/i386/hyperv.html
    """

    code = "HV005"
    name = "hyperv-reenlightenment"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        feature = domain.hyperv_features.get("reenlightenment")
        tsc = domain.timers.get("tsc")
        if tsc is not None and tsc.get("frequency"):
            return  # a fixed TSC frequency: QEMU allows migration
        if feature is not None and feature.on:
            yield self.finding(domain, feature.element, "reenlightenment blocks live migration",
                               Fix("remove reenlightenment", (Remove(feature.element),), FixSafety.UNSAFE))


class HypervPassthrough(Rule):
    """
    ## What it checks
    `<hyperv mode='passthrough'>`.

    ## Why it matters
    Passthrough exposes every enlightenment the host's KVM supports. That is convenient on
    one host, but the guest's view changes with the host's kernel, so migration between
    hosts with different kernels can fail or change guest behaviour.

    ## Example
    ```xml
    <hyperv mode='passthrough'/>
    ```

    ## Fix
    None: list the features you want with `mode='custom'`.

    ## Calibration
    Info: a portability concern, not a speed cost.
    Versions: libvirt 9.0 defines `<hyperv mode='passthrough'>`.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    """

    code = "HV006"
    name = "hyperv-passthrough-mode"
    severity = Severity.INFO
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.hyperv is not None and domain.hyperv_mode == "passthrough":
            yield self.finding(domain, domain.hyperv, "Hyper-V passthrough mode ties the guest to this host's KVM")


class HypervSynicWithoutAvic(Rule):
    """
    ## What it checks
    A guest with Hyper-V `synic` on and no `<avic state='on'/>`, on a host whose domain
    capabilities list `avic` (QEMU's hv-avic). Needs host facts.

    ## Why it matters
    QEMU's Hyper-V documentation: SynIC normally disables the hardware APICv/AVIC for the
    guest and has it use paravirtualised AutoEOI instead, so every interrupt and EOI exits
    again. `hv-avic` lets SynIC and APICv/AVIC work together.

    ## Example
    ```xml
    <hyperv><vpindex state='on'/><synic state='on'/><stimer state='on'/></hyperv>
    ```

    ## Fix
    Adds `<avic state='on'/>`. Unsafe: QEMU's documentation warns it can slow guests on
    hosts without APICv/AVIC, which a capabilities file does not show (`vmtune host` does:
    HOST007).

    ## Calibration
    Info: the gain depends on the host CPU having APICv/AVIC switched on, which the domain's
    view of the host does not tell. KVM guests only: APICv/AVIC is KVM's, and a `type='qemu'`
    (TCG) guest gets no enlightenment added.
    Versions: QEMU 7.2 documents hv-avic/hv-apicv; libvirt 9.0 defines `<avic>`.

    ## References
    - https://www.qemu.org/docs/master/system/i386/hyperv.html (hv-avic)
    - https://libvirt.org/formatdomain.html#hypervisor-features
    """

    code = "HV007"
    name = "hyperv-synic-without-avic"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    needs_host = True
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        # The host first: without avic in its domain capabilities (or without them) no domain of
        # the batch needs its Hyper-V features read.
        if ctx.host is None or not ctx.host.hyperv_features or "avic" not in ctx.host.hyperv_features:
            return
        if not domain.hyperv_on("synic") or domain.hyperv_mode == "passthrough" or "avic" in domain.hyperv_features:
            return
        yield self.finding(domain, domain.hyperv_features["synic"].element, "SynIC without hv-avic turns off "
                           "APICv/AVIC for the guest", Fix("enable Hyper-V avic", (hyperv_on(domain, "avic"),),
                                                           FixSafety.UNSAFE))


# Windows releases that turn on virtualization-based security (VBS) by default, i.e. run
# their own Hyper-V nested on KVM: Windows 11 and Server 2022 onwards (libosinfo ids).
NESTED_BY_DEFAULT = frozenset({"11", "2k22", "2k25"})


class HypervNestedEnlightenmentsMissing(Rule):
    """
    ## What it checks
    A Windows 11 or Server 2022/2025 guest on an Intel host without `<evmcs state='on'/>`
    (with `vapic` on) or with `stimer` on but not in direct mode
    (`<stimer state='on'><direct state='on'/></stimer>`), where the host's domain
    capabilities list `evmcs` or `stimer`. Features the user switched off are left alone.
    Needs host facts (the CPU vendor and the domain capabilities).

    ## Why it matters
    These Windows releases enable virtualization-based security by default, so they run
    their own Hyper-V beneath the guest OS: a nested hypervisor. QEMU's Hyper-V
    documentation: nested Hyper-V "can only use synthetic timers in direct mode", and
    `hv-evmcs` makes L2 exits faster and "can (and should) be enabled on Intel CPUs only";
    enabling it for regular Windows guests "should not have any negative effects".
    Direct-mode timers are also cheaper for KVM: 300-400 cycles per expiry instead of at
    least 1500 (Linux commit 8644f771 "x86/kvm/hyper-v: direct mode for synthetic
    timers"). virt-install adds evmcs on Intel hosts and Proxmox adds it to Windows
    11/2022/2025 guests on Intel (`Machine.pm`, "mitigate issues with VBS"); virt-install,
    oVirt (4.6+) and KubeVirt's Windows preferences write direct-mode timers.

    ## Example
    ```xml
    <hyperv><vapic state='on'/><vpindex state='on'/><synic state='on'/><stimer state='on'/></hyperv>
    ```

    ## Fix
    Adds `<evmcs state='on'/>` and `<direct state='on'/>` under `<stimer>`, as far as the
    host lists them. Unsafe: both help only a guest that runs VBS, WSL2 or Hyper-V, and
    QEMU notes that evmcs turns off some VMX features (posted interrupts) for the nested
    guests, so it is worth measuring there.

    ## Calibration
    Info: no figure for a given guest; the benefit depends on VBS being on.
    Versions: no libvirt or QEMU version is assumed: the fix adds only what this host's domain
    capabilities list.

    ## References
    - https://www.qemu.org/docs/master/system/i386/hyperv.html (hv-evmcs, hv-stimer-direct,
      Recommendations)
    - Linux commit 8644f771e07c ("x86/kvm/hyper-v: direct mode for synthetic timers")
    - virt-manager `virtinst/domain/features.py`; Proxmox `qemu-server` `PVE/QemuServer/Machine.pm`
    """

    code = "HV008"
    name = "hyperv-nested-enlightenments-missing"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    os = "windows"
    enlightened_windows = True
    hypervisors = frozenset({"kvm"})
    x86_only = True
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        if host is None or host.cpu_vendor != "Intel" or not host.hyperv_features or domain.hyperv is None \
                or domain.hyperv_mode == "passthrough" or domain.windows_version not in NESTED_BY_DEFAULT:
            return
        missing: list[str] = []
        edits: list[Edit] = []
        if "evmcs" in host.hyperv_features and "evmcs" not in domain.hyperv_features \
                and domain.hyperv_on("vapic"):
            missing.append("evmcs")
            edits.append(hyperv_on(domain, "evmcs"))
        stimer = domain.hyperv_features.get("stimer")
        direct = stimer.element.find("direct") if stimer is not None else None
        if "stimer" in host.hyperv_features and stimer is not None and stimer.on and direct is None:
            missing.append("stimer direct mode")
            edits.append(ensure(stimer.element, path("direct"), {"state": "on"}))
        if missing:
            yield self.finding(domain, domain.hyperv, f"Windows {domain.windows_version} (nested Hyper-V for VBS) "
                               f"on Intel without {' and '.join(missing)}",
                               Fix(f"enable {', '.join(missing)}", tuple(edits), FixSafety.UNSAFE))


RULES: list[Rule] = [HypervBaselineMissing(), HypervDependencyBroken(), HypervSpinlocksRetries(),
                     HypervEvmcsOnAmd(), HypervReenlightenment(), HypervPassthrough(),
                     HypervSynicWithoutAvic(), HypervNestedEnlightenmentsMissing()]
