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
    A Linux guest on KVM whose vCPUs each have a dedicated host CPU, without
    `<kvm><poll-control state='on'/>`. Selected by the `latency` policy.

    ## Why it matters
    Waking an idle vCPU costs a halt exit, a host schedule-in and an IPI: tens of
    microseconds per request on idle-to-busy workloads. With poll-control (plus
    `hint-dedicated`) the guest's haltpoll cpuidle driver polls briefly before halting,
    and the host stops halt-polling on its behalf; a large cloud reported markedly lower
    wake-up latency (field report 003). Never on overcommitted hosts: polling burns CPU
    other guests need.

    ## Example
    ```xml
    <cpu mode='host-passthrough'/>
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    Adds `poll-control` (and `hint-dedicated` with host-passthrough, which libvirt requires
    for it). Unsafe: only right while the CPUs stay dedicated.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - Linux `Documentation/virt/guest-halt-polling.rst`; field report 003
    """

    code = "LAT001"
    name = "poll-control-missing"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    os = "linux"
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not domain.dedicated_pinning or "poll-control" in domain.kvm_features:
            return
        edits: list[Edit] = [kvm_feature_on(domain, "poll-control")]
        if domain.cpu_mode == "host-passthrough" and "hint-dedicated" not in domain.kvm_features:
            edits.insert(0, kvm_feature_on(domain, "hint-dedicated"))
        yield self.finding(domain, domain.features if domain.features is not None else domain.root,
                           "dedicated Linux guest without poll-control: slow idle-to-busy wake-ups",
                           Fix("enable kvm poll-control", tuple(edits), FixSafety.UNSAFE))


RULES: list[Rule] = [PollControlMissing()]
