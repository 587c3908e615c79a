"""Storage rules the management stacks agree on: SCSI host adapters, the host page cache for
image files, and I/O threads for virtio-scsi controllers."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.devices import is_virtio_scsi
from vmtune.facts.domain import Domain
from vmtune.facts.units import uint_or_none
from vmtune.patch.edits import Edit, ensure, path, set_attrs, step
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.disk import DIRECT_CACHE_MODES

SYNCHRONOUS_CACHE_MODES = frozenset({"writethrough", "directsync"})  # O_DSYNC: every write waits for the storage

VIRTIO_SCSI_MODELS = frozenset({"virtio-scsi", "virtio-transitional", "virtio-non-transitional", "vhost-scsi"})
# libvirt's x86 default when a bus='scsi' disk has no controller (qemuDomainGetSCSIControllerModel):
# lsilogic, checked with libvirt 9.0's QEMU driver on pc and q35.
DEFAULT_SCSI_MODEL = "lsilogic"
# What QEMU emulates for each libvirt model name.
HBA_NAMES = {"lsilogic": "LSI 53C895A", "lsisas1068": "LSI SAS1068", "lsisas1078": "MegaRAID SAS (megasas)",
             "vmpvscsi": "VMware PVSCSI", "buslogic": "BusLogic", "am53c974": "AM53C974", "dc390": "DC-390",
             "ncr53c90": "NCR53C90", "auto": "libvirt's default (lsilogic)"}


def _scsi_disks(domain: Domain) -> list[etree._Element]:
    return domain.disks_on("scsi")


def _disk_iothreads(domain: Domain, disk: etree._Element) -> list[str]:
    """The I/O threads a disk names: `<driver iothread='N'>`, then libvirt 10's per-queue
    mapping `<driver><iothreads><iothread id='N'>` (what disk.py's _has_iothread accepts too)."""
    driver = domain.child(disk, "driver")
    if driver is None:
        return []
    named: list[str] = []
    if attribute := driver.get("iothread"):
        named.append(attribute)
    mapping = domain.child(driver, "iothreads")
    if mapping is not None:
        named += [i for t in domain.children(mapping, "iothread") if (i := t.get("id"))]
    return named


def _controller_index(domain: Domain, disk: etree._Element) -> int:
    address = domain.child(disk, "address")
    if address is not None and address.get("type") == "drive":
        return uint_or_none(address.get("controller")) or 0
    return 0


class ScsiDiskEmulatedHba(Rule):
    """
    ## What it checks
    A `bus='scsi'` disk on an emulated SCSI host adapter: a SCSI controller of model
    `lsilogic`, `lsisas1068`, `lsisas1078` (megasas), `vmpvscsi` (pvscsi), `buslogic`...,
    one without a model, or none at all (libvirt then adds an `lsilogic` one on x86).

    ## Why it matters
    The disk is paravirtual only when its controller is: on an emulated HBA every request
    goes through the emulated adapter's registers and exits to QEMU, the same class of
    cost as IDE and AHCI (DSK004). nova (`hw_scsi_model=virtio-scsi`), virt-install and
    KubeVirt use virtio-scsi for SCSI disks; Proxmox's backend default (`scsihw` = `lsi`) is
    one of the few that does not.

    ## Example
    ```xml
    <disk type='file' device='disk'><target dev='sda' bus='scsi'/></disk>
    <controller type='scsi' index='0' model='lsilogic'/>
    ```

    ## Fix
    Sets `model='virtio-scsi'` on each emulated SCSI controller that carries a disk, or adds
    `<controller type='scsi' index='0' model='virtio-scsi'/>` when there is none. The disks
    keep their names and addresses. Unsafe: the guest needs the virtio-scsi driver (vioscsi
    from virtio-win on Windows). Not offered when a Windows guest (or one whose definition
    says Windows) boots from such a disk: Windows without vioscsi loaded at boot stops with
    INACCESSIBLE_BOOT_DEVICE; the note says the safe order. When the OS is unknown (and the
    definition has no Windows signal) the fix is offered with a note saying to load vioscsi
    first if the guest is Windows, as DSK004 does for viostor.

    ## Calibration
    Warning: the emulation cost is documented for every disk on these adapters, as for
    DSK004. Unsafe: it changes guest-visible hardware that needs a driver.
    Versions: libvirt 9.0 (checked with its QEMU driver) adds an `lsilogic` controller for a
    SCSI disk that has none.

    ## References
    - https://libvirt.org/formatdomain.html#controllers
    - nova `hw_scsi_model`; virt-manager `virtinst/devices/controller.py`;
      Proxmox `qemu-server` `PVE/QemuServer.pm` (`scsihw`)
    """

    code = "DSK007"
    name = "scsi-disk-emulated-hba"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    reads_os = True  # the fix is withheld from a Windows boot disk
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        disks = [d for d in _scsi_disks(domain) if d.get("device", "disk") in ("disk", "lun")]
        if not disks:
            return
        controllers = {uint_or_none(c.get("index")) or 0: c for c in domain.controllers_of("scsi")}
        used = sorted({_controller_index(domain, d) for d in disks})
        emulated = [(i, controllers.get(i)) for i in used
                    if controllers.get(i) is None or controllers[i].get("model", "auto") not in VIRTIO_SCSI_MODELS]
        if not emulated:
            return
        models = sorted({(c.get("model") if c is not None else None) or "auto" for _, c in emulated})
        label = ", ".join(HBA_NAMES.get(m, m) for m in models)
        on_emulated = {index for index, _ in emulated}
        affected = [d for d in disks if _controller_index(domain, d) in on_emulated]
        first = affected[0]
        message = f"{len(affected)} SCSI disk(s) on an emulated host adapter ({label})"
        boot = domain.boot_disk
        if boot is not None and boot in affected and domain.may_be_windows:
            said = "Windows" if domain.is_windows else \
                f"the OS is unknown but the definition has {', '.join(domain.windows_signals)}: if Windows, it"
            yield self.finding(domain, domain.child(first, "target"), message, note=f"{said} boots from it: install "
                               "virtio-win, boot once with a small extra virtio-scsi controller and disk attached, "
                               "then switch this controller to virtio-scsi")
            return
        edits: list[Edit] = []
        for index, controller in emulated:
            if controller is not None:
                edits.append(set_attrs(controller, {"model": "virtio-scsi"}))
            else:
                edits.append(ensure(domain.root, path("devices", step("controller", type="scsi", index=str(index))),
                                    {"model": "virtio-scsi"}))
        # As DSK004: an unknown OS's boot disk keeps the (unsafe) fix, never without saying what
        # Windows needs first
        note = None
        if boot is not None and boot in affected and domain.os_family is None:
            note = "OS unknown: if this is Windows, load vioscsi before moving its boot disk"
        yield self.finding(domain, domain.child(first, "target"), message,
                           Fix("use a virtio-scsi controller", tuple(edits), FixSafety.UNSAFE), note=note)


class FileDiskHostPageCache(Rule):
    """
    ## What it checks
    A disk backed by an image file (`type='file'`, or `type='volume'`: a storage pool's
    volume, as terraform-provider-libvirt writes every disk; `device='disk'`) whose cache
    mode goes through the host page cache: no `cache` (QEMU's `writeback`), `writeback` or
    `writethrough`; or that flushes every write: `writethrough` or `directsync`. Shareable
    and read-only disks are left alone.

    ## Why it matters
    Every guest write is copied into the host page cache and the guest's own cache is
    duplicated in host memory; under memory pressure the host's writeback stalls the
    guest unpredictably, and live migration must flush it. nova defaults image disks to
    `cache='none'` "for consistent performance and migration correctness"
    (`nova/virt/libvirt/driver.py` `disk_cachemode`), oVirt writes `cache='none'` for every
    image and Proxmox opens images with O_DIRECT by default. virt-install leaves the
    default, so most hand-made guests have it. `writethrough` and `directsync` also open the
    image with O_DSYNC: every guest write waits until the storage has it, although guests
    flush what must be durable themselves; QEMU's documentation reports the guest's disk
    write cache as off in those modes.

    ## Example
    ```xml
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/vm.qcow2'/><target dev='vda' bus='virtio'/></disk>
    ```

    ## Fix
    Sets `cache='none'` (O_DIRECT). Unsafe: O_DIRECT fails on file systems without it
    (tmpfs) and the guest no longer benefits from the host's spare memory as a cache,
    which some workloads (read-mostly guests on a large host) rely on.

    ## Calibration
    Info: the anchors agree on the setting but give no figure for a given domain; whether
    the host cache helps or hurts depends on the workload and the host's memory. Warning
    for `writethrough` and `directsync`: QEMU documents that every write is synchronous in
    those modes, a cost in this configuration whatever the workload writes.
    Versions: none: without `cache` libvirt 9.0 leaves QEMU 7.2's default, writeback through
    the host page cache, as earlier versions did.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms (`cache`)
    - QEMU `docs/system/qemu-block-drivers.rst` and `qemu-options.hx` (`cache.direct`,
      `cache.writeback`: "writethrough" and "directsync" report the write cache off)
    - nova `nova/virt/libvirt/driver.py` (`disk_cachemode`); oVirt `LibvirtVmXmlBuilder`
      (`writeDiskDriver`); Proxmox `PVE/QemuServer/Drive.pm` (`drive_uses_cache_direct`)
    """

    code = "DSK008"
    name = "file-disk-host-page-cache"
    severity = Severity.INFO
    other_severities = (Severity.WARNING,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks:
            if disk.get("type") not in ("file", "volume") or disk.get("device", "disk") != "disk":
                continue
            driver = domain.child(disk, "driver")
            cache = driver.get("cache") if driver is not None else None
            synchronous = cache in SYNCHRONOUS_CACHE_MODES
            if not synchronous and (cache in DIRECT_CACHE_MODES or cache == "unsafe" or (
                    driver is not None and driver.get("io") == "native")):
                continue  # O_DIRECT already, a deliberate 'unsafe', or DSK001's business
            if domain.child(disk, "shareable") is not None or domain.child(disk, "readonly") is not None:
                continue
            edit = set_attrs(driver, {"cache": "none"}) if driver is not None else \
                ensure(disk, path("driver"), {"name": "qemu", "cache": "none"})
            target = domain.child(disk, "target")
            dev = target.get("dev") if target is not None else "?"
            kind = "image-file" if disk.get("type") == "file" else "pool-volume"
            if synchronous:
                yield self.finding(domain, driver, f"{kind} disk {dev} flushes every write (cache mode {cache}, "
                                   "O_DSYNC)", Fix("use cache='none'", (edit,), FixSafety.UNSAFE),
                                   severity=Severity.WARNING)
                continue
            yield self.finding(domain, driver if driver is not None else disk,
                               f"{kind} disk {dev} goes through the host page cache: cache mode "
                               f"{cache or 'writeback, QEMU' + chr(39) + 's default'}",
                               Fix("use cache='none'", (edit,), FixSafety.UNSAFE),
                               note=None if kind == "image-file" else "as the pool's files or block devices do; "
                               "a network pool's volume (RBD, Gluster) uses its client's cache instead")


class VirtioScsiWithoutIothread(Rule):
    """
    ## What it checks
    A virtio-scsi controller carrying disks without an I/O thread (`<driver iothread=...>`)
    on a guest whose virtio-blk disks have one (`<driver iothread='N'>`, or libvirt 10's
    per-queue `<driver><iothreads><iothread id='N'>`).

    ## Why it matters
    The guest's owner moved virtio-blk off QEMU's main loop, but the SCSI disks still share
    it with every other device and monitor command, so their latency follows whatever else
    the main loop does. Proxmox offers I/O threads for SCSI only through one virtio-scsi
    controller per disk with `iothread`; nova and oVirt give every disk controller their
    I/O thread.

    ## Example
    ```xml
    <iothreads>1</iothreads>
    <disk type='file' device='disk'><driver name='qemu' iothread='1'/><target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><target dev='sda' bus='scsi'/></disk>
    <controller type='scsi' model='virtio-scsi'/>
    ```

    ## Fix
    Adds `iothread` to the controller's `<driver>`, using the first I/O thread the first
    virtio-blk disk with one names. Unsafe: as DSK003, the gain depends on the workload, and the thread is
    shared with that disk.

    ## Calibration
    Info: workload-dependent; vmtune's one measurement of an I/O thread (DSK003) was a loss
    on an idle main loop.
    Versions: none: libvirt 9.0 accepts `<driver iothread>` on a virtio-scsi controller (the
    fix is defined in the test suite); the per-queue mapping it also reads on virtio-blk disks
    is libvirt 10.0's (not definable with this host's 9.0: tested on the XML only).

    ## References
    - https://libvirt.org/formatdomain.html#controllers (virtio-scsi `iothread`)
    - Proxmox `PVE/QemuServer.pm` (`virtio-scsi-single`); nova `_get_guest_iothread`
    """

    code = "DSK009"
    name = "virtio-scsi-without-iothread"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        scsi_disks = _scsi_disks(domain)
        if not scsi_disks:  # most domains: no controller is used, whatever I/O threads the disks have
            return
        threads = [t for d in domain.disks_on("virtio") for t in _disk_iothreads(domain, d)]
        if not threads:
            return
        used = {_controller_index(domain, d) for d in scsi_disks}
        for controller in domain.controllers_of("scsi"):
            driver = domain.child(controller, "driver")
            if not is_virtio_scsi(controller.get("model")):  # vhost-scsi takes no I/O thread
                continue
            if (uint_or_none(controller.get("index")) or 0) not in used or \
                    (driver is not None and driver.get("iothread")):
                continue
            edit = set_attrs(driver, {"iothread": threads[0]}) if driver is not None else \
                ensure(controller, path("driver"), {"iothread": threads[0]})
            yield self.finding(domain, controller, "virtio-scsi controller served by QEMU's main loop while the "
                               "virtio-blk disks have an I/O thread",
                               Fix(f"assign the controller to I/O thread {threads[0]}", (edit,), FixSafety.UNSAFE))


RULES: list[Rule] = [ScsiDiskEmulatedHba(), FileDiskHostPageCache(), VirtioScsiWithoutIothread()]
