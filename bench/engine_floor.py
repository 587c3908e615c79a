#!/usr/bin/env python3
"""Where a batch check's CPU goes per file, against xmllint's per-file cost: the budget the
rules would have at 1.0x xmllint, and what two alternative engines would cost.

    python bench/engine_floor.py [--python /tmp/venv/bin/python] [--size 2000] [--rounds 5]

Issue #25 asks for a batch at <= 1.0x `xmllint --relaxng`. This script answers "can the rules
fit in what is left?" with numbers from this machine:

1. Per-file slopes of whole processes: (CPU for N files - CPU for 1 file) / (N - 1), for
   vmtune (`check --isolated -j 1`) and xmllint, medians of interleaved runs. Start-up cancels.
2. Inside one vmtune process (the given interpreter's install, best of --rounds): walk, read,
   parse, the facts rule selection needs, the rules, the streamed text report (result, tally,
   rendered lines), freeing the tree, and what the rules take in the runs that produce a
   finding. "The rest" is the process slope minus those stages (start-up cancels; it is what
   the loop in commands/check.py adds, and the noise of the slope).
3. Two engines that were proposed, measured at their floor on the same parsed trees:
   - one walk that visits every element's tag and attributes (what a one-pass fact model
     costs before any fact or rule runs);
   - one compiled XPath that computes a "could this rule fire?" flag per rule in C (per
     sub-expression cost), to run only the flagged rules in Python.

Prints per-file microseconds; no target is asserted (bench/floor.py prints the targets).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import DOMAIN_RNG, interleave, load, machine

# Run by the measured interpreter: stage costs inside one process, printed as JSON.
STAGES = r'''
import io, json, os, sys, time
from lxml import etree
from vmtune.engine import CheckOptions, _applicable, enabled_rules
from vmtune.facts.domain import Domain
from vmtune.policy.load import load_policies
from vmtune.report.model import Report, SourceResult
from vmtune.report.text import render_result
from vmtune.rules.base import Severity
from vmtune.sources import iter_sources

folder, rounds = sys.argv[1], int(sys.argv[2])
# perf_counter, not process_time, inside the loop: a CPU-time clock is a system call (~0.5 µs),
# which would swamp the stages it measures. The loop waits for nothing (files are in the page
# cache), so its wall time is its CPU time.
clock = time.perf_counter
options = CheckOptions(policy=load_policies(["default"]))


def once():
    cost = dict.fromkeys(("walk", "read", "parse", "select", "rules", "report", "free"), 0.0)
    start = clock()
    sources = list(iter_sources([folder]))
    cost["walk"] = clock() - start
    # The text report as check streams it: a result per file, the tally, the rendered lines.
    report, out = Report(), io.StringIO()
    report.sink = lambda result: out.write(render_result(result))
    for source in sources:
        t0 = clock(); data = source.read(); t1 = clock()
        domain = Domain.parse(data, source.name, None); t2 = clock()
        selected = _applicable(enabled_rules(domain, options), domain, options); t3 = clock()
        found = []
        for rule, ctx, _config in selected:
            for finding in rule.check(domain, ctx):
                found.append(finding)
        t4 = clock()
        report.add(SourceResult(source.name, domain.name, found, fail_on=Severity.WARNING)); t5 = clock()
        domain = found = finding = None  # the last references: the tree and its proxies go here
        t6 = clock()
        cost["read"] += t1 - t0; cost["parse"] += t2 - t1; cost["select"] += t3 - t2; cost["rules"] += t4 - t3
        cost["report"] += t5 - t4; cost["free"] += t6 - t5
        out.seek(0); out.truncate()
    count = len(sources)
    return {k: 1e6 * v / count for k, v in cost.items()}


def firing_share():
    """Of the rules' time, the share spent in runs that produce a finding (timed rule by rule)."""
    total = firing = 0
    runs = fired = 0
    sources = list(iter_sources([folder]))
    for source in sources:
        domain = Domain.parse(source.read(), source.name, None)
        for rule, ctx, _config in _applicable(enabled_rules(domain, options), domain, options):
            start = time.perf_counter_ns()
            found = list(rule.check(domain, ctx))
            spent = time.perf_counter_ns() - start
            total += spent; runs += 1
            if found:
                firing += spent; fired += 1
    return firing / total, runs / len(sources), fired / len(sources)


def oracle():
    """The rules' time if only those that produce a finding ran (known from a first pass), each
    computing the facts it reads itself: a free and perfect "could this rule fire?" test."""
    sources = list(iter_sources([folder]))
    fire = []
    for source in sources:
        domain = Domain.parse(source.read(), source.name, None)
        fire.append([(rule, ctx) for rule, ctx, _config in _applicable(enabled_rules(domain, options), domain, options)
                     if list(rule.check(domain, ctx))])
    times = []
    for _ in range(rounds):
        spent = 0.0
        for source, rules in zip(sources, fire):
            domain = Domain.parse(source.read(), source.name, None)
            _applicable(enabled_rules(domain, options), domain, options)
            start = clock()
            for rule, ctx in rules:
                for _finding in rule.check(domain, ctx):
                    pass
            spent += clock() - start
        times.append(spent)
    return 1e6 * min(times) / len(sources)


best = min((once() for _ in range(rounds)), key=lambda c: sum(c.values()))
share, best["rules_run"], best["rules_fired"] = firing_share()
best["rules_firing"] = share * best["rules"]
best["oracle"] = oracle()
parser = etree.XMLParser(resolve_entities=False, no_network=True, collect_ids=False)
roots = [etree.fromstring(s.read(), parser) for s in iter_sources([folder])]
count = len(roots)


def per_file(fn):
    times = []
    for _ in range(rounds):
        start = clock()
        for root in roots:
            fn(root)
        times.append(clock() - start)
    return 1e6 * min(times) / count


