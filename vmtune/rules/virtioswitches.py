"""Switches of a device's data path that QEMU turns on by default: virtio's event index and
ioeventfd, and O_DIRECT where the image lives on tmpfs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from lxml import etree

from vmtune.facts.devices import is_virtio_scsi
from vmtune.facts.domain import Domain
from vmtune.patch.edits import set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT

EVENT_IDX_COST = "event_idx off: the guest and QEMU notify each other on every buffer, more interrupts and exits"
IOEVENTFD_COST = "ioeventfd off: every queue notification stops the vCPU until QEMU's main loop has handled it"


def _switch_findings(rule: Rule, domain: Domain, driver: etree._Element, what: str,
                     iothread: bool) -> Iterator[Finding]:
    """The findings of one virtio <driver>: event_idx='off' and ioeventfd='off', each fixed by
    removing the attribute (QEMU's default, on, returns)."""
    if driver.get("event_idx") == "off":
        yield rule.finding(domain, driver, f"{what}: {EVENT_IDX_COST}",
                           Fix("remove event_idx='off'", (set_attrs(driver, {"event_idx": None}),), FixSafety.UNSAFE),
                           note=EXPLICIT)
    if driver.get("ioeventfd") == "off":
        fix = Fix("remove ioeventfd='off'", (set_attrs(driver, {"ioeventfd": None}),), FixSafety.UNSAFE)
        if iothread:
            yield rule.finding(domain, driver, f"{what} is served by an I/O thread with ioeventfd off: QEMU refuses "
                               "to start it (ioeventfd is required for iothread)", fix, note=EXPLICIT,
                               severity=Severity.ERROR)
        else:
            yield rule.finding(domain, driver, f"{what}: {IOEVENTFD_COST}", fix, note=EXPLICIT)


class VirtioDiskSwitchesOff(Rule):
    """
    ## What it checks
    `event_idx='off'` or `ioeventfd='off'` on the `<driver>` of a virtio disk or of a
    virtio-scsi controller.

    ## Why it matters
    Both are on by default in QEMU and both exist to cut exits. With the event index
    (VIRTIO_RING_F_EVENT_IDX) each side tells the other how far it has read, so the guest
    notifies the device and the device interrupts the guest only when the other side is
    waiting; libvirt documents that `on` "will reduce the number of interrupts and exits for
    the guest", and `off` as a way to force it off where it misbehaves. With ioeventfd the
    guest's queue notification is an eventfd KVM signals without leaving the kernel, and
    the vCPU runs on while QEMU (or its I/O thread) handles the request; off, each
    notification is a synchronous exit to QEMU's main loop, which holds the vCPU until the
    request is submitted. libvirt notes that on an overloaded host `off` can lower I/O
    latency; the cost in host CPU and vCPU time is paid on every request.

    A disk or controller served by an I/O thread (`iothread=`) with `ioeventfd='off'` does
    not start: QEMU's virtio-blk and virtio-scsi refuse it ("ioeventfd is required for
    iothread", `hw/block/dataplane/virtio-blk.c`, `hw/scsi/virtio-scsi-dataplane.c`).

    ## Example
    ```xml
    <disk type='file' device='disk'><driver name='qemu' type='raw' event_idx='off'/>
      <source file='/var/lib/libvirt/images/a.img'/><target dev='vda' bus='virtio'/></disk>
    ```

    ## Fix
    Removes the attribute, so QEMU's default (on) applies. Unsafe: it changes a value the
    user wrote.

    ## Calibration
    Error for `ioeventfd='off'` with an I/O thread: QEMU refuses to start the guest.
    Warning otherwise: the extra interrupts and exits are the documented effect of the
    switch, on every request, and `off` has no documented gain but as a workaround (a buggy
    guest driver for event_idx; a host too loaded to run the I/O thread for ioeventfd): the
    user who needs one suppresses the finding with that reason. Versions: libvirt 9.0 passes
    both as QEMU device properties (`event_idx`, `ioeventfd`) of QEMU 7.2.

    ## References
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms (`ioeventfd`,
      `event_idx`)
    - virtio 1.2 specification, 2.7.10 (VIRTIO_F_EVENT_IDX)
    - QEMU `hw/block/dataplane/virtio-blk.c`, `hw/scsi/virtio-scsi-dataplane.c`
    """

    code = "DSK011"
    since = "unreleased"
    name = "virtio-disk-switches-off"
    severity = Severity.WARNING
    other_severities = (Severity.ERROR,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for disk in domain.disks_on("virtio"):
            driver = domain.child(disk, "driver")
            # most drivers switch neither off: no I/O thread read nor generator of findings for them
            if driver is None or (driver.get("event_idx") != "off" and driver.get("ioeventfd") != "off"):
                continue
            target = domain.child(disk, "target")
            if target is None:
                continue
            iothread = bool(driver.get("iothread")) or bool(domain.children(driver, "iothreads"))
            yield from _switch_findings(self, domain, driver, f"virtio disk {target.get('dev')}", iothread)
        for controller in domain.controllers_of("scsi"):
            driver = domain.child(controller, "driver")
            if driver is not None and is_virtio_scsi(controller.get("model")):
                yield from _switch_findings(self, domain, driver, "virtio-scsi controller",
                                            bool(driver.get("iothread")))


class VirtioNetSwitchesOff(Rule):
    """
    ## What it checks
    `event_idx='off'` or `ioeventfd='off'` on the `<driver>` of a virtio NIC.

    ## Why it matters
    As for disks (DSK011): the event index lets the guest and the device skip notifications
    the other side does not wait for (libvirt: `on` "will reduce the number of interrupts
    and exits for the guest"), and ioeventfd lets KVM pass a transmit notification to QEMU
    or vhost without stopping the vCPU. A NIC notifies per packet batch, so off costs
    exits at the packet rate.

    ## Example
    ```xml
    <interface type='network'><source network='default'/><model type='virtio'/>
      <driver name='qemu' event_idx='off'/></interface>
    ```

    ## Fix
    Removes the attribute, so QEMU's default (on) applies. Unsafe: it changes a value the
    user wrote.

    ## Calibration
    Warning: the extra interrupts and exits are the documented effect, paid per packet
    batch, and `off` has no documented gain but as a workaround. Versions: libvirt 9.0
    passes both as virtio-net-pci properties of QEMU 7.2.

    ## References
    - https://libvirt.org/formatdomain.html#setting-nic-driver-specific-options
      (`ioeventfd`, `event_idx`)
    - virtio 1.2 specification, 2.7.10 (VIRTIO_F_EVENT_IDX)
    """

    code = "NET009"
    since = "unreleased"
    name = "virtio-net-switches-off"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for nic in domain.interfaces:
            model, driver = domain.child(nic, "model"), domain.child(nic, "driver")
            if driver is not None and model is not None and model.get("type") == "virtio":
                yield from _switch_findings(self, domain, driver, "virtio NIC", False)


# /dev/shm is tmpfs on every Linux host (systemd's file-hierarchy(7); POSIX shared memory lives
# there): the parameter's default. /run is tmpfs too, but images under it are usually symbolic
# links to real storage (oVirt's VDSM links /run/vdsm/storage/... to its domains), so it and /tmp
# (tmpfs on Fedora, Arch, Debian 13) are named by the policy, for hosts where they hold image files.
TMPFS_DEFAULT = "/dev/shm"
TMPFS_ODIRECT = (6, 6)  # Linux 6.6: commit e88e0d366f9c "tmpfs: trivial support for direct IO"


def _kernel(release: object) -> tuple[int, int] | None:
    """(major, minor) of a kernel release such as 6.1.0-18-amd64; None when unknown."""
    match = re.match(r"([0-9]{1,3})\.([0-9]{1,3})", release) if isinstance(release, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _host_kernel(params: dict[str, object]) -> tuple[int, int] | None:
    return _kernel(params.get("host_kernel"))


def _tmpfs_dirs(params: dict[str, object]) -> tuple[str, ...]:
    named = params.get("tmpfs_paths", TMPFS_DEFAULT)
    dirs = [p.strip().rstrip("/") for p in named.split(",")] if isinstance(named, str) else []
    return tuple(d for d in dirs if d.startswith("/") and len(d) > 1)


def _tmpfs_prefixes(params: dict[str, object]) -> tuple[str, ...]:
    """The tmpfs directories with their `/`: one str.startswith of a tuple tells whether a path is
    under any (most are not: the directory it is under is then found by _on_tmpfs)."""
    return tuple(d + "/" for d in _tmpfs_dirs(params))


def _on_tmpfs(source: str, dirs: tuple[str, ...]) -> str | None:
    return next((d for d in dirs if source.startswith(d + "/")), None)


class DirectIoOnTmpfs(Rule):
    """
    ## What it checks
    A file disk with a direct cache mode (`cache='none'` or `directsync`, O_DIRECT) whose
    image lies under a directory that is tmpfs: those of the policy parameter `tmpfs_paths`,
    by default `/dev/shm` (tmpfs on every Linux host); add `/tmp` or `/run` where the host
    mounts them so and keeps image files, not links, there.

    ## Why it matters
    QEMU opens such an image with O_DIRECT. tmpfs accepts O_DIRECT only since Linux 6.6
    (commit e88e0d366f9c, "tmpfs: trivial support for direct IO"); on older host kernels
    the open fails with EINVAL and the guest does not start. On 6.6 and later it starts,
    and the direct mode buys nothing there: tmpfs is the page cache, so there is no second
    copy to avoid.

    ## Example
    ```xml
    <disk type='file' device='disk'><driver name='qemu' type='raw' cache='none'/>
      <source file='/dev/shm/scratch.img'/><target dev='vdb' bus='virtio'/></disk>
    ```

    ## Fix
    Sets `cache='writeback'` (and removes `io='native'`, which needs O_DIRECT: DSK001).
    Unsafe: it changes values the user wrote.

    ## Calibration
    Error when the policy parameter `host_kernel` (the host's `uname -r`) is before 6.6:
    the guest does not start. Warning when the host kernel is unknown: the same definition
    fails on every host before 6.6 (Debian 12, RHEL 9, Ubuntu 22.04). Not reported when
    `host_kernel` is 6.6 or later. Paths are judged by their text only: vmtune does not
    follow symbolic links or read the host's mount table, which is why `/run`, where oVirt
    keeps links to its storage domains, is not judged by default. Versions: Linux 6.6 opens
    tmpfs files with O_DIRECT; QEMU 7.2 opens `cache='none'` and `directsync` images with it.

    ## References
    - Linux commit e88e0d366f9c "tmpfs: trivial support for direct IO" (v6.6)
    - https://libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms (`cache`)
    - systemd `file-hierarchy(7)` (/dev/shm and /run are tmpfs)
    """

    code = "DSK012"
    since = "unreleased"
    name = "direct-io-on-tmpfs"
    severity = Severity.WARNING
    other_severities = (Severity.ERROR,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    params = {"host_kernel": "unknown", "tmpfs_paths": TMPFS_DEFAULT}
    param_docs = {"host_kernel": "the host's kernel release (uname -r): before 6.6, O_DIRECT on tmpfs refuses to "
                                 "open and the finding is an error",
                  "tmpfs_paths": "comma-separated directories that are tmpfs on the host and hold image files "
                                 "(e.g. /dev/shm,/tmp)"}

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        kernel = ctx.derive(_host_kernel)
        if kernel is not None and kernel >= TMPFS_ODIRECT:
            return
        dirs, prefixes = ctx.derive(_tmpfs_dirs), ctx.derive(_tmpfs_prefixes)
        for disk in domain.disks:
            # The image's path first: a file disk under a tmpfs directory is rare, and its driver
            # and cache are read only then (issue 45: ~6 K instructions a rendered KubeVirt domain).
            source = domain.child(disk, "source") if disk.get("type") == "file" else None
            path = (source.get("file") or "") if source is not None else ""
            if not path.startswith(prefixes):
                continue
            driver = domain.child(disk, "driver")
            cache = driver.get("cache") if driver is not None else None
            where = _on_tmpfs(path, dirs)
            if driver is None or cache not in ("none", "directsync") or where is None:
                continue
            fix = Fix("use cache='writeback'", (set_attrs(driver, {"cache": "writeback", "io": None}
                                                          if driver.get("io") == "native"
                                                          else {"cache": "writeback"}),), FixSafety.UNSAFE)
            if kernel is not None:
                yield self.finding(domain, driver, f"cache='{cache}' (O_DIRECT) on an image in {where}, tmpfs: the "
                                   f"host kernel {kernel[0]}.{kernel[1]} refuses O_DIRECT there (6.6 accepts it), "
                                   "the guest does not start", fix, severity=Severity.ERROR)
            else:
                yield self.finding(domain, driver, f"cache='{cache}' (O_DIRECT) on an image in {where}, tmpfs: "
                                   "host kernels before 6.6 refuse to open it", fix,
                                   note="host kernel unknown: the policy parameter host_kernel makes this an error "
                                        "before 6.6 and silent from 6.6")


RULES: list[Rule] = [VirtioDiskSwitchesOff(), VirtioNetSwitchesOff(), DirectIoOnTmpfs()]
