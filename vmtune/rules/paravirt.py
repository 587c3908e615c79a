"""Paravirtual promises and CPU modes the hypervisor must keep: KVM hints and spinlocks, and
what TCG (pure emulation) can offer."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.patch.edits import set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT


def _shares_cpus(domain: Domain) -> bool:
    """Whether the definition lets some vCPU run where another thread may: not every vCPU has
    a host CPU of its own. (Other domains on the same CPUs are CPU013's, with --host.)"""
    return not domain.dedicated_pinning


class PvSpinlocksOff(Rule):
    """
    ## What it checks
    `<features><pvspinlock state='off'/>` on a KVM guest that is not Windows, with several
    online vCPUs that do not each have a host CPU of their own.

    ## Why it matters
    Paravirtual spinlocks (KVM_FEATURE_PV_UNHALT) let a Linux guest's lock waiters halt and
    be kicked by the holder instead of spinning. When a vCPU holding a lock is preempted on
    a shared host CPU, the waiters on the other vCPUs spin on it for the rest of their time
    slice, burning the CPU time the holder needs to release it (lock-holder preemption).
    With `state='off'` the guest loses the paravirtual path; Linux then falls back to a
    test-and-set lock so that at least the queue does not stall behind a preempted waiter
    (`arch/x86/kernel/kvm.c`, `kvm_spinlock_init`). Windows does not use this feature.

    ## Example
    ```xml
    <vcpu>8</vcpu>
    <features><acpi/><apic/><pvspinlock state='off'/></features>
    ```

    ## Fix
    Sets `state='on'`. Unsafe: it changes a value the user wrote, and the guest sees a new
    CPUID feature at its next boot.

    ## Calibration
    Warning: on vCPUs that share host CPUs preemption is the normal case, and the spinning
    it causes is the cost the feature exists to remove; switching it off brings the guest
    nothing there. The value is written explicitly, so the fix is unsafe and the finding
    says to suppress it with its reason if deliberate. Guests whose vCPUs each have a host
    CPU of their own are not reported (nova and KubeVirt then prefer native spinlocks:
    KVM_HINTS_REALTIME).
    Versions: libvirt 9.0 writes `kvm-pv-unhalt=off` for `state='off'`.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features (`pvspinlock`)
    - Linux `Documentation/virt/kvm/x86/cpuid.rst` (KVM_FEATURE_PV_UNHALT) and
      `arch/x86/kernel/kvm.c` (`kvm_spinlock_init`)
    """

    code = "CPU023"

    since = "0.2.0"
    name = "pv-spinlocks-off"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True
    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        switch = domain.feature("pvspinlock")
        if switch is None or switch.get("state") != "off" or domain.is_windows:
            return
        if len(domain.online_vcpu_ids) < 2 or not _shares_cpus(domain):
            return
        yield self.finding(domain, switch, "paravirtual spinlocks off on vCPUs that share host CPUs: waiters spin "
                           "on a preempted lock holder", Fix("set pvspinlock on", (set_attrs(switch, {"state": "on"}),),
                                                              FixSafety.UNSAFE),
                           note=EXPLICIT)


class HintDedicatedOnSharedVcpus(Rule):
    """
    ## What it checks
    `<features><kvm><hint-dedicated state='on'/>` on a KVM guest whose vCPUs do not each have
    a host CPU of their own: some vCPU is unpinned, pinned to several host CPUs, or pinned to
    a host CPU another vCPU of the guest shares.

    ## Why it matters
    The hint sets KVM_HINTS_REALTIME, which promises the guest that its "vCPUs are never
    preempted for an unlimited time" (Linux `Documentation/virt/kvm/x86/cpuid.rst`). A
    Linux guest that reads it switches off its defences against preemption: paravirtual
    spinlocks (native queued spinlocks instead, which stall the whole queue behind a
    preempted waiter), paravirtual TLB flushes and yields (IPIs wait for preempted vCPUs),
    and it lets the haltpoll cpuidle driver poll on CPUs other threads need. On vCPUs that
    share host CPUs the promise is false, and each of those paths costs.

    ## Example
    ```xml
    <vcpu>4</vcpu>   <!-- no <vcpupin> -->
    <features><kvm><hint-dedicated state='on'/></kvm></features>
    ```

    ## Fix
    Sets `state='off'`. Unsafe: it changes a value the user wrote; pin each vCPU to a host
    CPU of its own instead where the guest is meant to be dedicated.

    ## Calibration
    Warning: the kernel documents the hint as a promise that this definition cannot keep,
    and the guest disables its preemption handling on the strength of it. Not reported
    when every vCPU is pinned to a host CPU of its own (CPU013 judges other domains on the
    same CPUs, with the host's inventory). Versions: Linux guests read the hint since Linux
    4.17 (KVM_HINTS_DEDICATED, later renamed KVM_HINTS_REALTIME); libvirt 9.0 passes
    `kvm-hint-dedicated=on` to QEMU.

    ## References
    - Linux `Documentation/virt/kvm/x86/cpuid.rst` (KVM_HINTS_REALTIME) and
      `arch/x86/kernel/kvm.c` (`kvm_spinlock_init`, `pv_tlb_flush_supported`,
      `pv_sched_yield_supported`)
    - https://libvirt.org/formatdomain.html#hypervisor-features (`hint-dedicated`)
    """

    code = "CPU024"

    since = "0.2.0"
    name = "hint-dedicated-on-shared-vcpus"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        hint = domain.kvm_features.get("hint-dedicated")
        if hint is None or not hint.on or not _shares_cpus(domain):
            return
        yield self.finding(domain, hint.element, "kvm hint-dedicated promises vCPUs that are never preempted, but "
                           "they share host CPUs", Fix("set kvm hint-dedicated off",
                                                       (set_attrs(hint.element, {"state": "off"}),), FixSafety.UNSAFE))


class HostPassthroughUnderTcg(Rule):
    """
    ## What it checks
    `<domain type='qemu'>` (TCG, pure emulation) with `<cpu mode='host-passthrough'>`.

    ## Why it matters
    Passing the host CPU through needs a hardware accelerator: libvirt 9.0 defines such a
    domain but refuses to start it ("CPU mode 'host-passthrough' for x86_64 qemu domain on
    x86_64 host is not supported by hypervisor"), and its domain capabilities for
    `virttype='qemu'` say `host-passthrough supported='no'`. It is usually a KVM guest copied
    to a host or test environment without KVM. `host-model` and `maximum` start under TCG.

    ## Example
    ```xml
    <domain type='qemu'>
      <cpu mode='host-passthrough' check='none' migratable='on'/>
    ```

    ## Fix
    Sets `mode='maximum'` (every feature TCG can emulate: the nearest to the host CPU).
    Unsafe: it changes a value the user wrote; `type='kvm'` is the cure where the host has
    KVM.

    ## Calibration
    Error: the guest does not start, verified with libvirt 9.0 and QEMU 7.2's embedded
    driver (`tests/test_embed_start.py` starts the fixed definition).

    ## References
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology (`host-passthrough`,
      `maximum`)
    - libvirt `src/qemu/qemu_validate.c` (the CPU mode check against domain capabilities)
    """

    code = "CPU025"

    since = "0.2.0"
    name = "host-passthrough-under-tcg"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.cpu is None or domain.cpu_mode != "host-passthrough":
            return
        yield self.finding(domain, domain.cpu, "host-passthrough CPU on a TCG guest (type='qemu'): libvirt refuses "
                           "to start it", Fix("CPU mode maximum", (set_attrs(domain.cpu, {"mode": "maximum"}),),
                                              FixSafety.UNSAFE))


class KvmParavirtFeaturesOff(Rule):
    """
    ## What it checks
    KVM paravirtual features a Linux guest uses, switched off: `<features><apic eoi='off'/>`
    (paravirtual end-of-interrupt) or `<features><kvm><pv-ipi state='off'/>` (paravirtual
    multicast IPIs), on a KVM guest that is not Windows.

    ## Why it matters
    With PV EOI a Linux guest acknowledges most interrupts by writing a flag in shared memory
    instead of the APIC's EOI register, which exits to the host (KVM's MSR_KVM_PV_EOI_EN;
    QEMU enables kvm-pv-eoi on KVM by default). With PV IPI one hypercall sends an IPI to
    many vCPUs; without it every destination vCPU costs a write to the APIC's ICR, an exit
    each (KVM_FEATURE_PV_SEND_IPI). Both costs grow with the interrupt and IPI rate: network,
    storage and TLB-shootdown heavy guests pay most. Windows uses Hyper-V's equivalents.

    ## Example
    ```xml
    <features><acpi/><apic eoi='off'/><kvm><pv-ipi state='off'/></kvm></features>
    ```

    ## Fix
    Sets `eoi='on'` and `state='on'`. Unsafe: it changes values the user wrote, and the guest
    sees new CPUID features at its next boot.

    ## Calibration
    Info: the cost is small or host-dependent: where the host's APICv (Intel) or AVIC (AMD)
    handles the guest's EOIs, PV EOI saves little, and an IPI's exit per destination costs
    only at a high IPI rate. The values are written explicitly, so the fix is unsafe and
    the note says to suppress the finding with its reason if deliberate. Versions: libvirt 9.0 passes `kvm-pv-eoi` and
    `kvm-pv-ipi` to QEMU 7.2; Linux guests use PV EOI since 3.6 and PV IPI since 4.19.

    ## References
    - QEMU `docs/system/i386/kvm-pv.rst` (kvm-pv-eoi, kvm-pv-ipi)
    - Linux `Documentation/virt/kvm/x86/msr.rst` (MSR_KVM_PV_EOI_EN) and
      `Documentation/virt/kvm/x86/cpuid.rst` (KVM_FEATURE_PV_SEND_IPI)
    - https://libvirt.org/formatdomain.html#hypervisor-features (`apic eoi`, `pv-ipi`)
    """

    code = "CPU031"

    since = "0.2.0"
    name = "kvm-paravirt-features-off"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True
    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.is_windows:
            return
        apic = domain.feature("apic")
        if apic is not None and apic.get("eoi") == "off":
            yield self.finding(domain, apic, "paravirtual end-of-interrupt off: every interrupt's EOI exits to the "
                               "host", Fix("set apic eoi on", (set_attrs(apic, {"eoi": "on"}),), FixSafety.UNSAFE),
                               note=EXPLICIT)
        ipi = domain.kvm_features.get("pv-ipi")
        if ipi is not None and ipi.explicitly_off:
            yield self.finding(domain, ipi.element, "paravirtual IPIs off: an IPI exits once per destination vCPU",
                               Fix("set kvm pv-ipi on", (set_attrs(ipi.element, {"state": "on"}),), FixSafety.UNSAFE),
                               note=EXPLICIT)


RULES: list[Rule] = [PvSpinlocksOff(), HintDedicatedOnSharedVcpus(), HostPassthroughUnderTcg(),
                     KvmParavirtFeaturesOff()]
