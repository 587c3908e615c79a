"""NUMA bindings that contradict the CPU placement."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset, human_kib
from vmtune.patch.edits import set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import vcpu_host_cpus


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


RULES: list[Rule] = [NumaMemoryRemote()]
