"""What reporters receive: findings per checked source, plus skips, notes and fixes.

A report can stream: with a `sink`, each result is handed on as soon as it is complete
and only the tallies stay in memory, so checking 10,000 files costs no more memory than
checking one (text output does this; JSON, SARIF and JUnit need the whole report).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vmtune.errors import InputError
from vmtune.patch.edits import Conflict
from vmtune.rules.base import Finding, FixSafety, Severity

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
    hostname: str | None = None  # live: the hypervisor's name (libvirt's getHostname()), metrics' host label
    # Live, running guests: findings the persistent definition no longer has but the running
    # guest still does (fixed, in effect only after a full shutdown and start).
    pending_restart: list[Finding] = field(default_factory=list)


@dataclass
class Tally:
    domains: int = 0
    by_severity: dict[str, int] = field(default_factory=lambda: {str(s): 0 for s in Severity})
    safe_fixable: int = 0
    unsafe_fixable: int = 0
    suggested_fixable: int = 0  # fixes of findings below --fail-on: applied only when selected
    fixable: int = 0
    applied: int = 0
    failing: bool = False
    by_rule: dict[str, int] = field(default_factory=dict)  # code -> findings, for --statistics
    fixable_by_rule: dict[str, int] = field(default_factory=dict)  # code -> findings with a fix
    rule_names: dict[str, str] = field(default_factory=dict)  # code -> name (custom checks included)
    live_domains: int = 0  # of `domains`, those read from libvirt: their fixes are `vmtune apply`'s
    baselined: int = 0  # findings the baseline hid

    def merge(self, other: Tally) -> None:
        self.domains += other.domains
        self.applied += other.applied
        for severity, count in other.by_severity.items():
            self.by_severity[severity] += count
        self.safe_fixable += other.safe_fixable
        self.unsafe_fixable += other.unsafe_fixable
        self.suggested_fixable += other.suggested_fixable
        self.fixable += other.fixable
        self.baselined += other.baselined
        self.failing = self.failing or other.failing
        self.live_domains += other.live_domains
        for code, count in other.by_rule.items():
            self.by_rule[code] = self.by_rule.get(code, 0) + count
        for code, count in other.fixable_by_rule.items():
            self.fixable_by_rule[code] = self.fixable_by_rule.get(code, 0) + count
        self.rule_names.update(other.rule_names)

    def add(self, result: SourceResult) -> None:
        self.domains += 1
        self.live_domains += result.host is not None
        self.applied += len(result.applied)
        for f in result.findings:
            self.by_severity[str(f.severity)] += 1
            self.by_rule[f.rule.code] = self.by_rule.get(f.rule.code, 0) + 1
            self.rule_names[f.rule.code] = f.rule.name
            self.failing = self.failing or f.severity >= result.fail_on
            if f.fix is not None:
                self.fixable += 1
                self.fixable_by_rule[f.rule.code] = self.fixable_by_rule.get(f.rule.code, 0) + 1
                if f.severity < result.fail_on:
                    self.suggested_fixable += 1
                elif f.fix.safety is FixSafety.SAFE:
                    self.safe_fixable += 1
                else:
                    self.unsafe_fixable += 1


@dataclass
class Report:
    results: list[SourceResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    errors: list[InputError] = field(default_factory=list)  # inputs that could not be checked (exit 2)
    dry_run: bool = False  # --diff: fixes are shown, not written
    subject: str = "domain(s)"  # what was checked, for the summary line ("host(s)" for `vmtune host`)
    would_change: bool = False  # --diff showed a change
    tally: Tally = field(default_factory=Tally)
    sink: Callable[[SourceResult], None] | None = None  # streaming: results are not kept
    keep: Callable[[SourceResult], None] | None = None  # e.g. a baseline, which drops known findings
    identities: list[str] | None = None  # collected for --write-baseline
    metrics_host: str | None = None  # --metrics-host: host label of files and of the run itself

    def add(self, result: SourceResult) -> None:
        if self.identities is not None:
            from vmtune.report import identity

            self.identities += [identity(f) for f in result.findings]
        if self.keep is not None:
            before = len(result.findings)
            self.keep(result)
            self.tally.baselined += before - len(result.findings)
        self.tally.add(result)
        if self.sink is not None:
            self.sink(result)
        else:
            self.results.append(result)

    def merge(self, other: Report) -> None:
        """Add a report made the same way elsewhere (a worker): its results already went through
        the baseline filter, the tally and, when streaming, the sink."""
        self.results += other.results
        self.tally.merge(other.tally)
        if self.identities is not None:
            self.identities += other.identities or []
        self.skipped += other.skipped
        self.errors += other.errors
        self.would_change = self.would_change or other.would_change

    def all_findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]

    def counts(self) -> dict[str, int]:
        return dict(self.tally.by_severity)

    def failing(self) -> bool:
        return self.tally.failing
