#!/usr/bin/env python3
"""The placement planner: 200 domains on a 4-node, 256-CPU host (target: under one second).

    python bench/planner.py [--domains 200] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from _common import ROOT, machine

sys.path.insert(0, str(ROOT))

from vmtune.facts.domain import Domain
from vmtune.facts.host import load_host
from vmtune.host.planner import plan
from vmtune.xml.safe import parse_domain

TEMPLATE = """<domain type='kvm'><name>{name}</name><memory unit='GiB'>{mem}</memory><vcpu>{vcpus}</vcpu>
<os><type arch='x86_64' machine='q35'>hvm</type></os><cpu mode='host-passthrough'/><devices/></domain>"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    host = load_host(str(ROOT / "fixtures" / "hosts" / "amd-4node-256cpu.xml"), None)
    assert host is not None
    rng = random.Random(42)
    domains = []
    for i in range(args.domains):
        xml = TEMPLATE.format(name=f"vm{i:04d}", mem=rng.choice([2, 4, 8, 16]), vcpus=rng.choice([1, 2, 4, 8]))
        domains.append(Domain(parse_domain(xml.encode(), f"vm{i}"), f"vm{i}"))
    times = []
    result = None
    for _ in range(args.runs):
        start = time.perf_counter()
        result = plan(host, domains, [])
        times.append(time.perf_counter() - start)
    assert result is not None
    print(f"machine: {machine()}")
    print(f"planner: {args.domains} domains on 4 nodes / 256 CPUs: median {statistics.median(times) * 1000:.1f} ms "
          f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}); placed {len(result.placements)}, "
          f"misfits {len(result.misfits)}")


if __name__ == "__main__":
    main()
