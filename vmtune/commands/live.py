"""`vmtune apply`, `history`, `rollback`: open the connection, call vmtune.live, map errors to exit 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vmtune.errors import VmtuneError

EXIT_ERROR = 2


def _out(text: str) -> None:
    print(text, flush=True)


def ask(question: str) -> bool:
    """Read the answer from stdin (a terminal or a pipe). End of input is no answer at all: from
    cron or Ansible that must not read as a successful run, so it is an error (exit 2)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
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

        def apply_one(key: str) -> int:
            return apply_domain(conn, key, options, unsafe=unsafe, dry_run=dry_run, yes=yes, force=force,
                                live=live, state_root=state_root, confirm=ask, out=_out)

        if domain is not None:
            return apply_one(domain)
        # --all: one domain's error must not stop the others; it still makes the exit code 2.
        code = 0
        for dom in list_domains(conn):
            _out(f"== {dom.name()}")
            try:
                code = max(code, apply_one(dom.UUIDString()))
            except ManagedDomainError as exc:
                _out(f"{dom.name()}: skipped: {exc.reason} (--force redefines it anyway)")
            except DomainGoneError:  # undefined by someone else since the list was read: not an error
                _out(f"{dom.name()}: skipped: no longer defined (undefined while apply --all ran)")
            except VmtuneError as exc:
                print(f"vmtune: {exc}", file=sys.stderr)
                code = EXIT_ERROR
        return code

    return _with_connection(uri, action)


def run_history(domain: str, uri: str | None, state_dir: Path | None) -> int:
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget

    def action(conn: Any) -> int:
        target = LiveTarget.find(conn, domain)
        found = backups.listing(backups.state_dir(str(state_dir) if state_dir else None), target.uri, target.uuid)
        saved = found.backups
        for path, why in found.skipped:  # never offered for rollback
            _out(f"skipped {path}: {why}")
        if not saved:
            _out(f"{target.name}: no backups")
        for backup in saved:
            meta = backup.meta
            changes = ", ".join(str(c) for c in meta.get("changes", []))  # type: ignore[attr-defined]
            _out(f"{backup.id}  {meta.get('action', '?'):<8} {changes}  {backup.path}")
        return 0

    return _with_connection(uri, action)


def run_rollback(domain: str, to: str | None, uri: str | None, yes: bool, dry_run: bool,
                 state_dir: Path | None) -> int:
    from vmtune.live.apply import rollback_domain
    from vmtune.live.backups import state_dir as default_state

    def action(conn: Any) -> int:
        return rollback_domain(conn, domain, backup_id=to, dry_run=dry_run, yes=yes, confirm=ask, out=_out,
                               state_root=default_state(str(state_dir) if state_dir else None))

    return _with_connection(uri, action)
