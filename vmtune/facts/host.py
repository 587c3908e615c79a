"""Host facts from `virsh capabilities` and `virsh domcapabilities` output."""

from __future__ import annotations

from typing import NamedTuple

from lxml import etree

from vmtune.errors import VmtuneError
from vmtune.facts.domain import ARM_ARCHES
from vmtune.facts.units import MAX_CPU_ID, ULLONG_MAX, InvalidValue, parse_cpuset, parse_uint, to_kib, uint_or_none
from vmtune.inputs import MAX_XML_BYTES, read_bytes
from vmtune.xml.safe import line_of, parse_xml


class HostCpu(NamedTuple):
    id: int
    core_id: int | None
    socket_id: int | None
    siblings: frozenset[int]


class NumaCell(NamedTuple):
    id: int
    memory_kib: int
    cpus: tuple[HostCpu, ...]
    pages: dict[int, int]  # page size KiB -> pool count

    @property
    def cpu_ids(self) -> frozenset[int]:
        return frozenset(c.id for c in self.cpus)


class GuestArch(NamedTuple):
    """What the capabilities' <guest> blocks offer for one guest architecture."""

    emulators: frozenset[str]
    machines: frozenset[str]  # names and canonical names, e.g. pc, pc-i440fx-7.2
    domain_types: frozenset[str]


class Host:
    """What vmtune knows about the host. Every field may be unknown (None / empty).

    A plain class, not a dataclass: `--host` and `--domcaps` load it at every start, and the
    dataclasses module (with copy and weakref) and the generated methods cost ~2.5 ms of a
    ~70 ms one-file check."""

    def __init__(self, name: str = "host", arch: str | None = None, cpu_vendor: str | None = None,
                 cells: list[NumaCell] | None = None, page_sizes_kib: frozenset[int] = frozenset(),
                 guest_domain_types: frozenset[str] = frozenset(), guests: dict[str, GuestArch] | None = None,
                 hyperv_features: frozenset[str] | None = None, free_2m_pages: dict[int, int] | None = None,
                 cpu_modes: frozenset[str] | None = None, node_memory_kib: int | None = None,
                 tsc_frequency: int | None = None, cpu_features: frozenset[str] | None = None,
                 gic_versions: frozenset[str] | None = None, domcaps_type: str | None = None) -> None:
        self.name = name
        self.arch = arch
        self.cpu_vendor = cpu_vendor
        self.cells: list[NumaCell] = [] if cells is None else cells
        self.page_sizes_kib = page_sizes_kib
        self.guest_domain_types = guest_domain_types  # hypervisors offered for the host arch
        self.guests: dict[str, GuestArch] = {} if guests is None else guests  # guest arch -> what is offered for it
        # domcapabilities
        self.hyperv_features = hyperv_features  # None: unknown; empty: none supported
        self.free_2m_pages = free_2m_pages  # live hosts: free 2 MiB pages per node right now
        self.cpu_modes = cpu_modes
        self.node_memory_kib = node_memory_kib  # live hosts: virNodeGetInfo's memory, when capabilities have no cells
        self.tsc_frequency = tsc_frequency  # Hz, from capabilities' <cpu><counter name='tsc'>
        self.cpu_features = cpu_features  # capabilities' <cpu><feature> names beyond the model
        # domcapabilities of an ARM host: the GIC versions QEMU can give a guest of `domcaps_type`
        # (kvm or qemu). None: unknown (no ARM domain capabilities given); empty: none.
        self.gic_versions = gic_versions
        self.domcaps_type = domcaps_type

    def _cpu_index(self) -> tuple[dict[int, NumaCell], frozenset[int]]:
        """Host CPU -> its NUMA cell (the first cell listing it), and every known CPU, built once
        per `cells` list: cross-domain rules ask for every domain of a batch."""
        cached = self.__dict__.get("_cpu_index_of")
        if cached is None or cached[0] is not self.cells:
            by_cpu: dict[int, NumaCell] = {}
            for cell in self.cells:
                for cpu in cell.cpus:
                    by_cpu.setdefault(cpu.id, cell)
            cached = self.__dict__["_cpu_index_of"] = (self.cells, by_cpu, frozenset(by_cpu))
        return cached[1], cached[2]

    @property
    def known_cpus(self) -> frozenset[int]:
        return self._cpu_index()[1]

    def cell_of_cpu(self, cpu: int) -> NumaCell | None:
        return self._cpu_index()[0].get(cpu)

    def nodes_of(self, cpus: frozenset[int]) -> frozenset[int]:
        """The NUMA nodes of some host CPUs (CPUs the host does not list are left out)."""
        by_cpu = self._cpu_index()[0]
        return frozenset(cell.id for cpu in cpus if (cell := by_cpu.get(cpu)) is not None)

    @property
    def offers_hyperv(self) -> bool:
        """Whether QEMU here can give a guest any Hyper-V enlightenment (the hypervclock timer,
        hv-time, included): False when the domain capabilities say `<hyperv supported='no'>`."""
        return self.hyperv_features is None or bool(self.hyperv_features)

    def supports_hyperv(self, feature: str) -> bool:
        """Unknown host: assume yes (the fix is what virt-install writes on a modern host)."""
        return self.hyperv_features is None or feature in self.hyperv_features

    def hugepages_available_kib(self) -> int:
        """2 MiB hugepage memory a new guest could get: free pages when known (live), else the pools."""
        if self.free_2m_pages is not None:
            return sum(self.free_2m_pages.values()) * 2048
        return sum(cell.pages.get(2048, 0) for cell in self.cells) * 2048

    def _memory(self) -> tuple[int, int]:
        """(total, largest cell) memory in KiB, summed once per `cells` list and node memory, as
        _cpu_index: CPU012 and MEM009 ask for every domain of a batch."""
        cached = self.__dict__.get("_memory_of")
        if cached is None or cached[0] is not self.cells or cached[1] != self.node_memory_kib:
            total = sum(c.memory_kib for c in self.cells) or self.node_memory_kib or 0
            largest = max((c.memory_kib for c in self.cells), default=0)
            cached = self.__dict__["_memory_of"] = (self.cells, self.node_memory_kib, total, largest)
        return cached[2], cached[3]

    @property
    def total_memory_kib(self) -> int:
        return self._memory()[0]

    @property
    def largest_cell_kib(self) -> int:
        """The memory of the largest NUMA cell (0 without cells)."""
        return self._memory()[1]


