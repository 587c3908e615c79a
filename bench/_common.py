"""Helpers shared by the benchmark scripts: run a command, time it, read its peak memory."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
VMTUNE = [sys.executable, "-m", "vmtune"]
DOMAIN_RNG = Path("/usr/share/libvirt/schemas/domain.rng")


@dataclass
class Run:
    seconds: float
    peak_rss_mb: float
    returncode: int
    cpu: float = 0.0  # user + sys seconds of the process and the children it waited for (workers)


def run(cmd: list[str], stdin: bytes | None = None, env: dict[str, str] | None = None) -> Run:
    """Wall time, CPU time (user+sys, children included) and the peak RSS of the largest process.

    os.wait4 gives this run's own rusage: ru_maxrss is the largest resident set of the process
    or of any descendant it waited for, and the CPU times include those descendants."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    if stdin is not None and proc.stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(seconds, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime)


@dataclass
class Compared:
    """Interleaved runs of several commands: per-command medians, and ratios taken pair by pair
    within a round (so a drift in the machine's speed cancels out)."""

    runs: dict[str, list[Run]]

    def cpu(self, label: str) -> float:
        return statistics.median(r.cpu for r in self.runs[label])

    def wall(self, label: str) -> float:
        return statistics.median(r.seconds for r in self.runs[label])

    def rss(self, label: str) -> float:
        return max(r.peak_rss_mb for r in self.runs[label])

    def ratio(self, a: str, b: str, what: str = "cpu") -> float:
        pairs = zip(self.runs[a], self.runs[b], strict=True)
        return statistics.median(getattr(x, what) / max(getattr(y, what), 1e-9) for x, y in pairs)


def interleave(commands: dict[str, list[str]], rounds: int, warmup: int = 1) -> Compared:
    """Run every command once per round, A B C A B C..., after `warmup` uncounted rounds."""
    runs: dict[str, list[Run]] = {label: [] for label in commands}
    for i in range(warmup + rounds):
        for label, cmd in commands.items():
            result = run(cmd)
            if i >= warmup:
                runs[label].append(result)
    return Compared(runs)


def load() -> str:
    try:
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


# What the measured interpreter is: its version, its real file, and whether the interpreter runs
# from a shared libpython (a pyenv or `--enable-shared` build) or is linked into the executable
# (Debian's /usr/bin/python3.11, built with PGO and LTO). The same install executes ~9 % more
# instructions, at a lower rate, under the pyenv build of this machine than under Debian's
# (docs/benchmarks.md, issue 45, session 57): a ratio is only comparable on the same interpreter.
_INTERPRETER = ("import os, sys; "
                "shared = any('libpython' in line for line in open('/proc/self/maps')); "
                "print(sys.version.split()[0], os.path.realpath(sys.executable), "
                "'shared libpython' if shared else 'static libpython')")


def machine(python: str | None = None) -> str:
    """The CPU, core count and the measured interpreter (`python`; this one when None)."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    said = subprocess.run([python or sys.executable, "-c", _INTERPRETER], capture_output=True, text=True)
    version, _, rest = said.stdout.strip().partition(" ")
    where = f" ({rest})" if rest else ""
    return f"{os.cpu_count()} cores, {cpu}, Python {version or 'unknown'}{where}"
