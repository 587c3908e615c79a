"""Small shared helpers for rules: common edits and host-derived sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmtune.facts.domain import Domain
from vmtune.facts.units import parse_cpuset
from vmtune.patch.edits import Edit, Ensure, ensure, path, step
from vmtune.rules.base import Fix, FixSafety

if TYPE_CHECKING:
    from vmtune.facts.host import Host


def hyperv_on(domain: Domain, feature: str, **extra: str) -> Ensure:
    return ensure(domain.root, path("features", "hyperv", feature), {"state": "on", **extra})


def timer(domain: Domain, name: str, **attrs: str) -> Ensure:
    return ensure(domain.root, path("clock", step("timer", name=name)), attrs)


def kvm_feature_on(domain: Domain, feature: str) -> Ensure:
    return ensure(domain.root, path("features", "kvm", feature), {"state": "on"})


def housekeeping_cpus(params: dict[str, object], host: Host | None) -> frozenset[int] | None:
    """CPUs for emulator and I/O threads: the policy's `housekeeping_cpus`, else the first
    core (with its SMT siblings) of each NUMA node when the host is known."""
    configured = params.get("housekeeping_cpus")
    if isinstance(configured, str) and configured:
        return parse_cpuset(configured)
    if host is None or not host.cells:
        return None
    cpus: set[int] = set()
    for cell in host.cells:
        if cell.cpus:
            first = min(cell.cpus, key=lambda c: c.id)
            cpus |= first.siblings | {first.id}
    return frozenset(cpus)


def share_memory_fix(domain: Domain) -> Fix:
    """<memoryBacking><source type='memfd'/><access mode='shared'/>: only the access element when
    the memory already has a source or is hugepage-backed (hugetlbfs files are shareable).
    Unsafe: it changes how all guest memory is allocated."""
    edits: list[Edit] = [ensure(domain.root, path("memoryBacking", "access"), {"mode": "shared"})]
    backing = domain.memory_backing
    if domain.hugepages is None and (backing is None or backing.find("source") is None):
        edits.insert(0, ensure(domain.root, path("memoryBacking", "source"), {"type": "memfd"}))
    return Fix("share guest memory", tuple(edits), FixSafety.UNSAFE)


def vcpu_host_cpus(domain: Domain) -> frozenset[int] | None:
    """The host CPUs the vCPUs may run on, when the definition confines them: every vCPU's
    <vcpupin>, or <vcpu cpuset> for those without one. None when some vCPU may run anywhere."""
    if domain.vcpu_pins and domain.all_vcpus_pinned:
        return domain.pinned_cpus
    if domain.vcpu_cpuset:
        return domain.vcpu_cpuset | domain.pinned_cpus
    return None
