#!/usr/bin/env python3
"""The cost of `--measure --all` on a libvirt test-driver host with N domains (default 1,000),
against its floor: the two bulk virConnectGetAllDomainStats calls it needs.

    python bench/measure.py [--domains 1000] [--rounds 5]

In-process on one connection (the test driver's state is per connection): what `--measure`
adds to `check --all` (the two samples through vmtune.live.measure, the rates, and attaching a
verdict to every finding of every domain, as scan_host does), the sampling interval
subtracted, against the two bulk statistics calls made directly. Prints the ratio (the
issue's budget: at most 1.2x). `check --all` itself (1-2 s here, with a spread larger than
the whole of --measure on a shared machine) is printed for scale.
Needs libvirt-python (pip install '.[live]').
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time

from _common import OUT, ROOT, machine

sys.path.insert(0, str(ROOT))
INTERVAL = 0.01  # seconds between the samples, subtracted from the measured run


def host(count: int) -> str:
    folder = OUT / f"testhost-{count}"
    folder.mkdir(parents=True, exist_ok=True)
    sources = [p for p in sorted((ROOT / "fixtures" / "domains").glob("*.xml")) if "xen" not in p.name]
    refs = []
    for i in range(count):
        text = sources[i % len(sources)].read_text()
        text = re.sub(r"<name>[^<]*</name>", f"<name>live-{i:05d}</name>", text, count=1)
        text = re.sub(r"<uuid>[^<]*</uuid>", "", text, count=1)
        (folder / f"d{i:05d}.xml").write_text(text)
        refs.append(f'  <domain file="d{i:05d}.xml"/>')
    node = folder / "node.xml"
    node.write_text("<node>\n  <cpu><nodes>2</nodes><sockets>1</sockets><cores>8</cores><threads>2</threads>"
                    "</cpu>\n  <memory>268435456</memory>\n" + "\n".join(refs) + "\n</node>\n")
    return f"test://{node}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from vmtune.commands.check import CheckRequest, build_options
    from vmtune.live.check import _measure_of, scan_host
    from vmtune.live.connection import open_connection
    from vmtune.live.measure import measure
    from vmtune.live.report import attach

    conn = open_connection(host(args.domains))
    options = build_options(CheckRequest(paths=[], isolated=True))
    start = time.perf_counter()
    results, _ = scan_host(None, [], options, conn=conn)
    plain = time.perf_counter() - start
    domains = {r.domain_name: r for r in results}
    from vmtune.facts.domain import Domain
    from vmtune.xml.safe import parse_domain

    parsed = {name: Domain(parse_domain(conn.lookupByName(name).XMLDesc(2).encode(), name), name)
              for name in domains}
    floor, added = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        conn.getAllDomainStats(0, 0)
        conn.getAllDomainStats(0, 0)
        floor.append(time.perf_counter() - start)
        start = time.perf_counter()
        samples = measure(conn, None, INTERVAL, "bench")
        measured = {m.uuid: m for m in samples} | {f"name:{m.name}": m for m in samples}
        for name, result in domains.items():
            attach(result, _measure_of(measured, parsed[name]))
        added.append(time.perf_counter() - start - INTERVAL)
        assert all(r.measurement is not None and r.measurement.state == "running" for r in results
                   if r.domain_name in {m.name for m in samples if m.state == "running"})
    base, extra = statistics.median(floor), statistics.median(added)
    print(f"machine: {machine()}")
    print(f"{args.domains} test-driver domains, median of {args.rounds}: two bulk statistics calls "
          f"{base * 1000:.1f} ms; --measure (both samples, rates, verdicts on every finding; interval "
          f"subtracted) {extra * 1000:.1f} ms; check --all itself {plain * 1000:.0f} ms")
    print(f"--measure adds {extra / base:.2f}x the wall time of the two bulk calls")


if __name__ == "__main__":
    main()
