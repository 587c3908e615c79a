#!/usr/bin/env python3
"""Throughput and memory: vmtune check (text, JSON, fix diff) against xmllint --relaxng.

    python bench/throughput.py [--count 10000] [--jobs N]

Generates the corpus with make_corpus.py when missing. Prints domains per second, ms per
domain, the ratio to xmllint's RELAX NG validation of the same files, and peak RSS for a
1,000- and a 10,000-domain run (memory should not grow with the number of files).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import DOMAIN_RNG, ROOT, VMTUNE, machine, run


def ensure_corpus(count: int) -> Path:
    # Outside the work tree: bench/out is git-ignored, and vmtune skips ignored files.
    folder = Path(tempfile.gettempdir()) / "vmtune-bench" / f"corpus-{count}"
    if not folder.is_dir() or len(list(folder.glob("*.xml"))) != count:
        subprocess.run([sys.executable, str(ROOT / "bench" / "make_corpus.py"), "--count", str(count),
                        "--out", str(folder)], check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    corpus = ensure_corpus(args.count)
    files = sorted(str(p) for p in corpus.glob("*.xml"))
    print(f"machine: {machine()}")
    print(f"corpus: {len(files)} domains in {corpus}")
    rows: list[tuple[str, float, float]] = []

    def measure(label: str, cmd: list[str]) -> float:
        result = run(cmd)
        per = result.seconds / len(files) * 1000
        rows.append((label, result.seconds, result.peak_rss_mb))
        print(f"{label:<44} {result.seconds:7.2f} s  {len(files) / result.seconds:8.0f} domains/s  "
              f"{per:6.3f} ms/domain  peak RSS {result.peak_rss_mb:6.1f} MB")
        return per

    xmllint = None
    if shutil.which("xmllint") and DOMAIN_RNG.exists():
        # One process for all files, as in the reference figure (0.07 s for 200 domains).
        xmllint = measure("xmllint --noout --relaxng domain.rng", ["xmllint", "--noout", "--relaxng",
                                                                   str(DOMAIN_RNG), *files])
    else:
        print("xmllint or libvirt's domain.rng missing: apt-get install libxml2-utils libvirt-clients")
    single = measure("vmtune check (text, --jobs 1)", [*VMTUNE, "check", "--isolated", "--jobs", "1", str(corpus)])
    measure("vmtune check --format json (--jobs 1)", [*VMTUNE, "check", "--isolated", "--jobs", "1", "-f", "json",
                                                      str(corpus)])
    parallel = measure(f"vmtune check (text, --jobs {args.jobs})", [*VMTUNE, "check", "--isolated", "--jobs",
                                                                    str(args.jobs), str(corpus)])
    measure(f"vmtune check --diff (fix, --jobs {args.jobs})", [*VMTUNE, "check", "--isolated", "--diff",
                                                                "--jobs", str(args.jobs), str(corpus)])
    if xmllint:
        print(f"ratio vmtune/xmllint per domain: single process {single / xmllint:.2f}, "
              f"{args.jobs} jobs {parallel / xmllint:.2f} (below 1 = faster than xmllint)")
    small = ensure_corpus(1000)
    small_run = run([*VMTUNE, "check", "--isolated", "--jobs", "1", str(small)])
    print(f"memory: peak RSS 1,000 domains {small_run.peak_rss_mb:.1f} MB, "
          f"{len(files):,} domains {rows[1 if xmllint else 0][2]:.1f} MB (single process, text)")


if __name__ == "__main__":
    main()
