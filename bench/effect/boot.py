"""Boot a domain through libvirt's embedded QEMU driver and watch its serial console."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def qemu_cpu_seconds(pid: int) -> float:
    """utime + stime of the QEMU process, from /proc (all threads)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def qemu_pid(name: str) -> int | None:
    """The QEMU process of a domain: the one whose command line names it (-name guest=NAME)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"qemu-system" in argv[0] and any(a.startswith(f"guest={name},".encode()) for a in argv):
            return int(proc.name)
    return None


def open_embed(root: Path) -> Any:
    import os
    import threading

    os.environ.setdefault("LIBVIRT_LOG_OUTPUTS", "4:stderr")  # errors only: no per-file XATTR warnings

    import libvirt

    (root / "etc").mkdir(parents=True, exist_ok=True)
    # QEMU as the invoking user: a benchmark's files (kernel, console, disk) may live in
    # directories the libvirt-qemu user cannot enter, such as pytest's 0700 temp dirs.
    (root / "etc" / "qemu.conf").write_text('stdio_handler = "file"\nuser = "root"\ngroup = "root"\n'
                                            if os.geteuid() == 0 else 'stdio_handler = "file"\n')
    if not getattr(open_embed, "loop", False):
        libvirt.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                libvirt.virEventRunDefaultImpl()

        threading.Thread(target=run, daemon=True).start()
        open_embed.loop = True  # type: ignore[attr-defined]
    return libvirt.open(f"qemu:///embed?root={root}")


@dataclass
class BootResult:
    console: str
    seconds: float
    idle_cpu_percent: float | None = None
    results: dict[str, str] = field(default_factory=dict)


def boot(conn: Any, xml: str, console: Path, timeout: float = 300, idle_window: float = 1.0) -> BootResult:
    """Define, start, wait for power-off. When the guest prints IDLE_START, sample QEMU's CPU
    time over the next `idle_window` seconds of host time (the guest idles longer than that)."""
    if console.exists():
        console.unlink()
    dom = conn.defineXML(xml)
    start = time.monotonic()
    try:
        dom.create()
        pid = qemu_pid(dom.name())
        idle_start: tuple[float, float] | None = None
        idle_cpu = None
        while dom.isActive():
            if time.monotonic() - start > timeout:
                dom.destroy()
                raise TimeoutError(f"{dom.name()} did not power off within {timeout:.0f} s")
            text = console.read_text(errors="replace") if console.exists() else ""
            try:  # QEMU may exit between isActive() and reading its /proc entry
                if pid and idle_start is None and "IDLE_START" in text:
                    idle_start = (time.monotonic(), qemu_cpu_seconds(pid))
                if pid and idle_start and idle_cpu is None and time.monotonic() - idle_start[0] >= idle_window:
                    wall = time.monotonic() - idle_start[0]
                    idle_cpu = (qemu_cpu_seconds(pid) - idle_start[1]) / wall * 100
            except FileNotFoundError:
                pid = None
            time.sleep(0.05)
        text = console.read_text(errors="replace") if console.exists() else ""
        results: dict[str, str] = {}
        for line in text.splitlines():
            if line.startswith("RESULT "):
                results.update(dict(part.split("=", 1) for part in line.split()[1:] if "=" in part))
        return BootResult(text, time.monotonic() - start, idle_cpu, results)
    finally:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
