"""Disk rules: cache and I/O modes, I/O threads, emulated buses, discard."""

from __future__ import annotations

import re
from collections.abc import Iterator

from lxml import etree

from vmtune.facts.devices import is_virtio_scsi
from vmtune.facts.domain import Domain
from vmtune.patch.edits import Edit, Remove, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT

DIRECT_CACHE_MODES = frozenset({"none", "directsync"})
CROWDED_QUEUE = 8  # vCPUs per virtio disk queue from which DSK010 warns
ASYNC_IO = frozenset({"native", "io_uring"})  # no thread-pool hop per request


def _driver(domain: Domain, disk: etree._Element) -> etree._Element | None:
    return domain.child(disk, "driver")  # disk.find("driver") from the domain's child index


def _target(domain: Domain, disk: etree._Element) -> etree._Element | None:
    return domain.child(disk, "target")


def _is_data_disk(disk: etree._Element) -> bool:
    return disk.get("device", "disk") == "disk"


def _has_iothread(domain: Domain, disk: etree._Element) -> bool:
    """`<driver iothread='N'>`, or libvirt 10's per-queue mapping
    `<driver><iothreads><iothread id='N'/></iothreads></driver>`."""
    driver = _driver(domain, disk)
    if driver is None:
        return False
    # driver.find("iothreads/iothread") from the child index: lxml's path engine cost ~2 us a disk;
    # the generator only for a driver with <iothreads> (most have none)
    if driver.get("iothread"):
        return True
    mappings = domain.children(driver, "iothreads")
    return bool(mappings) and any(domain.children(m, "iothread") for m in mappings)


def _driver_edit(domain: Domain, disk: etree._Element, attrs: dict[str, str | None]) -> Edit:
    driver = _driver(domain, disk)
    if driver is not None:
        return set_attrs(driver, attrs)
    return ensure(disk, path("driver"), {"name": "qemu", **{k: v for k, v in attrs.items() if v is not None}})


class NativeIoWithoutDirect(Rule):
    """
    ## What it checks
    A disk with `io='native'` whose cache mode is not `none` or `directsync` (unset means
    QEMU's writeback).

    ## Why it matters
    Linux native AIO only works on O_DIRECT file descriptors. libvirt 9.0 refuses to define
    such a disk, of any type ("io='native' needs either no disk cache or directsync cache
    mode"); older stacks refused to start it or silently fell back to blocking I/O in the
    main loop.

    ## Example
    ```xml
    <driver name='qemu' type='raw' cache='writeback' io='native'/>
    ```

    ## Fix
    Sets `cache='none'`. Unsafe: it changes the explicit cache mode and fails on
    filesystems without O_DIRECT (tmpfs).

    ## Calibration
    Error: libvirt 9.0 refuses the definition. Unsafe: it changes the explicit cache
    mode.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    """

    code = "DSK001"
    name = "native-io-without-direct"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks:
            driver = _driver(domain, disk)
            if driver is None or driver.get("io") != "native" or driver.get("cache") in DIRECT_CACHE_MODES:
                continue
            yield self.finding(domain, driver, f"io='native' needs O_DIRECT but cache is "
                               f"'{driver.get('cache') or 'writeback (default)'}'",
                               Fix("set cache='none'", (set_attrs(driver, {"cache": "none"}),), FixSafety.UNSAFE))


