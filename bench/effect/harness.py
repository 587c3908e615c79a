#!/usr/bin/env python3
"""A/B benchmark: boot real guests before and after `vmtune check --fix` and measure.

    python bench/effect/harness.py [--quick] [--runs N]

For each category a "before" domain is written the way real incidents look, the "after"
domain is produced by the real fixer (`vmtune check --fix --unsafe-fixes --select ...`
on a copy), and both boot through libvirt's embedded QEMU driver under TCG (`type='qemu'`:
/dev/kvm here only runs specially built kernels). The guest is Debian's kernel with a
busybox initramfs (bench/effect/guest.py); its init runs the workload and prints results
on the serial console. Writes docs/effects.md and docs/effects.png.

TCG shows device-emulation costs honestly (UHCI polling, IDE/AHCI register traffic) but
exaggerates or hides CPU-virtualisation effects (timers, Hyper-V, pinning), so those are
reported as measured, not extrapolated to KVM.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "bench" / "out" / "effect"
sys.path.insert(0, str(HERE))

import boot  # noqa: E402
import guest  # noqa: E402


@dataclass
class Category:
    key: str
    title: str
    select: str  # vmtune rules whose fixes make the "after" domain
    workload: str
    size: int
    quick_size: int
    machine: str
    devices: str
    metrics: list[tuple[str, str, bool]]  # (result key, label, higher is better)
    note: str = ""


CATEGORIES = [
    Category("usb", "Idle host CPU: UHCI controller with a USB tablet, no graphics", "USB", "idle", 12, 5, "pc",
             "<controller type='usb' index='0' model='piix3-uhci'/>\n    <input type='tablet' bus='usb'/>",
             [("idle_cpu", "QEMU CPU while the guest idles (%)", False)]),
    Category("timers", "Idle host CPU: HPET exposed to a Linux guest", "CLK", "idle", 12, 5, "q35",
             "<controller type='usb' index='0' model='none'/>",
             [("idle_cpu", "QEMU CPU while the guest idles (%)", False)],
             note="Under TCG the guest has no kvmclock; whether HPET costs anything here says little about KVM."),
    Category("net", "Network throughput, guest to host: e1000 vs virtio-net (QEMU user networking)", "NET", "net",
             64, 16, "q35",
             "<controller type='usb' index='0' model='none'/>\n    <interface type='user'>\n"
             "      <model type='e1000'/>\n    </interface>",
             [("send_mbs", "guest to host TCP (MB/s)", True)],
             note="User networking (slirp) carries the traffic to a listener on 127.0.0.1, so no tap device or "
                  "namespace is needed; but slirp under TCG moves only a few MB/s, so this measures slirp, not the "
                  "NIC model, and shows no benefit of virtio-net here. A tap backend (and vhost-net, which needs "
                  "KVM) would be the fair test; multiqueue (NET001) needs a tap too. Neither is measured."),
    Category("disk", "Disk throughput: SATA (AHCI) disk vs virtio-blk", "DSK", "disk", 128, 32, "q35",
             "<controller type='usb' index='0' model='none'/>\n    <disk type='file' device='disk'>\n"
             "      <driver name='qemu' type='raw'/>\n      <source file='{disk}'/>\n"
             "      <target dev='sda' bus='sata'/>\n    </disk>",
             [("write_mbs", "sequential write (MB/s)", True), ("read_mbs", "sequential read (MB/s)", True)]),
]


def before_xml(cat: Category, kernel: Path, initrd: Path, console: Path, disk: Path, size: int, port: int) -> str:
    devices = cat.devices.format(disk=disk)
    return f"""<domain type='qemu'>
  <name>effect-{cat.key}</name>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://debian.org/debian/12"/>
    </libosinfo:libosinfo>
  </metadata>
  <memory unit='MiB'>384</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='{cat.machine}'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>console=ttyS0 quiet vmtune.workload={cat.workload} vmtune.size={size} vmtune.port={port}</cmdline>
  </os>
  <features>
    <acpi/>
  </features>
  <clock offset='utc'/>
  <devices>
    <serial type='file'>
      <source path='{console}'/>
    </serial>
    {devices}
    <memballoon model='none'/>
  </devices>