def _int(text: str | None) -> int | None:
    return uint_or_none(text)


def _cpu_id(element: etree._Element, source: str | None) -> int:
    """A host CPU or cell id: refused with the file and line when libvirt could not have written it."""
    try:
        return parse_uint(element.get("id", "0"), MAX_CPU_ID)
    except InvalidValue as exc:
        raise VmtuneError(f"invalid <{element.tag} id>: {exc}", source, line_of(element)) from None


def apply_capabilities(host: Host, root: etree._Element, source: str | None = None) -> None:
    cpu = root.find("host/cpu")
    if cpu is not None:
        host.arch = cpu.findtext("arch")
        host.cpu_vendor = cpu.findtext("vendor")
        host.page_sizes_kib = frozenset(
            to_kib(p.get("size"), p.get("unit")) or 0 for p in cpu.iterfind("pages")
        )
        counter = cpu.find("counter[@name='tsc']")
        host.tsc_frequency = uint_or_none(counter.get("frequency"), ULLONG_MAX) if counter is not None else None
        features = frozenset(f.get("name", "") for f in cpu.iterfind("feature"))
        host.cpu_features = features or None  # none listed: a hand-written file, not a host without any
    cells = []
    for cell in root.iterfind("host/topology/cells/cell"):
        mem = cell.find("memory")
        cpus = tuple(
            HostCpu(
                id=_cpu_id(c, source),
                core_id=_int(c.get("core_id")),
                socket_id=_int(c.get("socket_id")),
                siblings=parse_cpuset(c.get("siblings")) or frozenset({_cpu_id(c, source)}),
            )
            for c in cell.iterfind("cpus/cpu")
        )
        pages = {
            to_kib(p.get("size"), p.get("unit")) or 0: uint_or_none(p.text or "0", ULLONG_MAX) or 0
            for p in cell.iterfind("pages")
        }
        cells.append(NumaCell(
            id=_cpu_id(cell, source),
            memory_kib=(to_kib((mem.text or "").strip(), mem.get("unit")) or 0) if mem is not None else 0,
            cpus=cpus,
            pages=pages,
        ))
    host.cells = cells
    types: set[str] = set()
    for guest in root.iterfind("guest"):
        arch = guest.find("arch")
        if arch is None:
            continue
        domain_types = frozenset(d.get("type", "") for d in arch.iterfind("domain"))
        machines = {(m.text or "").strip() for m in arch.iterfind(".//machine")}
        machines |= {m.get("canonical", "") for m in arch.iterfind(".//machine") if m.get("canonical")}
        emulators = {(e.text or "").strip() for e in arch.iterfind(".//emulator")}
        known = host.guests.get(arch.get("name", ""))
        if known is not None:  # one <guest> per os_type (hvm, xen...): merge
            domain_types, machines, emulators = (domain_types | known.domain_types, machines | known.machines,
                                                 emulators | known.emulators)
        host.guests[arch.get("name", "")] = GuestArch(frozenset(emulators), frozenset(machines), domain_types)
        if not host.arch or arch.get("name") == host.arch:
            types.update(domain_types)
    host.guest_domain_types = frozenset(types)


def apply_domcapabilities(host: Host, root: etree._Element, source: str | None = None) -> None:
    hyperv = root.find("features/hyperv")
    if hyperv is not None:
        if hyperv.get("supported") == "yes":
            host.hyperv_features = frozenset(
                (v.text or "").strip() for v in hyperv.iterfind("enum[@name='features']/value")
            )
        else:
            host.hyperv_features = frozenset()
    modes = root.find("cpu")
    if modes is not None:
        host.cpu_modes = frozenset(m.get("name", "") for m in modes.iterfind("mode")
                                   if m.get("supported") == "yes")
    if host.arch is None:
        host.arch = root.findtext("arch")
    host.domcaps_type = (root.findtext("domain") or "").strip() or None
    gic = root.find("features/gic")
    # Only an ARM host's answer counts: x86 domain capabilities say <gic supported='no'/>, which
    # says nothing about the ARM host an aarch64 definition is meant for.
    if gic is not None and (root.findtext("arch") or "").strip() in ARM_ARCHES:
        host.gic_versions = frozenset(
            (v.text or "").strip() for v in gic.iterfind("enum[@name='version']/value")
        ) if gic.get("supported") == "yes" else frozenset()


def load_host(caps_path: str | None, domcaps_path: str | None) -> Host | None:
    if not caps_path and not domcaps_path:
        return None
    host = Host()
    for path, expected, apply in (
        (caps_path, "capabilities", apply_capabilities),
        (domcaps_path, "domainCapabilities", apply_domcapabilities),
    ):
        if not path:
            continue
        data = read_bytes(path, path, expected, MAX_XML_BYTES)  # a regular file of bounded size
        root = parse_xml(data, path)
        if root.tag != expected:
            raise VmtuneError(f"expected <{expected}> output of virsh, found <{root.tag}>", path, line_of(root))
        apply(host, root, path)
    return host
