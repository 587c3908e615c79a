"""`vmtune apply`, `history`, `rollback`: open the connection, call vmtune.live, map errors to exit 2."""

from __future__ import annotations

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
    for backup in saved:
        meta = backup.meta
        changes = ", ".join(str(c) for c in meta.get("changes", []))
        say(f"{backup.id}  {meta.get('action', '?'):<8} {changes}  {backup.path}")


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
