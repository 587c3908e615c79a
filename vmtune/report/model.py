"""What reporters receive: findings per checked source, plus skips, notes and fixes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vmtune.patch.edits import Conflict
from vmtune.rules.base import Finding, Severity

if TYPE_CHECKING:  # the fixer (and pyexpat) stays out of a plain check
    from vmtune.patch.fixer import AppliedFix


@dataclass
class SourceResult:
    source: str  # file path, "<stdin>", or "host/domain" for live domains
    domain_name: str
    findings: list[Finding]
    applied: list[AppliedFix] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    host: str | None = None
    fail_on: Severity = Severity.WARNING  # from the settings that applied to this source


@dataclass
class Report:
    results: list[SourceResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    errors: list[str] = field(default_factory=list)  # one-line input errors (exit 2)

    def all_findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]

    def counts(self) -> dict[str, int]:
        counts = {str(s): 0 for s in Severity}
        for finding in self.all_findings():
            counts[str(finding.severity)] += 1
        return counts

    def failing(self) -> bool:
        return any(f.severity >= r.fail_on for r in self.results for f in r.findings)
