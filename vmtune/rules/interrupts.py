"""The ARM guest's interrupt controller: how many vCPUs a GIC version holds, and whether the
host can give the guest the version it names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from lxml import etree

from vmtune.facts.domain import ARM_ARCHES, Domain
from vmtune.patch.edits import set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

if TYPE_CHECKING:
    from vmtune.facts.host import Host  # annotations only: host facts (and dataclasses) load with --host

GICV2_MAX_CPUS = 8  # QEMU's GIC_NCPU: hw/arm/virt.c refuses more with gic-version=2


def _gic(domain: Domain) -> tuple[etree._Element, str] | None:
    """An ARM guest's `<features><gic version='N'/>` with a numeric version; None otherwise
    (no element, `version='host'`, or no version: libvirt then picks one the host offers)."""
    arch = domain.arch
    if not (arch in ARM_ARCHES or (arch is None and domain.machine.startswith("virt"))):
        return None
    gic = domain.feature("gic")
    version = (gic.get("version") or "").strip() if gic is not None else ""
    return (gic, version) if gic is not None and version.isdigit() else None


def _offered(host: Host | None, domain: Domain) -> frozenset[str] | None:
    """The GIC versions the host's domain capabilities offer this guest's domain type; None when
    not known (no ARM domain capabilities, or ones for the other domain type)."""
    if host is None or host.gic_versions is None:
        return None
    if host.domcaps_type is not None and host.domcaps_type != domain.hypervisor:
        return None
    return host.gic_versions


def _version_for(domain: Domain, offered: frozenset[str] | None) -> str | None:
    """The GIC version to write instead: 3 (no CPU limit to speak of) where the host offers it or
    is not known, else 2 when the guest fits in it."""
    if offered is None or "3" in offered:
        return "3"
    if "2" in offered and domain.max_vcpus <= GICV2_MAX_CPUS:
        return "2"
    return None


class Gicv2TooManyVcpus(Rule):
    """
    ## What it checks
    An ARM guest (`aarch64`, `armv7l`) with `<features><gic version='2'/>` and more than 8
    vCPUs, counting those hot-plug could add (`<vcpu>` is the maximum).

    ## Why it matters
    A GICv2 interrupt controller addresses at most 8 CPUs. QEMU's `virt` machine refuses
    the guest at start: `hw/arm/virt.c` sets the CPU limit to `GIC_NCPU` (8) for GICv2 and
    exits with "Number of SMP CPUs requested (N) exceeds max CPUs supported by machine
    'mach-virt' (8)". GICv3 holds hundreds (its redistributors' space: 123, or 512 more in
    high memory). It happens when an older 4-vCPU definition is scaled up.

    ## Example
    ```xml
    <vcpu>16</vcpu>
    <os><type arch='aarch64' machine='virt'>hvm</type></os>
    <features><gic version='2'/></features>
    ```

    ## Fix
    Sets `version='3'`. Unsafe: the guest sees another interrupt controller (Linux drives
    both; its device tree or ACPI tables change), and a KVM host must offer GICv3. Withheld
    when the host's domain capabilities (`--domcaps`) do not offer version 3.

    ## Calibration
    Error: the guest does not start. Versions: QEMU's `machvirt_init` limits GICv2 to
    `GIC_NCPU` (8) in every version read, from QEMU 2.x to QEMU 8.x; libvirt passes the
    version to QEMU as `gic-version`.

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features (`gic`)
    - QEMU `hw/arm/virt.c` (`machvirt_init`, `virt_max_cpus = GIC_NCPU`) and
      `hw/intc/arm_gic_common.c` ("requested %u CPUs exceeds GIC maximum")
    """

    code = "CPU026"

    since = "0.2.0"
    name = "gicv2-too-many-vcpus"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        found = _gic(domain)
        if found is None or found[1] != "2" or domain.max_vcpus <= GICV2_MAX_CPUS:
            return
        gic = found[0]
        offered = _offered(ctx.host, domain)
        version = _version_for(domain, offered)
        fix = note = None
        if version is not None:
            fix = Fix(f"GIC version {version}", (set_attrs(gic, {"version": version}),), FixSafety.UNSAFE)
            if offered is None:
                note = "the fix assumes a host that offers GICv3 (give --domcaps to know)"
        else:
            note = "the host's domain capabilities offer no GICv3: give the guest at most 8 vCPUs"
        yield self.finding(domain, gic, f"GICv2 addresses at most {GICV2_MAX_CPUS} CPUs, the guest has "
                           f"{domain.max_vcpus}: QEMU refuses to start it", fix, note=note)


class GicVersionUnsupported(Rule):
    """
    ## What it checks
    An ARM guest whose `<features><gic version='N'/>` names a GIC version the host's domain
    capabilities (`virsh domcapabilities`, given with `--domcaps`) do not list under
    `<gic supported='yes'><enum name='version'>` for the guest's domain type. Needs the host's
    domain capabilities for ARM.

    ## Why it matters
    Under KVM the interrupt controller is the host's own, virtualised: a host with a GICv3
    that has no GICv2 compatibility (most current ARM servers) cannot give a guest GICv2, and
    a GICv2 host cannot give GICv3. QEMU checks the chosen version against what KVM reports
    (`finalize_gic_version` in `hw/arm/virt.c`) and exits, so the guest does not start. It
    happens to definitions moved between ARM hosts of different generations.

    ## Example
    ```xml
    <features><gic version='2'/></features>   <!-- domcapabilities list only version 3 -->
    ```

    ## Fix
    Sets a version the host offers: 3 when offered, else 2 when the guest has at most 8
    vCPUs. Unsafe: the guest sees another interrupt controller. `version='host'` (or no
    version) lets libvirt pick one the host offers.

    ## Calibration
    Error: the guest does not start. Versions: libvirt 9.0 lists the versions QEMU's
    `query-gic-capabilities` reports (kernel and emulated) in its domain capabilities; QEMU
    since 2.x refuses a version KVM cannot provide.

    ## References
    - https://libvirt.org/formatdomaincaps.html#gic-capabilities
    - QEMU `hw/arm/virt.c` (`finalize_gic_version`)
    """

    code = "CPU027"

    since = "0.2.0"
    name = "gic-version-unsupported"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        found = _gic(domain)
        offered = _offered(ctx.host, domain) if found is not None else None
        if found is None or offered is None or found[1] in offered:
            return
        gic, current = found
        version = _version_for(domain, offered)
        fix = Fix(f"GIC version {version}", (set_attrs(gic, {"version": version}),), FixSafety.UNSAFE) \
            if version is not None and version != current else None
        said = ", ".join(sorted(offered)) if offered else "none"
        yield self.finding(domain, gic, f"GIC version {current} is not offered by the host (its domain "
                           f"capabilities list: {said}): the guest does not start", fix,
                           note=None if fix is not None else "no GIC version the host offers holds the guest's "
                                                              "vCPUs")


RULES: list[Rule] = [Gicv2TooManyVcpus(), GicVersionUnsupported()]
