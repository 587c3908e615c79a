"""Disk rules: cache and I/O modes, I/O threads, emulated buses, discard."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.patch.edits import Edit, Remove, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

DIRECT_CACHE_MODES = frozenset({"none", "directsync"})


def _driver(disk: etree._Element) -> etree._Element | None:
    return disk.find("driver")


def _target(disk: etree._Element) -> etree._Element | None:
    return disk.find("target")


def _is_data_disk(disk: etree._Element) -> bool:
    return disk.get("device", "disk") == "disk"


def _driver_edit(disk: etree._Element, attrs: dict[str, str | None]) -> Edit:
    driver = _driver(disk)
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
            driver = _driver(disk)
            if driver is None or driver.get("io") != "native" or driver.get("cache") in DIRECT_CACHE_MODES:
                continue
            yield self.finding(domain, driver, f"io='native' needs O_DIRECT but cache is "
                               f"'{driver.get('cache') or 'writeback (default)'}'",
                               Fix("set cache='none'", (set_attrs(driver, {"cache": "none"}),), FixSafety.UNSAFE))


class BlockDiskCacheMode(Rule):
    """
    ## What it checks
    A disk backed by a block device (`type='block'`: LVM, SAN, NVMe) without
    `cache='none'` and `io='native'`.

    ## Why it matters
    Through the host page cache every write is copied twice and the guest's own cache is
    duplicated in host memory; thread-pool AIO adds a context switch per request.
    virt-install and nova use `cache='none' io='native'` for block devices.

    ## Example
    ```xml
    <disk type='block' device='disk'><driver name='qemu' type='raw'/>...</disk>
    ```

    ## Fix
    Adds the missing `cache='none'` / `io='native'`: safe when only adding, unsafe when it
    changes an explicit cache or io value.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    - virt-manager `virtinst/devices/disk.py`
    """

    code = "DSK002"
    name = "block-disk-cache-mode"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks:
            if disk.get("type") != "block" or not _is_data_disk(disk):
                continue
            driver = _driver(disk)
            cache = driver.get("cache") if driver is not None else None
            io = driver.get("io") if driver is not None else None
            if cache in DIRECT_CACHE_MODES and io == "native":
                continue
            changes = {}
            if cache not in DIRECT_CACHE_MODES:
                changes["cache"] = "none"
            if io != "native":
                changes["io"] = "native"
            explicit = (cache is not None and "cache" in changes) or (io is not None and "io" in changes)
            yield self.finding(domain, driver if driver is not None else disk,
                               f"block device disk uses cache={cache or 'default'} io={io or 'default'}",
                               Fix("use cache='none' io='native'", (_driver_edit(disk, dict(changes)),),
                                   FixSafety.UNSAFE if explicit else FixSafety.SAFE))


class VirtioDiskWithoutIothread(Rule):
    """
    ## What it checks
    A KVM guest with virtio disks none of which is assigned to an I/O thread.

    ## Why it matters
    Without an I/O thread, virtio-blk requests are processed in QEMU's main loop together
    with every other device and monitor command; under load disk latency follows whatever
    else the main loop does. One I/O thread per busy disk lets submission and completion
    run on their own. Gains depend on the workload.

    ## Example
    ```xml
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <target dev='vda' bus='virtio'/></disk>
    ```

    ## Fix
    Adds `<iothreads>1</iothreads>` when the domain has none and assigns `iothread='1'` to
    each virtio disk's driver. Safe.

    ## References
    - https://libvirt.org/formatdomain.html#iothreads-allocation
    """

    code = "DSK003"
    name = "virtio-disk-without-iothread"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        virtio = [d for d in domain.disks if (t := _target(d)) is not None and t.get("bus") == "virtio"]
        if not virtio or any((dr := _driver(d)) is not None and dr.get("iothread") for d in virtio):
            return
        edits: list[Edit] = []
        if domain.iothreads == 0:
            edits.append(ensure(domain.root, path("iothreads"), text="1"))
        edits += [_driver_edit(d, {"iothread": "1"}) for d in virtio]
        yield self.finding(domain, virtio[0], f"{len(virtio)} virtio disk(s) served by QEMU's main loop",
                           Fix("add an I/O thread for virtio disks", tuple(edits)))


class DiskEmulatedBus(Rule):
    """
    ## What it checks
    A disk (not a CD-ROM) on an emulated IDE or SATA bus.

    ## Why it matters
    IDE and AHCI emulation exit to QEMU for every register access of every request;
    virtio-blk batches requests through a shared ring. Throughput is several times higher
    and host CPU per I/O much lower with virtio.

    ## Example
    ```xml
    <disk type='file' device='disk'><target dev='hda' bus='ide'/></disk>
    ```

    ## Fix
    Sets `bus='virtio'`, renames the target to the next free `vdX` and drops the
    drive address. Unsafe: the guest needs the virtio-blk driver (virtio-win on Windows)
    and may name the disk differently. Not offered for a Windows guest's boot disk: Windows
    without the viostor driver loaded at boot stops with INACCESSIBLE_BOOT_DEVICE. The note
    says the safe order instead: install virtio-win, boot once with a small extra virtio
    disk attached so Windows loads viostor, then move the boot disk.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    """

    code = "DSK004"
    name = "disk-emulated-bus"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        used = {t.get("dev") for d in domain.disks if (t := _target(d)) is not None}
        letters = (chr(c) for c in range(ord("a"), ord("z") + 1))
        free = (f"vd{c}" for c in letters if f"vd{c}" not in used)
        for disk in domain.disks:
            target = _target(disk)
            if target is None or not _is_data_disk(disk) or target.get("bus") not in ("ide", "sata"):
                continue
            message = f"disk {target.get('dev')} is on the emulated {target.get('bus')} bus"
            if domain.is_windows and disk is domain.boot_disk:
                yield self.finding(domain, target, message, note="Windows boots from it: install virtio-win, boot "
                                   "once with a small extra virtio disk attached, then move this one to virtio")
                continue
            dev = next(free, None)
            if dev is None:
                continue
            edits: list[Edit] = [set_attrs(target, {"bus": "virtio", "dev": dev})]
            edits += [Remove(a) for a in disk.iterfind("address") if a.get("type") == "drive"]
            yield self.finding(domain, target, message, Fix(f"move to virtio as {dev}", tuple(edits),
                                                            FixSafety.UNSAFE))


class ThinDiskWithoutDiscard(Rule):
    """
    ## What it checks
    A qcow2 disk without `discard='unmap'`.

    ## Why it matters
    Without it, blocks the guest frees (fstrim, deleted files) stay allocated in the image:
    images only grow, and a full host volume stalls every guest on it. Small per-request
    cost; the win is capacity.

    ## Example
    ```xml
    <driver name='qemu' type='qcow2'/>
    ```

    ## Fix
    Adds `discard='unmap'` to the driver. Safe.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms
    """

    code = "DSK005"
    name = "thin-disk-without-discard"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks:
            driver = _driver(disk)
            if driver is None or driver.get("type") != "qcow2" or not _is_data_disk(disk):
                continue
            if driver.get("discard") is None and disk.find("readonly") is None:
                yield self.finding(domain, driver, "qcow2 disk does not pass guest discards through",
                                   Fix("add discard='unmap'", (set_attrs(driver, {"discard": "unmap"}),)))


RULES: list[Rule] = [NativeIoWithoutDirect(), BlockDiskCacheMode(), VirtioDiskWithoutIothread(),
                     DiskEmulatedBus(), ThinDiskWithoutDiscard()]
