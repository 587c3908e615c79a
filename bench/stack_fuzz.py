#!/usr/bin/env python3
"""The long fuzz run of stack sources: N seeded mutations of the KubeVirt oracle manifests and
the OpenStack fixtures (tests/stack_mutate.py), each checked and then fixed in process.

    python bench/stack_fuzz.py [--count 2000] [--seed 20261127]

Prints files tried, exit codes, failures (tracebacks, internal errors, exit 2 without a one-line
error, over 2 s) and the slowest file; the whole run is one process, so its peak RSS bounds every
file's. tests/test_stack_hostile.py runs the same mutator on 70 files in CI.
"""

from __future__ import annotations

import argparse
import collections
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine

sys.path.insert(0, str(ROOT / "tests"))
from mutate import run_vmtune_in_process
from stack_mutate import mutate_stack

HOST = ROOT / "fixtures" / "hosts" / "intel-2node.xml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261127)
    args = parser.parse_args()
    openstack = ROOT / "fixtures" / "stacks" / "openstack"
    originals = sorted((ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle").glob("*.yaml")) + sorted(
        p for p in openstack.iterdir() if p.suffix in (".yaml", ".json", ".conf"))
    rng = random.Random(args.seed)
    codes: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    slowest = (0.0, "")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.count):
            source = rng.choice(originals)
            target = Path(tmp) / f"{index:05d}-{source.name}"
            target.write_bytes(mutate_stack(source.read_bytes(), source.name, rng))
            for mode in ("check", "fix-latency-host"):
                outcome = run_vmtune_in_process(target, mode, HOST)
                codes[f"{mode} exit {outcome.exit_code}"] += 1
                if outcome.problem or outcome.seconds > 2:
                    failures.append(f"{target.name} {mode}: {outcome.problem or f'{outcome.seconds:.1f} s'}")
                slowest = max(slowest, (outcome.seconds, f"{target.name} {mode}"))
            target.unlink()
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine: {machine()}")
    print(f"files tried: {args.count} (seed {args.seed}, {len(originals)} originals), runs: {2 * args.count}")
    print(f"wall time: {elapsed:.1f} s; slowest run: {slowest[0] * 1000:.0f} ms ({slowest[1]})")
    print(f"peak RSS: {peak_mb:.0f} MB")
    for key, count in sorted(codes.items()):
        print(f"  {key}: {count}")
    print(f"failures: {len(failures)}")
    for failure in failures[:50]:
        print(f"  {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
