"""Cross-domain placement rules: what one domain's pins and memory do to the others.

They need the host's other domains (`vmtune check --host caps.xml DIR/` or a live
connection); without them they stay silent.
"""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset, human_kib
from vmtune.rules.base import Context, Finding, Rule, Severity


class VcpuPinsShared(Rule):
    """
    ## What it checks
    vCPUs pinned to host CPUs that another domain's vCPUs are pinned to as well. An error
    when both domains pin each vCPU to its own CPU (they were meant to be dedicated), a
    warning otherwise. Needs the host's other domains.

    ## Why it matters
    Two "dedicated" guests on the same cores get half the CPU each and all the cache
    thrashing of sharing, while their owners believe they are isolated: the classic result
    of copying a pinned definition to a new VM.

    ## Example
    ```xml
    <!-- db01 and db02 both: -->
    <cputune><vcpupin vcpu='0' cpuset='4'/><vcpupin vcpu='1' cpuset='5'/></cputune>
    ```

    ## Fix
    None automatic here: `vmtune plan` assigns non-overlapping CPUs.

    ## Calibration
    Error when both domains pin each vCPU to a CPU of its own (both were meant to be
    dedicated); warning otherwise, since sharing halves each guest's CPU.
    Versions: none matter; libvirt 9.0 accepts overlapping pins of two domains without a
    warning.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    """

    code = "CPU013"
    needs = "cputune"
    name = "vcpu-pins-shared"
    severity = Severity.WARNING
    other_severities = (Severity.ERROR,)

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        # vCPU pins are <cputune>'s: a domain without one, most of a batch, is settled without
        # collecting its pinned CPUs.
        if ctx.inventory is None or domain.cputune is None or not domain.pinned_cpus:
            return
        for other in ctx.inventory.pinned_on(domain.pinned_cpus, domain):
            shared = domain.pinned_cpus & other.vcpu_cpus
            if shared:
                both = domain.dedicated_pinning and other.dedicated
                yield self.finding(domain, domain.cputune, f"vCPU pins {format_cpuset(shared)} are shared with "
                                   f"{other.name}" + (" (both dedicated)" if both else ""),
                                   severity=Severity.ERROR if both else Severity.WARNING)


class EmulatorOnOtherVcpus(Rule):
    """
    ## What it checks
    An `<emulatorpin>` or `<iothreadpin>` on host CPUs where another domain's vCPUs are
    pinned. Needs the host's other domains.

    ## Why it matters
    Emulator and I/O threads wake up for every device interrupt; put on another guest's
    dedicated cores they preempt it, which is exactly what its pinning was meant to prevent.

    ## Example
    ```xml
    <emulatorpin cpuset='4-5'/>   <!-- db02's vCPUs are on 4-5 -->
    ```

    ## Fix
    None automatic: move them to housekeeping CPUs (`vmtune plan` does).

    ## Calibration
    Warning: the pinned guest's isolation is broken by another domain's threads, a
    documented cost.
    Versions: none matter; libvirt 9.0 accepts an emulatorpin on another domain's vCPU CPUs.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    """

    code = "CPU014"
    needs = "cputune"
    name = "emulator-on-other-vcpus"
    severity = Severity.WARNING

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        # Emulator and I/O thread pins are <cputune>'s: a domain without one, most of a batch, is
        # settled without building either.
        if ctx.inventory is None or domain.cputune is None:
            return
        threads = (domain.emulator_pin or frozenset()).union(*domain.iothread_pins.values())
        if not threads:
            return
        for other in ctx.inventory.pinned_on(threads, domain):
            shared = threads & other.vcpu_cpus
            if shared:
                yield self.finding(domain, domain.cputune, f"emulator/I/O threads on CPUs {format_cpuset(shared)} "
                                   f"where {other.name}'s vCPUs are pinned")


