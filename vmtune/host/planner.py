"""NUMA-aware CPU placement for domains that should have dedicated CPUs.

Deterministic: the same host and domains give the same plan. For each domain (largest
first, then by name) the planner picks whole physical cores on one NUMA node, best fit
(the node with the fewest free cores that still holds the domain), never a housekeeping
core and never a core another domain is pinned to. SMT siblings of a core always go to
the same domain, to consecutive vCPUs, so a guest topology with threads=2 sees real
sibling pairs. Emulator and I/O threads go to the node's housekeeping CPUs, memory is
bound to the node (`numatune strict`), which also places the domain's hugepages there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmtune.facts.domain import Domain
from vmtune.facts.host import Host, NumaCell
from vmtune.facts.units import MAX_VCPUS, format_cpuset, human_kib, uint_or_none
from vmtune.host.inventory import DomainUsage, Reserved, reserved_of
from vmtune.patch.edits import Edit, ensure, path, set_attrs, step


@dataclass(frozen=True)
class Core:
    node: int
    cpus: tuple[int, ...]  # the core's threads, sorted


@dataclass
class Placement:
    domain: str
    node: int
    vcpu_pins: dict[int, int]
    housekeeping: frozenset[int]  # emulator and I/O threads

    @property
    def cpus(self) -> frozenset[int]:
        return frozenset(self.vcpu_pins.values())


@dataclass
class Plan:
    placements: list[Placement] = field(default_factory=list)
    misfits: dict[str, str] = field(default_factory=dict)  # domain -> why it does not fit

    def for_domain(self, name: str) -> Placement | None:
        return next((p for p in self.placements if p.domain == name), None)


def cores_of(cell: NumaCell) -> list[Core]:
    seen: dict[frozenset[int], Core] = {}
    for cpu in sorted(cell.cpus, key=lambda c: c.id):
        group = frozenset(cpu.siblings & cell.cpu_ids) or frozenset({cpu.id})
        if group not in seen:
            seen[group] = Core(cell.id, tuple(sorted(group)))
    return sorted(seen.values(), key=lambda c: c.cpus[0])


def default_housekeeping(host: Host) -> frozenset[int]:
    """The first core (with its siblings) of each NUMA node."""
    cpus: set[int] = set()
    for cell in host.cells:
        cores = cores_of(cell)
        if cores:
            cpus.update(cores[0].cpus)
    return frozenset(cpus)


def _guest_threads(domain: Domain) -> int:
    topology = domain.cpu.find("topology") if domain.cpu is not None else None
    threads = topology.get("threads") if topology is not None else None
    return uint_or_none(threads, MAX_VCPUS) or 1


def _fit(domain: Domain, threads: int, node: int, free: list[Core], per_core: int, memory_left: int,
         hugepages_left: int) -> tuple[int, int] | str:
    """(cores needed, vCPUs per core) when the domain (`threads` per guest core) fits the node, else why not."""
    if threads > 1 and free and per_core < threads:
        return f"node {node} has {per_core} thread(s) per core, the guest wants {threads}"
    usable = threads if threads > 1 else per_core  # vCPUs placed per core
    needed_cores = -(-domain.vcpus // max(1, usable))
    if len(free) < needed_cores:
        return f"node {node} has {len(free)} free core(s), {needed_cores} needed"
    if domain.memory_kib > memory_left:
        return (f"node {node} has {human_kib(max(0, memory_left))} of memory left, "
                f"the guest needs {human_kib(domain.memory_kib)}")
    if domain.hugepage_size_kib and domain.memory_kib > hugepages_left:
        return (f"node {node} has {human_kib(max(0, hugepages_left))} of 2 MiB hugepages left, "
                f"the guest needs {human_kib(domain.memory_kib)}")
    return needed_cores, usable


def plan(host: Host, domains: list[Domain], reserved: list[DomainUsage] | Reserved,
         housekeeping: frozenset[int] | None = None) -> Plan:
    """Place each domain in `domains`; `reserved` are other domains whose pins stay as they are
    (or what they hold together, Inventory.reserved_by_others)."""
    housekeeping = default_housekeeping(host) if housekeeping is None else housekeeping
    held = reserved if isinstance(reserved, Reserved) else reserved_of(reserved)
    taken: set[int] = set(housekeeping) | held.cpus
    memory_left = {cell.id: cell.memory_kib - held.memory_by_node.get(cell.id, 0) for cell in host.cells}
    hugepages_left = {cell.id: cell.pages.get(2048, 0) * 2048 for cell in host.cells}
    for node, kib in held.hugepages_by_node.items():
        hugepages_left[node] = hugepages_left.get(node, 0) - kib
    result = Plan()
    cells = sorted(host.cells, key=lambda c: c.id)
    free_cores = {cell.id: [core for core in cores_of(cell) if not taken.intersection(core.cpus)] for cell in cells}
    per_core_of = {cell.id: len(cores[0].cpus) if (cores := cores_of(cell)) else 1 for cell in cells}
    for domain in sorted(domains, key=lambda d: (-d.vcpus, d.name)):
        threads = _guest_threads(domain)
        candidates = []
        reasons = []
        for cell in cells:
            free = free_cores[cell.id]
            fit = _fit(domain, threads, cell.id, free, per_core_of[cell.id], memory_left.get(cell.id, 0),
                       hugepages_left.get(cell.id, 0))
            if isinstance(fit, str):
                reasons.append(fit)
            else:
                needed_cores, usable = fit
                candidates.append((len(free), cell.id, free[:needed_cores], usable))
        if not candidates:
            result.misfits[domain.name] = "; ".join(reasons) or "the host has no NUMA topology"
            continue
        _, node, chosen, usable = min(candidates)  # best fit, then lowest node id
        cpus = [cpu for core in chosen for cpu in core.cpus[:usable]]
        pins = {vcpu: cpus[vcpu] for vcpu in range(domain.vcpus)}
        for core in chosen:
            taken.update(core.cpus)  # a partly used core stays the domain's: no sibling sharing
        free_cores[node] = [core for core in free_cores[node] if core not in chosen]
        memory_left[node] -= domain.memory_kib
        if domain.hugepage_size_kib:
            hugepages_left[node] -= domain.memory_kib
        node_cpus = next(c.cpu_ids for c in cells if c.id == node)
        node_housekeeping = (housekeeping & node_cpus) or housekeeping
        result.placements.append(Placement(domain.name, node, pins, node_housekeeping))
    return result


def placement_edits(domain: Domain, placement: Placement) -> list[Edit]:
    """The XML changes that realise a placement: vcpupin, emulatorpin, iothreadpin, numatune."""
    edits: list[Edit] = []
    existing = {p.get("vcpu"): p for p in domain.cputune.iterfind("vcpupin")} if domain.cputune is not None else {}
    for vcpu, cpu in sorted(placement.vcpu_pins.items()):
        pin = existing.get(str(vcpu))
        if pin is not None:
            edits.append(set_attrs(pin, {"cpuset": str(cpu)}))
        else:
            edits.append(ensure(domain.root, path("cputune", step("vcpupin", vcpu=str(vcpu))), {"cpuset": str(cpu)}))
    housekeeping = format_cpuset(placement.housekeeping)
    edits.append(ensure(domain.root, path("cputune", "emulatorpin"), {"cpuset": housekeeping}))
    for tid in range(1, domain.iothreads + 1):
        edits.append(ensure(domain.root, path("cputune", step("iothreadpin", iothread=str(tid))),
                            {"cpuset": housekeeping}))
    edits.append(ensure(domain.root, path("numatune", "memory"), {"mode": "strict", "nodeset": str(placement.node)}))
    return edits


def apply_placement(data: bytes, domain: Domain, placement: Placement, label: str) -> bytes:
    """The domain's XML text with the placement spliced in (every other byte as it was)."""
    from vmtune.patch.splice import apply_edits  # the splicer is only needed when writing

    return apply_edits(data, domain.root, [("PLAN", e) for e in placement_edits(domain, placement)], label).data
