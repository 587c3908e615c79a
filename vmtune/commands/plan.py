"""`vmtune plan`: CPU placement for a host's dedicated domains, printed, as diffs, or written.

Domains count as dedicated when the policies in effect enable `vcpus-not-pinned` (CPU007)
for them: the `latency` policy (the default for `plan`), or a scoped entry in yours.
Domains already fully pinned keep their pins and are treated like the rest of the host, and
so are domains nova or KubeVirt own: their placement is that system's job.

The domains come from files (with `--host caps.xml`) or from a libvirt connection, whose
capabilities then describe the host; `--write` replaces the files atomically or redefines
the live domains the way `vmtune apply` does (diff, confirm, backup, define, verify).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmtune.errors import NotADomainError, VmtuneError
from vmtune.escape import printable
from vmtune.facts.domain import Domain
from vmtune.facts.host import Host
from vmtune.facts.units import format_cpuset, human_kib
from vmtune.host.inventory import DomainUsage
from vmtune.host.planner import Placement, Plan, apply_placement, plan
from vmtune.request import CheckRequest, OptionsResolver

if TYPE_CHECKING:
    from vmtune.fileio import FileIdentity


@dataclass
class PlannedDomain:
    domain: Domain
    data: bytes
    path: str | None  # None for live domains
    label: str
    identity: FileIdentity | None = None  # the file read, which --write must find again
    # A live domain's name exactly as libvirt has it: what --write looks up. Domain.name trims
    # surrounding whitespace (as every rule reads it), so a domain named "victim\t" planned as
    # "victim" used to have its placement defined into the other domain "victim".
    live_name: str | None = None


@dataclass
class LiveWrite:
    """How `plan --connect --write` redefines: the same gate and backups as `vmtune apply`."""
    yes: bool
    dry_run: bool
    state_dir: Path | None
    live: bool = False  # also re-pin running domains now


def _describe(result: Plan, planned: list[PlannedDomain]) -> str:
    lines = []
    for item in planned:
        name = item.domain.name
        placement = result.for_domain(name)
        if placement is None:
            lines.append(f"{printable(name)}: does not fit: {printable(result.misfits.get(name, 'unknown reason'))}")
            continue
        pins = ", ".join(f"{v}->{c}" for v, c in sorted(placement.vcpu_pins.items()))
        lines.append(f"{printable(name)}: node {placement.node}, vCPU->CPU {pins}; emulator and I/O threads on "
                     f"{format_cpuset(placement.housekeeping)}; memory ({human_kib(item.domain.memory_kib)}) "
                     f"bound to node {placement.node}")
    return "\n".join(lines)


def _from_files(paths: list[str], write: bool = False) -> list[PlannedDomain]:
    from vmtune.sources import iter_sources
    from vmtune.xml.safe import parse_domain

    found: list[PlannedDomain] = []
    for source in iter_sources(paths):
        try:
            data, identity = source.load(for_write=write)
            domain = Domain(parse_domain(data, source.name), source.name)
        except NotADomainError:
            continue
        found.append(PlannedDomain(domain, data, source.path, source.name, identity))
    return found


def _from_connection(conn: Any) -> list[PlannedDomain]:
    from vmtune.live.check import read_definitions

    parsed, errors = read_definitions(conn)
    if errors:  # a domain we cannot read might hold CPUs: planning around it blindly could double-book them
        raise VmtuneError(errors[0])
    return [PlannedDomain(domain, data, None, domain.source, live_name=name)
            for name, (domain, data) in parsed.items()]


def _patched(item: PlannedDomain, placement: Placement) -> bytes:
    return apply_placement(item.data, item.domain, placement, item.label)


def _write_file(item: PlannedDomain, placement: Placement) -> None:
    from vmtune.fileio import write_atomic
    from vmtune.xml.safe import parse_domain

    assert item.path is not None
    patched = _patched(item, placement)
    parse_domain(patched, item.label)  # never replace a file with something that does not parse
    try:
        write_atomic(item.path, patched, item.identity)
    except OSError as exc:
        raise VmtuneError(f"cannot write: {exc.strerror or exc}", item.label) from None
    print(f"{printable(item.label)}: pinned to node {placement.node}")


def _plan(request: CheckRequest, everything: list[PlannedDomain], host: Host | None,
          housekeeping: str | None) -> tuple[Plan, list[PlannedDomain], int]:
    """The placement of the dedicated, unpinned, self-managed domains; the rest stays where it is.
    Also how many of them were not placed because their name is not unique."""
    from vmtune.engine import enabled_rules
    from vmtune.facts.units import parse_cpuset

    resolver = OptionsResolver(request)
    options = resolver.options_for(resolver.settings_for(None), None)
    host = options.host or host
    if host is None or not host.cells:
        raise VmtuneError("plan needs the host's NUMA topology: --host caps.xml (virsh capabilities) or --connect")
    dedicated = [p for p in everything if "CPU007" in enabled_rules(p.domain, options)]
    for item in dedicated:
        if item.domain.manager:
            print(f"{printable(item.domain.name)}: managed by {item.domain.manager}, which places it; left as it is")
    to_place = [p for p in dedicated if not p.domain.all_vcpus_pinned and not p.domain.manager]
    moving = {id(p) for p in (*to_place, *_sharing_pins(dedicated, everything))}
    to_place = [p for p in everything if id(p) in moving]  # in the order they were read
    # The plan names each placement by domain name: two domains of one name (once trimmed, or in
    # two files) would share one placement, and one's pins would not be reserved for the other.
    seen = Counter(p.domain.name for p in everything)
    for item in to_place:
        if seen[item.domain.name] > 1:
            print(f"{printable(item.domain.name)} ({printable(item.label)}): not placed: {seen[item.domain.name]} "
                  "domains have this name (compared without surrounding whitespace); give each its own name")
    ambiguous = sum(1 for p in to_place if seen[p.domain.name] > 1)
    to_place = [p for p in to_place if seen[p.domain.name] == 1]
    placing = {id(p) for p in to_place}
    reserved = [DomainUsage.of(p.domain) for p in everything if id(p) not in placing]
    cpus = None
    if housekeeping is not None:
        cpus = parse_cpuset(housekeeping)
        if not cpus:
            raise VmtuneError(f"--housekeeping '{housekeeping}' is not a cpuset (e.g. 0,8 or 0-1,16-17)")
        unknown = cpus - host.known_cpus
        if unknown:
            raise VmtuneError(f"--housekeeping names CPUs the host does not have: {format_cpuset(unknown)}")
    return plan(host, [p.domain for p in to_place], reserved, cpus), to_place, ambiguous


def _sharing_pins(dedicated: list[PlannedDomain], everything: list[PlannedDomain]) -> list[PlannedDomain]:
    """Pinned dedicated domains to place anew because their vCPUs share host CPUs with another
    dedicated domain's (CPU013's error: a copied definition). Domains a manager owns keep their
    pins, then the first by name of each group; the others move, and say so."""
    movable = {id(p) for p in dedicated if p.domain.all_vcpus_pinned and not p.domain.manager}
    pinned = sorted((p for p in everything if p.domain.dedicated_pinning),
                    key=lambda p: (id(p) in movable, p.domain.name))
    kept: dict[int, str] = {}  # host CPU -> the dedicated domain that keeps it
    moved = []
    for item in pinned:
        shared = item.domain.pinned_cpus & kept.keys()
        if shared and id(item) in movable:
            others = ", ".join(sorted({kept[cpu] for cpu in shared}))
            print(f"{printable(item.domain.name)}: vCPU pins {format_cpuset(shared)} are shared with "
                  f"{printable(others)} (both dedicated): planned anew")
            moved.append(item)
            continue
        kept.update(dict.fromkeys(item.domain.pinned_cpus, item.domain.name))
    return moved


def _report(request: CheckRequest, everything: list[PlannedDomain], host: Host | None, diff: bool, write: bool,
            housekeeping: str | None, place_live: Callable[[str, Placement], int] | None = None) -> int:
    """Print, diff or write the plan; place_live(name, placement) -> exit code redefines a live domain."""
    from vmtune.fixer import diff_text

    result, to_place, ambiguous = _plan(request, everything, host, housekeeping)
    if not to_place:
        if not ambiguous:
            print("no unpinned dedicated domains to place (dedicated: domains the policy enables CPU007 for)")
        return 1 if ambiguous else 0
    if not diff and not write:
        print(_describe(result, to_place))
    # As `check --diff`: 1 while a placement is pending (printed, a diff, or a --dry-run of
    # --write); 0 once written and verified, or when there is nothing to place.
    code = 1 if result.misfits or ambiguous or (result.placements and not write) else 0
    for item in to_place:
        placement = result.for_domain(item.domain.name)
        if placement is None or not (diff or write):
            continue
        if diff:
            sys.stdout.write(diff_text(item.data.decode("utf-8", "replace"),
                                       _patched(item, placement).decode("utf-8", "replace"), item.label))
        elif place_live is not None:
            code = max(code, place_live(item.live_name or item.domain.name, placement))
        else:
            _write_file(item, placement)
    return code


def run_plan(request: CheckRequest, diff: bool, write: bool, housekeeping: str | None,
             connect: str | None = None, live: LiveWrite | None = None) -> int:
    try:
        if connect is None:
            if not request.paths:
                raise VmtuneError("plan needs domain files or --connect URI")
            return _report(request, _from_files(request.paths, write), None, diff, write, housekeeping)
        if request.paths:
            raise VmtuneError("plan takes domain files or --connect, not both")
        return _run_live(request, diff, write, housekeeping, connect, live or LiveWrite(False, False, None))
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return 2


def _run_live(request: CheckRequest, diff: bool, write: bool, housekeeping: str | None, uri: str,
              live: LiveWrite) -> int:
    from vmtune.commands.live import ask, say
    from vmtune.live.apply import place_domain
    from vmtune.live.backups import state_dir
    from vmtune.live.connection import host_facts, open_connection

    conn = open_connection(uri)
    try:
        state_root = state_dir(str(live.state_dir) if live.state_dir else None)

        def place_live(name: str, placement: Placement) -> int:
            return place_domain(conn, name, placement, dry_run=live.dry_run, yes=live.yes, live=live.live,
                                state_root=state_root, confirm=ask, out=say, by="name")

        host = None if request.host else host_facts(conn)
        return _report(request, _from_connection(conn), host, diff, write, housekeeping, place_live)
    finally:
        conn.close()
