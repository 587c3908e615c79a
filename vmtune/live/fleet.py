"""vmtune as a library for fleet engines (the Ansible collection in ansible/): check, tune and
roll back the domains of one libvirt connection, returning plain data instead of printing.

Each function opens its own connection and closes it; errors are VmtuneError with one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from vmtune.errors import ManagedDomainError


@dataclass
class Selection:
    """What to check or tune: the options of `vmtune check` that make sense on a fleet."""

    policies: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    fail_on: str | None = None


def _request(uri: str, domains: list[str], selection: Selection) -> Any:
    from vmtune.commands.check import CheckRequest

    return CheckRequest(paths=[], connect=[uri], domains=list(domains), all_domains=not domains,
                        policies=list(selection.policies), select=list(selection.select),
                        ignore=list(selection.ignore), fail_on=selection.fail_on, output_format="json", isolated=True)


def check(uri: str, domains: list[str], selection: Selection) -> dict[str, Any]:
    """The `--format json` document of `vmtune check -c URI --all` (or the named domains), plus
    `failing`: whether a finding reaches `fail_on` (default warning)."""
    from vmtune.commands.check import OptionsResolver, check_live_domains
    from vmtune.report.jsonout import render
    from vmtune.report.model import Report

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

    @property
    def warnings(self) -> list[str]:
        """What apply and rollback warned about: edits libvirt did not keep, changes vmtune did not make."""
        return [m for m in self.messages if m.startswith("warning:")]

    def as_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "changed": self.changed, "fixes": self.fixes, "skipped": self.skipped,
                "messages": self.messages, "warnings": self.warnings}


@contextmanager
def _connection(uri: str) -> Iterator[Any]:
    from vmtune.live.connection import open_connection

    conn = open_connection(uri)
    try:
        yield conn
    finally:
        conn.close()


def _keys(conn: Any, domains: list[str]) -> list[str]:
    from vmtune.live.connection import all_domains

    return list(domains) or [dom.name() for dom in all_domains(conn)]


def tune(uri: str, domains: list[str], selection: Selection, *, unsafe: bool = False, live: bool = False,
         force: bool = False, check_mode: bool = False, state_dir: str | None = None) -> list[DomainChange]:
    """Fix each domain as `vmtune apply --yes` does (backup, concurrency guard, define, verify);
    in check mode, compute the same change and define nothing. A second run changes nothing."""
    from vmtune.commands.check import build_options
    from vmtune.facts.domain import Domain
    from vmtune.live.apply import LiveTarget, apply_domain
    from vmtune.live.backups import state_dir as default_state
    from vmtune.live.check import HostFactsCache
    from vmtune.live.connection import DomainGoneError
    from vmtune.patch.fixer import fix_document
    from vmtune.xml.safe import parse_domain

    options = build_options(_request(uri, domains, selection))
    changes = []
    with _connection(uri) as conn:
        facts = HostFactsCache(conn, options.host)
        for key in _keys(conn, domains):
            try:
                target = LiveTarget.find(conn, key)
                before = target.read()
            except DomainGoneError as exc:
                if domains:  # named: an error, as on the command line
                    raise
                changes.append(DomainChange(key, skipped=f"no longer defined ({exc.message})"))
                continue
            change = DomainChange(target.name)
            changes.append(change)
            domain = Domain(parse_domain(before.encode(), target.label()), target.label(), options.os_override)
            if domain.manager and not force:
                change.skipped = ManagedDomainError(domain.manager).reason
                continue
            outcome = fix_document(before.encode(), target.label(), replace(options, host=facts.for_domain(domain)),
                                   unsafe)
            if not outcome.changed:
                continue
            change.changed, change.before = True, before
            change.fixes = [f"{a.code}: {a.description} [{a.safety}]" for a in outcome.applied]
            if check_mode:
                change.after = outcome.fixed.decode()
                continue
            try:
                apply_domain(conn, target.uuid, options, unsafe=unsafe, yes=True, force=force, live=live,
                             state_root=default_state(state_dir), confirm=lambda _question: True,
                             out=change.messages.append)
            except DomainGoneError as exc:  # undefined since it was read: nothing was defined
                if domains:
                    raise
                change.changed, change.skipped = False, f"no longer defined ({exc.message})"
                continue
            change.after = LiveTarget.find(conn, target.uuid).read()
    return changes


def rollback(uri: str, domains: list[str], *, check_mode: bool = False,
             state_dir: str | None = None) -> list[DomainChange]:
    """Restore each domain's definition from before vmtune's last change (its newest backup that
    was not itself made by a rollback), so running it twice restores once."""
    from vmtune.live import backups
    from vmtune.live.apply import LiveTarget, rollback_domain
    from vmtune.live.backups import state_dir as default_state

    root = default_state(state_dir)
    changes = []
    with _connection(uri) as conn:
        for key in _keys(conn, domains):
            target = LiveTarget.find(conn, key)
            change = DomainChange(target.name)
            changes.append(change)
            made_by_changes = [b for b in backups.history(root, target.uri, target.uuid)
                               if b.meta.get("action") != "rollback"]
            if not made_by_changes:
                change.skipped = "no backup: vmtune never changed this domain"
                continue
            chosen = made_by_changes[-1]
            current = target.read()
            if current == chosen.xml:
                continue
            change.changed, change.before, change.after = True, current, chosen.xml
            change.fixes = [f"restore backup {chosen.id}"]
            if not check_mode:
                rollback_domain(conn, target.uuid, backup_id=chosen.id, state_root=root, yes=True,
                                confirm=lambda _question: True, out=change.messages.append)
                change.after = LiveTarget.find(conn, target.uuid).read()
    return changes


def require() -> None:
    """Raise VmtuneError naming what to install when libvirt-python is missing."""
    from vmtune.live.connection import libvirt_module

    libvirt_module()