class BlockDiskCacheMode(Rule):
    """
    ## What it checks
    A disk backed by a block device (`type='block'`: LVM, SAN, NVMe) without a direct
    cache mode (`none`, `directsync`) and an asynchronous I/O engine (`io='native'` or
    `io='io_uring'`).

    ## Why it matters
    Through the host page cache every write is copied twice and the guest's own cache is
    duplicated in host memory; thread-pool AIO (`io='threads'`, QEMU's default) adds a
    context switch per request. virt-install uses `cache='none' io='native'` for block
    devices; Proxmox makes `io_uring` its default (`Drive.pm` `aio_cmdline_option`), which
    has no thread pool either, so it is left alone.

    ## Example
    ```xml
    <disk type='block' device='disk'><driver name='qemu' type='raw'/>...</disk>
    ```

    ## Fix
    Adds the missing `cache='none'` / `io='native'`: safe when only adding, unsafe when it
    changes an explicit cache or io value. An explicit `io='io_uring'` is kept.

    ## Calibration
    Warning: the double caching and copy cost apply to every block-backed disk written
    this way (libvirt's formatdomain on `cache` and `io`; virt-install's block-device
    defaults). `io_uring` is not reported: no anchor measured `native` faster, and Proxmox
    chose it as its default. Safe when it only adds the missing attributes; unsafe when it
    changes an explicit value. libvirt 9.0 defines `cache='none' io='native'` on any block
    disk (DSK001 is the case it refuses).

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    - virt-manager `virtinst/devices/disk.py`
    - Proxmox qemu-server `src/PVE/QemuServer/Drive.pm` (`aio_cmdline_option`)
    """

    code = "DSK002"
    name = "block-disk-cache-mode"
    severity = Severity.WARNING
    other_fix_safety = FixSafety.UNSAFE
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks:
            if disk.get("type") != "block" or not _is_data_disk(disk):
                continue
            driver = _driver(domain, disk)
            cache = driver.get("cache") if driver is not None else None
            io = driver.get("io") if driver is not None else None
            if cache in DIRECT_CACHE_MODES and io in ASYNC_IO:
                continue
            changes = {}
            if cache not in DIRECT_CACHE_MODES:
                changes["cache"] = "none"
            if io not in ASYNC_IO:
                changes["io"] = "native"
            explicit = (cache is not None and "cache" in changes) or (io is not None and "io" in changes)
            yield self.finding(domain, driver if driver is not None else disk,
                               f"block device disk uses cache={cache or 'default'} io={io or 'default'}",
                               Fix(f"use {' '.join(f'{k}={v!r}' for k, v in changes.items())}",
                                   (_driver_edit(domain, disk, dict(changes)),),
                                   FixSafety.UNSAFE if explicit else FixSafety.SAFE))


class VirtioDiskWithoutIothread(Rule):
    """
    ## What it checks
    A KVM guest with virtio disks none of which is assigned to an I/O thread, either with
    `<driver iothread='N'>` or with libvirt 10's per-queue mapping
    `<driver><iothreads><iothread id='N'/></iothreads></driver>`.

    ## Why it matters
    Without an I/O thread, virtio-blk requests are processed in QEMU's main loop together
    with every other device and monitor command; under load disk latency follows whatever
    else the main loop does. One I/O thread per busy disk lets submission and completion
    run on their own. Gains depend on the workload: vmtune's own effect run (docs/effects.md)
    measured a *slower* disk with the thread on a guest whose main loop was idle (read
    0.93x, 4 KiB latency 1.11x), because the thread only adds a hand-off there.

    ## Example
    ```xml
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <target dev='vda' bus='virtio'/></disk>
    ```

    ## Fix
    Assigns each virtio disk's driver to the domain's first I/O thread (its id from
    `<iothreadids>` when declared), adding `<iothreads>1</iothreads>` when the domain has
    none. Unsafe: whether it helps depends on the workload (see above), and on a pinned
    guest the new thread needs a pin of its own (CPU005).

    ## Calibration
    Info: no measured gain for a domain we can tell from its definition; the one
    measurement we have is a loss. Its fix is a workload decision, so never applied by
    default. libvirt 9.0 defines the fix (`<iothreads>` and `iothread=` exist since libvirt
    1.2.8); the `<iothreads><iothread id/>` mapping needs libvirt 10.0 and QEMU 9.0.

    ## References
    - https://libvirt.org/formatdomain.html#iothreads-allocation
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms (`iothread` attribute)
    """

    code = "DSK003"
    name = "virtio-disk-without-iothread"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        virtio = domain.disks_on("virtio")
        for disk in virtio:  # a loop, not any() over a generator: it runs for most domains
            if _has_iothread(domain, disk):
                return
        if not virtio:
            return
        edits: list[Edit] = []
        if not domain.iothread_ids:
            edits.append(ensure(domain.root, path("iothreads"), text="1"))
        thread = str(domain.iothread_ids[0]) if domain.iothread_ids else "1"
        edits += [_driver_edit(domain, d, {"iothread": thread}) for d in virtio]
        yield self.finding(domain, virtio[0], f"{len(virtio)} virtio disk(s) served by QEMU's main loop",
                           Fix(f"assign virtio disks to I/O thread {thread}", tuple(edits), FixSafety.UNSAFE))


