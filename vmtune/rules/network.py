"""Network rules: vhost and multiqueue virtio-net, emulated NIC models."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.patch.edits import Edit, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

# Interface types whose backend is a tap/macvtap device that can have several queues.
TAP_TYPES = frozenset({"network", "bridge", "direct", "ethernet"})
EMULATED_MODELS = frozenset({"e1000", "e1000e", "rtl8139", "ne2k_pci", "pcnet", "i82551", "i82557b",
                             "i82559er", "vmxnet3"})
QUEUE_PARAM_DOC = {"max_queues": "host tap queue limit: 8 on 3.x kernels, 256 on 4.x and later"}
THREE_X_TAP_LIMIT = 8
# vmtune cannot see the host kernel in a domain file, so the default assumes the strictest.
THREE_X_NOTE = "8 is the limit of 3.x kernels; on hosts with 4.x or later set max_queues: 256"


def _model(nic: etree._Element) -> str | None:
    model = nic.find("model")
    return model.get("type") if model is not None else None


def _queues(nic: etree._Element) -> int | None:
    driver = nic.find("driver")
    value = driver.get("queues") if driver is not None else None
    return int(value) if value and value.isdigit() else None


def _queue_fix(nic: etree._Element, queues: int) -> Fix:
    driver = nic.find("driver")
    edit: Edit
    if driver is not None:
        edit = set_attrs(driver, {"queues": str(queues)})
    else:
        edit = ensure(nic, path("driver"), {"name": "vhost", "queues": str(queues)})
    return Fix(f"set {queues} queues", (edit,))


class VirtioNetSingleQueue(Rule):
    """
    ## What it checks
    A virtio NIC on a tap backend (network, bridge, direct, ethernet) of a multi-vCPU KVM
    guest, without `queues`.

    ## Why it matters
    One queue means one vCPU takes every receive interrupt and softirq: an nginx guest
    with 16 vCPUs could not fill a 10G link until it had several queues (field report 001).

    ## Example
    ```xml
    <vcpu>16</vcpu>
    <interface type='bridge'><model type='virtio'/></interface>
    ```

    ## Fix
    Sets `<driver name='vhost' queues='N'/>` with N = min(vCPUs, `max_queues`). Safe:
    current Linux and Windows virtio drivers use all queues on their own.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    - nova multiqueue (`hw_vif_multiqueue_enabled`, bug 1570631 for the tap limit)
    """

    code = "NET001"
    name = "virtio-net-single-queue"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm"})
    params = {"max_queues": 8}
    param_docs = QUEUE_PARAM_DOC

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.vcpus < 2:
            return
        limit = int(ctx.params.get("max_queues", 8))
        queues = min(domain.vcpus, limit)
        for nic in domain.interfaces:
            if nic.get("type") not in TAP_TYPES or _model(nic) != "virtio" or _queues(nic) is not None:
                continue
            driver = nic.find("driver")
            if driver is not None and driver.get("name") == "qemu":
                continue  # NET003 first: userspace virtio-net has no multiqueue benefit
            yield self.finding(domain, nic, f"virtio NIC has one queue for {domain.vcpus} vCPUs",
                               _queue_fix(nic, queues))


class VirtioNetQueuesTooMany(Rule):
    """
    ## What it checks
    A NIC with more `queues` than the guest has vCPUs (warning) or than the host's tap
    queue limit `max_queues` (error).

    ## Why it matters
    Above the tap limit (8 on 3.x kernels) the tap device cannot be opened and the guest
    does not start. Above the vCPU count the extra queues only cost memory and interrupts.
    A domain file does not say which kernel its host runs, so the default `max_queues` is
    the strictest limit (8); on a fleet of 4.x+ hosts set it to 256 in `.vmtune.yaml`.

    ## Example
    ```xml
    <vcpu>4</vcpu>
    <interface type='bridge'><model type='virtio'/><driver name='vhost' queues='16'/></interface>
    ```

    ## Fix
    Clamps `queues` to min(vCPUs, `max_queues`) on tap backends, to the vCPU count on others
    (vDPA, vhost-user). Safe.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    - nova bug 1570631
    """

    code = "NET002"
    name = "virtio-net-queues-too-many"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.SAFE
    params = {"max_queues": 8}
    param_docs = QUEUE_PARAM_DOC

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        limit = int(ctx.params.get("max_queues", 8))
        for nic in domain.interfaces:
            queues = _queues(nic)
            if queues is None or queues <= 1:
                continue
            tap = nic.get("type") in TAP_TYPES
            target = min(domain.vcpus, limit) if tap else domain.vcpus  # the tap limit is no vDPA/vhost-user limit
            if queues > limit and tap:
                yield self.finding(domain, nic.find("driver"), f"{queues} queues exceed the tap limit of {limit} "
                                   "(max_queues): a host with that limit will not start the guest",
                                   _queue_fix(nic, target), severity=Severity.ERROR,
                                   note=THREE_X_NOTE if limit == THREE_X_TAP_LIMIT else None)
            elif queues > domain.vcpus:
                yield self.finding(domain, nic.find("driver"), f"{queues} queues for {domain.vcpus} vCPUs",
                                   _queue_fix(nic, target))


class VirtioNetUserspaceBackend(Rule):
    """
    ## What it checks
    A virtio NIC with `<driver name='qemu'>` on a KVM guest.

    ## Why it matters
    `qemu` forces virtio-net processing into QEMU's main loop instead of the in-kernel
    vhost-net worker: every packet batch costs a userspace round trip, and throughput
    drops sharply while host CPU rises.

    ## Example
    ```xml
    <interface type='bridge'><model type='virtio'/><driver name='qemu'/></interface>
    ```

    ## Fix
    Sets `name='vhost'`. Safe (libvirt falls back to userspace if vhost-net is missing).

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    """

    code = "NET003"
    name = "virtio-net-userspace-backend"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            driver = nic.find("driver")
            if _model(nic) == "virtio" and driver is not None and driver.get("name") == "qemu" \
                    and nic.get("type") in TAP_TYPES:
                yield self.finding(domain, driver, "virtio NIC uses the userspace (qemu) backend instead of vhost",
                                   Fix("use vhost", (set_attrs(driver, {"name": "vhost"}),)))


class NicEmulatedModel(Rule):
    """
    ## What it checks
    A NIC emulating real hardware (e1000, e1000e, rtl8139...) or, on x86, with no model
    (libvirt then picks an emulated one).

    ## Why it matters
    Emulated NICs exit to QEMU on every register access; virtio-net moves packets through
    shared rings with vhost-net in the kernel. Throughput differs by several times and
    host CPU per packet by more.

    ## Example
    ```xml
    <interface type='bridge'><model type='e1000'/></interface>
    ```

    ## Fix
    Sets `<model type='virtio'/>`. Unsafe: the guest needs the virtio-net driver
    (virtio-win on Windows) or loses its network.

    ## References
    - https://libvirt.org/formatdomain.html#network-interfaces
    """

    code = "NET004"
    name = "nic-emulated-model"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            if nic.get("type") in ("hostdev", "vhostuser", "vdpa"):
                continue
            model = _model(nic)
            if model in EMULATED_MODELS or (model is None and domain.is_x86):
                label = model or "no model (an emulated NIC by default)"
                yield self.finding(domain, nic.find("model") if model else nic, f"NIC is {label}",
                                   Fix("use virtio-net", (ensure(nic, path("model"), {"type": "virtio"}),),
                                       FixSafety.UNSAFE))


RULES: list[Rule] = [VirtioNetSingleQueue(), VirtioNetQueuesTooMany(), VirtioNetUserspaceBackend(),
                     NicEmulatedModel()]
