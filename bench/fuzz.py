#!/usr/bin/env python3
"""The long fuzz run: N seeded mutations of real definitions (hostile values, duplicated and
missing elements, broken syntax), each checked and then fixed with every fix on a two-node host.

    python bench/fuzz.py [--count 10000] [--seed 20261122] [--corpus ../shared/corpus/domains]

Prints files tried, exit codes, failures (tracebacks, internal errors, exit 2 without a one-line
error, over 5 s) and the slowest file; the whole run is one process, so its peak RSS bounds every
file's. tests/test_fuzz.py runs the same mutator on 150 files in CI.
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
from mutate import mutate, run_vmtune_in_process

HOST = ROOT / "fixtures" / "hosts" / "intel-2node.xml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "domains")
    args = parser.parse_args()
    originals = sorted(args.corpus.glob("*.xml")) + sorted((ROOT / "fixtures" / "virt-install").glob("*.xml"))
    rng = random.Random(args.seed)
    codes: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    slowest = (0.0, "")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.count):
            source = rng.choice(originals)
            target = Path(tmp) / f"{index:05d}-{source.name}"
            target.write_bytes(mutate(source.read_bytes(), rng))
            for mode in ("check", "fix-latency-host"):
                outcome = run_vmtune_in_process(target, mode, HOST)
                codes[f"{mode} exit {outcome.exit_code}"] += 1
                if outcome.problem or outcome.seconds > 5:
                    failures.append(f"{target.name} {mode}: {outcome.problem or f'{outcome.seconds:.1f} s'}")
                slowest = max(slowest, (outcome.seconds, f"{target.name} {mode}"))
            target.unlink()
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine: {machine()}")
    print(f"files tried: {args.count} (seed {args.seed}, {len(originals)} originals), runs: {2 * args.count}")
    print(f"wall time: {elapsed:.1f} s ({1000 * elapsed / (2 * args.count):.1f} ms per run)")
    print(f"slowest run: {slowest[0] * 1000:.0f} ms ({slowest[1]})")
    print(f"peak RSS of the whole run: {peak_mb:.0f} MB")
    for key, count in sorted(codes.items()):
        print(f"  {key}: {count}")
    print(f"failures: {len(failures)}")
    for failure in failures[:50]:
        print(f"  {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
