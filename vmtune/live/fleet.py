"""vmtune as a library for fleet engines (the Ansible collection in ansible/): check, tune and
roll back the domains of one libvirt connection, returning plain data instead of printing.

Each function opens its own connection and closes it; errors are VmtuneError with one line.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vmtune.errors import ManagedDomainError

if TYPE_CHECKING:
    from vmtune.live.connection import LookupBy


@dataclass
class Selection:
    """What to check or tune: the options of `vmtune check` that make sense on a fleet."""

    policies: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    fail_on: str | None = None


def _request(uri: str, domains: list[str], selection: Selection) -> Any:
    from vmtune.request import CheckRequest

    return CheckRequest(paths=[], connect=[uri], domains=list(domains), all_domains=not domains,
                        policies=list(selection.policies), select=list(selection.select),
                        ignore=list(selection.ignore), fail_on=selection.fail_on, output_format="json", isolated=True)


def check(uri: str, domains: list[str], selection: Selection) -> dict[str, Any]:
    """The `--format json` document of `vmtune check -c URI --all` (or the named domains), plus
    `failing`: whether a finding reaches `fail_on` (default warning)."""
    from vmtune.live.check import check_live_domains
    from vmtune.report.jsonout import render
    from vmtune.report.model import Report
    from vmtune.request import OptionsResolver

    report = Report()
    check_live_domains(OptionsResolver(_request(uri, domains, selection)), report)
    document: dict[str, Any] = json.loads(render(report))
    document["failing"] = report.failing()
    return document


@dataclass
class DomainChange:
    """One domain's outcome, as a module returns it."""

    domain: str
    changed: bool = False
    before: str = ""
    after: str = ""
    fixes: list[str] = field(default_factory=list)
    skipped: str | None = None
    messages: list[str] = field(default_factory=list)
    uuid: str = ""
    backup: str | None = None  # the backup this run made before changing the domain
    definition_sha256: str | None = None  # of the definition this run left (secrets left out)
    error: str | None = None  # why this domain could not be tuned (the others were)

    @property
    def warnings(self) -> list[str]:
        """What apply and rollback warned about: edits libvirt did not keep, changes vmtune did not make."""
        return [m for m in self.messages if m.startswith("warning:")]

    def as_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "uuid": self.uuid, "changed": self.changed, "fixes": self.fixes,
                "skipped": self.skipped, "messages": self.messages, "backup": self.backup, "error": self.error,
                "warnings": self.warnings}


def run_record(uri: str, changes: list[DomainChange]) -> dict[str, Any]:
    """What a tune run changed on one host, for `rollback(undo=...)`: per domain the backup it made
    and a hash of the definition it left, so a later hand edit is noticed and not rolled over."""
    return {"uri": uri, "domains": {c.domain: {"uuid": c.uuid, "backup": c.backup,
                                               "definition_sha256": c.definition_sha256}
                                    for c in changes if c.backup is not None}}


def definition_digest(target: Any) -> str:
    """sha256 of a domain's persistent definition without secrets (a record on the controller must
    not let anyone test guesses of a graphics password against it)."""
    import hashlib

    from vmtune.live.connection import persistent_xml

    return hashlib.sha256(persistent_xml(target.dom, secure=False).encode()).hexdigest()


@contextmanager
def _connection(uri: str) -> Iterator[Any]:
    from vmtune.live.connection import open_connection

    conn = open_connection(uri)
    try:
        yield conn
    finally:
        conn.close()


def _keys(conn: Any, domains: list[str]) -> tuple[list[str], LookupBy]:
    """The domains to tune and how to look them up: as named (a name or a UUID), or every domain
    by the name libvirt gives it."""
    from vmtune.live.connection import all_domains

    return (list(domains), "any") if domains else ([dom.name() for dom in all_domains(conn)], "name")


def tune(uri: str, domains: list[str], selection: Selection, *, unsafe: bool = False, live: bool = False,
         force: bool = False, check_mode: bool = False, state_dir: str | None = None) -> list[DomainChange]:
    """Fix each domain as `vmtune apply --yes` does (backup, concurrency guard, define, verify);
    in check mode, compute the same change and define nothing. A second run changes nothing.
    A domain that fails (gone, rejected, changed concurrently) gets `error` and the others go on,
    as `vmtune apply --all` does, so the caller still learns every backup this run made."""
    from vmtune.errors import VmtuneError
    from vmtune.live.backups import state_dir as default_state
    from vmtune.live.check import HostFactsCache
    from vmtune.live.connection import DomainGoneError
    from vmtune.request import build_options

    options = build_options(_request(uri, domains, selection))
    root = default_state(state_dir)
    changes = []
    with _connection(uri) as conn:
        facts = HostFactsCache(conn, options.host)
        keys, by = _keys(conn, domains)
        for key in keys:
            change = DomainChange(key)
            changes.append(change)
            try:
                _tune_one(conn, key, by, change, options, facts, root, unsafe=unsafe, live=live, force=force,
                          check_mode=check_mode)
            except DomainGoneError as exc:
                if domains:  # named: an error, as on the command line
                    change.error = str(exc)
                else:  # undefined since the listing: nothing of it was defined
                    change.changed, change.skipped = False, f"no longer defined ({exc.message})"
            except VmtuneError as exc:
                change.error = str(exc)
    return changes