# Properties libvirt accepts only on the emulated buses: moving the disk to virtio with them
# makes the define fail. Those that only describe the emulated controller are dropped with the
# move; those the guest sees (its disk identity or media type) block the fix.
BUS_ONLY_DROPPED = {("geometry", "trans"): "BIOS CHS translation exists only on IDE"}
BUS_ONLY_BLOCKING = {
    ("wwn", None): "its <wwn> (libvirt: 'Only ide and scsi disk support wwn') is an identity the guest "
                   "may mount by",
    ("target", "rotation_rate"): "its rotation_rate (libvirt: 'rotation rate is only valid for SCSI/IDE/SATA "
                                 "bus') tells the guest SSD or spinning disk",
    ("vendor", None): "its <vendor> exists only on SCSI",
    ("product", None): "its <product> exists only on SCSI",
    ("target", "removable"): "its removable flag (libvirt: \"'removable' is not supported for disk bus\") tells the "
                             "guest it can be unplugged",
}
EMULATED_BUSES = frozenset({"ide", "sata", "usb"})


def _bus_only(domain: Domain, disk: etree._Element) -> tuple[list[Edit], list[str]]:
    """Edits that drop what only described the emulated bus, and reasons that block the move."""
    drops: list[Edit] = []
    blockers: list[str] = []
    for (tag, attr), reason in BUS_ONLY_BLOCKING.items():
        el = domain.child(disk, tag)  # disk.find(tag), from the domain's child index
        if el is not None and (attr is None or el.get(attr) is not None):
            blockers.append(reason)
    for (tag, attr), _reason in BUS_ONLY_DROPPED.items():
        el = domain.child(disk, tag)  # disk.find(tag), from the domain's child index
        if el is not None and el.get(attr) is not None:
            drops.append(set_attrs(el, {attr: None}))
    return drops, blockers


def _free_virtio_names(domain: Domain) -> Iterator[str]:
    """vda, vdb ... vdz, without those a disk of the domain has."""
    used = {t.get("dev") for d in domain.disks if (t := _target(domain, d)) is not None}
    letters = (chr(c) for c in range(ord("a"), ord("z") + 1))
    return (f"vd{c}" for c in letters if f"vd{c}" not in used)


