"""USB controller and input rules."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.patch.edits import Edit, Remove, ensure, path, set_attrs, step
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

POLLING_MODELS = frozenset({"piix3-uhci", "piix4-uhci", "vt82c686b-uhci", "ich9-ehci1", "ich9-uhci1",
                            "ich9-uhci2", "ich9-uhci3", "pci-ohci"})


def is_pseries(domain: Domain) -> bool:
    """A 64-bit POWER guest on QEMU's pseries machine (libvirt's default for ppc64)."""
    return ((domain.arch or "").startswith("ppc64") and domain.machine in ("", "pseries")) \
        or domain.machine.startswith("pseries-")


def polling_groups(domain: Domain) -> list[list]:
    """USB controller groups (by index) that QEMU polls: UHCI/EHCI/OHCI models, or a controller
    written without a model, which libvirt 9.0 makes a piix3-uhci on i440fx and q35 alike (only
    a q35 guest with no USB controller written at all gets a qemu-xhci) and a pci-ohci on ppc64."""
    controllers = domain.controllers_of("usb")
    if len(controllers) == 1:  # most domains: one controller, polled only by its model or without one
        model = controllers[0].get("model")
        if model is not None and model not in POLLING_MODELS:
            return []
    by_index: dict[str, list] = {}
    for ctl in controllers:
        by_index.setdefault(ctl.get("index", "0"), []).append(ctl)
    groups = []
    for group in by_index.values():
        models = [c.get("model") for c in group]
        default_polled = models == [None] and (domain.is_x86 or is_pseries(domain))
        if not default_polled and not any(m in POLLING_MODELS for m in models):
            continue
        if any(m == "none" or (m not in POLLING_MODELS and m is not None) for m in models):
            continue
        groups.append(group)
    return groups


def implicit_uhci(domain: Domain) -> bool:
    """No USB controller written on an x86 i440fx guest (or one without a machine attribute,
    whose default is i440fx): libvirt adds a piix3-uhci."""
    machine = domain.machine
    return (domain.is_x86 and not domain.controllers_of("usb") and domain.devices is not None
            and (machine == "" or (machine.startswith("pc") and not domain.is_q35)))


class UsbPollingController(Rule):
    """
    ## What it checks
    USB controllers of the UHCI/EHCI/OHCI generation (`piix3-uhci`, the `ich9-ehci1` +
    `ich9-uhci` companion set, `pci-ohci`), a USB controller written without a model (libvirt
    9.0 makes it a piix3-uhci on q35 as on i440fx), or an i440fx guest with no USB controller
    at all (libvirt then adds a piix3-uhci; a definition without a machine attribute gets
    i440fx), on a guest with at least one USB device (a USB tablet, keyboard, disk,
    redirected or passed-through device, hub...). On x86 guests, and on 64-bit POWER
    guests of the pseries machine, whose USB controller is a `pci-ohci` (libvirt's default
    there when no model is written).

    ## Why it matters
    UHCI is polled by QEMU with a 1 ms frame timer whenever a device is attached, so an idle
    guest with a USB tablet keeps waking the host. OHCI, the controller of pseries guests,
    runs the same 1 ms frame timer while a device is attached (QEMU `hw/usb/hcd-ohci.c`,
    `ohci_frame_boundary`). xHCI is interrupt driven: one report measured idle host CPU
    fall from 13% to 1%. Without a device nothing is polled (Linux's
    uhci-hcd also stops an idle root hub), so such guests are not reported.

    ## Example
    ```xml
    <controller type='usb' index='0' model='piix3-uhci'/>
    ```

    ## Fix
    Turns the first controller into `model='qemu-xhci'` and removes its UHCI companions and
    its `<master>` setting. A lone controller keeps its PCI address: on an i440fx guest whose
    bus 0 is full libvirt could not place it elsewhere ("PCI controller at index 1 has
    bus='0x01', but index must be larger than bus"), and libvirt 9.0 defines and starts a
    qemu-xhci at the PIIX3's 00:01.2. A controller whose companions go loses its address
    (its function may need the removed companions' function 0). Unsafe: the guest needs an
    xHCI driver (Windows 8 and later, Linux). Not offered to Windows guests before Windows 8,
    nor to Windows guests whose version is unknown (`--os windows` or inferred from the
    definition): Windows 7 has no in-box xHCI driver. With no controller written, it adds
    `<controller type='usb' index='0' model='qemu-xhci' ports='15'/>`.

    ## Calibration
    Warning: the idle polling cost is measured (docs/effects.md: 1.9% to 0.3% host CPU)
    for these controllers with a device attached. Unsafe: the guest needs an xHCI driver and
    sees other hardware.
    Versions: libvirt 9.0 defines and starts a qemu-xhci controller, also at the PIIX3's
    address 00:01.2 (QEMU 7.2); it turns `<controller type='usb'/>` into a piix3-uhci on q35
    too (a q35 guest with no controller written gets a qemu-xhci), seen with its embedded
    QEMU driver (`tests/test_embed_define.py`). On ppc64 libvirt builds a controller without
    a model as `pci-ohci` (`src/qemu/qemu_command.c`, `ARCH_IS_PPC64`); the fixed pseries
    definition validates against libvirt 9.0's schema and defines on the test driver (no
    ppc64 QEMU here to start it). A pseries guest with no controller written is not judged.

    ## References
    - https://libvirt.org/formatdomain.html#usb-controller
    - virt-manager `virtinst/devices/controller.py`
    """

    code = "USB001"
    name = "usb-polling-controller"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not (domain.is_x86 or is_pseries(domain)):
            return  # other machines' controllers are not judged
        # What is polled first, then whether a device is attached (nothing attached: nothing
        # polled): most guests have an xHCI controller, and whether a USB device is attached
        # may read every device of the domain (~2/3 of this rule's cost; issue 45).
        implicit, groups = implicit_uhci(domain), polling_groups(domain)
        if not (implicit or groups) or not domain.has_usb_consumer:
            return
        no_xhci = self._no_xhci_driver(domain)
        if implicit and no_xhci is None:
            xhci = ensure(domain.root, path("devices", step("controller", type="usb", index="0")),
                          {"model": "qemu-xhci", "ports": "15"})
            yield self.finding(domain, domain.devices, "no USB controller is written, so libvirt adds a polled "
                               "piix3-uhci", Fix("add a qemu-xhci controller", (xhci,), FixSafety.UNSAFE))
        for group in groups:
            models = [c.get("model") for c in group]
            first, rest = group[0], group[1:]
            edits: list[Edit] = [set_attrs(first, {"model": "qemu-xhci", "ports": "15"})]
            # A lone controller keeps its slot (a full bus 0 has no other); a companion set's
            # EHCI sits on a function whose function 0 is a companion that goes, so it moves.
            dropped = ("address", "master") if rest else ("master",)
            edits += [Remove(child) for child in first if isinstance(child.tag, str) and child.tag in dropped]
            edits += [Remove(c) for c in rest]
            default = "default pci-ohci" if is_pseries(domain) else "default piix3-uhci"
            label = "/".join(m or default for m in models)
            message = f"USB controller {label} is polled (idle host CPU)"
            if no_xhci is not None:
                yield self.finding(domain, first, message, note=no_xhci)
                continue
            yield self.finding(domain, first, message, Fix("use qemu-xhci", tuple(edits), FixSafety.UNSAFE))

    @staticmethod
    def _no_xhci_driver(domain: Domain) -> str | None:
        """Why the guest may lack an xHCI driver (Windows before 8, or Windows of unknown version)."""
        if not domain.is_windows:
            return None
        if domain.windows_version is None:
            return "no fix: Windows of unknown version (Windows 7 has no in-box xHCI driver); give libosinfo " \
                   "metadata to get one"
        if domain.windows_before_8:
            return f"no fix: Windows {domain.windows_version} has no in-box xHCI driver (Windows 8 and later do)"
        return None


class UsbTabletWithoutGraphics(Rule):
    """
    ## What it checks
    A USB tablet on a guest with no graphics device.

    ## Why it matters
    The tablet exists to give a graphical console an absolute pointer. Without graphics it
    does nothing. On a UHCI/EHCI/OHCI controller it also keeps QEMU's 1 ms frame timer
    running: vmtune's effect run measured idle host CPU fall from 1.9% to 0.3% when the
    polled controller went (docs/effects.md). On xHCI, which is interrupt driven, it costs
    nothing measurable.

    ## Example
    ```xml
    <input type='tablet' bus='usb'/>   <!-- and no <graphics> -->
    ```

    ## Fix
    Removes the tablet. Unsafe: it removes a device the user declared, and a graphical
    console added later would have a relative pointer only.

    ## Calibration
    Warning when the guest's USB controller is polled (the measured cost applies); info on
    xHCI or other controllers, where only the clutter remains. The fix removes a declared
    device, so it is unsafe.
    Versions: libvirt 9.0 defines the guest without the tablet; the polling cost is QEMU's
    UHCI/EHCI frame timer (QEMU 7.2).

    ## References
    - https://libvirt.org/formatdomain.html#input-devices
    - Proxmox `tablet` option documentation
    """

    code = "USB002"
    name = "usb-tablet-without-graphics"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.graphics:
            return
        polled = bool(polling_groups(domain)) or implicit_uhci(domain)
        for dev in domain.inputs:
            if dev.get("type") == "tablet" and dev.get("bus", "usb") == "usb":
                yield self.finding(domain, dev, "USB tablet on a guest without graphics"
                                   + (" keeps a polled USB controller busy" if polled else ""),
                                   Fix("remove the tablet", (Remove(dev),), FixSafety.UNSAFE),
                                   severity=None if polled else Severity.INFO)


class UsbControllerUnused(Rule):
    """
    ## What it checks
    A USB controller (other than `model='none'`) on a guest with no graphics and no USB
    device at all.

    ## Why it matters
    An unused controller is still a PCI device QEMU emulates and a guest driver that
    polls. nova and KubeVirt set `model='none'` when nothing needs USB.

    ## Example
    ```xml
    <controller type='usb' model='qemu-xhci'/>   <!-- no USB devices, no graphics -->
    ```

    ## Fix
    Sets `model='none'` on the first controller and removes its companions (deleting the
    controller would make libvirt add a default one). Unsafe: it changes a controller the
    user declared, and USB hot-plug then fails ("USB is disabled for this domain").

    ## Calibration
    Info: an idle controller without devices has no measured cost. The fix removes
    guest-visible hardware, so it is unsafe.
    Versions: libvirt 9.0 defines `model='none'` and refuses USB hot-plug then.

    ## References
    - https://libvirt.org/formatdomain.html#usb-controller
    """

    code = "USB003"
    name = "usb-controller-unused"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        usb = domain.controllers_of("usb")
        # has_usb_consumer last: it may read every device of the domain
        if not usb or domain.graphics or any(c.get("model") == "none" for c in usb) or domain.has_usb_consumer:
            return
        first = usb[0]
        edits: list[Edit] = [set_attrs(first, {"model": "none", "ports": None})]
        edits += [Remove(child) for child in first if isinstance(child.tag, str)]
        edits += [Remove(c) for c in usb[1:]]
        yield self.finding(domain, first, "USB controller without any USB device",
                           Fix("set USB controller model='none'", tuple(edits), FixSafety.UNSAFE))


RULES: list[Rule] = [UsbPollingController(), UsbTabletWithoutGraphics(), UsbControllerUnused()]
