"""`vmtune plan`: CPU placement for a host's dedicated domains, printed or as diffs.

Domains count as dedicated when the policies in effect enable `vcpus-not-pinned` (CPU007)
for them: the `latency` policy (the default for `plan`), or a scoped entry in yours.
Domains already fully pinned keep their pins and are treated like the rest of the host.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from vmtune.commands.check import CheckRequest, OptionsResolver
from vmtune.errors import NotADomainError, VmtuneError
from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset, human_kib
from vmtune.host.inventory import DomainUsage
from vmtune.host.planner import Plan, placement_edits, plan


@dataclass
class PlannedDomain:
    domain: Domain
    data: bytes
    path: Path | None  # None for live domains
    label: str


def _describe(result: Plan, planned: list[PlannedDomain]) -> str:
    lines = []
    for item in planned:
        name = item.domain.name
        placement = result.for_domain(name)
        if placement is None:
            lines.append(f"{name}: does not fit: {result.misfits.get(name, 'unknown reason')}")
            continue
        pins = ", ".join(f"{v}->{c}" for v, c in sorted(placement.vcpu_pins.items()))
        lines.append(f"{name}: node {placement.node}, vCPU->CPU {pins}; emulator and I/O threads on "
                     f"{format_cpuset(placement.housekeeping)}; memory ({human_kib(item.domain.memory_kib)}) "
                     f"bound to node {placement.node}")
    return "\n".join(lines)


def run_plan(request: CheckRequest, diff: bool, write: bool, housekeeping: str | None) -> int:
    from vmtune.engine import enabled_rules
    from vmtune.facts.units import parse_cpuset
    from vmtune.patch.fixer import diff_text
    from vmtune.patch.splice import apply_edits
    from vmtune.sources import iter_sources
    from vmtune.xml.safe import parse_domain

    try:
        resolver = OptionsResolver(request)
        settings = resolver.settings_for(None)
        options = resolver.options_for(settings, None)
        if options.host is None or not options.host.cells:
            raise VmtuneError("plan needs the host's NUMA topology: --host caps.xml (virsh capabilities)")
        everything: list[PlannedDomain] = []
        for source in iter_sources(request.paths):
            try:
                data = source.read()
                domain = Domain(parse_domain(data, source.name), source.name)
            except NotADomainError:
                continue
            everything.append(PlannedDomain(domain, data, source.path, source.name))
        managed = [p for p in everything if "CPU007" in enabled_rules(p.domain, options)
                   and not p.domain.all_vcpus_pinned]
        names = {p.domain.name for p in managed}
        reserved = [DomainUsage.of(p.domain) for p in everything if p.domain.name not in names]
        cpus = parse_cpuset(housekeeping) if housekeeping else None
        result = plan(options.host, [p.domain for p in managed], reserved, cpus)
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return 2
    if not managed:
        print("no unpinned dedicated domains to place (dedicated: domains the policy enables CPU007 for)")
        return 0
    if not diff and not write:
        print(_describe(result, managed))
    for item in managed:
        placement = result.for_domain(item.domain.name)
        if placement is None or not (diff or write):
            continue
        edits = [("PLAN", e) for e in placement_edits(item.domain, placement)]
        patched = apply_edits(item.data, item.domain.root, edits, item.label).data
        if diff:
            sys.stdout.write(diff_text(item.data.decode("utf-8", "replace"), patched.decode("utf-8", "replace"),
                                       item.label))
        elif item.path is not None:
            from vmtune.fileio import write_atomic

            parse_domain(patched, item.label)
            write_atomic(item.path, patched)
            print(f"{item.label}: pinned to node {placement.node}")
    return 1 if result.misfits else 0