class DiskEmulatedBus(Rule):
    """
    ## What it checks
    A disk (not a CD-ROM) on an emulated IDE, SATA or USB bus.

    ## Why it matters
    IDE and AHCI emulation exit to QEMU for every register access of every request;
    virtio-blk batches requests through a shared ring. Throughput is several times higher
    and host CPU per I/O much lower with virtio; even under TCG, where every device is
    emulated, vmtune's effect run measured sequential reads 1.25x faster (docs/effects.md).
    A USB disk is QEMU's `usb-storage`: the Bulk-Only Transport of USB mass storage carries
    one SCSI command at a time (no queue), each as USB transfers through the emulated host
    controller (`hw/usb/dev-storage.c`); on a UHCI/EHCI/OHCI controller those are polled
    by its frame timer.

    ## Example
    ```xml
    <disk type='file' device='disk'><target dev='hda' bus='ide'/></disk>
    ```

    ## Fix
    Sets `bus='virtio'`, renames the target to the next free `vdX`, drops the drive or
    USB address and the IDE-only `<geometry trans>`. Unsafe: the guest needs the virtio-blk
    driver (virtio-win on Windows) and may name the disk differently.

    Not offered:
    - for a Windows guest's boot disk (libosinfo, `--os`, or inferred from Hyper-V
      enlightenments or a hypervclock timer), or the boot disk of a guest whose OS is unknown
      but whose definition has a weaker Windows signal (a localtime clock): Windows without
      the viostor driver loaded at boot stops with
      INACCESSIBLE_BOOT_DEVICE. The note says the safe order instead: install virtio-win,
      boot once with a small extra virtio disk attached so Windows loads viostor, then move
      the boot disk. When the OS is unknown the note says so;
    - for a disk with a `<wwn>`, a `rotation_rate`, `<vendor>`, `<product>` or a
      `removable` flag: libvirt refuses them on virtio ("Only ide and scsi disk support
      wwn", "rotation rate is only valid for SCSI/IDE/SATA bus", "'removable' is not
      supported for disk bus") and dropping them changes what the guest sees.

    ## Calibration
    Warning: the cost is documented and measured for every disk on these buses (for USB:
    one command at a time, by the mass-storage protocol itself). The fix changes
    guest-visible hardware and needs a driver, so it is unsafe. A USB disk is sometimes a
    deliberate removable stick for the guest: the finding names the bus, and such a disk
    is suppressed with that reason; one written `removable='on'` shows that reason in the
    XML itself and is reported at info (no fix: virtio has no removable flag).
    Versions: libvirt 9.0 defines the moved disk (validated by `virDomainDiskDefValidate` for
    the properties listed above).

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    - QEMU `hw/usb/dev-storage.c` (usb-storage: Bulk-Only Transport)
    - libvirt `src/conf/domain_validate.c` (`virDomainDiskDefValidate`: wwn, geometry trans,
      rotation_rate by bus), checked against libvirt 9.0's QEMU driver
    """

    code = "DSK004"
    name = "disk-emulated-bus"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    x86_only = True
    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not domain.has_disks_on(EMULATED_BUSES):
            return  # most domains: no disk on these buses (the disks' buses are read once, for every disk rule)
        free: Iterator[str] | None = None  # the vdX names no disk has, made for the first fix only
        for disk in domain.disks:
            target = _target(domain, disk)
            if target is None or not _is_data_disk(disk) or target.get("bus") not in EMULATED_BUSES:
                continue
            message = f"disk {target.get('dev')} is on the emulated {target.get('bus')} bus"
            if disk is domain.boot_disk and domain.may_be_windows:
                said = "Windows" if domain.is_windows else \
                    f"the OS is unknown but the definition has {', '.join(domain.windows_signals)}: if Windows,"
                yield self.finding(domain, target, message, note=f"{said} boots from it: install virtio-win, boot "
                                   "once with a small extra virtio disk attached, then move this one to virtio")
                continue
            drops, blockers = _bus_only(domain, disk)
            if blockers:
                stick = target.get("bus") == "usb" and target.get("removable") == "on"
                yield self.finding(domain, target, message, note="no fix: " + "; ".join(blockers),
                                   severity=Severity.INFO if stick else None)
                continue
            if free is None:
                free = _free_virtio_names(domain)
            dev = next(free, None)
            if dev is None:
                continue
            edits: list[Edit] = [set_attrs(target, {"bus": "virtio", "dev": dev}), *drops]
            edits += [Remove(a) for a in domain.children(disk, "address") if a.get("type") in ("drive", "usb")]
            note = None
            if disk is domain.boot_disk and domain.os_family is None:
                note = "OS unknown: if this is Windows, load viostor before moving its boot disk"
            yield self.finding(domain, target, message, Fix(f"move to virtio as {dev}", tuple(edits),
                                                            FixSafety.UNSAFE), note=note)


class ThinDiskWithoutDiscard(Rule):
    """
    ## What it checks
    A qcow2 disk without `discard='unmap'`.

    ## Why it matters
    Without it, blocks the guest frees (fstrim, deleted files) stay allocated in the image:
    images only grow, and a full host volume stalls every guest on it. The win is capacity,
    not speed; passing discards through costs some throughput on delete-heavy workloads and
    fragments the image.

    ## Example
    ```xml
    <driver name='qemu' type='qcow2'/>
    ```

    ## Fix
    Adds `discard='unmap'` to the driver. Unsafe: the guest then sees a disk that accepts
    discard requests, and whether that pays off depends on the workload and on the guest
    trimming at all.

    ## Calibration
    Info: a capacity matter with no measured speed cost for this domain. Its benefit
    depends on the workload, so its fix is never applied by default.
    Versions: libvirt 9.0 defines `discard='unmap'`.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    """

    code = "DSK005"
    name = "thin-disk-without-discard"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks:
            driver = _driver(domain, disk)
            if driver is None or driver.get("type") != "qcow2" or not _is_data_disk(disk):
                continue
            if driver.get("discard") is None and domain.child(disk, "readonly") is None:
                yield self.finding(domain, driver, "qcow2 disk does not pass guest discards through",
                                   Fix("add discard='unmap'", (set_attrs(driver, {"discard": "unmap"}),),
                                       FixSafety.UNSAFE))


# QEMU 5.2 made a virtio-blk/virtio-scsi device's queue count default to the vCPU count;
# machine types up to 5.1 keep one queue through their compat properties.
_MACHINE_VERSION = r"^pc-(?:i440fx|q35)-([0-9]+)\.([0-9]+)$"  # compiled at first use (see vmtune.facts.units)


def _before_5_2(machine: str) -> bool:
    match = re.match(_MACHINE_VERSION, machine)
    return match is not None and (int(match.group(1)), int(match.group(2))) < (5, 2)


