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
    from vmtune.commands.check import CheckRequest, build_options
    from vmtune.errors import ManagedDomainError
    from vmtune.live.apply import apply_domain
    from vmtune.live.backups import state_dir as default_state
    from vmtune.live.connection import DomainGoneError
    from vmtune.live.connection import all_domains as list_domains

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
        # --all: one domain's error must not stop the others; it still makes the exit code 2.
        code = 0
        for dom in list_domains(conn):
            say(f"== {dom.name()}")
            try:
                code = max(code, apply_one(dom.UUIDString(), "uuid"))  # this domain, not one named so
            except ManagedDomainError as exc:
                say(f"{dom.name()}: skipped: {exc.reason} (--force redefines it anyway)")
            except DomainGoneError:  # undefined by someone else since the list was read: not an error
                say(f"{dom.name()}: skipped: no longer defined (undefined while apply --all ran)")
            except VmtuneError as exc:
                print(f"vmtune: {exc}", file=sys.stderr)
                code = EXIT_ERROR
        return code

    return _with_connection(uri, action)


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
                      os_family: str | None) -> tuple[list[Any], list[str]]:
    from vmtune.commands.check import CheckRequest, build_options
    from vmtune.live.check import scan_host

    options = build_options(CheckRequest(paths=[], policies=policies, os_family=os_family))
    return scan_host(None, keys, options, conn=conn, measure=seconds)


def run_measure(domains: list[str], all_domains: bool, uri: str | None, seconds: float, top: int, fmt: str,
                policies: list[str], os_family: str | None) -> int:
    """`vmtune measure`: the measured picture first (for --all, the domains that cost most), then
    per cost the findings whose signature it is."""
    from vmtune.escape import printable  # a name on its line: a newline in it cannot start another
    from vmtune.live.report import cost, measurement_line, verdict_dict

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
                say(f"== {printable(r.domain_name)}: {measurement_line(r.measurement)}")
                explained = [(f, r.verdicts[f.rule.code]) for f in r.findings if f.rule.code in r.verdicts]
                for f, verdict in explained:
                    if verdict.status == "measured":
                        say(f"  {verdict.what}: {verdict.text.removeprefix('measured: ')}")
                        say(f"    explained by {f.rule.code} ({f.rule.name}): {printable(f.message)}")
                for f, verdict in explained:
                    if verdict.status != "measured":
                        say(f"  {f.rule.code} ({f.rule.name}): {verdict.text}")
                if r.measurement.state == "running" and not any(v.status == "measured" for _, v in explained):
                    say("  no finding's signature is in the statistics of this run")
            if not measured:
                say("no running domain to measure")
        return EXIT_ERROR if errors else 0

    return _with_connection(uri, action)


def _comparison(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Before and after side by side: every value both runs measured."""
    lines = []
    old, new = before.get("values", {}), after.get("values", {})
    for key in [k for k in old if k in new]:
        a, b = float(old[key]), float(new[key])
        change = f" ({(b - a) / a * 100:+.0f}%)" if a else ""
        lines.append(f"  {key:<34} {a:>12.3f} -> {b:<12.3f}{change}")
    return lines


def run_apply_measured(domain: str | None, all_domains: bool, uri: str | None, seconds: float | None, after: bool,
                       unsafe: bool, yes: bool, dry_run: bool, force: bool, live: bool, select: list[str],
                       ignore: list[str], policies: list[str], os_family: str | None,
                       state_dir: Path | None) -> int:
    """`apply --measure`: measure, apply, store the measurement with the backup; once the guest
    has had its full restart (`--after`, or `apply --measure` again with nothing left to fix),
    measure again for as long as before and show both side by side, stored beside the first."""
    from vmtune.escape import printable  # a name on its line: a newline in it cannot start another
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget

    if domain is None or all_domains:
        print("vmtune: apply --measure takes one --domain NAME", file=sys.stderr)
        return EXIT_ERROR
    root = backups.state_dir(str(state_dir) if state_dir else None)

    def measure_now(conn: Any, target: Any, length: float) -> Any:
        results, errors = _measured_results(conn, [target.uuid], length, policies, os_family)
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
                if result.pending_restart:
                    codes = ", ".join(sorted({f.rule.code for f in result.pending_restart}))
                    say(f"{printable(target.name)}: not restarted yet ({codes} still in the running guest): after a "
                        "full shutdown and start, run `vmtune apply --measure --after` again")
                    return 1
                if result.measurement.state != "running":
                    say(f"{printable(target.name)}: not running: start it, then measure again")
                    return 1
                now = result.measurement.as_dict()
                backups.save_measurement(newest, "after", now)
                say(f"{printable(target.name)}: measured before (backup {newest.id}) and after the restart, "
                    f"{now['seconds']:.1f} s each:")
                for line in _comparison(recorded["before"], now):
                    say(line)
                return 0
        before = None
        if not dry_run:
            result = measure_now(conn, target, seconds or 5.0)
            if result.measurement.state == "running":
                before = result.measurement.as_dict()
                from vmtune.live.report import measurement_line

                say(f"{printable(target.name)}: before: {measurement_line(result.measurement)}")
            else:
                say(f"{printable(target.name)}: not running: nothing measured before the change")
        code = run_apply_one(conn, target, root, unsafe, yes, dry_run, force, live, select, ignore, policies,
                             os_family)
        made = [b for b in backups.history(root, target.uri, target.uuid) if b.id not in {s.id for s in saved}]
        if made and before is not None:
            backups.save_measurement(made[-1], "before", before)
            say(f"measurement stored with backup {made[-1].id}: after the guest's next full shutdown and start, "
                f"`vmtune apply --domain {shlex.quote(target.name)} --measure --after` measures again and compares")
        return code

    return _with_connection(uri, action)


def run_apply_one(conn: Any, target: Any, root: Path, unsafe: bool, yes: bool, dry_run: bool, force: bool,
                  live: bool, select: list[str], ignore: list[str], policies: list[str],
                  os_family: str | None) -> int:
    from vmtune.commands.check import CheckRequest, build_options
    from vmtune.live.apply import apply_domain

    options = build_options(CheckRequest(paths=[], select=select, ignore=ignore, policies=policies,
                                         os_family=os_family))
    return apply_domain(conn, target.uuid, options, unsafe=unsafe, dry_run=dry_run, yes=yes, force=force, live=live,
                        state_root=root, confirm=ask, out=say, by="uuid")
