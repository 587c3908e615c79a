"""PCI topology rules."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.facts.units import uint_or_none
from vmtune.patch.edits import ensure, path, step
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity


class PcieRootPortsExhausted(Rule):
    """
    ## What it checks
    A q35 guest whose `pcie-root-port` controllers all hold a device (virt-lint's "free
    PCIe root ports" check). Judged only when the ports have indexes and the devices PCI
    addresses, as in a definition libvirt has written.

    ## Why it matters
    On q35 every hot-plugged PCIe device (a disk, a NIC, a vhost-user port during a
    live operation) needs an empty root port; with none free, hot-plug fails and the
    guest must be shut down to grow.

    ## Example
    ```xml
    <controller type='pci' index='1' model='pcie-root-port'/>
    <interface type='network'><address type='pci' bus='0x01' slot='0x00'/></interface>
    ```

    ## Fix
    Adds one `<controller type='pci' model='pcie-root-port'/>`; libvirt assigns its index
    and address. Safe.

    ## Calibration
    Info: nothing is slow until a hot-plug is attempted. Safe: it adds one empty root
    port and changes nothing the user wrote; applied only when asked (`--select
    PCI001`).
    Versions: libvirt 9.0 defines the added `pcie-root-port` on q35 guests.

    ## References
    - https://gitlab.com/libvirt/virt-lint
    - https://libvirt.org/pci-hotplug.html
    """

    code = "PCI001"
    name = "pcie-root-ports-exhausted"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not domain.is_q35 or domain.devices is None:
            return
        ports = [c for c in domain.controllers_of("pci") if c.get("model") == "pcie-root-port"]
        indexes = {i for c in ports if (i := uint_or_none(c.get("index"))) is not None}
        if not ports or len(indexes) != len(ports):
            return
        # iterfind(".//address[@type='pci']") with the tag matched by libxml2, not lxml's path engine
        occupied = {bus for address in domain.devices.iter("address") if address.get("type") == "pci"
                    and (bus := uint_or_none(address.get("bus"), 255, base16=True)) is not None}
        if indexes - occupied:
            return
        yield self.finding(domain, ports[-1], f"all {len(ports)} PCIe root ports are in use: no hot-plug possible",
                           Fix("add a pcie-root-port", (ensure(domain.root, path(
                               "devices", step("controller", type="pci", model="pcie-root-port")), new=True),),
                               FixSafety.SAFE))


RULES: list[Rule] = [PcieRootPortsExhausted()]
