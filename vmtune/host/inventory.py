"""What every domain on a host uses: pinned CPUs, emulator pins, memory and hugepages per node.

Cross-domain rules read this; the planner reserves what domains it does not manage use.

A batch checks every domain against all the others, so the questions rules ask ("who else pins
CPU 4?", "the memory of all the others") are answered from indexes built once, in time linear
in the number of domains, instead of a walk over every other domain for every domain.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from vmtune.facts.domain import Domain


class DomainUsage(NamedTuple):
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


class Reserved(NamedTuple):
    """What a set of domains holds, as the planner needs it: CPUs their vCPUs are pinned to, and
    memory and 2 MiB hugepages bound to a single node."""

    cpus: frozenset[int]
    memory_by_node: dict[int, int]
    hugepages_by_node: dict[int, int]


def _single_node(usage: DomainUsage) -> int | None:
    return next(iter(usage.nodeset)) if usage.nodeset is not None and len(usage.nodeset) == 1 else None


def reserved_of(usages: list[DomainUsage]) -> Reserved:
    cpus: set[int] = set()
    memory: dict[int, int] = {}
    hugepages: dict[int, int] = {}
    for usage in usages:
        cpus |= usage.vcpu_cpus
        node = _single_node(usage)
        if node is not None:
            memory[node] = memory.get(node, 0) + usage.memory_kib
            if usage.hugepage_kib:
                hugepages[node] = hugepages.get(node, 0) + usage.memory_kib
    return Reserved(frozenset(cpus), memory, hugepages)


class _Index:
    """Built once from the domain list (rebuilt if the list grows)."""

    def __init__(self, domains: list[DomainUsage]) -> None:
        self.size = len(domains)
        self.by_uuid: dict[str, list[int]] = {}  # positions, in inventory order
        self.by_name_without_uuid: dict[str, list[int]] = {}
        self.by_cpu: dict[int, list[int]] = {}  # pinned vCPU host CPU -> domains pinning to it
        self.by_page_size: dict[int, list[int]] = {}
        self.memory_kib = 0  # of the running domains: a shut-off definition uses none
        self.active_count = 0
        # Running domains by name: cross-domain totals are reported on the first of them only.
        self.by_name_order = sorted((i for i, d in enumerate(domains) if d.active), key=lambda i: domains[i].name)
        for i, usage in enumerate(domains):
            if usage.uuid is not None:
                self.by_uuid.setdefault(usage.uuid, []).append(i)
            else:
                self.by_name_without_uuid.setdefault(usage.name, []).append(i)
            for cpu in usage.vcpu_cpus:
                self.by_cpu.setdefault(cpu, []).append(i)
            if usage.hugepage_kib is not None:
                self.by_page_size.setdefault(usage.hugepage_kib, []).append(i)
            if usage.active:
                self.memory_kib += usage.memory_kib
                self.active_count += 1
        # How many domains pin each CPU: a domain's vcpu_cpus is a set, so each appears once in
        # by_cpu per domain (no Counter.update per domain, a Python call each).
        self.cpu_count: Counter[int] = Counter({cpu: len(positions) for cpu, positions in self.by_cpu.items()})
        self.reserved = reserved_of(domains)
        self.last_same: tuple[tuple[str, str | None], frozenset[int]] | None = None


class Inventory:
    """All domains known on one host (files in the checked directories, or libvirt's list)."""

    def __init__(self, domains: list[DomainUsage] | None = None) -> None:
        self.domains: list[DomainUsage] = domains if domains is not None else []
        self._index: _Index | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Inventory) and self.domains == other.domains

    def __getstate__(self) -> list[DomainUsage]:  # the index is rebuilt where it is used
        return self.domains

    def __setstate__(self, state: list[DomainUsage]) -> None:
        self.domains, self._index = state, None

    @property
    def index(self) -> _Index:
        if self._index is None or self._index.size != len(self.domains):
            self._index = _Index(self.domains)
        return self._index

    def _same(self, domain: Domain) -> frozenset[int]:
        """Positions of the entries that are this domain: same uuid, or same name without a uuid.
        Several cross-domain rules ask in turn about the same domain: the last answer is kept."""
        index = self.index
        key = (domain.name, domain.uuid)
        if index.last_same is not None and index.last_same[0] == key:
            return index.last_same[1]
        same = index.by_name_without_uuid.get(domain.name, [])
        if domain.uuid is not None:
            same = same + index.by_uuid.get(domain.uuid, [])
        positions = frozenset(same)
        index.last_same = (key, positions)
        return positions

    def others(self, domain: Domain) -> list[DomainUsage]:
        same = self._same(domain)
        return [d for i, d in enumerate(self.domains) if i not in same] if same else list(self.domains)

    def pinned_on(self, cpus: frozenset[int], domain: Domain) -> list[DomainUsage]:
        """Other domains whose vCPUs are pinned to any of these CPUs, in inventory order."""
        index, same = self.index, self._same(domain)
        found = {i for cpu in cpus for i in index.by_cpu.get(cpu, ()) if i not in same}
        return [self.domains[i] for i in sorted(found)]

    def with_page_size(self, size_kib: int, domain: Domain) -> list[DomainUsage]:
        """Other domains backed by hugepages of this size, in inventory order."""
        same = self._same(domain)
        return [self.domains[i] for i in self.index.by_page_size.get(size_kib, ()) if i not in same]

    def active(self, domain: Domain) -> bool:
        """Whether this domain runs (files and unknown domains count as running)."""
        return all(self.domains[i].active for i in self._same(domain))

    def first_by_name(self, domain: Domain) -> bool:
        """No other running domain has a name sorting before this one's.

        Asked for every domain of a batch (MEM009), and false for all but one: the running
        domains are walked in name order, without the positions _same builds, until a name does
        not sort before this one's (then no later one does) or one that is another domain's."""
        domains, name = self.domains, domain.name
        for i in self.index.by_name_order:
            usage = domains[i]
            if not usage.name < name:
                return True
            if not usage.same_domain(domain):
                return False
        return True

    def totals(self, domain: Domain) -> tuple[int, int]:
        """(number, memory in KiB) of the other running domains."""
        index = self.index
        mine = [self.domains[i] for i in self._same(domain) if self.domains[i].active]
        return index.active_count - len(mine), index.memory_kib - sum(d.memory_kib for d in mine)

    def reserved_by_others(self, domain: Domain) -> Reserved:
        """What every other domain holds (for the planner), from the totals less this domain's."""
        index, same = self.index, self._same(domain)
        if not same:
            return index.reserved
        mine = [self.domains[i] for i in same]
        counts = index.cpu_count.copy()
        for usage in mine:
            counts.subtract(usage.vcpu_cpus)
        own = reserved_of(mine)
        return Reserved(frozenset(cpu for cpu, n in counts.items() if n > 0),
                        _less(index.reserved.memory_by_node, own.memory_by_node),
                        _less(index.reserved.hugepages_by_node, own.hugepages_by_node))


def _less(total: dict[int, int], part: dict[int, int]) -> dict[int, int]:
    return {node: left for node, kib in total.items() if (left := kib - part.get(node, 0))}