class VirtioSingleQueueOldMachine(Rule):
    """
    ## What it checks
    A virtio-blk disk or virtio-scsi controller without `queues` on a guest with several
    vCPUs whose machine type is versioned 5.1 or older (`pc-q35-4.2`, `pc-i440fx-5.1`).

    ## Why it matters
    Since QEMU 5.2 virtio-blk and virtio-scsi get one queue per vCPU by default, so each
    vCPU submits and completes on its own queue. Machine types up to 5.1 keep the old single
    queue (QEMU's compat properties `num-queues=1`), so a guest defined years ago keeps
    funnelling every vCPU's I/O through one queue after the host was upgraded.

    ## Example
    ```xml
    <os><type arch='x86_64' machine='pc-q35-4.2'>hvm</type></os>
    <disk type='file' device='disk'><target dev='vda' bus='virtio'/></disk>
    ```

    ## Fix
    Sets `queues` to the vCPU count on the disk's or controller's `<driver>`. Unsafe: the
    guest sees more queues (Linux blk-mq and current virtio-win use them), and the gain
    depends on the workload's parallel I/O.

    ## Calibration
    Info: the effect is workload-dependent; no measured cost for a given domain.
    Versions: the single queue is QEMU's machine-type compat (hw_compat_5_1); libvirt 9.0
    defines `queues` on virtio-blk and virtio-scsi.

    ## References
    - QEMU commit "virtio-blk: default num_queues to -smp N" (5.2) and `hw/core/machine.c`
      (hw_compat_5_1)
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    """

    code = "DSK006"
    name = "virtio-single-queue-old-machine"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.vcpus < 2 or not _before_5_2(domain.machine):
            return
        queues = str(domain.vcpus)
        for disk in domain.disks_on("virtio"):
            target, driver = _target(domain, disk), _driver(domain, disk)
            if target is None or (driver is not None and driver.get("queues")):
                continue
            yield self.finding(domain, target, f"virtio disk {target.get('dev')} has one queue on machine "
                               f"{domain.machine}", Fix(f"set {queues} queues", (_driver_edit(domain, disk, {
                                   "queues": queues}),), FixSafety.UNSAFE))
        for controller in domain.controllers_of("scsi"):
            driver = domain.child(controller, "driver")
            if not is_virtio_scsi(controller.get("model")) or (driver is not None and driver.get("queues")):
                continue
            edit = set_attrs(driver, {"queues": queues}) if driver is not None else \
                ensure(controller, path("driver"), {"queues": queues})
            yield self.finding(domain, controller, f"virtio-scsi controller has one queue on machine "
                               f"{domain.machine}", Fix(f"set {queues} queues", (edit,), FixSafety.UNSAFE))


def _queue_count(driver: etree._Element | None) -> int | None:
    """The `queues` a `<driver>` writes; None when absent or not a positive number."""
    text = (driver.get("queues") or "").strip() if driver is not None else ""
    return int(text) if text.isdigit() and 0 < len(text) < 6 and int(text) > 0 else None


def _queues_mapped(domain: Domain, driver: etree._Element) -> bool:
    """libvirt 10's per-queue I/O thread mapping (`<iothreads><iothread><queue id='N'/>`), which
    must name every queue: a new queue count needs a new mapping."""
    return any(domain.children(t, "queue") for m in domain.children(driver, "iothreads")
               for t in domain.children(m, "iothread"))