class HugepagePoolExceeded(Rule):
    """
    ## What it checks
    A domain backed by hugepages when the host's pool of its page size (2 MiB or 1 GiB; per
    bound node, or in total) cannot hold it together with every other domain using that pool.
    Needs host facts and the host's other domains.

    ## Why it matters
    Hugepages are reserved at boot of the guest, not on demand: when the pool runs out the
    guest does not start ("unable to map backing store for guest RAM"), typically the one
    restarted last after a maintenance window.

    ## Example
    ```xml
    <memoryBacking><hugepages/></memoryBacking>
    <numatune><memory mode='strict' nodeset='0'/></numatune>
    ```

    ## Fix
    None automatic: grow the pool (`vm.nr_hugepages`, per node under
    `/sys/devices/system/node/nodeN/hugepages/`) or move guests to another node.

    ## Calibration
    Error: the guest does not start when the pool cannot hold it.
    Versions: libvirt 9.0 refuses to start a guest whose hugepage pool is too small.

    ## References
    - https://libvirt.org/formatdomain.html#memory-backing
    """

    code = "MEM008"
    name = "hugepage-pool-exceeded"
    severity = Severity.ERROR
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        # <hugepages> first: most domains have none, and their page size is then not worked out.
        if host is None or not host.cells or domain.hugepages is None:
            return
        size = domain.hugepage_size_kib
        if size is None:
            return
        nodes = domain.memory_nodeset or frozenset(c.id for c in host.cells)
        pool = sum(c.pages.get(size, 0) for c in host.cells if c.id in nodes) * size
        demand = domain.memory_kib
        sharing = []
        for other in ctx.inventory.with_page_size(size, domain) if ctx.inventory else []:
            if other.hugepage_kib == size and (other.nodeset is None or other.nodeset & nodes):
                demand += other.memory_kib
                sharing.append(other.name)
        if demand > pool:
            with_others = f" with {', '.join(sharing)}" if sharing else ""
            yield self.finding(domain, domain.hugepages, f"needs {human_kib(demand)} of {human_kib(size)} "
                               f"hugepages{with_others} "
                               f"on node(s) {format_cpuset(nodes)}, the pool holds {human_kib(pool)}: "
                               "the guest will not start")


class HostMemoryOvercommit(Rule):
    """
    ## What it checks
    The memory of the host's running domains together exceeds the host's RAM (on a live
    host shut-off definitions are not counted; files given on the command line all count).
    Reported once per host, on the first running domain by name, and only when at least
    two domains add up: one domain larger than the host is CPU012's error. Needs host facts
    and the host's other domains.

    ## Why it matters
    Overcommitted memory is paid for with host swapping and ballooning: in one report
    the host's swap was full and ksmd busy while guests crawled.

    ## Example
    ```xml
    <memory unit='GiB'>64</memory>   <!-- on a 96 GiB host already running 48 GiB of guests -->
    ```

    ## Fix
    None automatic: move or shrink guests.

    ## Calibration
    Warning: overcommitted memory is paid for with host swapping, a documented cost for
    every domain on the host (linux-kvm.org's memory overcommit notes). A shut-off
    definition costs nothing until it starts, so it is not counted.
    Versions: no libvirt or QEMU version changes the verdict; the rule reads sizes only.

    ## References
    - https://www.linux-kvm.org/page/Memory (overcommit)
    """

    code = "MEM009"
    name = "host-memory-overcommit"
    severity = Severity.WARNING
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        if host is None or not host.total_memory_kib or ctx.inventory is None:
            return
        inventory = ctx.inventory
        # Reported on the first running domain by name only: asked first, since it settles all
        # but one domain of a batch.
        if not inventory.first_by_name(domain) or not inventory.active(domain):
            return  # a shut-off definition uses no memory
        count, memory = inventory.totals(domain)
        if not count:
            return  # one domain alone is CPU012's
        total = domain.memory_kib + memory
        if total > host.total_memory_kib:
            yield self.finding(domain, domain.top("memory"),
                               f"the host's {count + 1} domains need {human_kib(total)}, the host has "
                               f"{human_kib(host.total_memory_kib)}")


RULES: list[Rule] = [VcpuPinsShared(), EmulatorOnOtherVcpus(), HugepagePoolExceeded(), HostMemoryOvercommit()]