best["elements"] = sum(1 for root in roots for _ in root.iter()) / count
best["visit"] = per_file(lambda root: [(e.tag, e.items()) for e in root.iter()])
# 15 sub-expressions of the kind rule preconditions need (a device with an attribute, an
# absent child...), repeated to 60: the cost per rule flag, evaluated by libxml2 in C.
subs = ["devices/disk[driver/@io='native']", "devices/interface[model/@type='virtio'][not(driver/@queues)]",
        "features/hyperv[not(synic)]", "clock/timer[@name='hpet'][@present='no']",
        "devices/controller[@type='usb'][not(@model='none')]", "memtune/hard_limit", "cputune/vcpupin[@cpuset]",
        "devices/disk[@device='disk'][target/@bus='virtio'][not(driver/@iothread)]",
        "devices/memballoon[@model!='none']", "currentMemory", "cpu[@mode='host-model']",
        "os/type[@arch='x86_64']", "devices/input[@type='tablet']", "devices/graphics",
        "devices/video/model[@type='qxl']"]
flags = etree.XPath("concat(" + ",".join(f"number(boolean({s}))" for s in subs * 4) + ")")
best["xpath_per_flag"] = per_file(flags) / (len(subs) * 4)
print(json.dumps(best))
'''


def slope(vmtune: list[str], folder: Path, rounds: int) -> tuple[float, float]:
    """Per-file CPU (µs) of vmtune and of xmllint: the difference between N files and one file."""
    files = sorted(str(p) for p in folder.glob("*.xml"))
    one = files[:1]
    with tempfile.TemporaryDirectory() as scratch:
        single = Path(scratch) / "one"
        single.mkdir()
        shutil.copy(one[0], single)
        commands = {
            "vmtune N": [*vmtune, "check", "--isolated", "-j", "1", str(folder)],
            "vmtune 1": [*vmtune, "check", "--isolated", "-j", "1", str(single)],
            "xmllint N": ["xmllint", "--noout", "--relaxng", str(DOMAIN_RNG), *files],
            "xmllint 1": ["xmllint", "--noout", "--relaxng", str(DOMAIN_RNG), *one],
        }
        result = interleave(commands, rounds)
    count = len(files) - 1
    return (1e6 * (result.cpu("vmtune N") - result.cpu("vmtune 1")) / count,
            1e6 * (result.cpu("xmllint N") - result.cpu("xmllint 1")) / count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the vmtune install to measure")
    parser.add_argument("--size", type=int, default=2000, help="corpus size (bench/make_corpus.py)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "vmtune-bench")
    args = parser.parse_args()
    if not (shutil.which("xmllint") and DOMAIN_RNG.exists()):
        sys.exit("xmllint or libvirt's domain.rng missing: apt-get install libxml2-utils libvirt-daemon")
    folder = args.out / f"corpus-{args.size}"
    if not folder.is_dir() or sum(1 for _ in folder.glob("*.xml")) != args.size:
        subprocess.run([sys.executable, str(Path(__file__).parent / "make_corpus.py"), "--count", str(args.size),
                        "--out", str(folder)], check=True, stdout=subprocess.DEVNULL)
    script = Path(args.python).parent / "vmtune"
    vmtune = [str(script)] if script.exists() else [args.python, "-m", "vmtune"]
    print(f"machine: {machine(args.python)}; {load()}; {args.size} files")
    vmtune_us, xmllint_us = slope(vmtune, folder, args.rounds)
    stages = json.loads(subprocess.run([args.python, "-c", STAGES, str(folder), str(args.rounds)], check=True,
                                       capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout)
    measured = sum(stages[k] for k in ("walk", "read", "parse", "select", "rules", "report", "free"))
    rest = vmtune_us - measured
    print(f"\nper file, CPU µs     xmllint {xmllint_us:6.1f}   vmtune {vmtune_us:6.1f}  "
          f"({vmtune_us / xmllint_us:.2f}x)")
    for label, key in (("walk", "walk"), ("read", "read"), ("parse", "parse"),
                       ("facts for rule selection", "select"), ("rules (and the facts they read)", "rules"),
                       ("text report (result, tally, lines)", "report"), ("freeing the tree", "free")):
        print(f"  {label:<34} {stages[key]:6.1f}")
    print(f"  {'the rest (process slope - above)':<34} {rest:6.1f}")
    budget = xmllint_us - (vmtune_us - stages["rules"])
    print(f"\nrules run per file {stages['rules_run']:.1f}, of which produce a finding {stages['rules_fired']:.1f}; "
          f"those runs take {stages['rules_firing']:.1f} µs of {stages['rules']:.1f}")
    oracle_x = (vmtune_us - stages["rules"] + stages["oracle"]) / xmllint_us
    print(f"only the rules that find something, chosen for free, computing their own facts: "
          f"{stages['oracle']:.1f} µs (the batch would be {oracle_x:.2f}x xmllint)")
    print(f"budget for rules at 1.0x xmllint: {budget:.1f} µs per file "
          f"({budget / max(stages['rules_run'], 1):.2f} µs per rule run); they take {stages['rules']:.1f}")
    print("\nalternative engines at their floor (same parsed trees):")
    print(f"  one walk visiting every element's tag and attributes: {stages['visit']:6.1f} µs per file "
          f"({stages['elements']:.0f} elements)")
    print(f"  one compiled XPath of rule flags: {stages['xpath_per_flag']:.2f} µs per flag, "
          f"{stages['xpath_per_flag'] * stages['rules_run']:.1f} µs for {stages['rules_run']:.0f} flags")
    print(f"(process slopes: medians of {args.rounds} interleaved runs; stages: best of {args.rounds}; {load()})")


if __name__ == "__main__":
    main()
