"""Idle-latency rules."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.patch.edits import Edit
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import kvm_feature_on


class PollControlMissing(Rule):
    """
    ## What it checks
    A Linux guest on KVM whose vCPUs each have a dedicated host CPU, with a CPU model
    other than `host-passthrough`/`maximum`, without `<kvm><poll-control state='on'/>`
    and `<hint-dedicated state='on'/>`. Selected by the `latency` policy.

    ## Why it matters
    Waking an idle vCPU costs a halt exit, a host schedule-in and an IPI: tens of
    microseconds per request on idle-to-busy workloads. With poll-control and
    `hint-dedicated` the guest's haltpoll cpuidle driver polls briefly before halting, and
    the host stops halt-polling on its behalf. The guest driver loads only with both: it
    needs the KVM_HINTS_REALTIME hint (`hint-dedicated`) and the poll-control feature.
    QEMU's `-cpu host` (libvirt's `host-passthrough`) already exposes kvm-poll-control, so
    such guests are not reported. Never on overcommitted hosts: polling burns CPU other
    guests need.

    ## Example
    ```xml
    <cpu mode='host-model'/>
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    Adds `poll-control` and `hint-dedicated` where missing. Unsafe: only right while the
    CPUs stay dedicated, and it changes the CPU features the guest sees.

    ## Calibration
    Info in the rule (the `latency` policy raises it): the gain is for idle-to-busy latency
    workloads only, so its fix is a workload decision and never applied by default.
    Versions: libvirt 9.0 defines `<kvm><poll-control>` on QEMU 7.2.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - Linux `Documentation/virt/guest-halt-polling.rst` and `drivers/cpuidle/cpuidle-haltpoll.c`
    """

    code = "LAT001"
    needs = "cputune"
    name = "poll-control-missing"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    os = "linux"
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not domain.dedicated_pinning or domain.cpu_mode in ("host-passthrough", "maximum"):
            return
        missing = [f for f in ("hint-dedicated", "poll-control")
                   if f not in domain.kvm_features or not domain.kvm_features[f].on]
        if not missing or any(domain.kvm_features[f].explicitly_off for f in missing if f in domain.kvm_features):
            return
        edits: list[Edit] = [kvm_feature_on(domain, f) for f in missing]
        yield self.finding(domain, domain.features if domain.features is not None else domain.root,
                           f"dedicated Linux guest without {' and '.join(missing)}: slow idle-to-busy wake-ups",
                           Fix(f"enable kvm {' and '.join(missing)}", tuple(edits), FixSafety.UNSAFE))


RULES: list[Rule] = [PollControlMissing()]