</domain>
"""


def after_xml(before: str, cat: Category, work: Path) -> tuple[str, str]:
    """The real fixer's output for the category's rules, and what it reported."""
    path = work / f"{cat.key}-after.xml"
    path.write_text(before)
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", "--fix", "--unsafe-fixes",
                           "--show-fixes", "--select", cat.select, str(path)], capture_output=True, text=True,
                          cwd=ROOT)
    fixes = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("fixed:")]
    return path.read_text(), "; ".join(fixes) or "no fix applied"


class Sink:
    """A TCP listener on 127.0.0.1 that swallows what the guest sends, then closes."""

    def __init__(self) -> None:
        import socket
        import threading

        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.expected = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.server.accept()
            with conn:
                received = 0
                while received < self.expected:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    received += len(chunk)


SINK = Sink()


@dataclass
class Measured:
    values: dict[str, list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)


def measure(conn: object, xml: str, cat: Category, console: Path, runs: int, cat_size: int) -> Measured:
    out = Measured()
    for _ in range(runs):
        # The guest idles `size` seconds; measure the host-side window of size - 1 seconds.
        result = boot.boot(conn, xml, console, idle_window=max(1.0, cat_size - 1.0))
        out.seconds.append(result.seconds)
        row: dict[str, float] = {}
        if result.idle_cpu_percent is not None:
            row["idle_cpu"] = result.idle_cpu_percent
        if "send_s" in result.results:
            row["send_mbs"] = float(result.results["mb"]) / max(float(result.results["send_s"]), 0.01)
        if "write_s" in result.results:
            mb = float(result.results["mb"])
            row["write_mbs"] = mb / max(float(result.results["write_s"]), 0.01)
            row["read_mbs"] = mb / max(float(result.results["read_s"]), 0.01)
        if not row:
            raise RuntimeError(f"{cat.key}: no result on the console:\n{result.console[-1500:]}")
        for key, value in row.items():
            out.values.setdefault(key, []).append(value)
    return out


def stats(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f}"


def chart(rows: list[tuple[str, str, float, float, bool]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.6))
    for ax, (title, label, before, after, _higher) in zip(axes if len(rows) > 1 else [axes], rows, strict=True):
        ax.bar(["before", "after vmtune"], [before, after], color=["#c0504d", "#4f81bd"])
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(label, fontsize=8)
    fig.suptitle("vmtune fixes under TCG (median of runs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run each, short workloads (< 3 minutes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", help="comma-separated category keys (usb, timers, net, disk)")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "effects.md")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    started = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    kernel, initrd = guest.build(OUT / "guest")
    root = OUT / "embed-root"
    conn = boot.open_embed(root)
    import libvirt

    for dom in conn.listAllDomains(0):  # leftovers of an interrupted run
        for step in (dom.destroy, dom.undefine):
            with contextlib.suppress(libvirt.libvirtError):
                step()
    chosen = [c for c in CATEGORIES if not args.only or c.key in args.only.split(",")]
    sections: list[str] = []
    chart_rows: list[tuple[str, str, float, float, bool]] = []
    for cat in chosen:
        size = cat.quick_size if args.quick else cat.size
        SINK.expected = size * 1024 * 1024
        disk = OUT / f"{cat.key}.img"
        if cat.workload == "disk":
            with disk.open("wb") as fh:
                fh.truncate((size + 16) * 1024 * 1024)
        console = OUT / f"{cat.key}-console.log"
        before = before_xml(cat, kernel, initrd, console, disk, size, SINK.port)
        (OUT / f"{cat.key}-before.xml").write_text(before)
        after, fixes = after_xml(before, cat, OUT)
        print(f"[{cat.key}] {fixes}", flush=True)
        if after == before:
            sections.append(f"## {cat.title}\n\nNot measured: `vmtune check --fix --unsafe-fixes --select "
                            f"{cat.select}` changes nothing in this TCG guest (those rules target `type='kvm'` "
                            "guests), so there is no before/after to compare. " + cat.note + "\n")
            print(sections[-1], flush=True)
            continue
        a = measure(conn, before, cat, console, runs, size)
        b = measure(conn, after, cat, console, runs, size)
        lines = [f"## {cat.title}", "", f"Fixes applied by `vmtune check --fix --unsafe-fixes --select {cat.select}`: "
                 f"{fixes}.", "", "| metric | variant | median | min | max | runs |", "|---|---|---|---|---|---|"]
        for key, label, higher in cat.metrics:
            if key not in a.values or key not in b.values:
                continue
            lines.append(f"| {label} | before | {stats(a.values[key])} | {runs} |")
            lines.append(f"| {label} | after | {stats(b.values[key])} | {runs} |")
            mb, ma = statistics.median(a.values[key]), statistics.median(b.values[key])
            ratio = ma / mb if mb else float("inf")
            verdict = "better" if (ratio > 1.05 if higher else ratio < 0.95) else \
                ("worse" if (ratio < 0.95 if higher else ratio > 1.05) else "no clear effect (within 5%)")
            lines.append(f"| {label} | after / before | {ratio:.2f} | | | {verdict} |")
            chart_rows.append((f"{cat.key}: {label.split(' (')[0]}", label, mb, ma, higher))
        if cat.note:
            lines += ["", cat.note]
        lines.append("")
        sections.append("\n".join(lines))
        print(sections[-1], flush=True)
    conn.close()
    elapsed = time.monotonic() - started
    png = args.output.with_suffix(".png")
    has_chart = chart(chart_rows, png)
    header = [
        "# Measured effects of vmtune's fixes",
        "",
        "Generated by `python bench/effect/harness.py" + (" --quick" if args.quick else "") + "` "
        f"in {elapsed / 60:.1f} minutes on {boot_machine()}.",
        "",
        "Guests boot under **TCG** (`type='qemu'`), not KVM: /dev/kvm on these machines runs only specially",
        "built guest kernels. TCG shows device-emulation costs honestly but exaggerates or hides",
        "CPU-virtualisation effects; read ratios as evidence of direction, not as KVM numbers.",
        "Not covered: multiqueue virtio-net (needs a tap backend in a network namespace, which the",
        "harness does not create), disk cache/io modes and I/O threads, disk latency, Hyper-V timers",
        "(Windows guests only).",
        "",
    ]
    if has_chart:
        header += [f"![before and after]({png.name})", ""]
    args.output.write_text("\n".join(header + sections))
    print(f"wrote {args.output}" + (f" and {png}" if has_chart else " (no matplotlib: no chart)"))


def boot_machine() -> str:
    import os

    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} cores ({cpu})"


if __name__ == "__main__":
    main()
