"""What every domain on a host uses: pinned CPUs, emulator pins, memory and hugepages per node.

Cross-domain rules read this; the planner reserves what domains it does not manage use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmtune.facts.domain import Domain


@dataclass(frozen=True)
class DomainUsage:
    name: str
    uuid: str | None
    vcpus: int
    memory_kib: int
    vcpu_cpus: frozenset[int]
    emulator_cpus: frozenset[int]
    dedicated: bool
    hugepage_kib: int | None  # page size, None without hugepages
    nodeset: frozenset[int] | None  # numatune strict binding, if any
    active: bool = True

    @classmethod
    def of(cls, domain: Domain, active: bool = True) -> DomainUsage:
        binding = domain.numatune_memory
        binding_holds = binding is not None and binding.get("mode", "strict") in ("strict", "restrictive")
        nodeset = domain.memory_nodeset if binding_holds else None
        return cls(domain.name, domain.uuid, domain.vcpus, domain.memory_kib, domain.pinned_cpus,
                   domain.emulator_pin or frozenset(), domain.dedicated_pinning, domain.hugepage_size_kib,
                   nodeset, active)

    def same_domain(self, domain: Domain) -> bool:
        return (self.uuid is not None and self.uuid == domain.uuid) or (self.uuid is None and self.name == domain.name)


@dataclass
class Inventory:
    """All domains known on one host (files in the checked directories, or libvirt's list)."""

    domains: list[DomainUsage] = field(default_factory=list)

    def others(self, domain: Domain) -> list[DomainUsage]:
        return [d for d in self.domains if not d.same_domain(domain)]
