#!/usr/bin/env python3
"""Cold start: `vmtune check one.xml` against `virt-xml-validate one.xml` and `python -c pass`.

    python bench/coldstart.py [--runs 20]

Prints median/min/max wall time of each and the slowest imports of vmtune's check path
(python -X importtime), so start-up regressions show.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time

from _common import ROOT, VMTUNE, machine

ONE = ROOT / "fixtures" / "domains" / "win10-timer-storm.xml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    # Installed wheels ship bytecode; a checkout may not have it (PYTHONDONTWRITEBYTECODE): compile first.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "vmtune")], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"machine: {machine()}; {args.runs} runs each, after one warm-up")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "vmtune check one.xml": [*VMTUNE, "check", "--isolated", str(ONE)],
    }
    if shutil.which("virt-xml-validate"):
        commands["virt-xml-validate one.xml"] = ["virt-xml-validate", str(ONE), "domain"]
    for label, cmd in commands.items():
        times = []
        for i in range(args.runs + 1):
            start = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if i:  # the first run warms the page cache
                times.append(time.perf_counter() - start)
        med, low, high = statistics.median(times), min(times), max(times)
        print(f"{label:<28} median {med * 1000:6.1f} ms  (min {low * 1000:.1f}, max {high * 1000:.1f})")
    trace = subprocess.run([sys.executable, "-X", "importtime", "-m", "vmtune", "check", "--isolated", str(ONE)],
                           capture_output=True, text=True, cwd=ROOT).stderr
    imports = []
    for line in trace.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            imports.append((int(match.group(2)), match.group(4)))
    print("slowest imports (cumulative, top 12):")
    for micros, name in sorted(imports, reverse=True)[:12]:
        print(f"  {micros / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
