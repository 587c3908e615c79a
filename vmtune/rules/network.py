"""Network rules: vhost and multiqueue virtio-net, emulated NIC models."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.devices import is_virtio
from vmtune.facts.domain import Domain
from vmtune.facts.memory import shared_memory
from vmtune.facts.units import uint_or_none
from vmtune.patch.edits import Edit, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import share_memory_fix
from vmtune.rules.realtime import realtime_vcpus

# Interface types whose backend is a tap/macvtap device that can have several queues.
TAP_TYPES = frozenset({"network", "bridge", "direct", "ethernet"})
EMULATED_MODELS = frozenset({"e1000", "e1000e", "rtl8139", "ne2k_pci", "pcnet", "i82551", "i82557b",
                             "i82559er", "vmxnet3"})
QUEUE_PARAM_DOC = {"max_queues": "host tap queue limit: 256 since Linux 4.0 (8 on 3.x kernels)"}
# nova's _get_max_tap_queues: 256 on 4.x kernels and later; 3.x (limit 8) is long out of support.
DEFAULT_TAP_LIMIT = 256


def nic_model(domain: Domain, nic: etree._Element) -> str | None:
    model = domain.child(nic, "model")
    return model.get("type") if model is not None else None


def _queues(domain: Domain, nic: etree._Element) -> int | None:
    driver = domain.child(nic, "driver")
    return uint_or_none(driver.get("queues")) if driver is not None else None


def _queue_fix(domain: Domain, nic: etree._Element, queues: int, safety: FixSafety) -> Fix:
    """queues only: an explicit name='vhost' would take away libvirt's fallback to userspace
    virtio-net on a host without /dev/vhost-net, and the guest would not start."""
    driver = domain.child(nic, "driver")
    edit: Edit
    if driver is not None:
        edit = set_attrs(driver, {"queues": str(queues)})
    else:
        edit = ensure(nic, path("driver"), {"queues": str(queues)})
    return Fix(f"set {queues} queues", (edit,), safety)


class VirtioNetSingleQueue(Rule):
    """
    ## What it checks
    A virtio NIC (any virtio model: `virtio`, `virtio-transitional`,
    `virtio-non-transitional`) on a tap backend (network, bridge, direct, ethernet) of a KVM
    guest with several online vCPUs, without `queues`.

    ## Why it matters
    One queue means one vCPU takes every receive interrupt and softirq: an nginx guest
    with 16 vCPUs could not fill a 10G link until it had several queues; with
    `queues='16'` softirq spread over all vCPUs and the link filled. Red Hat's tuning guide
    and nova (`hw_vif_multiqueue_enabled`) size the queues to the vCPUs.

    ## Example
    ```xml
    <vcpu>16</vcpu>
    <interface type='bridge'><model type='virtio'/></interface>
    ```

    ## Fix
    Sets `queues='N'` on the interface's `<driver>` with N = min(online vCPUs, `max_queues`),
    leaving the backend (vhost or userspace) to libvirt. With several virtio NICs the queues
    are shared out, about two per vCPU in all and at least two per NIC (8 vCPUs x 10 NICs
    = 80 queues filled a Windows guest's memory: kubevirt/kubevirt#18012, KubeVirt VEP 422).
    No fix, and info, on a guest with real-time vCPUs (`vcpusched` fifo/rr): the guest spreads
    each queue's interrupt over its vCPUs, the real-time ones included. Online vCPUs are `<vcpu current>`
    when set: a guest defined with hot-plug headroom (`<vcpu current='1'>160</vcpu>`, as oVirt
    writes) gets queues for the vCPUs it runs, not 160, and a guest with one online vCPU is
    not reported. Safe for Linux and unknown guests; unsafe for Windows.

    ## Calibration
    Sizing: online vCPUs capped at the tap limit, what nova (`vif.py`
    `_get_virtio_mq_settings`) and KubeVirt (`network/virtio-queues.go`) write, and what the
    field measurement used (16 queues for 16 vCPUs filled the link). oVirt caps at 4
    (`MultiQueueUtils.OPTIMAL_NUM_OF_QUEUES_PER_VNIC`) without a published measurement; set
    `max_queues: 4` to follow it. Warning from `min_vcpus_warning` online vCPUs (default 8),
    where the single-queue ceiling was measured and one vCPU's softirq is at most an eighth of
    the guest's CPU; info for 2 to 7 (Red Hat's RHEL 7 tuning guide, 5.4.2: multiqueue may
    cost outgoing throughput on small guests). Windows guests: info with an unsafe fix,
    because virtio-win issue #237 measured Windows Server 2012 slower with 16 queues (2.3
    Gbit/s) than with one (4.3). Safe elsewhere: Linux virtio-net (since 3.8) enables the
    queues itself and nothing the user wrote changes. libvirt 9.0 defines every queue count
    up to the tap limit.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    - https://docs.openstack.org/nova/latest/admin/networking.html (multiqueue); nova
      `nova/virt/libvirt/vif.py` `_get_virtio_mq_settings`
    - KubeVirt `pkg/network/.../virtio-queues.go`; oVirt `MultiQueueUtils.java`
    - Red Hat, Virtualization Tuning and Optimization Guide (RHEL 7), 5.4.2 "Multi-queue virtio-net"
    - https://github.com/virtio-win/kvm-guest-drivers-windows/issues/237
    - https://github.com/kubevirt/kubevirt/issues/18012 (queues multiplied by NICs)
    """

    code = "NET001"
    name = "virtio-net-single-queue"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.SAFE
    other_fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    params = {"max_queues": DEFAULT_TAP_LIMIT, "min_vcpus_warning": 8}
    param_docs = {**QUEUE_PARAM_DOC,
                  "min_vcpus_warning": "vCPUs from which a single queue is a warning (info below)"}

    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        online = domain.vcpus  # <vcpu current>: what the guest runs, not its hot-plug maximum
        limit = int(ctx.params.get("max_queues", DEFAULT_TAP_LIMIT))
        if min(online, limit) < 2:
            return
        tap_nics = [nic for nic in domain.interfaces
                    if nic.get("type") in TAP_TYPES and is_virtio(nic_model(domain, nic))]
        realtime: bool | None = None  # worked out at the first NIC reported: most have queues or none is virtio
        for nic in tap_nics:
            if _queues(domain, nic) is not None:
                continue
            driver = domain.child(nic, "driver")
            if driver is not None and driver.get("name") == "qemu":
                continue  # NET003 first: userspace virtio-net has no multiqueue benefit
            if realtime is None:
                queues = queues_per_nic(online, limit, len(tap_nics))
                big = online >= int(ctx.params.get("min_vcpus_warning", 8)) and not domain.is_windows
                safety = FixSafety.UNSAFE if domain.is_windows else FixSafety.SAFE
                realtime = bool(realtime_vcpus(domain))
            online_note = f" online (of {domain.max_vcpus})" if domain.max_vcpus > online else ""
            message = f"virtio NIC has one queue for {online} vCPUs{online_note}"
            if realtime:  # the guest spreads each queue's interrupt over its vCPUs, real-time ones included
                yield self.finding(domain, nic, message, severity=Severity.INFO,
                                   note="no fix: real-time vCPUs (vcpusched fifo/rr) would take the queues' "
                                        "interrupts; add queues only with the guest's IRQ affinity kept off them")
                continue
            notes = []
            if queues < min(online, limit):
                notes.append(f"{queues} queues, not {min(online, limit)}: {len(tap_nics)} virtio NICs share about two "
                             "queues per vCPU")
            if domain.is_windows:
                notes.append("Windows: virtio-win measured more queues slower on Server 2012; measure before keeping "
                             "them")
            yield self.finding(domain, nic, message, _queue_fix(domain, nic, queues, safety),
                               severity=None if big else Severity.INFO, note="; ".join(notes) or None)


def queues_per_nic(online: int, limit: int, nics: int) -> int:
    """Queues for each virtio NIC: one per online vCPU (nova, KubeVirt), capped by the tap limit
    and, where several NICs multiply them, shared out to about two per vCPU in all (but at
    least two each): 8 vCPUs x 10 NICs = 80 queues filled a Windows guest's memory
    (kubevirt/kubevirt#18012, KubeVirt VEP 422)."""
    return min(online, limit, max(2, 2 * online // max(nics, 1)))


class VirtioNetQueuesTooMany(Rule):
    """
    ## What it checks
    A NIC with more `queues` than the host's tap queue limit `max_queues` (error) or than
    the guest's maximum vCPUs (info).

    ## Why it matters
    Above the tap limit the tap device cannot be opened and the guest does not start. The
    limit is 256 since Linux 4.0 (nova's `_get_max_tap_queues`) and was 8 on 3.x kernels;
    set `max_queues: 8` for hosts that still run one. Above the vCPU count the extra queues
    only cost a little memory and some interrupt vectors: the guest driver uses one queue
    pair per vCPU. The maximum vCPU count is used, not the current one, so queues sized for
    vCPU hot-plug are fine.

    ## Example
    ```xml
    <vcpu>4</vcpu>
    <interface type='bridge'><model type='virtio'/><driver name='vhost' queues='16'/></interface>
    ```

    ## Fix
    Lowers `queues` to min(maximum vCPUs, `max_queues`) on tap backends, to the maximum
    vCPU count on others (vDPA, vhost-user). Unsafe: it changes a value the user wrote.

    ## Calibration
    Error above the tap limit (the guest does not start); info above the vCPU count, where
    no measured cost exists.
    Versions: the tap limit is 256 queues since Linux 4.0 (8 before); libvirt 9.0 defines any
    count.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    - nova `nova/virt/libvirt/vif.py` (`_get_max_tap_queues`), nova bug 1570631
    """

    code = "NET002"
    name = "virtio-net-queues-too-many"
    severity = Severity.INFO
    other_severities = (Severity.ERROR,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    params = {"max_queues": DEFAULT_TAP_LIMIT}
    param_docs = QUEUE_PARAM_DOC

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        limit = int(ctx.params.get("max_queues", DEFAULT_TAP_LIMIT))
        vcpus = domain.max_vcpus
        for nic in domain.interfaces:
            queues = _queues(domain, nic)
            if queues is None or queues <= 1:
                continue
            tap = nic.get("type") in TAP_TYPES
            target = min(vcpus, limit) if tap else vcpus  # the tap limit is no vDPA/vhost-user limit
            if queues > limit and tap:
                yield self.finding(domain, domain.child(nic, "driver"),
                                   f"{queues} queues exceed the tap limit of {limit} "
                                   "(max_queues): a host with that limit will not start the guest",
                                   _queue_fix(domain, nic, target, FixSafety.UNSAFE), severity=Severity.ERROR)
            elif queues > vcpus:
                yield self.finding(domain, domain.child(nic, "driver"), f"{queues} queues for {vcpus} vCPUs",
                                   _queue_fix(domain, nic, target, FixSafety.UNSAFE))


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
    Removes `name='qemu'`, so libvirt uses vhost-net where the host has `/dev/vhost-net`
    and userspace otherwise. It does not write `name='vhost'`: with an explicit vhost libvirt
    has no fallback, and on a host without vhost-net the guest would not start ("vhost-net
    was requested for an interface, but is unavailable"). Unsafe: it changes a value the
    user wrote (some set it on purpose, e.g. to debug or for features vhost lacks).

    ## Calibration
    Warning: the userspace backend's cost is documented (libvirt's formatdomain: "In
    general you should leave this option alone, unless you are very certain you know what
    you are doing"), and it applies to this NIC as written.
    Versions: libvirt 9.0 uses vhost-net whenever `/dev/vhost-net` exists and `name='qemu'` is
    not written.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
    """

    code = "NET003"
    name = "virtio-net-userspace-backend"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            driver = domain.child(nic, "driver")
            if is_virtio(nic_model(domain, nic)) and driver is not None and driver.get("name") == "qemu" \
                    and nic.get("type") in TAP_TYPES:
                yield self.finding(domain, driver, "virtio NIC uses the userspace (qemu) backend instead of vhost",
                                   Fix("let libvirt choose vhost", (set_attrs(driver, {"name": None}),),
                                       FixSafety.UNSAFE))


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
    (virtio-win on Windows) or loses its network. The finding says what to do first for
    Windows (install NetKVM), FreeBSD (the NIC becomes `vtnet0`: rc.conf) and guests whose
    OS is unknown; Linux kernels carry virtio-net and keep the NIC's PCI slot and name.

    ## Calibration
    Warning: an emulated NIC exits to QEMU for every register access, a documented cost
    for every guest that uses it (even under TCG, where every device is emulated,
    virtio-net measured 1.10x less guest CPU per byte; docs/effects.md). Unsafe: the
    guest needs a virtio-net driver and sees other hardware.
    Versions: libvirt 9.0 defines `<model type='virtio'/>` on every interface type the rule
    reports.

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
            model = nic_model(domain, nic)
            if model in EMULATED_MODELS or (model is None and domain.is_x86):
                label = model or "no model (an emulated NIC by default)"
                yield self.finding(domain, domain.child(nic, "model") if model else nic, f"NIC is {label}",
                                   Fix("use virtio-net", (ensure(nic, path("model"), {"type": "virtio"}),),
                                       FixSafety.UNSAFE), note=virtio_nic_prerequisite(domain))


def virtio_nic_prerequisite(domain: Domain) -> str | None:
    """What the guest needs before its NIC becomes virtio-net, said with the fix: the switch is
    never offered as if it were harmless where the guest may lose its network."""
    if domain.is_windows:
        return "before switching: install the virtio-win network driver (NetKVM), or Windows loses this network"
    if domain.is_linux:
        return None  # virtio-net is in every distribution kernel; the PCI slot (and predictable name) stays
    if domain.libosinfo_id and "freebsd" in domain.libosinfo_id:
        return "before switching: FreeBSD names the NIC vtnet0 instead of em0/re0: update rc.conf and pf.conf"
    return ("before switching: the guest needs a virtio-net driver (Windows: virtio-win's NetKVM first, or it "
            "loses this network; BSDs rename the interface to vtnet0)")


class VhostUserWithoutSharedMemory(Rule):
    """
    ## What it checks
    A `vhostuser` interface on a guest whose memory is not shared (no
    `<memoryBacking><access mode='shared'/>` and no guest NUMA cells with
    `memAccess='shared'`).

    ## Why it matters
    A vhost-user backend (OVS-DPDK, VPP, a vDPA daemon) reads and writes the guest's
    packets straight in guest memory, which it must be able to map: libvirt's documentation
    requires shared memory for vhost-user. Without it the interface carries no traffic.

    ## Example
    ```xml
    <interface type='vhostuser'><source type='unix' path='/run/vhu0' mode='client'/>
      <model type='virtio'/></interface>
    ```

    ## Fix
    Adds `<memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>`
    (or only the `access` element when the domain has hugepages, which are file-backed).
    Unsafe: it changes how all guest memory is allocated.

    ## Calibration
    Warning: the interface carries no traffic as configured, a certain cost, but libvirt
    9.0 defines the domain (error is kept for what libvirt or QEMU refuses). Unsafe:
    changing how all guest memory is allocated is the user's decision.
    Versions: libvirt 9.0 (`vhostuser` needs shared memory per formatdomain).

    ## References
    - https://libvirt.org/formatdomain.html#vhost-user-interface
    - https://libvirt.org/kbase/virtiofs.html (shared memory backing)
    """

    code = "NET005"
    name = "vhost-user-without-shared-memory"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        nics = [n for n in domain.interfaces if n.get("type") == "vhostuser"]
        if not nics or shared_memory(domain):
            return
        yield self.finding(domain, nics[0], "vhost-user interface on a guest whose memory is not shared: the "
                           "backend cannot map it", share_memory_fix(domain))


class UserModeNetworking(Rule):
    """
    ## What it checks
    An `<interface type='user'>` on a KVM guest: QEMU's userspace network stack (SLIRP), or
    passt with `<backend type='passt'/>`.

    ## Why it matters
    Every packet is translated by a userspace TCP/IP stack (in QEMU for SLIRP, in the passt
    process otherwise) and reaches the host's sockets as a new connection: no tap device,
    no vhost-net, no multiqueue. QEMU's documentation lists for user networking that "there
    is a lot of overhead so the performance is poor", and the guest is not reachable from
    outside without port forwards. It is libvirt's network for unprivileged
    (`qemu:///session`) guests; on a system guest that serves traffic a bridge or a libvirt
    network with a virtio NIC on vhost-net carries it at line rate.

    ## Example
    ```xml
    <interface type='user'><model type='virtio'/></interface>
    ```

    ## Fix
    None: a tap-based network (a bridge or a libvirt network) is a host change, and
    session guests cannot use one without a helper.

    ## Calibration
    Info: the cost is documented, but only a guest that moves much traffic pays it, and
    session guests (desktops, CI) choose it on purpose. passt is reported as well: faster
    than SLIRP, still a userspace copy of every packet. Versions: libvirt 9.0 is the first
    with the passt backend; SLIRP is QEMU's default for `type='user'`.

    ## References
    - QEMU `docs/system/devices/net.rst` ("User Networking (SLIRP)")
    - https://libvirt.org/formatdomain.html#userspace-connection (SLIRP and passt)
    """

    code = "NET008"

    since = "0.2.0"
    name = "user-mode-networking"
    severity = Severity.INFO
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            if nic.get("type") != "user":
                continue
            backend = domain.child(nic, "backend")
            stack = "passt" if backend is not None and backend.get("type") == "passt" else "SLIRP"
            yield self.finding(domain, nic, f"user-mode networking ({stack}): every packet goes through a "
                               "userspace network stack, without vhost-net or multiqueue")


RULES: list[Rule] = [VirtioNetSingleQueue(), VirtioNetQueuesTooMany(), VirtioNetUserspaceBackend(),
                     NicEmulatedModel(), VhostUserWithoutSharedMemory(), UserModeNetworking()]
