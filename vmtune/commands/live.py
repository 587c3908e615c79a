"""`vmtune apply`, `history`, `rollback`: open the connection, call vmtune.live, map errors to exit 2."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError

if TYPE_CHECKING:
    from vmtune.live.connection import LookupBy

EXIT_ERROR = 2


def say(text: str) -> None:
    """Print what apply, rollback and history say: domain names and XML come from libvirt, so
    whoever can define a domain must not reach the terminal with escape sequences."""
    from vmtune.escape import printable_block

    print(printable_block(text), flush=True)


def ask(question: str) -> bool:
    """Read the answer from stdin (a terminal or a pipe). End of input is no answer at all: from
    cron or Ansible that must not read as a successful run, so it is an error (exit 2)."""
    from vmtune.escape import printable

    print(f"{printable(question)} [y/N] ", end="", file=sys.stderr, flush=True)  # it names the domain
    answer = sys.stdin.readline()
    if not answer:
        print(file=sys.stderr)
        raise VmtuneError("no answer on stdin (end of input): give --yes to apply, or --dry-run to look")
    return answer.strip().lower() in ("y", "yes")


def _with_connection(uri: str | None, action: Callable[[Any], int]) -> int:
    try:
        from vmtune.live.connection import default_uri, open_connection

        conn = open_connection(uri or default_uri())
        try:
            return action(conn)
        finally:
            conn.close()
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return EXIT_ERROR


def run_apply(domain: str | None, all_domains: bool, uri: str | None, unsafe: bool, yes: bool, dry_run: bool,
              force: bool, live: bool, select: list[str], ignore: list[str], policies: list[str],
              os_family: str | None, state_dir: Path | None) -> int:
    from vmtune.live.apply import apply_domain
    from vmtune.live.backups import state_dir as default_state
    from vmtune.live.connection import all_domains as list_domains
    from vmtune.request import CheckRequest, build_options

    if (domain is None) == (not all_domains):
        print("vmtune: apply needs --domain NAME or --all (not both)", file=sys.stderr)
        return EXIT_ERROR

    def action(conn: Any) -> int:
        options = build_options(CheckRequest(paths=[], select=select, ignore=ignore, policies=policies,
                                             os_family=os_family))
        state_root = default_state(str(state_dir) if state_dir else None)

        def apply_one(key: str, by: LookupBy = "any") -> int:
            return apply_domain(conn, key, options, unsafe=unsafe, dry_run=dry_run, yes=yes, force=force,
                                live=live, state_root=state_root, confirm=ask, out=say, by=by)

        if domain is not None:
            return apply_one(domain)
        return _each_domain(list_domains(conn), lambda dom: apply_one(dom.UUIDString(), "uuid"))

    return _with_connection(uri, action)


def _each_domain(domains: list[Any], one: Callable[[Any], int], header: bool = True) -> int:
    """`apply --all`: one(dom) for each domain, in turn (by UUID inside: this domain, not one
    named so). One domain's error must not stop the others; it still makes the exit code 2."""
    from vmtune.errors import ManagedDomainError
    from vmtune.live.connection import DomainGoneError

    code = 0
    for dom in domains:
        if header:
            say(f"== {dom.name()}")
        try:
            code = max(code, one(dom))
        except ManagedDomainError as exc:
            say(f"{dom.name()}: skipped: {exc.reason} (--force redefines it anyway)")
        except DomainGoneError:  # undefined by someone else since the list was read: not an error
            say(f"{dom.name()}: skipped: no longer defined (undefined while apply --all ran)")
        except VmtuneError as exc:
            print(f"vmtune: {exc}", file=sys.stderr)
            code = EXIT_ERROR
    return code


def _print_backups(saved: list[Any]) -> None:
    from vmtune.live.backups import read_measurements

    for backup in saved:
        meta = backup.meta
        changes = ", ".join(str(c) for c in meta.get("changes", []))
        say(f"{backup.id}  {meta.get('action', '?'):<8} {changes}  {backup.path}")
        measured = read_measurements(backup)
        if measured:  # apply --measure: before the change, and after the guest's restart once measured
            say("    " + "; ".join(f"{when}: {_short(measured[when])}" for when in ("before", "after")
                                   if isinstance(measured.get(when), dict)))