class VirtioQueuesBelowVcpus(Rule):
    """
    ## What it checks
    An explicit `queues` on a virtio-blk disk's or a virtio-scsi controller's `<driver>` that
    gives each queue more than two vCPUs: fewer queues than half the online vCPUs, on a guest
    with at least 4.

    ## Why it matters
    A guest's block layer (Linux blk-mq, viostor and vioscsi on Windows) maps each vCPU to a
    queue; a queue's completion interrupt arrives on one vCPU. With one queue per vCPU, QEMU's
    default since 5.2, a request completes on the vCPU that submitted it. With fewer, the
    vCPUs sharing a queue contend for it and their completions arrive on another vCPU, which
    has to pass them on with an inter-processor interrupt (each one a VM exit). QEMU made one
    queue per vCPU the default for this reason: its commit measured 78k rising to 104k IOPS
    (4 KiB random reads at queue depth 1, a 32-vCPU guest with 101 virtio-blk disks). An
    explicit `queues` keeps its count on every QEMU, and is often a template value from a
    smaller guest.

    ## Example
    ```xml
    <vcpu>16</vcpu>
    <disk type='file' device='disk'><driver name='qemu' type='raw' queues='1'/>
      <target dev='vda' bus='virtio'/></disk>
    ```

    ## Fix
    Sets `queues` to the online vCPU count. Unsafe: it changes a value the user wrote, and
    the gain depends on how much parallel I/O the guest does (OSv measured no gain from more
    queues, cloudius-systems/osv#1466). No fix where the queues are mapped to I/O threads
    (`<iothreads><iothread><queue>`): the mapping names every queue and must be written anew;
    none for a vhost-user disk, whose backend decides how many queues it serves.

    ## Calibration
    Warning where one queue serves 8 vCPUs or more (one queue for 16 vCPUs): the contention
    and the completion IPIs are the cost QEMU's commit measured (78k against 104k IOPS), and
    nothing in the definition gains from it. Info for fewer vCPUs per queue, where the cost
    depends on how much parallel I/O the guest does. The value is written explicitly, so the
    fix is unsafe and the note says to suppress the finding with its reason if deliberate.
    Half the vCPUs is the threshold so that a deliberate share (oVirt gives virtio-scsi at
    most 4 queues) on a guest of up to 8 vCPUs is not reported. Versions:
    QEMU 5.2 and later default to one queue per vCPU when no `queues` is written (DSK006
    covers older machine types); libvirt 9.0 passes `queues` as `num-queues`.

    ## References
    - QEMU commit "virtio-blk-pci: default num-queues to -smp N" (5.2), with its IOPS measurement
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms (`queues`)
    - oVirt `MultiQueueUtils.java`; KubeVirt `blockMultiQueue` (queues = vCPUs)
    """

    code = "DSK010"

    since = "0.2.0"
    name = "virtio-queues-below-vcpus"
    severity = Severity.INFO
    other_severities = (Severity.WARNING,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        vcpus = len(domain.online_vcpu_ids)
        if vcpus < 4:
            return
        wanted = str(vcpus)
        for disk in domain.disks_on("virtio"):
            target, driver = _target(domain, disk), _driver(domain, disk)
            queues = _queue_count(driver)
            if target is None or driver is None or queues is None:
                continue
            if 2 * queues < vcpus:
                # A vhost-user disk's backend (qemu-storage-daemon, SPDK) serves as many queues as it
                # was started with: asking the guest side for more stops the guest from starting.
                backend = "the vhost-user backend sets how many queues it serves" \
                    if disk.get("type") == "vhostuser" else None
                yield self._finding(domain, driver, f"virtio disk {target.get('dev')}", queues, vcpus, wanted,
                                    backend)
        for controller in domain.controllers_of("scsi"):
            driver = domain.child(controller, "driver")
            queues = _queue_count(driver)
            if is_virtio_scsi(controller.get("model")) and driver is not None and queues is not None \
                    and 2 * queues < vcpus:
                yield self._finding(domain, driver, "virtio-scsi controller", queues, vcpus, wanted)

    def _finding(self, domain: Domain, driver: etree._Element, what: str, queues: int, vcpus: int,
                 wanted: str, blocker: str | None = None) -> Finding:
        if blocker is None and _queues_mapped(domain, driver):
            blocker = "the queues are mapped to I/O threads, map the new ones too"
        fix = None if blocker else Fix(f"set {wanted} queues", (set_attrs(driver, {"queues": wanted}),),
                                       FixSafety.UNSAFE)
        note = f"{EXPLICIT}; without a value QEMU 5.2+ gives one queue per vCPU"
        if blocker:
            note += f"; no fix: {blocker}"
        plural = "queue" if queues == 1 else "queues"
        crowded = vcpus >= CROWDED_QUEUE * queues
        return self.finding(domain, driver, f"{what} has {queues} {plural} for {vcpus} vCPUs: vCPUs share "
                            "queues and their completions arrive on other vCPUs", fix, note=note,
                            severity=Severity.WARNING if crowded else None)


RULES: list[Rule] = [NativeIoWithoutDirect(), BlockDiskCacheMode(), VirtioDiskWithoutIothread(),
                     DiskEmulatedBus(), ThinDiskWithoutDiscard(), VirtioSingleQueueOldMachine(),
                     VirtioQueuesBelowVcpus()]
