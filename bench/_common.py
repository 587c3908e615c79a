"""Helpers shared by the benchmark scripts: run a command, time it, read its peak memory."""

from __future__ import annotations

import os
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


def run(cmd: list[str], stdin: bytes | None = None, env: dict[str, str] | None = None) -> Run:
    """Wall time and the peak RSS of the largest process it started (children included)."""
    start = time.perf_counter()
    # A fresh wait4() rusage per run: spawn through a tiny wrapper so ru_maxrss is this run's.
    wrapper = [sys.executable, "-c",
               "import resource,subprocess,sys;p=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,"
               "stderr=subprocess.DEVNULL);print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
               "sys.exit(p.returncode)", *cmd]
    done = subprocess.run(wrapper, input=stdin, capture_output=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - start
    rss_kb = int(done.stdout.decode().strip().splitlines()[-1] or 0)
    return Run(seconds, rss_kb / 1024, done.returncode)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {sys.version.split()[0]}"