def _short(measurement: dict[str, Any]) -> str:
    values = measurement.get("values") or {}
    shown = [f"{key} {values[key]}" for key in ("host_cpu_percent", "outside_vcpu_cpu_percent",
                                                 "io_exits_per_second", "mmio_exits_per_second",
                                                 "vcpu_delay_percent_max") if key in values]
    seconds = measurement.get("seconds")
    took = f"{seconds:.1f} s" if isinstance(seconds, int | float) else "? s"
    return f"{took}, " + (", ".join(shown) or "no values")


def run_history(domain: str, uri: str | None, state_dir: Path | None) -> int:
    """`vmtune history --domain X`: without --connect read from the state directory alone, as
    --all is (X: a name or UUID the backups recorded, on any host); with it, the domain libvirt
    has under that name or UUID now (a renamed domain too), else the backups recorded for it."""
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget
    from vmtune.live.connection import DomainGoneError, host_name

    root = backups.state_dir(str(state_dir) if state_dir else None)
    if uri is None:
        return _print_history_all(root, None, domain)

    def action(conn: Any) -> int:
        try:
            target = LiveTarget.find(conn, domain)
        except DomainGoneError:  # undefined since: its backups are still there to read
            return _print_history_all(root, host_name(conn), domain)
        found = backups.listing(root, target.uri, target.uuid)
        saved = found.backups
        for path, why in found.skipped:  # never offered for rollback
            say(f"skipped {path}: {why}")
        if not saved:
            say(f"{target.name}: no backups")
        _print_backups(saved)
        return 0

    return _with_connection(uri, action)


def backed_up_domains(root: Path, uri: str | None = None, skipped: list[tuple[Path, str]] | None = None,
                      key: str | None = None) -> list[tuple[str, str, list[Any]]]:
    """(host URI, domain name, backups) for every domain with backups under the state directory
    (STATE/<host key>/<uuid>/), or only those of `uri`'s host, or only the domain `key` names (its
    UUID, or a name one of its backups recorded). Read from the files alone: domains since
    undefined, and hosts this machine cannot reach, are listed too. Backups that cannot be
    restored (incomplete, mismatched, planted) are added to `skipped` with the reason."""
    from vmtune.live import backups

    if not backups.exists(root):  # and trusted: history lists what rollback would restore
        return []
    hosts = [root / backups.host_key(uri)] if uri else sorted(p for p in root.glob("*") if p.is_dir())
    found = []
    for host_dir in hosts:
        for uuid_dir in sorted(p for p in host_dir.glob("*") if p.is_dir()):
            # The directory name is already host_key()'s output, which host_key() maps to itself;
            # listing() opens each level without following symlinks and checks who may write it.
            result = backups.listing(root, host_dir.name, uuid_dir.name)
            saved = result.backups
            if key is not None and key.lower() != uuid_dir.name.lower() \
                    and key not in {b.meta.get("domain") for b in saved}:
                continue
            if skipped is not None:
                skipped.extend(result.skipped)
            if saved:
                newest = saved[-1].meta
                found.append((str(newest.get("host", host_dir.name)), str(newest.get("domain", uuid_dir.name)),
                              saved))
    return sorted(found, key=lambda item: (item[0], item[1]))


def run_history_all(uri: str | None, state_dir: Path | None) -> int:
    """`vmtune history --all`: the state directory's backups, grouped by host and domain; with
    --connect only that host's, keyed as `apply` keys them (by the connection's own label)."""
    from vmtune.live import backups

    root = backups.state_dir(str(state_dir) if state_dir else None)
    if uri is not None:
        from vmtune.live.connection import host_name

        return _with_connection(uri, lambda conn: _print_history_all(root, host_name(conn)))
    return _print_history_all(root, None)


