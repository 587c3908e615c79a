"""virtio-net driver settings: offloads and virtqueue depth."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.devices import is_virtio
from vmtune.facts.domain import Domain
from vmtune.facts.units import uint_or_none
from vmtune.patch.edits import Edit, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT
from vmtune.rules.network import TAP_TYPES, nic_model

# libvirt's <driver><host .../> and <guest .../> offload switches (QEMU's csum, host_tso4... and
# guest_csum, guest_tso4...). The guest ones set the tap device's offloads toward the guest.
HOST_OFFLOADS = ("csum", "gso", "tso4", "tso6", "ecn", "ufo", "mrg_rxbuf")
GUEST_OFFLOADS = ("csum", "tso4", "tso6", "ecn", "ufo")
# What Windows' receive segment coalescing needs of the tap: TX checksum and TCP segmentation.
RSC_NEEDS = frozenset({"csum", "tso4", "tso6"})
DEFAULT_QUEUE_SIZE = 256
QUEUE_SIZE = "1024"  # the largest QEMU accepts for tap and vhost-user; nova's documented value


class VirtioNetOffloadsOff(Rule):
    """
    ## What it checks
    A virtio NIC with offloads switched off in its `<driver>`: any of `csum`, `gso`,
    `tso4`, `tso6`, `ecn`, `ufo`, `mrg_rxbuf` set to `off` on `<host>`, or `csum`, `tso4`,
    `tso6`, `ecn`, `ufo` on `<guest>`.

    ## Why it matters
    Checksums and segmentation then happen in software, per 1500-byte packet, in the guest
    or in vhost. The guest-side switches also set the tap device's offloads toward the
    guest, which Windows' receive segment coalescing (RSC, netkvm) needs: virtio-win's
    knowledge base requires TX checksum and TCP segmentation offload on the tap and
    measured RSC at 5x host-to-guest throughput (7 to 35 Gbit/s). The switches exist to
    work around broken NICs or guest drivers and are often copied along after the bug is
    gone.

    ## Example
    ```xml
    <interface type='bridge'><model type='virtio'/>
      <driver><host csum='off' tso4='off'/><guest tso4='off'/></driver></interface>
    ```

    ## Fix
    Removes the `off` switches (the offloads return to QEMU's default, on). Unsafe: it
    changes values the user wrote, perhaps as a workaround.

    ## Calibration
    Warning: software checksums and segmentation cost CPU per packet on every guest, and
    for a Windows guest whose `<guest>` checksum or TSO switches are off they disable RSC,
    whose 5x is documented; the switches bring nothing but as a workaround for a broken
    driver. They are written explicitly, so the fix is unsafe and the note says to suppress
    the finding with its reason if it is such a workaround.
    Versions: none: libvirt passes the `<host>`/`<guest>` switches to QEMU's virtio-net
    properties unchanged; the RSC figure is virtio-win's.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    - https://virtio-win.github.io/Knowledge-Base/netkvm-RSC-(receive-segment-coalescing)-feature
    """

    code = "NET006"
    name = "virtio-net-offloads-off"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    reads_os = True  # names RSC for Windows

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            driver = domain.child(nic, "driver")
            if driver is None or not is_virtio(nic_model(domain, nic)):
                continue
            edits: list[Edit] = []
            off: list[str] = []
            rsc = False
            for side, names in (("host", HOST_OFFLOADS), ("guest", GUEST_OFFLOADS)):
                element = driver.find(side)
                if element is None:
                    continue
                names_off = [n for n in names if element.get(n) == "off"]
                if names_off:
                    off += [f"{side} {n}" for n in names_off]
                    edits.append(set_attrs(element, dict.fromkeys(names_off)))
                    rsc = rsc or (side == "guest" and bool(RSC_NEEDS & set(names_off)))
            if not off:
                continue
            windows = rsc and domain.is_windows
            message = f"virtio NIC has offloads off ({', '.join(off)})"
            if windows:
                message += ": Windows receive segment coalescing (RSC) cannot work"
            yield self.finding(domain, driver, message, Fix("switch the offloads back on", tuple(edits),
                                                            FixSafety.UNSAFE), note=EXPLICIT)


class VirtioNetQueueSizeDefault(Rule):
    """
    ## What it checks
    A virtio NIC tuned for throughput (several `queues`, or a vhost-user backend) without
    `rx_queue_size` (and, on vhost-user, `tx_queue_size`): its virtqueues keep QEMU's 256
    descriptors. Single-queue NICs on a tap are left alone: NET001 speaks first, and a
    deeper ring matters at packet rates those guests are not set up for.

    ## Why it matters
    A 256-entry receive ring overflows in packet bursts while the guest's vCPU is not
    running; the packets are dropped and TCP backs off. nova exposes
    `[libvirt] rx_queue_size` (vhost and vhost-user backends) and `tx_queue_size`
    (vhost-user only) with the choices 256, 512 and 1024. QEMU honours `tx_queue_size`
    above 256 only for vhost-user backends. A NIC forced to the userspace backend
    (`<driver name='qemu'>`, NET003) is left alone.

    ## Example
    ```xml
    <interface type='bridge'><model type='virtio'/><driver queues='4'/></interface>
    ```

    ## Fix
    Sets `rx_queue_size='1024'` (and `tx_queue_size='1024'` on vhost-user). Unsafe: the
    guest sees deeper rings (more memory per queue), and the benefit is for high packet
    rates only.

    ## Calibration
    Info: no figure in the anchors for a given domain; a workload decision.
    Versions: QEMU 7.2 honours `tx_queue_size` above 256 only for vhost-user backends;
    libvirt 9.0 passes both sizes.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    - nova `nova/conf/libvirt.py` (`rx_queue_size`, `tx_queue_size`), `nova/virt/libvirt/vif.py`
    """

    code = "NET007"
    name = "virtio-net-queue-size-default"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            kind = nic.get("type")
            if not is_virtio(nic_model(domain, nic)) or (kind not in TAP_TYPES and kind != "vhostuser"):
                continue
            driver = domain.child(nic, "driver")
            if driver is not None and driver.get("name") == "qemu":
                continue  # nova: rx_queue_size is for the vhost and vhost-user backends
            queues = uint_or_none(driver.get("queues")) if driver is not None else None
            if kind != "vhostuser" and (queues is None or queues < 2):
                continue
            wanted = {"rx_queue_size": QUEUE_SIZE}
            if kind == "vhostuser":
                wanted["tx_queue_size"] = QUEUE_SIZE
            missing = {k: v for k, v in wanted.items() if driver is None or driver.get(k) is None}
            if not missing:
                continue
            edit = set_attrs(driver, dict(missing)) if driver is not None else ensure(nic, path("driver"), missing)
            yield self.finding(domain, driver if driver is not None else nic, f"virtio NIC keeps "
                               f"{DEFAULT_QUEUE_SIZE}-descriptor {' and '.join(k[:2] for k in missing)} rings",
                               Fix(f"set {', '.join(f'{k}={v}' for k, v in missing.items())}", (edit,),
                                   FixSafety.UNSAFE))


RULES: list[Rule] = [VirtioNetOffloadsOff(), VirtioNetQueueSizeDefault()]
