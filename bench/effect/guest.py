"""Build the benchmark guest: Debian's kernel and busybox-static in a tiny initramfs.

Everything comes from Debian packages (`apt-get download`), extracted without installing.
The init script loads the modules the workload needs, runs it, prints `RESULT ...` lines
on the serial console and powers off.

The kernel boots as an uncompressed ELF through its PVH entry point (QEMU's `-kernel` takes
one when the ELF carries the Xen PHYS32_ENTRY note; Debian builds with CONFIG_PVH=y). Under
TCG, the bzImage's own xz decompressor took ~5.5 s of every ~12 s boot; the guest's devices
and workload are the same either way. A kernel without the note is booted as the bzImage.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import subprocess
from pathlib import Path

RECIPE = "3: net timing starts once the link has carrier"
MODULES = ["virtio_pci", "virtio_blk", "virtio_net", "ata_piix", "ahci", "sd_mod", "e1000", "e1000e",
           "uhci_hcd", "ehci_pci", "xhci_pci", "usbhid"]
APPLETS = ["sh", "mount", "insmod", "cat", "sleep", "echo", "dd", "poweroff", "grep", "sed", "awk", "ls",
           "mkdir", "ip", "ifconfig", "nc", "sync", "head", "cut", "date", "seq", "true", "test", "["]

INIT = r"""#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod /lib/modules/$m 2>/dev/null; done
arg() { sed -n "s/.*vmtune\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
W=$(arg workload); N=$(arg size)
up() { cut -d' ' -f1 /proc/uptime; }
echo "BOOTED workload=$W" > /dev/ttyS0
case "$W" in
idle)
    echo "IDLE_START" > /dev/ttyS0
    sleep "$N"
    echo "IDLE_END" > /dev/ttyS0
    ;;
spin)
    # A vCPU that always wants to run (for run-queue delay: what a competing host thread costs it).
    echo "SPIN_START" > /dev/ttyS0
    while :; do :; done
    ;;
disk)
    sleep 1
    DEV=""
    for d in vda sda hda; do [ -b /dev/$d ] && DEV=/dev/$d && break; done
    if [ -z "$DEV" ]; then echo "RESULT error=nodisk" > /dev/ttyS0; else
        T0=$(up); dd if=/dev/zero of=$DEV bs=1M count=$N conv=fsync 2>/dev/null; T1=$(up)
        sync; echo 3 > /proc/sys/vm/drop_caches  # read from the device, not the guest's page cache
        T2=$(up); dd if=$DEV of=/dev/null bs=1M count=$N 2>/dev/null; T3=$(up)
        # Latency: 64 synchronous 4 KiB writes, each its own dd (process start is the same on both sides).
        for i in $(seq 64); do dd if=/dev/zero of=$DEV bs=4k count=1 seek=$((i * 61)) conv=fsync 2>/dev/null; done
        T4=$(up)
        echo "RESULT dev=$DEV write_s=$(awk "BEGIN{print $T1-$T0}") read_s=$(awk "BEGIN{print $T3-$T2}") sync4k_s=$(awk "BEGIN{print $T4-$T3}") ops=64 mb=$N" > /dev/ttyS0
    fi
    ;;
net)
    sleep 1
    IF=$(ls /sys/class/net | grep -v lo | head -n 1)
    ip link set lo up; ip link set "$IF" up; ip addr add 10.0.2.15/24 dev "$IF"
    PORT=$(arg port); S=$(arg streams)
    [ -z "$S" ] && S=1
    # Time from here, not from the link coming up: e1000 waits for autonegotiation, virtio does not.
    L0=$(up); i=0
    while [ "$(cat /sys/class/net/$IF/carrier 2>/dev/null)" != 1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    L1=$(up)
    T0=$(up)
    for s in $(seq $S); do
        (dd if=/dev/zero bs=64k count=$((N * 16 / S)) 2>/dev/null | nc 10.0.2.2 "$PORT") &
    done
    wait
    T1=$(up)
    echo "RESULT if=$IF queues=$(ls /sys/class/net/$IF/queues | grep -c tx) send_s=$(awk "BEGIN{print $T1-$T0}") link_s=$(awk "BEGIN{print $L1-$L0}") mb=$N" > /dev/ttyS0
    ;;
esac
echo "DONE" > /dev/ttyS0
sync
poweroff -f
"""


def _cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A newc cpio archive: (path, mode, data); symlinks carry their target as data."""
    out = io.BytesIO()
    for ino, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        encoded = name.encode() + b"\0"
        header = b"070701" + b"".join(f"{v:08X}".encode() for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0))
        out.write(header + encoded)
        out.write(b"\0" * ((4 - (len(header) + len(encoded)) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))
    return out.getvalue()


def _download(cache: Path) -> tuple[Path, Path]:
    cache.mkdir(parents=True, exist_ok=True)
    depends = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], capture_output=True, text=True,
                             check=True).stdout
    image = next(line.split()[-1] for line in depends.splitlines() if "Depends: linux-image-" in line)
    for package in (image, "busybox-static"):
        if not list(cache.glob(f"{package}_*.deb")):
            subprocess.run(["apt-get", "download", package], cwd=cache, check=True, capture_output=True)
    kernel_deb = next(cache.glob(f"{image}_*.deb"))
    busybox_deb = next(cache.glob("busybox-static_*.deb"))
    return kernel_deb, busybox_deb