def _print_history_all(root: Path, host: str | None, key: str | None = None) -> int:
    skipped: list[tuple[Path, str]] = []
    try:
        found = backed_up_domains(root, host, skipped, key)
    except VmtuneError as exc:  # an untrusted state directory, as apply and rollback refuse it
        print(f"vmtune: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (OSError, ValueError) as exc:  # unreadable directory, a .json that is not JSON
        reason = getattr(exc, "strerror", None) or exc
        print(f"vmtune: {VmtuneError(f'cannot read the backups: {reason}', str(root))}", file=sys.stderr)
        return EXIT_ERROR
    for path, why in skipped:  # never offered for rollback
        say(f"skipped {path}: {why}")
    if not found:
        say(f"no backups in {root}" if key is None else f"{key}: no backups in {root}")
    for host, name, saved in found:
        say(f"== {name} on {host} ({saved[-1].path.parent.name})")
        _print_backups(saved)
    return 0


def run_rollback(domain: str, to: str | None, uri: str | None, yes: bool, dry_run: bool,
                 state_dir: Path | None) -> int:
    from vmtune.live.apply import rollback_domain
    from vmtune.live.backups import state_dir as default_state

    def action(conn: Any) -> int:
        return rollback_domain(conn, domain, backup_id=to, dry_run=dry_run, yes=yes, confirm=ask, out=say,
                               state_root=default_state(str(state_dir) if state_dir else None))

    return _with_connection(uri, action)


def _measured_results(conn: Any, keys: list[str], seconds: float, policies: list[str],
                      os_family: str | None, intervals: int = 1) -> tuple[list[Any], list[str]]:
    from vmtune.live.check import scan_host
    from vmtune.request import CheckRequest, build_options

    options = build_options(CheckRequest(paths=[], policies=policies, os_family=os_family))
    return scan_host(None, keys, options, conn=conn, measure=seconds, intervals=intervals)


def run_measure(domains: list[str], all_domains: bool, uri: str | None, seconds: float, top: int, fmt: str,
                policies: list[str], os_family: str | None) -> int:
    """`vmtune measure`: the measured picture first (for --all, the domains that cost most), then
    per cost the findings whose signature it is."""
    from vmtune.live.report import cost, measure_lines
    from vmtune.report.measured import verdict_dict

    def action(conn: Any) -> int:
        results, errors = _measured_results(conn, [] if all_domains else domains, seconds, policies, os_family)
        for error in errors:  # a name libvirt gave may be in it: escaped as every error is
            print(f"vmtune: {VmtuneError(error)}", file=sys.stderr)
        measured = [r for r in results if r.measurement is not None
                    and (not all_domains or r.measurement.state == "running")]
        measured.sort(key=lambda r: -cost(r.measurement))
        if all_domains:
            measured = measured[:top]
        if fmt == "json":
            # check -f json's encoder: a name's `##[` is written `\u0023#[`, no command to a CI runner
            from vmtune.report.jsonout import dumps

            sys.stdout.write(dumps([r.measurement.as_dict() | {"explained_by": [
                {"rule": f.rule.code, "message": f.message} | verdict_dict(r.verdicts[f.rule.code])
                for f in r.findings if f.rule.code in r.verdicts]} for r in measured]))
        else:
            for r in measured:
                for line in measure_lines(r):
                    say(line)
            if not measured:
                say("no running domain to measure")
        return EXIT_ERROR if errors else 0

    return _with_connection(uri, action)


def run_apply_measured(domain: str | None, all_domains: bool, uri: str | None, seconds: float | None, after: bool,
                       unsafe: bool, yes: bool, dry_run: bool, force: bool, live: bool, select: list[str],
                       ignore: list[str], policies: list[str], os_family: str | None,
                       state_dir: Path | None) -> int:
    """`apply --measure`: measure, apply, store the measurement with the backup; once the guest
    has had its full restart (`--after`, or `apply --measure` again with nothing left to fix),
    measure again for as long as before and show both side by side, stored beside the first.
    With --all: one measurement of every domain (two bulk statistics calls), see _measured_all."""
    from vmtune.escape import printable  # a name on its line: a newline in it cannot start another
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget
    from vmtune.live.measure import COMPARE_INTERVALS

    if (domain is None) == (not all_domains):
        print("vmtune: apply needs --domain NAME or --all (not both)", file=sys.stderr)
        return EXIT_ERROR
    root = backups.state_dir(str(state_dir) if state_dir else None)

    def apply_fix(conn: Any, target: Any) -> int:
        return run_apply_one(conn, target, root, unsafe, yes, dry_run, force, live, select, ignore, policies,
                             os_family)

    if domain is None:
        return _with_connection(uri, lambda conn: _measured_all(conn, root, seconds, after, dry_run, policies,
                                                                os_family, apply_fix))

    def measure_now(conn: Any, target: Any, length: float) -> Any:
        results, errors = _measured_results(conn, [target.uuid], length, policies, os_family, COMPARE_INTERVALS)
        if errors:
            raise VmtuneError(errors[0])
        return results[0]

    def action(conn: Any) -> int:
        target = LiveTarget.find(conn, domain)
        saved = backups.history(root, target.uri, target.uuid)
        newest = backups.newest_change(saved)
        recorded = backups.read_measurements(newest) if newest is not None else {}
        if after or (recorded.get("before") and not recorded.get("after")):
            if newest is None or not recorded.get("before"):
                if after:
                    # VmtuneError's str escapes the name, which whoever defined the domain chose
                    nothing = VmtuneError("no `apply --measure` to compare with (no measurement is stored with its "
                                          "newest backup)", target.name)
                    print(f"vmtune: {nothing}", file=sys.stderr)
                    return EXIT_ERROR
            else:
                result = measure_now(conn, target, float(recorded["before"].get("seconds") or seconds or 5))
                return _after_restart(printable(target.name), newest, recorded["before"], result,
                                      "vmtune apply --measure --after", dry_run=dry_run)
        before = None if dry_run else _say_before(printable(target.name),
                                                  measure_now(conn, target, seconds or 5.0))
        code = apply_fix(conn, target)
        made = [b for b in backups.history(root, target.uri, target.uuid) if b.id not in {s.id for s in saved}]
        if made and before is not None:
            backups.save_measurement(made[-1], "before", before)
            say(f"measurement stored with backup {made[-1].id}: after the guest's next full shutdown and start, "
                f"`vmtune apply --domain {shlex.quote(target.name)} --measure --after` measures again and compares")
        return code

    return _with_connection(uri, action)


def _say_before(name: str, result: Any) -> dict[str, Any] | None:
    """The "before" of `apply --measure`, said; None for a domain that is not running."""
    from vmtune.report.measured import measurement_line

    if result.measurement.state != "running":
        say(f"{name}: not running: nothing measured before the change")
        return None
    say(f"{name}: before: {measurement_line(result.measurement)}")
    return result.measurement.as_dict()


def _after_restart(name: str, backup: Any, before: dict[str, Any], result: Any, again: str,
                   longer: bool = False, dry_run: bool = False) -> int:
    """The "after" of `apply --measure`, measured in `result` (a SourceResult with its measurement):
    stored beside `before` (not with --dry-run, which changes nothing) and shown side by side once
    the guest had its full restart; else why not (exit 1). `again` is the command to run after the
    restart; `longer`: measured for longer than the "before" (--all measures as long as the longest
    one), which the header then says."""
    from vmtune.live import backups
    from vmtune.live.report import comparison

    if result.pending_restart:
        codes = ", ".join(sorted({f.rule.code for f in result.pending_restart}))
        say(f"{name}: not restarted yet ({codes} still in the running guest): after a full "
            f"shutdown and start, run `{again}` again")
        return 1
    if result.measurement.state != "running":
        say(f"{name}: not running: start it, then measure again")
        return 1
    now = result.measurement.as_dict()
    if not dry_run:
        backups.save_measurement(backup, "after", now)
    took = _stored_seconds(before)
    if longer and took is not None:
        say(f"{name}: measured before (backup {backup.id}, {took:.1f} s) and after the restart "
            f"({now['seconds']:.1f} s, the longest before of this run):")
    else:
        say(f"{name}: measured before (backup {backup.id}) and after the restart, {now['seconds']:.1f} s each:")
    for line in comparison(before, now):
        say(line)
    if dry_run:
        say(f"{name}: --dry-run: the after is not stored")
    return 0


def _stored_seconds(before: dict[str, Any]) -> float | None:
    """How long a stored "before" was measured, when the file says so plausibly."""
    from vmtune.live.measure import MAX_SECONDS

    took = before.get("seconds")
    if isinstance(took, bool) or not isinstance(took, int | float):
        return None
    return float(took) if 0 < took <= MAX_SECONDS else None


def _measured_all(conn: Any, root: Path, seconds: float | None, after: bool, dry_run: bool, policies: list[str],
                  os_family: str | None, apply_fix: Callable[[Any, Any], int]) -> int:
    """`apply --measure --all` and `apply --measure --after --all`: ONE measurement of every domain
    of the connection (two bulk statistics calls, as `check --all --measure`), then per domain
    what `apply --domain X --measure` does with it: a domain whose newest backup holds a "before"
    and no "after" gets its "after" (once restarted), every other one is applied as `apply --all`
    applies it, its own "before" stored with its backup. `--after` only compares.

    One measurement has one length: the longest of the stored "before"s that await their "after"
    and (unless --after or --dry-run) the SECONDS asked for the new "before"s. Rates are per
    second, so a longer "after" is the same quantity measured over more time; never a shorter
    one, which would see fewer of a guest's periodic bursts than its "before" did."""
    from vmtune.escape import printable
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget
    from vmtune.live.connection import all_domains as list_domains
    from vmtune.live.connection import host_name
    from vmtune.live.measure import COMPARE_INTERVALS, DEFAULT_SECONDS

    domains = list_domains(conn)
    host = host_name(conn)
    waiting: dict[str, tuple[Any, dict[str, Any]]] = {}  # UUID -> newest backup, its stored "before"
    unreadable: dict[str, VmtuneError] = {}  # said in the domain's turn, as apply --all says its errors
    without = compared = 0
    for dom in domains:
        uuid = dom.UUIDString()
        try:
            newest = backups.newest_change(backups.history(root, host, uuid))
        except VmtuneError as exc:
            unreadable[uuid] = exc
            continue
        recorded = backups.read_measurements(newest) if newest is not None else {}
        if isinstance(recorded.get("before"), dict) and not recorded.get("after"):
            waiting[uuid] = (newest, recorded["before"])
        elif recorded.get("before"):
            compared += 1
        else:
            without += 1
    asked = seconds or DEFAULT_SECONDS
    lengths = [_stored_seconds(before) or asked for _, before in waiting.values()]
    if not after and not dry_run:
        lengths.append(asked)
    code = 0
    results: dict[str, Any] = {}  # by UUID; by name only for a definition without one (kept apart:
    named: dict[str, Any] = {}     # a domain may be named after another's UUID)
    interval = max(lengths, default=0.0)
    if lengths:
        measured, errors = _measured_results(conn, [], interval, policies, os_family, COMPARE_INTERVALS)
        for error in errors:  # a definition that cannot be read: that domain is not measured
            print(f"vmtune: {error}", file=sys.stderr)
            code = EXIT_ERROR
        for result in measured:
            results[(result.measurement.uuid or "").lower()] = result
            named.setdefault(result.domain_name, result)
    again = "vmtune apply --all --measure --after"
    stored: list[str] = []  # the domains whose "before" is stored with the backup just made

    def measured_of(target: Any) -> Any:
        result = results.get(target.uuid.lower()) or named.get(target.name)
        if result is None:
            raise VmtuneError("not measured (its definition could not be read): nothing done", target.label())
        return result

    def one(dom: Any) -> int:
        uuid = dom.UUIDString()
        if uuid in unreadable:
            raise unreadable[uuid]
        target = LiveTarget.find(conn, uuid, "uuid")
        name = printable(target.name)
        if uuid in waiting:
            newest, before = waiting[uuid]
            return _after_restart(name, newest, before, measured_of(target), again,
                                  longer=(_stored_seconds(before) or asked) < interval, dry_run=dry_run)
        saved = {b.id for b in backups.history(root, target.uri, target.uuid)}
        measurement = None if dry_run else _say_before(name, measured_of(target))
        applied = apply_fix(conn, target)
        made = [b for b in backups.history(root, target.uri, target.uuid) if b.id not in saved]
        if made and measurement is not None:
            backups.save_measurement(made[-1], "before", measurement)
            say(f"{name}: measurement stored with backup {made[-1].id}")
            stored.append(name)
        return applied

    if after:
        code = max(code, _each_domain([d for d in domains if d.UUIDString() in waiting or d.UUIDString() in unreadable],
                                      one, header=False))
        skipped = [f"{without} with no `apply --measure` before stored"] if without else []
        skipped += [f"{compared} compared already"] if compared else []
        if not waiting:
            say("nothing to compare: no domain's newest backup holds an `apply --measure` before without an after"
                + (f" ({', '.join(skipped)})" if skipped else ""))
        elif skipped:
            say(f"not compared: {', '.join(skipped)}")
        return code
    code = max(code, _each_domain(domains, one))
    if stored:
        say(f"measurements stored for {len(stored)} domain(s): after each guest's next full shutdown and start, "
            f"`{again}` measures again and compares")
    return code


def run_apply_one(conn: Any, target: Any, root: Path, unsafe: bool, yes: bool, dry_run: bool, force: bool,
                  live: bool, select: list[str], ignore: list[str], policies: list[str],
                  os_family: str | None) -> int:
    from vmtune.live.apply import apply_domain
    from vmtune.request import CheckRequest, build_options

    options = build_options(CheckRequest(paths=[], select=select, ignore=ignore, policies=policies,
                                         os_family=os_family))
    return apply_domain(conn, target.uuid, options, unsafe=unsafe, dry_run=dry_run, yes=yes, force=force, live=live,
                        state_root=root, confirm=ask, out=say, by="uuid")
