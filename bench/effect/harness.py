#!/usr/bin/env python3
"""A/B benchmark: boot real guests before and after `vmtune check --fix` and measure.

    python bench/effect/harness.py [--quick] [--runs N]

For each category a "before" domain is written the way real incidents look (a KVM guest,
`type='kvm'`), the "after" domain is produced by the real fixer (`vmtune check --fix
--unsafe-fixes --select ...` on a copy), and both then boot through libvirt's embedded QEMU
driver under TCG: the harness changes `type='kvm'` to `type='qemu'` in both and nothing
else (/dev/kvm here only runs specially built kernels). The guest is Debian's kernel with a
busybox initramfs (bench/effect/guest.py); its init runs the workload and prints results
on the serial console. Writes docs/effects.md and docs/effects.png.

TCG shows device-emulation costs honestly (UHCI polling, IDE/AHCI register traffic) but
exaggerates or hides CPU-virtualisation effects (timers, Hyper-V, pinning), so those are
reported as measured, not extrapolated to KVM.

Run as root, the harness re-executes itself inside a network namespace of its own that
has only a loopback interface (`ip netns add vmtune-effect`); tap devices for the network
categories are created there, the host end gets 10.0.2.2/24 and a listener, so guest
traffic never reaches a real network. Disk categories that need a block device get a loop
device over a sparse file. Without root those categories are reported as not measured.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
    vcpus: int = 1
    streams: int = 1  # parallel TCP streams (net)
    tap: bool = False  # needs a tap device (root, in the harness's namespace)
    block: bool = False  # needs a block device ({disk} becomes a loop device)


NO_USB = "<controller type='usb' index='0' model='none'/>"
DISK_METRICS = [("write_mbs", "sequential write (MB/s)", True), ("read_mbs", "sequential read (MB/s)", True),
                ("sync4k_ms", "synchronous 4 KiB write (ms per op)", False)]
SYNC_NOTE = ("The 4 KiB figure is 64 `dd ... conv=fsync` runs, each a new process in the guest: the process "
             "start is in both sides' numbers, so compare the difference, not the absolute value.")
TAP = "<target dev='vmtap0' managed='no'/>"
CPU_BOUND_NOTE = ("Under TCG the guest's own TCP stack runs emulated and saturates its vCPU (QEMU at 100-115% CPU "
                  "during the transfer, sampled from /proc), so throughput is a few MB/s and the ratio is the guest "
                  "CPU each NIC model costs per byte, not line rate. Timing starts once the link has carrier.")

CATEGORIES = [
    Category("usb", "Idle host CPU: UHCI controller with a USB tablet, no graphics", "USB", "idle", 12, 2, "pc",
             "<controller type='usb' index='0' model='piix3-uhci'/>\n    <input type='tablet' bus='usb'/>",
             [("idle_cpu", "QEMU CPU while the guest idles (%)", False)]),
    Category("timers", "Idle host CPU: HPET and timer tick policies of a Linux guest", "CLK", "idle", 12, 2, "q35",
             NO_USB, [("idle_cpu", "QEMU CPU while the guest idles (%)", False)],
             note="Under TCG the guest has no kvmclock and timer interrupts are emulated in QEMU's own threads; "
                  "whether HPET costs anything here says little about KVM, where the incident's cost was VM exits."),
    Category("net", "Network throughput, guest to host over a tap: e1000 vs virtio-net", "NET004", "net",
             24, 4, "q35",
             f"{NO_USB}\n    <interface type='ethernet'>\n      {TAP}\n      <model type='e1000'/>\n    </interface>",
             [("send_mbs", "guest to host TCP (MB/s)", True)], tap=True, note=CPU_BOUND_NOTE),
    Category("net-mq", "Network throughput over a tap, 2 vCPUs, 2 TCP streams: one queue vs multiqueue", "NET001",
             "net", 24, 4, "q35",
             f"{NO_USB}\n    <interface type='ethernet'>\n      {TAP}\n      <model type='virtio'/>\n    </interface>",
             [("send_mbs", "guest to host TCP, 2 streams (MB/s)", True)], vcpus=2, streams=2, tap=True,
             note="The fix is `<driver name='vhost' queues='2'/>`. Multiqueue spreads softirq work over vCPUs; under "
                  "TCG both vCPUs and QEMU's I/O share the machine's two cores with the listener, so the gain seen "
                  "on a 16-vCPU KVM guest cannot show at this scale. " + CPU_BOUND_NOTE),
    Category("disk", "Disk: SATA (AHCI) disk vs virtio-blk", "DSK004", "disk", 128, 16, "q35",
             f"{NO_USB}\n    <disk type='file' device='disk'>\n"
             "      <driver name='qemu' type='raw'/>\n      <source file='{disk}'/>\n"
             "      <target dev='sda' bus='sata'/>\n    </disk>", DISK_METRICS, note=SYNC_NOTE),
    Category("disk-cache", "Disk on a block device: default cache (host page cache) vs cache='none' io='native'",
             "DSK002", "disk", 128, 16, "q35",
             f"{NO_USB}\n    <disk type='block' device='disk'>\n"
             "      <driver name='qemu' type='raw'/>\n      <source dev='{disk}'/>\n"
             "      <target dev='vda' bus='virtio'/>\n    </disk>", DISK_METRICS, block=True,
             note="The block device is a loop device over a sparse file in the host's page cache, so `cache='none'` "
                  "skips one copy but the data still lands in host memory: a real disk or SAN shows larger "
                  "differences, in both directions for reads. " + SYNC_NOTE),
    Category("disk-iothread", "Disk: virtio-blk in QEMU's main loop vs in an I/O thread", "DSK003", "disk", 128, 16,
             "q35",
             f"{NO_USB}\n    <disk type='file' device='disk'>\n"
             "      <driver name='qemu' type='raw'/>\n      <source file='{disk}'/>\n"
             "      <target dev='vda' bus='virtio'/>\n    </disk>", DISK_METRICS, vcpus=2,
             note="An I/O thread takes disk emulation out of QEMU's main loop, which matters when that loop is busy "
                  "(many devices, migration, monitor traffic); this guest has nothing else there, so all the "
                  "thread adds is a hand-off on two shared cores. " + SYNC_NOTE),
]


def before_xml(cat: Category, kernel: Path, initrd: Path, console: Path, disk: str, size: int, port: int) -> str:
    """The incident as a KVM guest; `as_tcg` turns it (and its fixed version) into what boots here."""
    devices = cat.devices.format(disk=disk)
    cmdline = (f"console=ttyS0 quiet vmtune.workload={cat.workload} vmtune.size={size} vmtune.port={port} "
               f"vmtune.streams={cat.streams}")
    return f"""<domain type='kvm'>
  <name>effect-{cat.key}</name>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://debian.org/debian/12"/>
    </libosinfo:libosinfo>
  </metadata>
  <memory unit='MiB'>384</memory>
  <vcpu>{cat.vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='{cat.machine}'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
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


def as_tcg(xml: str) -> str:
    return xml.replace("<domain type='kvm'>", "<domain type='qemu'>", 1)


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
        # All addresses only inside the harness's own namespace (there: the taps' 10.0.2.2); else loopback.
        self.server = socket.create_server(("" if IN_NETNS else "127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.expected = 0  # bytes per connection; the listener closes then, which ends the guest's nc
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        with conn:
            received = 0
            while received < self.expected:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                received += len(chunk)


NETNS = "vmtune-effect"
IN_NETNS = os.environ.get("VMTUNE_EFFECT_NETNS") == NETNS


def enter_netns() -> None:
    """Re-run this script inside a loopback-only network namespace (root only)."""
    if IN_NETNS or os.geteuid() != 0 or shutil.which("ip") is None:
        return
    if NETNS not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split():
        subprocess.run(["ip", "netns", "add", NETNS], check=True)
    subprocess.run(["ip", "-n", NETNS, "link", "set", "lo", "up"], check=True)
    os.environ["VMTUNE_EFFECT_NETNS"] = NETNS
    code = subprocess.run(["ip", "netns", "exec", NETNS, sys.executable, __file__, *sys.argv[1:]]).returncode
    subprocess.run(["ip", "netns", "del", NETNS], check=False)
    sys.exit(code)


@contextlib.contextmanager
def tap_for(xml: str) -> Iterator[str | None]:
    """The tap device a domain names (`<target dev='vmtap0' managed='no'/>`), created with the
    queue mode libvirt will open it with, the host end at 10.0.2.2/24; removed afterwards."""
    match = re.search(r"<target dev='(vmtap\d+)' managed='no'/>", xml)
    if match is None:
        yield None
        return
    dev = match.group(1)
    queues = re.search(r"queues='(\d+)'", xml)
    mode = ["multi_queue"] if queues and int(queues.group(1)) > 1 else []
    subprocess.run(["ip", "tuntap", "add", "dev", dev, "mode", "tap", "vnet_hdr", *mode], check=True)
    try:
        subprocess.run(["ip", "addr", "add", "10.0.2.2/24", "dev", dev], check=True)
        subprocess.run(["ip", "link", "set", dev, "up"], check=True)
        yield dev
    finally:
        subprocess.run(["ip", "link", "del", dev], check=False)


@contextlib.contextmanager
def loop_device(image: Path) -> Iterator[str]:
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)


@dataclass
class Measured:
    values: dict[str, list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    guest: dict[str, str] = field(default_factory=dict)  # what the guest reported of its devices


def measure(conn: object, xml: str, cat: Category, console: Path, runs: int, cat_size: int) -> Measured:
    out = Measured()
    for _ in range(runs):
        # The guest idles `size` seconds; measure the host-side window of size - 1 seconds.
        with tap_for(xml):
            result = boot.boot(conn, xml, console, idle_window=max(1.0, cat_size - 1.0))
        out.seconds.append(result.seconds)
        out.guest.update({k: v for k, v in result.results.items() if k in ("dev", "if", "queues")})
        row: dict[str, float] = {}
        if result.idle_cpu_percent is not None:
            row["idle_cpu"] = result.idle_cpu_percent
        if "send_s" in result.results:
            row["send_mbs"] = float(result.results["mb"]) / max(float(result.results["send_s"]), 0.01)
        if "write_s" in result.results:
            mb = float(result.results["mb"])
            row["write_mbs"] = mb / max(float(result.results["write_s"]), 0.01)
            row["read_mbs"] = mb / max(float(result.results["read_s"]), 0.01)
            row["sync4k_ms"] = float(result.results["sync4k_s"]) / int(result.results["ops"]) * 1000
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
    columns = min(4, len(rows))
    lines = -(-len(rows) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(3.6 * columns, 2.9 * lines), squeeze=False)
    for ax in axes.flat[len(rows):]:
        ax.set_visible(False)
    for ax, (title, label, before, after, _higher) in zip(axes.flat, rows, strict=False):
        ax.bar(["before", "after vmtune"], [before, after], color=["#c0504d", "#4f81bd"])
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(label.split(" (")[-1].rstrip(")"), fontsize=8)
    fig.suptitle("vmtune fixes under TCG (median of runs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


@dataclass
class Rig:
    """What every category boots with: the libvirt connection, the guest and the host's listener."""
    conn: object
    kernel: Path
    initrd: Path
    sink: Sink


def run_category(cat: Category, quick: bool, runs: int, rig: Rig, stack: contextlib.ExitStack) -> str:
    """Boot the category's before and after domains `runs` times each; its docs/effects.md section."""
    size = cat.quick_size if quick else cat.size
    rig.sink.expected = size * 1024 * 1024 // cat.streams
    disk: str = str(OUT / f"{cat.key}.img")
    if cat.workload == "disk":
        with open(disk, "wb") as fh:
            fh.truncate((size + 16) * 1024 * 1024)
        if cat.block:
            disk = stack.enter_context(loop_device(Path(disk)))
    console = OUT / f"{cat.key}-console.log"
    incident = before_xml(cat, rig.kernel, rig.initrd, console, disk, size, rig.sink.port)
    fixed, fixes = after_xml(incident, cat, OUT)
    before, after = as_tcg(incident), as_tcg(fixed)
    (OUT / f"{cat.key}-before.xml").write_text(before)
    (OUT / f"{cat.key}-after.xml").write_text(after)
    print(f"[{cat.key}] {fixes}", flush=True)
    if after == before:
        return (f"## {cat.title}\n\nNot measured: `vmtune check --fix --unsafe-fixes --select {cat.select}` changes "
                "nothing in this guest, so there is no before/after to compare. " + cat.note + "\n")
    try:
        a = measure(rig.conn, before, cat, console, runs, size)
        b = measure(rig.conn, after, cat, console, runs, size)
    except Exception as exc:  # a variant that does not boot under TCG is a result too
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"## {cat.title}\n\nFixes applied by `vmtune check --fix --unsafe-fixes --select {cat.select}`: "
                f"{fixes}.\n\nNot measured: a guest did not run to completion under TCG: `{first}`.\n")
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
    if a.guest or b.guest:
        seen = lambda m: ", ".join(f"{k}={v}" for k, v in sorted(m.guest.items()))  # noqa: E731
        lines += ["", f"The guest saw: before {seen(a)}; after {seen(b)}."]
    if cat.note:
        lines += ["", cat.note]
    lines.append("")
    return "\n".join(lines)


def rows_from_markdown(text: str) -> list[tuple[str, str, float, float, bool]]:
    """Chart rows from the effects tables (their before/after medians): one source for the PNG."""
    rows: list[tuple[str, str, float, float, bool]] = []
    keys = {c.title: c for c in CATEGORIES}
    cat: Category | None = None
    before: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("## "):
            cat = keys.get(line[3:])
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cat is None or len(cells) < 3 or cells[1] not in ("before", "after"):
            continue
        if cells[1] == "before":
            before[cells[0]] = float(cells[2])
        elif cells[0] in before:
            higher = next(h for k, label, h in cat.metrics if label == cells[0])
            rows.append((f"{cat.key}: {cells[0].split(' (')[0]}", cells[0], before[cells[0]], float(cells[2]), higher))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run each, short workloads (< 3 minutes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", help="comma-separated category keys: " + ", ".join(c.key for c in CATEGORIES))
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "effects.md")
    parser.add_argument("--chart-only", action="store_true", help="redraw the PNG from an existing --output")
    args = parser.parse_args()
    if args.chart_only:
        drawn = chart(rows_from_markdown(args.output.read_text()), args.output.with_suffix(".png"))
        sys.exit(0 if drawn else "matplotlib is missing (pip install -r bench/requirements.txt)")
    enter_netns()
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
    rig = Rig(conn, kernel, initrd, Sink())  # after enter_netns: the listener lives in the namespace
    chosen = [c for c in CATEGORIES if not args.only or c.key in args.only.split(",")]
    sections: list[str] = []
    for cat in chosen:
        if (cat.tap or cat.block) and not IN_NETNS:
            sections.append(f"## {cat.title}\n\nNot measured: needs root (and `ip`, `losetup`) to create "
                            "its tap or loop device in the harness's own network namespace.\n")
            print(sections[-1], flush=True)
            continue
        with contextlib.ExitStack() as stack:
            section = run_category(cat, args.quick, runs, rig, stack)
        sections.append(section)
        print(section, flush=True)
    conn.close()
    elapsed = time.monotonic() - started
    png = args.output.with_suffix(".png")
    has_chart = chart(rows_from_markdown("\n".join(sections)), png)  # the chart draws the tables' medians
    header = [
        "# Measured effects of vmtune's fixes",
        "",
        "Generated by `python bench/effect/harness.py" + (" --quick" if args.quick else "") + "` "
        f"in {elapsed / 60:.1f} minutes on {boot_machine()}.",
        "",
        "Guests boot under **TCG** (`type='qemu'`), not KVM: /dev/kvm on these machines runs only specially",
        "built guest kernels. TCG shows device-emulation costs honestly but exaggerates or hides",
        "CPU-virtualisation effects; read ratios as evidence of direction, not as KVM numbers.",
        "Domains are written and fixed as KVM guests (`type='kvm'`, as in the incidents) and booted",
        "with `type='qemu'`, the only change the harness makes to either. Network categories use a",
        "tap device in a loopback-only network namespace of the harness's own; the host end",
        "listens on 10.0.2.2. Not covered: Hyper-V timers (Windows guests only).",
        "",
    ]
    if has_chart:
        header += [f"![before and after]({png.name})", ""]
    args.output.write_text("\n".join(header + sections))
    print(f"wrote {args.output}" + (f" and {png}" if has_chart else " (no matplotlib: no chart)"))


def boot_machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{os.cpu_count()} cores ({cpu})"


if __name__ == "__main__":
    main()
