"""Small shared helpers for rules: common edits and host-derived sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmtune.facts.domain import Domain
from vmtune.facts.units import parse_cpuset
from vmtune.patch.edits import Edit, Ensure, ensure, path, step
from vmtune.rules.base import Fix, FixSafety

if TYPE_CHECKING:
    from vmtune.facts.host import Host


# The note of a finding on a value the user wrote (issue 48's calibration rule): the severity is
# the cost, and the explicitness makes the fix unsafe, never the finding milder.
EXPLICIT = "written explicitly: if deliberate, suppress it with its reason"


def hyperv_on(domain: Domain, feature: str, **extra: str) -> Ensure:
    return ensure(domain.root, path("features", "hyperv", feature), {"state": "on", **extra})


# What a Hyper-V fix assumes when no domain capabilities were given: said in the fix's description
# (shown with --show-fixes, in JSON and after --fix), not in a note every text report would print.
HYPERV_ASSUMED = " (assumes a host that offers Hyper-V enlightenments: --domcaps checks)"


def hyperv_fix_description(description: str, host: Host | None) -> str:
    """A fix that adds Hyper-V enlightenments, saying what it assumes when the host is unknown:
    QEMU refuses to start a guest asking for one the host lacks, and kernels built without
    CONFIG_KVM_HYPERV (Linux 6.8+) and some nested hosts offer none."""
    return description if host is not None else description + HYPERV_ASSUMED


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


NO_HOUSEKEEPING = "set the policy parameter housekeeping_cpus or give --host"


def guest_nodes(domain: Domain, host: Host | None) -> frozenset[int]:
    """The host NUMA nodes the guest lives on: those of its pinned vCPUs' CPUs and of its
    `<numatune><memory nodeset>`; empty when the host or the placement is unknown."""
    if host is None or not domain.vcpu_pins:
        return frozenset()
    return host.nodes_of(domain.pinned_cpus) | (domain.memory_nodeset or frozenset())


# Why a thread-pinning fix has no host CPUs to pin to. A stack that picks the CPUs itself
# (KubeVirt's isolateEmulatorThread, nova's hw:emulator_threads_policy) drops these notes from
# its advice: they are about vmtune's XML fix (vmtune.stacks.frontend).
NO_LOCAL_HOUSEKEEPING = "no housekeeping CPU free on NUMA node"
HOST_CPU_NOTES = (NO_HOUSEKEEPING, NO_LOCAL_HOUSEKEEPING)


def thread_pin_cpus(domain: Domain, params: dict[str, object], host: Host | None) -> tuple[frozenset[int], str | None]:
    """Host CPUs for the emulator and I/O threads, or none and why: the housekeeping CPUs the
    vCPUs do not use, on the guest's NUMA node when it lives on one (a thread on another node
    reaches the guest's memory across the interconnect on every access)."""
    housekeeping = housekeeping_cpus(params, host)
    if not housekeeping:
        return frozenset(), NO_HOUSEKEEPING
    target = housekeeping - domain.pinned_cpus
    nodes = guest_nodes(domain, host)
    if host is not None and len(nodes) == 1:
        (node,) = nodes
        cell = next((c for c in host.cells if c.id == node), None)
        local = target & cell.cpu_ids if cell is not None else frozenset()
        if not local:
            return frozenset(), f"{NO_LOCAL_HOUSEKEEPING} {node}, where the guest runs: name one in " \
                                "the policy parameter housekeeping_cpus"
        return local, None
    return target, None if target else NO_HOUSEKEEPING


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