# Compressed payload signatures inside a bzImage, and how to inflate them in Python.
_PAYLOADS = {b"\xfd7zXZ\x00": "xz", b"\x1f\x8b\x08": "gzip"}
_XEN_ELFNOTE_PHYS32_ENTRY = 18


def pvh_kernel(bzimage: bytes) -> bytes | None:
    """The ELF vmlinux inside a bzImage if it has a PVH entry point, else None."""
    import lzma
    import zlib

    for magic, kind in _PAYLOADS.items():
        start = bzimage.find(magic)
        while start >= 0:
            try:
                elf = (lzma.LZMADecompressor().decompress(bzimage[start:]) if kind == "xz"
                       else zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(bzimage[start:]))
            except (lzma.LZMAError, zlib.error):
                elf = b""
            if elf.startswith(b"\x7fELF"):
                return elf if _has_pvh_note(elf) else None
            start = bzimage.find(magic, start + 1)
    return None


def _has_pvh_note(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF has a Xen PHYS32_ENTRY note in a PT_NOTE segment."""
    import struct

    if elf[4] != 2 or elf[5] != 1:  # ELFCLASS64, little-endian
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for index in range(phnum):
        p_type, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + index * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        at, end = offset, offset + filesz
        while at + 12 <= end:
            namesz, descsz, note_type = struct.unpack_from("<III", elf, at)
            name = elf[at + 12:at + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and note_type == _XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            at += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def build(out: Path) -> tuple[Path, Path]:
    """Returns (kernel, initrd), building them once into `out`."""
    import hashlib

    # The initrd is named after what goes into it (and the recipe's version, which covers how the
    # kernel is extracted), so editing INIT, MODULES or the recipe rebuilds both.
    digest = hashlib.sha256((RECIPE + INIT + ",".join(MODULES) + ",".join(APPLETS)).encode()).hexdigest()[:12]
    initrd_path = out / f"initrd-{digest}.gz"
    for kernel_path in (out / "vmlinux", out / "vmlinuz"):  # PVH ELF when the kernel has the entry point
        if kernel_path.exists() and initrd_path.exists():
            return kernel_path, initrd_path
    kernel_deb, busybox_deb = _download(out / "debs")
    extracted = out / "extract"
    shutil.rmtree(extracted, ignore_errors=True)
    for deb in (kernel_deb, busybox_deb):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(extracted)], check=True)
    bzimage = next((extracted / "boot").glob("vmlinuz-*")).read_bytes()
    elf = pvh_kernel(bzimage)
    kernel_path = out / ("vmlinux" if elf else "vmlinuz")
    kernel_path.write_bytes(elf or bzimage)
    for stale in [*out.glob("initrd*.gz"), out / "vmlinuz", out / "vmlinux"]:
        if stale not in (initrd_path, kernel_path):
            stale.unlink(missing_ok=True)
    modroot = next((extracted / "lib" / "modules").iterdir())
    # The package ships no modules.dep (depmod writes it at install time, and kmod may be
    # missing here): read each module's `depends=` from its .modinfo section instead.
    by_name = {p.name.removesuffix(".ko").replace("-", "_"): p for p in modroot.rglob("*.ko")}
    order: list[Path] = []

    def visit(name: str) -> None:
        path = by_name.get(name)
        if path is None or path in order:
            return
        data = path.read_bytes()
        start = data.find(b"\0depends=")
        if start >= 0:
            value = data[start + 9:data.index(b"\0", start + 9)].decode()
            for dep in filter(None, value.split(",")):
                visit(dep.replace("-", "_"))
        order.append(path)

    for name in MODULES:
        visit(name)
    entries: list[tuple[str, int, bytes]] = [(d, stat.S_IFDIR | 0o755, b"") for d in
                                             ("bin", "proc", "sys", "dev", "lib", "lib/modules")]
    busybox = (extracted / "bin" / "busybox").read_bytes()
    entries.append(("bin/busybox", stat.S_IFREG | 0o755, busybox))
    entries += [(f"bin/{a}", stat.S_IFLNK | 0o777, b"busybox") for a in APPLETS]
    for module in order:
        entries.append((f"lib/modules/{module.name}", stat.S_IFREG | 0o644, module.read_bytes()))
    entries.append(("modules.order", stat.S_IFREG | 0o644, "\n".join(m.name for m in order).encode()))
    entries.append(("init", stat.S_IFREG | 0o755, INIT.encode()))
    initrd_path.write_bytes(gzip.compress(_cpio_newc(entries), compresslevel=6))
    shutil.rmtree(extracted)
    os.sync()
    return kernel_path, initrd_path
