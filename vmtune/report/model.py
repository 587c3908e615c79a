"""What reporters receive: findings per checked source, plus skips, notes and fixes.

A report can stream: with a `sink`, each result is handed on as soon as it is complete
and only the tallies stay in memory, so checking 10,000 files costs no more memory than
checking one (text output does this; JSON, SARIF and JUnit need the whole report).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vmtune.errors import InputError
from vmtune.patch.edits import Conflict
from vmtune.rules.base import Finding, FixSafety, Severity

if TYPE_CHECKING:  # the fixer (and pyexpat) stays out of a plain check
    from vmtune.fixer import AppliedFix


# str(severity) by the severity's value: Severity.__str__ and the enum's __hash__ (its label table's
# lookup) are two Python calls, an index of a tuple is none; read for every finding reported.
LABELS: tuple[str, ...] = tuple(next((str(s) for s in Severity if s == value), "")
                                for value in range(max(Severity) + 1))
# The severities' labels in the enum's order: a tally's counts start from them (iterating the enum
# and calling str() on each member cost ~1.5 us a tally; a stack run makes one a file or chunk).
_SEVERITY_KEYS: tuple[str, ...] = tuple(str(s) for s in Severity)


# The records below are plain classes, not dataclasses: creating a dataclass costs ~0.5 ms
# (it compiles its methods), paid at every start of a one-file pre-commit check.


class SourceResult:
    __slots__ = ("applied", "conflicts", "counted", "domain_name", "fail_on", "findings", "host", "hostname",
                 "measurement", "pending_restart", "source", "verdicts")

    def __init__(self, source: str, domain_name: str, findings: list[Finding],
                 applied: list[AppliedFix] | None = None, conflicts: list[Conflict] | None = None,
                 host: str | None = None, fail_on: Severity = Severity.WARNING, hostname: str | None = None,
                 pending_restart: list[Finding] | None = None) -> None:
        self.source = source  # file path, "<stdin>", or "host/domain" for live domains
        self.domain_name = domain_name
        self.findings = findings
        self.applied: list[AppliedFix] = [] if applied is None else applied
        self.conflicts: list[Conflict] = [] if conflicts is None else conflicts
        self.host = host
        self.fail_on = fail_on  # from the settings that applied to this source
        self.hostname = hostname  # live: the hypervisor's name (libvirt's getHostname()), metrics' host label
        # Live, running guests: findings the persistent definition no longer has but the running
        # guest still does (fixed, in effect only after a full shutdown and start).
        self.pending_restart: list[Finding] = [] if pending_restart is None else pending_restart
        # --measure: the domain's measured costs (vmtune.live.measure.DomainMeasure) and, per rule
        # code, the measurement that confirms its findings or says it was not seen (signatures.Verdict):
        # a verdict depends on the rule and the domain's measurement only, so a rule's findings share it.
        self.measurement: Any = None
        self.verdicts: Mapping[str, Any] = {}
        # False: more findings of a domain already counted under another file (a flavor × image
        # pair's findings on the flavor's file and on the image's): one domain, not two
        self.counted = True

    def verdict_of(self, finding: Finding) -> Any:
        """The --measure verdict a finding carries (signatures.Verdict), None without one."""
        return self.verdicts.get(finding.rule.code)


class Tally:
    __slots__ = ("applied", "baselined", "by_rule", "by_severity", "domains", "failing", "fixable", "fixable_by_rule",
                 "live_domains", "rule_names", "safe_fixable", "suggested_fixable", "unsafe_fixable",
                 "unsafe_suggested_fixable")

    def __init__(self) -> None:
        self.domains = 0
        self.by_severity: dict[str, int] = dict.fromkeys(_SEVERITY_KEYS, 0)
        self.safe_fixable = 0
        self.unsafe_fixable = 0
        self.suggested_fixable = 0  # safe fixes of findings below --fail-on: applied only when selected
        self.unsafe_suggested_fixable = 0  # unsafe ones: --unsafe-fixes and --select
        # Every finding with a fix, whatever it takes to apply it: the one meaning of "fixable" in
        # the text summary, JSON, HTML and statistics; the four counts above split it by command.
        self.fixable = 0
        self.applied = 0
        self.failing = False
        self.by_rule: dict[str, int] = {}  # code -> findings, for --statistics
        self.fixable_by_rule: dict[str, int] = {}  # code -> findings with a fix
        self.rule_names: dict[str, str] = {}  # code -> name (custom checks included)
        self.live_domains = 0  # of `domains`, those read from libvirt: their fixes are `vmtune apply`'s
        self.baselined = 0  # findings the baseline hid

    def merge(self, other: Tally) -> None:
        self.domains += other.domains
        self.applied += other.applied
        for severity, count in other.by_severity.items():
            self.by_severity[severity] += count
        self.safe_fixable += other.safe_fixable
        self.unsafe_fixable += other.unsafe_fixable
        self.suggested_fixable += other.suggested_fixable
        self.unsafe_suggested_fixable += other.unsafe_suggested_fixable
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
        self.domains += result.counted
        self.live_domains += result.host is not None
        self.applied += len(result.applied)
        # the tables and the threshold in locals: every finding of a run passes here
        by_severity, by_rule, rule_names, fail_on = self.by_severity, self.by_rule, self.rule_names, result.fail_on
        for f in result.findings:
            by_severity[LABELS[f.severity]] += 1
            rule = f.rule
            code = rule.code
            by_rule[code] = by_rule.get(code, 0) + 1
            rule_names[code] = rule.name
            failing = f.severity >= fail_on
            if failing:
                self.failing = True
            if f.fix is not None:
                self.fixable += 1
                self.fixable_by_rule[code] = self.fixable_by_rule.get(code, 0) + 1
                safe = f.fix.safety is FixSafety.SAFE
                if not failing:
                    self.suggested_fixable += safe
                    self.unsafe_suggested_fixable += not safe
                elif safe:
                    self.safe_fixable += 1
                else:
                    self.unsafe_fixable += 1


class Report:
    __slots__ = ("dry_run", "errors", "identities", "keep", "metrics_host", "results", "sink", "skipped", "subject",
                 "tally", "would_change")

    def __init__(self, results: list[SourceResult] | None = None, skipped: list[tuple[str, str]] | None = None,
                 errors: list[InputError] | None = None, dry_run: bool = False, subject: str = "domain(s)",
                 would_change: bool = False, tally: Tally | None = None,
                 sink: Callable[[SourceResult], None] | None = None, keep: Callable[[SourceResult], None] | None = None,
                 identities: list[str] | None = None, metrics_host: str | None = None) -> None:
        self.results: list[SourceResult] = [] if results is None else results
        self.skipped: list[tuple[str, str]] = [] if skipped is None else skipped  # (source, reason)
        self.errors: list[InputError] = [] if errors is None else errors  # inputs that could not be checked (exit 2)
        self.dry_run = dry_run  # --diff: fixes are shown, not written
        self.subject = subject  # what was checked, for the summary line ("host(s)" for `vmtune host`)
        self.would_change = would_change  # --diff showed a change
        self.tally = Tally() if tally is None else tally
        self.sink = sink  # streaming: results are not kept
        self.keep = keep  # e.g. a baseline, which drops known findings
        self.identities = identities  # collected for --write-baseline
        self.metrics_host = metrics_host  # --metrics-host: host label of files and of the run itself

    def add(self, result: SourceResult) -> None:
        if self.identities is not None:
            from vmtune.report.identify import identity

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
