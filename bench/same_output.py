#!/usr/bin/env python3
"""Byte-identical output of two vmtune installs on the benchmark corpora (issue #45: a speed-up
keeps stdout, stderr and the exit code of `-f json`, `--diff` and the default text exactly).

    python bench/same_output.py --base /tmp/venv-main/bin/python --new /tmp/venv-branch/bin/python

Each interpreter runs `-m vmtune` (a `pip install .` of the tree to compare). The corpora are
those of bench/floor.py and bench/stacks.py, made first with those scripts (default
$TMPDIR/vmtune-bench: `bench/stacks.py --quick`, `bench/floor.py --quick`). Prints one line per
command, `same` or `DIFF`, and exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT


def commands(out: Path) -> list[list[str]]:
    manifests = out / "kubevirt-1000" / "manifests"
    pairs = [str(out / "openstack-1000" / "sources" / name) for name in ("flavors.json", "image.json")]
    xml = out / "corpus-2000"
    stacks = ROOT / "fixtures" / "stacks"
    domains = ROOT / "fixtures" / "domains"
    check = ["check", "--isolated"]
    return [
        [*check, "-j", "1", "-f", "json", str(manifests)],
        [*check, "-f", "json", str(manifests)],
        [*check, "-j", "2", str(manifests)],
        [*check, "-j", "2", "--statistics", str(manifests)],
        [*check, "-j", "1", "--diff", str(manifests)],
        [*check, "--diff", "--unsafe-fixes", str(manifests)],
        [*check, "-j", "2", "-f", "json", str(manifests), str(stacks / "kubevirt")],
        [*check, "-j", "1", "-p", "latency", "--fail-on", "info", "--diff", "--unsafe-fixes", str(manifests)],
        [*check, "-j", "1", "-f", "json", *pairs],
        [*check, "-f", "json", *pairs],
        [*check, "--diff", "--unsafe-fixes", *pairs],
        [*check, "-j", "1", "-f", "json", str(xml)],
        [*check, "-f", "json", str(xml)],
        [*check, "-j", "1", "--diff", "--unsafe-fixes", str(xml)],
        [*check, "-f", "json", "-p", "latency", str(xml)],
        [*check, "-j", "1", "-p", "latency", "--fail-on", "info", "--diff", "--unsafe-fixes", str(xml)],
        [*check, "-p", "latency", "--diff", "--unsafe-fixes", str(xml)],
        [*check, "-j", "1", "-p", "latency", "--fail-on", "info", "--diff", "--unsafe-fixes", str(domains)],
        [*check, "-f", "json", str(stacks)],
        [*check, "--diff", str(stacks)],
    ]


def run(python: str, args: list[str]) -> tuple[int, bytes, bytes]:
    done = subprocess.run([python, "-m", "vmtune", *args], capture_output=True, cwd=tempfile.gettempdir())
    return done.returncode, done.stdout, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="interpreter of the install to compare against")
    parser.add_argument("--new", required=True, help="interpreter of the install to check")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "vmtune-bench",
                        help="where bench/floor.py and bench/stacks.py wrote their corpora")
    args = parser.parse_args()
    listed = commands(args.out)
    missing = sorted({a for c in listed for a in c if a.startswith(str(args.out)) and not Path(a).exists()})
    if missing:
        sys.exit(f"corpora missing ({', '.join(missing)}): run bench/stacks.py and bench/floor.py --quick first")
    differ = 0
    for command in listed:
        base, new = run(args.base, command), run(args.new, command)
        same = base == new
        differ += not same
        print(f"{'same' if same else 'DIFF'}  (exit {base[0]}, {len(base[1]):,} B stdout) vmtune {' '.join(command)}")
    print(f"{len(listed) - differ} of {len(listed)} commands give the same stdout, stderr and exit code")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
