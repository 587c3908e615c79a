#!/usr/bin/env python3
"""Every speed target of vmtune in one run: CPU and wall ratios against the floors.

    python bench/floor.py [--python /tmp/venv/bin/python] [--rounds 5] [--sizes 1,100,2000,10000] [--quick]

--quick: issue #45's sizes only (one file and 2,000 files) and 3 rounds, about three minutes
on 2 idle cores; the targets of issue #45 are marked "#45" in the summary.

Measures a normal (non-editable) install: give the interpreter of a venv where vmtune was
installed with `pip install .` (default: this interpreter). Every figure is the median of
interleaved runs (A B C A B C ...) and every ratio is the median of the ratios taken within a
round, so a machine that speeds up or slows down between rounds does not skew it. CPU time is
user+sys of the process and its waited-for children (parallel workers included), from wait4.

References, on the same files:
- `xmllint --noout --relaxng domain.rng FILES` (libvirt's schema validation, one process);
- the lxml parse floor: `python -c 'from lxml import etree; parse every file'`;
- `python -c 'import lxml.etree'` for a one-file run (cold start).

Corpora come from make_corpus.py (deterministic, from ../shared/corpus and fixtures/) and are
written outside any git work tree (default $TMPDIR/vmtune-bench), since vmtune skips the files
git ignores and bench/out is ignored.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import DOMAIN_RNG, ROOT, Compared, interleave, load, machine

HOST = ROOT / "fixtures" / "hosts" / "intel-2node.xml"
DOMCAPS = ROOT / "fixtures" / "hosts" / "domcaps-full.xml"
ONE = ROOT / "fixtures" / "domains" / "win10-timer-storm.xml"
FLOOR = ("import os,sys\nfrom lxml import etree\n"
         "for given in sys.argv[1:]:\n"
         "    names=sorted(e.path for e in os.scandir(given) if e.name.endswith('.xml')) "
         "if os.path.isdir(given) else [given]\n"
         "    for name in names: etree.parse(name)\n")

# (target name, limit): each is printed with its measured value and whether it is met.
verdicts: list[tuple[str, float, float]] = []


def verdict(name: str, value: float, limit: float) -> str:
    verdicts.append((name, value, limit))
    return f"{value:5.2f}x (target <= {limit:.2f}x: {'met' if value <= limit else 'MISSED'})"


def ensure_corpus(out: Path, count: int) -> Path:
    folder = out / f"corpus-{count}"
    if not folder.is_dir() or sum(1 for _ in folder.glob("*.xml")) != count:
        subprocess.run([sys.executable, str(ROOT / "bench" / "make_corpus.py"), "--count", str(count),
                        "--out", str(folder)], check=True, stdout=subprocess.DEVNULL)
    return folder


def refuse_errors(result: Compared) -> None:
    """A run that failed (vmtune's exit 2, the parse floor's traceback) measured an error path.
    xmllint exits non-zero when a file does not validate: it still read and validated every file."""
    for label, runs in result.runs.items():
        codes = {r.returncode for r in runs}
        bad = {c for c in codes if c < 0 or (c > 1 and label != "xmllint")}
        if bad:
            sys.exit(f"{label} failed (exit codes {sorted(codes)}): fix the command before comparing times")


def in_git_work_tree(path: Path) -> bool:
    return shutil.which("git") is not None and subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--is-inside-work-tree"], capture_output=True).returncode == 0


def row(label: str, result: Compared, key: str, files: int) -> str:
    per = result.cpu(key) / files * 1000
    return (f"  {label:<34} cpu {result.cpu(key):7.3f} s  wall {result.wall(key):7.3f} s  "
            f"{per:6.3f} ms cpu/file  peak RSS {result.rss(key):6.1f} MB")


def batch(vmtune: list[str], python: str, folder: Path, count: int, rounds: int) -> None:
    files = sorted(str(p) for p in folder.glob("*.xml"))
    target = files if count == 1 else [str(folder)]
    commands = {
        "xmllint": ["xmllint", "--noout", "--relaxng", str(DOMAIN_RNG), *files],
        "parse": [python, "-c", FLOOR, *target],
        "check": [*vmtune, "check", "--isolated", "-j", "1", *target],
        "check --host": [*vmtune, "check", "--isolated", "-j", "1", "--host", str(HOST), *target],
        "check (default -j)": [*vmtune, "check", "--isolated", *target],
        "check --host (default -j)": [*vmtune, "check", "--isolated", "--host", str(HOST), *target],
    }
    if count >= 200:  # where a second worker could help; below 200 files vmtune stays in one process
        commands["check -j 2"] = [*vmtune, "check", "--isolated", "-j", "2", *target]
    result = interleave(commands, rounds)
    refuse_errors(result)
    print(f"{count:,} file(s), {rounds} rounds, {load()}")
    for key in commands:
        print(row(key, result, key, count))
    targeted = count >= 2000  # the targets are at 2,000 and 10,000 files; smaller runs are start-up
    check_x = result.ratio("check", "xmllint")
    host_x = result.ratio("check --host", "check")
    print(f"  check / xmllint        cpu "
          f"{verdict(f'batch {count:,} / xmllint', check_x, 1.0) if targeted else f'{check_x:5.2f}x'}"
          f"  wall {result.ratio('check', 'xmllint', 'seconds'):5.2f}x")
    print(f"  check / lxml parse     cpu {result.ratio('check', 'parse'):5.2f}x  "
          f"wall {result.ratio('check', 'parse', 'seconds'):5.2f}x")
    print(f"  --host / check         cpu "
          f"{verdict(f'--host {count:,} / batch', host_x, 1.2) if targeted else f'{host_x:5.2f}x'}"
          f"  wall {result.ratio('check --host', 'check', 'seconds'):5.2f}x")
    print(f"  default -j / xmllint   cpu {result.ratio('check (default -j)', 'xmllint'):5.2f}x  "
          f"wall {result.ratio('check (default -j)', 'xmllint', 'seconds'):5.2f}x")
    if count == 2000:  # issue #45's targets: CPU in one process, wall at the default -j
        print(f"  #45: check -j 1 / xmllint cpu {verdict('#45 2,000 xml -j 1 / xmllint (cpu)', check_x, 1.5)}")
        wall = result.ratio("check (default -j)", "xmllint", "seconds")
        print(f"  #45: default -j / xmllint wall {verdict('#45 2,000 xml default -j / xmllint (wall)', wall, 1.0)}")
    if "check -j 2" in commands:
        print(f"  -j 2 / -j 1            cpu {result.ratio('check -j 2', 'check'):5.2f}x  "
              f"wall {result.ratio('check -j 2', 'check', 'seconds'):5.2f}x")
    if count == 10_000:
        rss = result.rss("check")
        verdicts.append(("peak RSS 10,000 files (MB)", rss, 40.0))
        print(f"  peak RSS check {rss:.1f} MB (target <= 40 MB: {'met' if rss <= 40 else 'MISSED'}), "
              f"--host {result.rss('check --host'):.1f} MB")


def coldstart(vmtune: list[str], python: str, rounds: int, scratch: Path) -> None:
    """One file: vmtune against `import lxml.etree`, and each common option against a plain check."""
    config = scratch / "vmtune.yaml"
    config.write_text("policies: [default]\nfail-on: warning\n")
    plain = [*vmtune, "check", "--isolated", str(ONE)]
    options = {
        "-j 1": ["-j", "1"], "-j 2": ["-j", "2"], "--host": ["--host", str(HOST)],
        "--domcaps": ["--domcaps", str(DOMCAPS)],
        "-f json": ["-f", "json"], "-f sarif": ["-f", "sarif"], "-o FILE": ["-o", str(scratch / "report.txt")],
        "--select CLK,HV": ["--select", "CLK,HV"], "--ignore VAL001": ["--ignore", "VAL001"],
        "--fail-on error": ["--fail-on", "error"], "-p latency": ["-p", "latency"],
        "--config FILE": ["--config", str(config)],
        "--os windows": ["--os", "windows"], "--quiet": ["--quiet"], "--statistics": ["--statistics"],
        "--exit-zero": ["--exit-zero"], "--color never": ["--color", "never"],
    }
    commands = {"import lxml.etree": [python, "-c", "import lxml.etree"], "python -c pass": [python, "-c", "pass"],
                "check one.xml": plain, "--version": [*vmtune, "--version"]}
    for label, extra in options.items():
        isolated = [] if label == "--config FILE" else ["--isolated"]  # --isolated would ignore --config
        commands[label] = [*vmtune, "check", *isolated, *extra, str(ONE)]
    result = interleave(commands, rounds * 4)  # short runs: more rounds for a stable median
    refuse_errors(result)
    print(f"cold start, one file, {rounds * 4} rounds, {load()}")
    for key in ("python -c pass", "import lxml.etree", "check one.xml"):
        print(row(key, result, key, 1))
    print(f"  check one.xml / import lxml.etree  cpu "
          f"{verdict('#45 cold start / import lxml.etree', result.ratio('check one.xml', 'import lxml.etree'), 1.3)}"
          f"  wall {result.ratio('check one.xml', 'import lxml.etree', 'seconds'):5.2f}x")
    worst = max((result.ratio(label, "check one.xml"), label) for label in [*options, "--version"])
    for label in ["--version", *options]:
        print(f"  {label:<18} / plain check  cpu {result.ratio(label, 'check one.xml'):5.2f}x  "
              f"({result.cpu(label) * 1000:5.1f} ms)")
    print(f"  worst common option: {worst[1]} {verdict('#45 worst common option / plain check', worst[0], 1.15)}")
    host = result.ratio("--host", "check one.xml")
    print(f"  --host / plain check: {verdict('#45 --host one file / plain check', host, 1.15)}")


def _import_trace(python: str, *args: str) -> list[tuple[int, int, int, str]]:
    """(cumulative µs, self µs, depth, module) per import of a run, from python -X importtime."""
    trace = subprocess.run([python, "-X", "importtime", *args], capture_output=True, text=True,
                           cwd=tempfile.gettempdir()).stderr
    rows = []
    for line in trace.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            rows.append((int(match.group(2)), int(match.group(1)), len(match.group(3)), match.group(4)))
    return rows


def importtime(python: str) -> None:
    """What a one-file check imports beyond `import lxml.etree` (which brings typing, inspect, re,
    gzip... itself): the modules, their own import time (median of 5 traces), the slowest."""
    check = ["-c", "import sys; sys.argv=['vmtune','check','--isolated',sys.argv[1]]\n"
             "from vmtune.main import main\ntry: main()\nexcept SystemExit: pass", str(ONE)]
    traces = [_import_trace(python, *check) for _ in range(5)]
    floor = {name for _ in range(2) for _c, _s, _d, name in _import_trace(python, "-c", "import lxml.etree")}
    own: dict[str, list[int]] = {}
    for rows in traces:
        for _cumulative, self_us, _depth, name in rows:
            if name not in floor:
                own.setdefault(name, []).append(self_us)
    extra = {name: sorted(times)[len(times) // 2] for name, times in own.items()}
    ours = {n: t for n, t in extra.items() if n.split(".")[0] == "vmtune"}
    stdlib = {n: t for n, t in extra.items() if n not in ours}
    print(f"python -X importtime, check one.xml: {len(traces[0])} modules; beyond `import lxml.etree`: "
          f"{len(ours)} vmtune modules {sum(ours.values()) / 1000:.1f} ms, {len(stdlib)} others "
          f"{sum(stdlib.values()) / 1000:.1f} ms (own import time, median of 5)")
    print("  others: " + ", ".join(f"{n} {t / 1000:.1f}" for n, t in sorted(stdlib.items(), key=lambda i: -i[1])))
    print("  slowest vmtune modules: " + ", ".join(f"{n} {t / 1000:.1f}" for n, t in
                                                   sorted(ours.items(), key=lambda i: -i[1])[:8]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the vmtune install to measure (a venv with `pip install .`)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per size (10,000 files: at most 3)")
    parser.add_argument("--sizes", default="1,100,2000,10000")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "vmtune-bench",
                        help="where the generated corpora go (outside a git work tree)")
    parser.add_argument("--quick", action="store_true", help="sizes 1,2000 and 3 rounds (issue #45's targets)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.rounds = "1,2000", min(args.rounds, 3)
    if not (shutil.which("xmllint") and DOMAIN_RNG.exists()):
        sys.exit("xmllint or libvirt's domain.rng missing: apt-get install libxml2-utils libvirt-daemon")
    script = Path(args.python).parent / "vmtune"
    vmtune = [str(script)] if script.exists() else [args.python, "-m", "vmtune"]
    args.out.mkdir(parents=True, exist_ok=True)
    if in_git_work_tree(args.out):
        sys.exit(f"{args.out} is inside a git work tree: vmtune would skip ignored files; give --out elsewhere")
    version = subprocess.run([*vmtune, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {machine(args.python)}; {version} at {vmtune[0]}; {load()}")
    with tempfile.TemporaryDirectory() as scratch:
        coldstart(vmtune, args.python, args.rounds, Path(scratch))
    importtime(args.python)
    for size in (int(s) for s in args.sizes.split(",")):
        folder = ensure_corpus(args.out, size)
        batch(vmtune, args.python, folder, size, min(args.rounds, 3) if size >= 10_000 else args.rounds)
    print(f"\nsummary ({load()}):")
    for name, value, limit in verdicts:
        print(f"  {name:<46} {value:7.2f}  target <= {limit:5.2f}  {'met' if value <= limit else 'MISSED'}")
    missed = sum(1 for _n, value, limit in verdicts if value > limit)
    print(f"{len(verdicts) - missed} of {len(verdicts)} targets met")


if __name__ == "__main__":
    main()