def _tune_one(conn: Any, key: str, by: LookupBy, change: DomainChange, options: Any, facts: Any, root: Any, *,
              unsafe: bool, live: bool, force: bool, check_mode: bool) -> None:
    from vmtune.facts.domain import Domain
    from vmtune.fixer import fix_document
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget, apply_domain
    from vmtune.xml.safe import parse_domain

    target = LiveTarget.find(conn, key, by)
    change.domain, change.uuid = target.name, target.uuid
    before = target.read()
    domain = Domain(parse_domain(before.encode(), target.label()), target.label(), options.os_override)
    if domain.manager and not force:
        change.skipped = ManagedDomainError(domain.manager).reason
        return
    outcome = fix_document(before.encode(), target.label(), options.replace(host=facts.for_domain(domain)), unsafe)
    if not outcome.changed:
        return
    change.changed, change.before = True, before
    change.fixes = [f"{a.code}: {a.description} [{a.safety}]" for a in outcome.applied]
    if check_mode:
        change.after = outcome.fixed.decode()
        return
    earlier = {b.id for b in backups.history(root, target.uri, target.uuid)}
    try:
        apply_domain(conn, target.uuid, options, unsafe=unsafe, yes=True, force=force, live=live, state_root=root,
                     confirm=lambda _question: True, out=change.messages.append, by="uuid")
    finally:  # a backup stays only for a definition that was replaced, even when a later step failed
        made = [b.id for b in backups.history(root, target.uri, target.uuid) if b.id not in earlier]
        change.backup = made[-1] if made else None
        change.changed = change.backup is not None
    after = LiveTarget.find(conn, target.uuid, by="uuid")
    change.after, change.definition_sha256 = after.read(), definition_digest(after)


def rollback(uri: str, domains: list[str], *, undo: dict[str, Any] | None = None, check_mode: bool = False,
             state_dir: str | None = None) -> list[DomainChange]:
    """Undo vmtune's changes, never more than was asked:

    - with `undo` (a `run_record` of earlier tune runs on this host): restore exactly the backups
      those runs made, each only while the domain still has the definition the run left (a domain
      changed since, by hand or another tool, is skipped and says so); `domains` narrows it;
    - else the named `domains`, each to before vmtune's last change (its newest backup that was
      not itself made by a rollback).

    Naming neither is refused: it would restore every domain vmtune ever changed. Running it
    twice restores once."""
    from vmtune.errors import VmtuneError
    from vmtune.live.backups import state_dir as default_state

    root = default_state(state_dir)
    if undo is not None and undo.get("uri") not in (None, uri):
        raise VmtuneError(f"the tune record is of {undo.get('uri')}, not of {uri}: nothing rolled back")
    recorded: dict[str, Any] = dict((undo or {}).get("domains") or {})
    if not recorded and not domains:
        raise VmtuneError("rollback needs the record of a tune run (tune.yml keeps it in tune-run.json) or the "
                          "domains to roll back; naming neither would restore every domain vmtune ever changed")
    changes = []
    with _connection(uri) as conn:
        if recorded:
            wanted = set(domains)
            for name, entry in recorded.items():
                if wanted and name not in wanted and entry.get("uuid") not in wanted:
                    continue
                # A recorded domain is the one with the recorded UUID, looked up by UUID only: by
                # name first, a domain named after its UUID was found instead, and its rollback
                # refused ("backup ... is no longer in the state directory").
                if entry.get("uuid"):
                    changes.append(_restore(conn, root, str(entry["uuid"]), entry, check_mode, "uuid"))
                else:
                    changes.append(_restore(conn, root, name, entry, check_mode, "name"))
            missing = sorted(wanted - set(recorded) - {str(e.get("uuid")) for e in recorded.values()})
        else:
            missing = list(domains)
        for key in missing:  # named, but no tune run of the record changed them
            changes.append(_restore(conn, root, key, None, check_mode))
    return changes


def _restore(conn: Any, root: Any, key: str, entry: dict[str, Any] | None, check_mode: bool,
             by: LookupBy = "any") -> DomainChange:
    """One domain back to a backup: the recorded one, or (named without a record) the newest that
    a change, not a rollback, made. `by`: how key names it (`any` for a domain the user named)."""
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget, rollback_domain

    target = LiveTarget.find(conn, key, by)
    change = DomainChange(target.name, uuid=target.uuid)
    saved = backups.history(root, target.uri, target.uuid)
    if entry is not None:
        chosen = next((b for b in saved if b.id == entry.get("backup")), None)
        if chosen is None:
            change.skipped = f"backup {entry.get('backup')} is no longer in the state directory"
            return change
    else:
        newest = backups.newest_change(saved)  # as `vmtune rollback` without --to chooses
        if newest is None:
            change.skipped = "no backup: vmtune never changed this domain"
            return change
        chosen = newest
    current = target.read()
    if current == chosen.xml:
        return change  # already restored
    if entry is not None and definition_digest(target) != entry.get("definition_sha256"):
        change.skipped = (f"changed since the tune run that made backup {chosen.id}; not rolled back "
                          f"(`vmtune rollback --domain {shlex.quote(target.name)} --to {chosen.id}` if you mean it)")
        return change
    change.changed, change.before, change.after = True, current, chosen.xml
    change.fixes = [f"restore backup {chosen.id}"]
    if not check_mode:
        rollback_domain(conn, target.uuid, backup_id=chosen.id, state_root=root, yes=True,
                        confirm=lambda _question: True, out=change.messages.append, by="uuid")
        change.after = LiveTarget.find(conn, target.uuid, by="uuid").read()
    return change


def require() -> None:
    """Raise VmtuneError naming what to install when libvirt-python is missing."""
    from vmtune.live.connection import libvirt_module

    libvirt_module()
