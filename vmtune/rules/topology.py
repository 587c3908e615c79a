"""Guest CPU topology: what the guest is told about sockets, cores and threads."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.facts.units import MAX_VCPUS, uint_or_none
from vmtune.patch.edits import ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

CLIENT_SOCKET_LIMIT = 2  # Windows 10/11 Pro and Enterprise; Home uses one socket
SERVER_SOCKET_LIMIT = 64  # Windows Server 2012 and later, Standard and Datacenter


def _topology(domain: Domain) -> dict[str, int] | None:
    element = domain.child(domain.cpu, "topology") if domain.cpu is not None else None
    if element is None:
        return None
    return {key: uint_or_none(element.get(key), MAX_VCPUS) or 1 for key in ("sockets", "dies", "cores", "threads")}


def _socket_limit(domain: Domain) -> int | None:
    """How many sockets this Windows edition uses; None when libosinfo does not tell."""
    if domain.windows_server is False:
        return CLIENT_SOCKET_LIMIT
    if domain.windows_server and domain.windows_version not in ("2k8", "2k8r2"):
        return SERVER_SOCKET_LIMIT
    return None


def _online_sockets(domain: Domain, topology: dict[str, int] | None) -> int:
    """Sockets that hold a vCPU online at boot. QEMU numbers vCPUs socket by socket (thread,
    then core, then die), so vCPU i sits in socket i // (dies*cores*threads); without a
    topology every vCPU is a socket of its own."""
    per_socket = topology["dies"] * topology["cores"] * topology["threads"] if topology else 1
    return len({vcpu // per_socket for vcpu in domain.online_vcpu_ids})


class WindowsVcpusAsSockets(Rule):
    """
    ## What it checks
    A Windows client guest (7, 8, 10, 11: libosinfo says which) with more than two vCPUs and
    either no `<cpu><topology>` or one with more than two sockets
    (`<topology sockets='4' cores='1'/>`); a Windows Server 2012 or later guest with more
    than 64 sockets the same way. Only sockets holding a vCPU online at boot count:
    `<vcpu current='4'>16</vcpu>` with `sockets='4' cores='4'` (KubeVirt's CPU hot-plug
    headroom) boots four vCPUs in one socket, which Windows uses in full.

    ## Why it matters
    Without a topology libvirt 9.0 passes `-smp N,sockets=N,cores=1,threads=1`: one socket
    per vCPU. Windows client editions use at most two sockets (Pro and Enterprise; Home one),
    so the other vCPUs sit idle: a 16-vCPU Windows 10 guest works on 2 (an 8-vCPU Windows
    Pro guest used 2 in sagemath/sage-windows-cygwin#25; a 32-core one 2 in
    yunionio/cloudpods#16650). virt-manager writes a topology with cores for this reason.
    An explicit topology of N sockets of one core has the same effect; it is nova's default
    (N sockets of 1 core, `doc/source/admin/cpu-topologies.rst`) and was KubeVirt's Windows
    preference (`preferSockets`, changed to cores in common-instancetypes#542). Windows
    Server editions since 2012 use at most 64 sockets, so a guest of more than 64 vCPUs
    given one socket each leaves the rest idle (sapcc/helm-charts#6241).

    ## Example
    ```xml
    <vcpu>8</vcpu>
    <cpu mode='host-passthrough'/>   <!-- or <topology sockets='8' dies='1' cores='1' threads='1'/> -->
    ```

    ## Fix
    Adds `<topology sockets='1' dies='1' cores='N' threads='1'/>` to `<cpu>`, N being the
    maximum vCPU count; an explicit topology becomes one socket (and one die) holding all
    its cores, with its `threads` kept. Unsafe: the guest sees another CPU topology
    (Windows may ask to reactivate), and an explicit topology is a value the user wrote.

    ## Calibration
    Warning: Microsoft documents the socket limits of client and server editions, and they
    apply to this guest as written. Windows Server 2008 (4 sockets in Standard, more in
    other editions) is not reported: libosinfo does not say which edition it is.
    Versions: libvirt 9.0 passes `-smp N,sockets=N,cores=1,threads=1` without a `<topology>`;
    the limit is Windows 10/11 client licensing.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology
    - https://learn.microsoft.com/windows-hardware/design/minimum/minimum-hardware-requirements-overview
    - https://learn.microsoft.com/windows-server/get-started/editions-comparison (64 sockets)
    - virt-manager `virtinst/domain/cpu.py` (topology defaults)
    - nova `doc/source/admin/cpu-topologies.rst`; kubevirt/common-instancetypes#542
    """

    code = "CPU016"
    name = "windows-vcpus-as-sockets"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    os = "windows"
    hypervisors = frozenset({"kvm", "qemu"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        limit = _socket_limit(domain)
        if limit is None or domain.max_vcpus <= limit:
            return
        topology = _topology(domain)
        if _online_sockets(domain, topology) <= limit:
            return  # the rest is hot-plug headroom (KubeVirt's CPU hot-plug): what boots sits in sockets Windows uses
        if topology is not None:
            yield from self._explicit(domain, topology, limit)
            return
        count = str(domain.max_vcpus)
        fix = Fix(f"one socket of {count} cores", (ensure(domain.root, path("cpu", "topology"), {
            "sockets": "1", "dies": "1", "cores": count, "threads": "1"}),), FixSafety.UNSAFE)
        yield self.finding(domain, domain.vcpu_element, f"{count} vCPUs as {count} sockets: Windows "
                           f"{domain.windows_version} uses {limit} at most", fix)

    def _explicit(self, domain: Domain, topology: dict[str, int], limit: int) -> Iterator[Finding]:
        """An explicit topology of more sockets than the edition uses: fold them into one socket."""
        sockets = topology["sockets"] * topology["dies"]
        if topology["sockets"] <= limit:
            return
        element = domain.child(domain.cpu, "topology") if domain.cpu is not None else None
        cores = str(sockets * topology["cores"])
        fix = Fix(f"one socket of {cores} cores", (set_attrs(element, {
            "sockets": "1", "dies": "1" if element.get("dies") is not None else None, "cores": cores}),),
            FixSafety.UNSAFE) if element is not None else None
        yield self.finding(domain, element, f"topology of {topology['sockets']} sockets: Windows "
                           f"{domain.windows_version} uses {limit} at most", fix)


class VcpusExceedHostCpus(Rule):
    """
    ## What it checks
    A guest with more vCPUs than its host has CPUs. Needs host facts.

    ## Why it matters
    Its vCPUs time-share the host's CPUs: a vCPU holding a guest spinlock is preempted by
    its sibling vCPU, and the others spin waiting for it. QEMU warns at start ("Number of SMP
    cpus requested exceeds the recommended cpus supported by KVM").

    ## Example
    ```xml
    <vcpu>32</vcpu>   <!-- on a 16-CPU host -->
    ```

    ## Fix
    None: give the guest at most as many vCPUs as the host has CPUs.

    ## Calibration
    Warning: lock-holder preemption is a documented cost for every guest larger than its
    host.
    Versions: none matter; libvirt 9.0 defines more vCPUs than host CPUs without a warning.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-allocation
    - QEMU `accel/kvm/kvm-all.c` (the recommended-CPUs warning)
    """

    code = "CPU017"
    name = "vcpus-exceed-host-cpus"
    severity = Severity.WARNING
    needs_host = True
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        cpus = len(ctx.host.known_cpus) if ctx.host else 0
        if cpus and domain.vcpus > cpus:
            yield self.finding(domain, domain.vcpu_element, f"{domain.vcpus} vCPUs on a host with {cpus} CPUs")


class SmtTopologyNotOnSiblings(Rule):
    """
    ## What it checks
    A guest whose `<topology>` has `threads` > 1 and whose vCPUs are each pinned to one host
    CPU, where the vCPUs of one guest core are not pinned to SMT siblings of one host core.
    Needs host facts.

    ## Why it matters
    The guest scheduler treats the threads of a core as sharing its execution units and
    caches: it packs work onto them and balances across cores. Pinned to CPUs of different
    host cores, the guest's picture is wrong both ways. nova's `hw:cpu_thread_policy` and
    vmtune's planner keep a guest core's threads on sibling host threads.

    ## Example
    ```xml
    <cpu mode='host-passthrough'><topology sockets='1' dies='1' cores='1' threads='2'/></cpu>
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    None: `vmtune plan` places guests sibling-aware; or use `threads='1'`.

    ## Calibration
    Info: the misplacement has no measured cost we can cite for a given workload.
    Versions: none matter; libvirt 9.0 accepts any pinning of a threads>1 topology.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology
    - nova `hw:cpu_thread_policy`
    """

    code = "CPU018"
    needs = "cputune"
    name = "smt-topology-not-on-siblings"
    severity = Severity.INFO
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        # Dedicated pinning pins every vCPU (there is at least one): a domain without any pin,
        # most of a batch, is settled without reading its topology.
        if not domain.vcpu_pins:
            return
        topology = _topology(domain)
        if ctx.host is None or not ctx.host.cells or topology is None or topology["threads"] < 2 \
                or not domain.dedicated_pinning:
            return
        siblings = {cpu.id: cpu.siblings | {cpu.id} for cell in ctx.host.cells for cpu in cell.cpus}
        threads = topology["threads"]
        for first in range(0, domain.max_vcpus, threads):
            group = [domain.vcpu_pins.get(v) for v in range(first, first + threads)]
            cpus = [min(pin) for pin in group if pin and len(pin) == 1]
            if len(cpus) == threads and not all(c in siblings.get(cpus[0], frozenset()) for c in cpus):
                yield self.finding(domain, domain.cputune, f"vCPUs {first}-{first + threads - 1} form one guest "
                                   f"core but are pinned to host CPUs {', '.join(map(str, cpus))} of different cores")
                return


RULES: list[Rule] = [WindowsVcpusAsSockets(), VcpusExceedHostCpus(), SmtTopologyNotOnSiblings()]
