"""NUMA bindings that contradict the CPU placement."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset, human_kib, parse_cpuset, to_kib
from vmtune.patch.edits import set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT, vcpu_host_cpus


class NumaMemoryRemote(Rule):
    """
    ## What it checks
    `<numatune><memory nodeset=...>` naming only host NUMA nodes on which none of the
    vCPUs may run: the vCPUs are pinned (`<vcpupin>`) or confined (`<vcpu cpuset>`) to
    CPUs of other nodes. Guests with their own NUMA topology (`<cpu><numa>`, bound per
    cell with `<memnode>`) are left alone. Needs host facts.

    ## Why it matters
    Every memory access of every vCPU then crosses the interconnect: all of the guest's
    memory is remote. nova's `cpu-topologies.rst`: vCPUs must be "on the same NUMA node as
    the memory used by these processes", so that accesses "do not consume the limited
    cross-node memory bandwidth, adding latency to memory accesses".
    It happens when a guest is re-pinned by hand, or its binding copied from another
    guest; nova (`hw:numa_nodes`) and KubeVirt (`guestMappingPassthrough`) always write
    the binding from the same placement as the pins.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='6'/></cputune>  <!-- node 1 -->
    <numatune><memory mode='strict' nodeset='0'/></numatune>
    ```

    ## Fix
    Sets `nodeset` to the vCPUs' node(s), when their memory can hold the guest. Unsafe: it
    changes a value the user wrote, and with `mode='strict'` the guest does not start if
    the node cannot hold its memory at start (a fix that raises MEM008 is withheld).

    ## Calibration
    Warning: remote memory is a documented cost and here it applies to all of it.
    Versions: none: the cost is the hardware's; libvirt 9.0 binds memory as `<numatune>` says.

    ## References
    - https://libvirt.org/formatdomain.html#numa-node-tuning
    - nova `doc/source/admin/cpu-topologies.rst`; KubeVirt `guestMappingPassthrough`
    - canonical/lxd#15082 (memory taken from node 0 despite the node setting)
    """

    code = "CPU019"
    name = "numa-memory-remote"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        binding = domain.numatune_memory
        # The binding first: most domains have none, and the vCPUs' CPUs are then not read.
        if host is None or len(host.cells) < 2 or binding is None:
            return
        bound = domain.memory_nodeset
        if not bound:
            return
        confined = vcpu_host_cpus(domain)
        if not confined or domain.guest_numa_cells:
            return
        cells = {c.id: c for cpu in confined if (c := host.cell_of_cpu(cpu)) is not None}
        if not cells or set(cells) & bound:
            return
        nodes = format_cpuset(frozenset(cells))
        capacity = sum(c.memory_kib for c in cells.values())
        fix = note = None
        if domain.memory_kib <= capacity:
            fix = Fix(f"bind memory to node(s) {nodes}", (set_attrs(binding, {"nodeset": nodes}),), FixSafety.UNSAFE)
        else:
            note = f"node(s) {nodes} hold {human_kib(capacity)}, less than the guest's memory: re-place the guest"
        yield self.finding(domain, binding, f"memory is bound to node(s) {format_cpuset(bound)} but the vCPUs run "
                           f"on node(s) {nodes}: all memory is remote", fix, note=note)


def _memnodes(domain: Domain) -> list[etree._Element]:
    numatune = domain.top("numatune")
    return domain.children(numatune, "memnode") if numatune is not None else []


def _cell_vcpu_cpus(domain: Domain, cell: etree._Element) -> frozenset[int] | None:
    """The host CPUs a guest NUMA cell's vCPUs may run on; None unless every one of them is
    confined (`<vcpupin>`, or `<vcpu cpuset>` for the unpinned)."""
    vcpus = parse_cpuset(cell.get("cpus"))
    if not vcpus:
        return None
    cpus: set[int] = set()
    for vcpu in vcpus:
        confined = domain.vcpu_pins.get(vcpu) or domain.vcpu_cpuset
        if not confined:
            return None
        cpus |= confined
    return frozenset(cpus)


class NumaCellMemoryRemote(Rule):
    """
    ## What it checks
    A guest NUMA cell (`<cpu><numa><cell id='N' cpus=...>`) whose memory `<numatune><memnode
    cellid='N' nodeset=...>` binds to host nodes on which none of the cell's vCPUs may run:
    the cell's vCPUs are pinned (`<vcpupin>`) or confined (`<vcpu cpuset>`) to CPUs of other
    nodes. Needs host facts; a binding to nodes the host does not have is not judged (the
    definition was written for another host).

    ## Why it matters
    A guest with NUMA cells places its threads and their memory by the cells it sees: a
    thread on a cell's vCPUs allocates from that cell. When the host puts the cell's memory
    on another node than its vCPUs, every access of that cell's threads crosses the
    interconnect, and the guest's own NUMA placement makes it worse, not better. nova's
    `cpu-topologies.rst`: vCPUs must be "on the same NUMA node as the memory used by these
    processes". nova and KubeVirt write each `memnode` from the same host node as the cell's
    pins; a crossed binding comes from a hand edit, or cells renumbered without their
    bindings.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='5'/></cputune>
    <cpu><numa><cell id='0' cpus='0' memory='2' unit='GiB'/>
              <cell id='1' cpus='1' memory='2' unit='GiB'/></numa></cpu>
    <numatune><memnode cellid='0' mode='strict' nodeset='1'/>   <!-- vCPU 0 runs on node 0 -->
              <memnode cellid='1' mode='strict' nodeset='0'/></numatune>
    ```

    ## Fix
    Sets each such `memnode`'s `nodeset` to the node(s) of its cell's vCPUs, when they can
    hold the cell's memory. Unsafe: it changes a value the user wrote, and with
    `mode='strict'` the guest does not start if the node cannot hold it at start.

    ## Calibration
    Warning: remote memory is a documented cost (nova `cpu-topologies.rst`), and here it
    applies to all of the cell's memory. Versions: none: the cost is the hardware's; libvirt
    9.0 binds each cell's memory as its `memnode` says.

    ## References
    - https://libvirt.org/formatdomain.html#numa-node-tuning (`memnode`)
    - nova `doc/source/admin/cpu-topologies.rst`
    """

    code = "CPU028"

    since = "0.2.0"
    name = "numa-cell-memory-remote"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        memnodes = _memnodes(domain)
        if host is None or len(host.cells) < 2 or not memnodes:
            return
        cells = {cell.get("id"): cell for cell in domain.guest_numa_cells}
        capacity = {c.id: c.memory_kib for c in host.cells}
        for memnode in memnodes:
            cell = cells.get(memnode.get("cellid"))
            bound = parse_cpuset(memnode.get("nodeset"))
            if bound and not bound <= capacity.keys():
                continue  # nodes this host does not have: a definition for another host, not a remote binding
            cpus = _cell_vcpu_cpus(domain, cell) if cell is not None and bound else None
            nodes = host.nodes_of(cpus) if cpus else frozenset()
            if not bound or not nodes or nodes & bound:
                continue
            wanted = format_cpuset(nodes)
            size = to_kib(cell.get("memory"), cell.get("unit") or "KiB") if cell is not None else None
            fix = note = None
            if size is not None and size <= sum(capacity.get(n, 0) for n in nodes):
                fix = Fix(f"bind cell {memnode.get('cellid')}'s memory to node(s) {wanted}",
                          (set_attrs(memnode, {"nodeset": wanted}),), FixSafety.UNSAFE)
            else:
                note = f"node(s) {wanted} cannot hold the cell's memory: re-place the cell"
            yield self.finding(domain, memnode, f"guest NUMA cell {memnode.get('cellid')}'s memory is bound to "
                               f"node(s) {format_cpuset(bound)} but its vCPUs run on node(s) {wanted}: all its "
                               "memory is remote", fix, note=note)


class NumaInterleaveOneNode(Rule):
    """
    ## What it checks
    `<numatune><memory mode='interleave' nodeset=...>` over several host nodes for a guest
    whose vCPUs are all pinned (`<vcpupin>`) or confined (`<vcpu cpuset>`) to CPUs of one of
    them, without guest NUMA cells. Needs host facts.

    ## Why it matters
    Interleaving spreads the guest's pages round-robin over the nodes named, which suits
    memory used from several nodes at once (the kernel's `numa_memory_policy.rst`:
    interleave "is most effective" for large areas "accessed from multiple nodes"). A guest
    whose vCPUs all run on one node of N reaches (N-1)/N of its memory across the
    interconnect in exchange for the other nodes' bandwidth, which helps only a workload
    bound by memory bandwidth.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='2'/></cputune>  <!-- node 0 -->
    <numatune><memory mode='interleave' nodeset='0-1'/></numatune>
    ```

    ## Fix
    None: interleaving is a choice of its own. Where bandwidth is not the aim, bind the
    memory to the vCPUs' node (`mode='strict'` or `'preferred'`, `nodeset` that node).

    ## Calibration
    Warning: (N-1)/N of the guest's memory accesses cross the interconnect while every vCPU
    runs on one node, a documented cost (the kernel's memory-policy documentation) on every
    access; the other nodes' bandwidth pays it back only for a workload bound by memory
    bandwidth, which the definition cannot show. The policy is written explicitly, so the
    note says to suppress the finding with its reason if deliberate (a bandwidth-bound
    guest). A nodeset without the vCPUs' node at all is CPU019's warning. Versions: libvirt 9.0 applies `interleave` to
    the guest's memory backend (`policy=interleave`).

    ## References
    - https://libvirt.org/formatdomain.html#numa-node-tuning
    - Linux `Documentation/admin-guide/mm/numa_memory_policy.rst` (MPOL_INTERLEAVE)
    """

    code = "CPU029"

    since = "0.2.0"
    name = "numa-interleave-one-node"
    severity = Severity.WARNING
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        binding = domain.numatune_memory
        if host is None or len(host.cells) < 2 or binding is None or binding.get("mode") != "interleave":
            return
        bound = domain.memory_nodeset
        confined = vcpu_host_cpus(domain)
        if not bound or len(bound) < 2 or not confined or domain.guest_numa_cells:
            return
        nodes = host.nodes_of(confined)
        if len(nodes) != 1 or not nodes <= bound:
            return
        (node,) = nodes
        remote = len(bound) - 1
        yield self.finding(domain, binding, f"memory is interleaved over nodes {format_cpuset(bound)} but the vCPUs "
                           f"run on node {node} alone: {remote} of every {len(bound)} pages are remote",
                           note=f"{EXPLICIT}: interleaving pays off only for a workload bound by memory "
                                "bandwidth")


class ThreadsRemoteFromMemory(Rule):
    """
    ## What it checks
    `<emulatorpin>` or an `<iothreadpin>` whose host CPUs all lie on host nodes other than
    those the guest's memory is bound to (`<numatune><memory nodeset>` and each `<memnode>`).
    Needs host facts.

    ## Why it matters
    The emulator thread and I/O threads work on the guest's memory: they read and write the
    virtio rings and the data buffers of every disk request (and of every packet without
    vhost) they serve. Pinned to another node than that memory, each of those accesses
    crosses the interconnect, and the completion interrupts they raise go to vCPUs on the
    other node. nova pins emulator threads to the instance's own NUMA node(s)
    (`hw:emulator_threads_policy`, "on the same host NUMA node(s) as the instance"); vmtune's
    own CPU004/CPU005 fixes do the same.

    ## Example
    ```xml
    <cputune><emulatorpin cpuset='4'/><iothreadpin iothread='1' cpuset='4'/></cputune>  <!-- node 1 -->
    <numatune><memory mode='strict' nodeset='0'/></numatune>
    ```

    ## Fix
    None automatic: the right CPU is a housekeeping CPU of the memory's node, which only the
    host's layout says. Pin the threads there (the policy parameter `housekeeping_cpus`
    names them; CPU004/CPU005 then pin unpinned threads on the guest's node).

    ## Calibration
    Warning: every access the threads make to the guest's memory is remote, on every I/O
    request they serve, and a pin away from the memory brings nothing in the definition's
    context (nova's own placement keeps them on the instance's node). The pins are written
    explicitly, so there is no automatic fix and the note says to suppress the finding with
    its reason if deliberate. Versions: none: libvirt 9.0 pins the threads as written.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning (`emulatorpin`, `iothreadpin`)
    - nova `doc/source/admin/cpu-topologies.rst` (emulator threads)
    """

    code = "CPU030"
    needs = "cputune"

    since = "0.2.0"
    name = "threads-remote-from-memory"
    severity = Severity.WARNING
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        if host is None or len(host.cells) < 2 or domain.cputune is None:
            return
        memory = set(domain.memory_nodeset or ())
        for memnode in _memnodes(domain):
            memory |= parse_cpuset(memnode.get("nodeset")) or frozenset()
        if not memory or not memory <= {c.id for c in host.cells}:
            return  # unbound, or bound to nodes this host does not have (a definition for another host)
        pins: list[tuple[str, frozenset[int]]] = []
        if domain.emulator_pin:
            pins.append(("emulator threads", domain.emulator_pin))
        pins += [(f"I/O thread {tid}", cpus) for tid, cpus in sorted(domain.iothread_pins.items()) if cpus]
        for what, cpus in pins:
            nodes = host.nodes_of(cpus)
            if nodes and not nodes & memory:
                yield self.finding(domain, domain.cputune, f"{what} pinned on node(s) {format_cpuset(nodes)}, the "
                                   f"guest's memory is on node(s) {format_cpuset(frozenset(memory))}: every access "
                                   "they make to it is remote", note=EXPLICIT)


RULES: list[Rule] = [NumaMemoryRemote(), NumaCellMemoryRemote(), NumaInterleaveOneNode(), ThreadsRemoteFromMemory()]
