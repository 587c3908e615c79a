"""Small shared helpers for rules: common edits and host-derived sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmtune.facts.domain import Domain
from vmtune.facts.units import parse_cpuset
from vmtune.patch.edits import Ensure, ensure, path, step

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
