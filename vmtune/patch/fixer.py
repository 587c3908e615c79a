"""The fix loop: check, collect the fixes allowed, splice, re-parse, re-check; repeat."""

from __future__ import annotations

from dataclasses import dataclass, field

from vmtune.engine import CheckOptions, check_domain
from vmtune.errors import VmtuneError
from vmtune.facts.domain import Domain
from vmtune.patch.edits import Conflict, Edit
from vmtune.patch.splice import apply_edits
from vmtune.rules.base import Finding, FixSafety
from vmtune.xml.safe import parse_domain

MAX_PASSES = 4  # a fix may create what another rule then refines (tablet removed -> controller unused)


@dataclass(frozen=True)
class AppliedFix:
    code: str
    description: str
    safety: FixSafety
    xpath: str


@dataclass
class FixOutcome:
    source: str
    original: bytes
    fixed: bytes
    domain: Domain
    findings: list[Finding]  # what remains after fixing
    applied: list[AppliedFix] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def allowed(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and bool(finding.fix.edits) and (unsafe or finding.fix.safety is FixSafety.SAFE)


def fix_document(data: bytes, source: str, options: CheckOptions, unsafe: bool = False) -> FixOutcome:
    original = data
    applied: list[AppliedFix] = []
    conflicts: list[Conflict] = []
    for _ in range(MAX_PASSES):
        root = parse_domain(data, source)
        findings = check_domain(Domain(root, source, options.os_override), options)
        # Rule order, not line order, decides conflicts: deterministic whatever the file looks like.
        fixes = sorted((f for f in findings if allowed(f, unsafe)), key=lambda f: (f.rule.code, f.line or 0))
        if not fixes:
            break
        edits: list[tuple[str, Edit]] = [(f.rule.code, e) for f in fixes for e in f.fix.edits]  # type: ignore[union-attr]
        result = apply_edits(data, root, edits, source)
        conflicts += result.conflicts
        if result.data == data:
            break
        try:
            parse_domain(result.data, source)
        except VmtuneError as exc:
            raise VmtuneError(f"fixing would produce invalid XML ({exc.message}); nothing written", source) from None
        landed = set(result.applied)
        applied += [AppliedFix(f.rule.code, f.fix.description, f.fix.safety, f.xpath)  # type: ignore[union-attr]
                    for f in fixes if f.rule.code in landed]
        data = result.data
    domain = Domain(parse_domain(data, source), source, options.os_override)
    return FixOutcome(source, original, data, domain, check_domain(domain, options), applied, conflicts)


def diff_text(before: str, after: str, label: str) -> str:
    """A unified diff as git prints it, marking a last line without newline."""
    import difflib

    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 f"a/{label}", f"b/{label}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def unified_diff(outcome: FixOutcome, label: str) -> str:
    return diff_text(outcome.original.decode("utf-8", "replace"), outcome.fixed.decode("utf-8", "replace"), label)
