"""Calling vmtune's pure functions from tests."""

from __future__ import annotations

from vmtune.engine import CheckOptions, check_domain
from vmtune.facts.domain import Domain
from vmtune.facts.host import Host, load_host
from vmtune.host.inventory import DomainUsage, Inventory
from vmtune.patch.fixer import FixOutcome, fix_document
from vmtune.policy.load import load_policies
from vmtune.rules.base import Finding, Severity
from vmtune.xml.safe import parse_domain

from conftest import HOSTS


def host(caps: str | None = None, domcaps: str | None = None) -> Host | None:
    return load_host(str(HOSTS / caps) if caps else None, str(HOSTS / domcaps) if domcaps else None)


def inventory(*xmls: str) -> Inventory:
    return Inventory([DomainUsage.of(Domain(parse_domain(x.encode(), "other.xml"), "other.xml")) for x in xmls])


def options(policies: tuple[str, ...] = ("default",), host_facts: Host | None = None,
            select: list[str] | None = None, os: str | None = None,
            others: Inventory | None = None, fix_select: tuple[str, ...] = (),
            fix_all: bool = False) -> CheckOptions:
    """fix_select: rules named as with `--select` on the command line, whose info fixes --fix applies;
    fix_all: every finding's fix, as `--fail-on info` gives."""
    opts = CheckOptions(load_policies(list(policies)), host_facts, os, select or [], [],  # type: ignore[arg-type]
                        fix_selected=fix_select, fix_severity=Severity.INFO if fix_all else Severity.WARNING)
    opts.inventory = others
    return opts


def findings(xml: str | bytes, opts: CheckOptions | None = None) -> list[Finding]:
    data = xml.encode() if isinstance(xml, str) else xml
    opts = opts or options()
    return check_domain(Domain(parse_domain(data, "test.xml"), "test.xml", opts.os_override), opts)


def codes(xml: str | bytes, opts: CheckOptions | None = None) -> list[str]:
    return [f.rule.code for f in findings(xml, opts)]


def fix(xml: str | bytes, opts: CheckOptions | None = None, unsafe: bool = False) -> FixOutcome:
    data = xml.encode() if isinstance(xml, str) else xml
    return fix_document(data, "test.xml", opts or options(), unsafe)
