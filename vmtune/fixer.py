"""The fix loop: check, collect the fixes allowed, splice, re-parse, re-check; repeat.

Which fixes run (docs/rules.md, "Calibration"): safe ones (unsafe too with --unsafe-fixes) of
findings at or above the fix severity (--fail-on), or of rules named with --select. A fix whose
result has a failing finding the original did not have is withheld: a pre-commit hook must
never block a commit on a finding vmtune itself wrote.

Beside the engine, not in vmtune.patch: the loop checks (vmtune.engine), while vmtune.patch holds
the edits and the splicer the rules themselves use.
"""

from __future__ import annotations

from collections import Counter

from vmtune.engine import CheckOptions, check_domain
from vmtune.errors import TooManyElementsError, VmtuneError
from vmtune.facts.domain import Domain
from vmtune.patch.edits import Conflict, Edit
from vmtune.patch.splice import apply_edits
from vmtune.record import Record
from vmtune.rules.base import Finding, FixSafety
from vmtune.xml.safe import parse_domain

MAX_PASSES = 4  # a fix may create what another rule then refines (tablet removed -> controller unused)


# The fixer's values are plain classes, not dataclasses: importing dataclasses imports inspect (with
# ast, dis, tokenize) and each dataclass compiles its methods as its module loads: ~45 M of the
# 179 M instructions of a one-file `--fix` or `--diff` (issue 45, docs/benchmarks.md).
class AppliedFix(Record):
    __slots__ = ("code", "description", "safety", "xpath")

    def __init__(self, code: str, description: str, safety: FixSafety, xpath: str) -> None:
        self.code = code
        self.description = description
        self.safety = safety
        self.xpath = xpath


class FixOutcome:
    __slots__ = ("applied", "conflicts", "domain", "findings", "fixed", "original", "original_findings", "source",
                 "withheld")

    def __init__(self, source: str, original: bytes, fixed: bytes, domain: Domain, findings: list[Finding],
                 applied: list[AppliedFix], conflicts: list[Conflict], withheld: dict[str, str],
                 original_findings: list[Finding]) -> None:
        self.source = source
        self.original = original
        self.fixed = fixed
        self.domain = domain
        self.findings = findings  # what remains after fixing
        self.applied = applied
        self.conflicts = conflicts
        self.withheld = withheld  # rule code -> why its fix was not applied
        self.original_findings = original_findings  # before fixing, lines of the original

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def allowed(finding: Finding, unsafe: bool, options: CheckOptions | None = None) -> bool:
    """Whether --fix applies this finding's fix (without options: any severity)."""
    if finding.fix is None or not finding.fix.edits or not (unsafe or finding.fix.safety is FixSafety.SAFE):
        return False
    return options is None or wanted(finding, options)


def wanted(finding: Finding, options: CheckOptions) -> bool:
    """At or above the fix severity, or its rule asked for by name on the command line."""
    if finding.severity >= options.fix_severity:
        return True
    from vmtune.policy.model import selector_matches

    return any(selector_matches(s, finding.rule) and s != "ALL" for s in options.fix_selected)


def not_applied(finding: Finding, unsafe: bool, options: CheckOptions) -> str:
    """The label of a finding whose fix --fix left out: what it needs, as the options that apply it
    (an info finding's fix needs its rule named even with --unsafe-fixes); "" without a fix."""
    fix = finding.fix
    if fix is None:
        return ""
    needs = [] if unsafe or fix.safety is FixSafety.SAFE else ["--unsafe-fixes"]
    if not wanted(finding, options):
        needs.append(f"--select {finding.rule.code}")
    # Nothing missing: allowed, yet not applied (its edit conflicted with another fix's)
    return f"[{fix.safety} fix not applied" + (f": needs {' '.join(needs)}]" if needs else "]")


class _Passes:
    __slots__ = ("applied", "conflicts", "fixed")

    def __init__(self, fixed: bytes, applied: list[AppliedFix], conflicts: list[Conflict]) -> None:
        self.fixed = fixed
        self.applied = applied
        self.conflicts = conflicts


class _Checks:
    """The checks one fix_document makes, by the bytes checked: each text is parsed and checked
    once. A pass ends by checking what the last splice wrote, and that check is what remains; a
    trial of _culprit starts from the original, checked already, and often splices to a text
    another trial or pass checked. A check depends on nothing but the bytes (the source and the
    options are the document's), and nothing here changes a finding before the loop is over."""

    __slots__ = ("done", "options", "source")

    def __init__(self, source: str, options: CheckOptions) -> None:
        self.source = source
        self.options = options
        self.done: dict[bytes, tuple[Domain, list[Finding]]] = {}

    def __call__(self, data: bytes) -> tuple[Domain, list[Finding]]:
        checked = self.done.get(data)
        if checked is None:
            checked = self.done[data] = _check(data, self.source, self.options)
        return checked


def _run_passes(data: bytes, check: _Checks, unsafe: bool, excluded: frozenset[str]) -> _Passes:
    """Up to MAX_PASSES rounds of check, splice, re-parse."""
    source, options = check.source, check.options
    applied: list[AppliedFix] = []
    conflicts: list[Conflict] = []
    for _ in range(MAX_PASSES):
        domain, findings = check(data)
        root = domain.root
        # Rule order, not line order, decides conflicts: deterministic whatever the file looks like.
        fixes = sorted((f for f in findings if allowed(f, unsafe, options) and f.rule.code not in excluded),
                       key=lambda f: (f.rule.code, f.line or 0))
        if not fixes:
            break
        edits: list[tuple[str, Edit]] = [(f.rule.code, e) for f in fixes for e in f.fix.edits]  # type: ignore[union-attr]
        result = apply_edits(data, root, edits, source)
        conflicts += result.conflicts
        if result.data == data:
            break
        try:
            parse_domain(result.data, source)
        except TooManyElementsError as exc:  # vmtune never writes a file it would then refuse to check
            raise VmtuneError(f"fixing would leave {exc.message}; nothing written", source) from None
        except VmtuneError as exc:
            raise VmtuneError(f"fixing would produce invalid XML ({exc.message}); nothing written", source) from None
        landed = set(result.applied)
        applied += [AppliedFix(f.rule.code, f.fix.description, f.fix.safety, f.xpath)  # type: ignore[union-attr]
                    for f in fixes if f.rule.code in landed]
        data = result.data
    return _Passes(data, applied, conflicts)


def _failing(findings: list[Finding], options: CheckOptions) -> Counter[str]:
    return Counter(f.rule.code for f in findings if f.severity >= options.fix_severity)


def _new_failing(before: Counter[str], findings: list[Finding], options: CheckOptions) -> list[str]:
    after = _failing(findings, options)
    return sorted(code for code, count in after.items() if count > before[code])


def _check(data: bytes, source: str, options: CheckOptions) -> tuple[Domain, list[Finding]]:
    domain = Domain.parse(data, source, options.os_override)
    return domain, check_domain(domain, options)


def fix_document(data: bytes, source: str, options: CheckOptions, unsafe: bool = False) -> FixOutcome:
    check = _Checks(source, options)
    original_findings = check(data)[1]
    before = _failing(original_findings, options)
    excluded: frozenset[str] = frozenset()
    withheld: dict[str, str] = {}
    while True:
        passes = _run_passes(data, check, unsafe, excluded)
        # Nothing changed: the original check is the result (a clean file costs one check).
        domain, remaining = check(passes.fixed)
        new = _new_failing(before, remaining, options)
        if not new or not passes.applied:
            break
        culprit = _culprit(data, check, unsafe, excluded, passes, before)
        withheld[culprit] = f"withheld: fixing it raises {', '.join(new)}"
        excluded |= {culprit}
    for finding in remaining:
        reason = withheld.get(finding.rule.code)
        if reason is not None and finding.fix is not None:
            finding.fix = None  # no "[*]": --fix will not apply it
            finding.note = f"fix {reason}; {finding.note}" if finding.note else f"fix {reason}"
    return FixOutcome(source, data, passes.fixed, domain, remaining, passes.applied, passes.conflicts, withheld,
                      original_findings)


def _culprit(data: bytes, check: _Checks, unsafe: bool, excluded: frozenset[str],
             passes: _Passes, before: Counter[str]) -> str:
    """The applied rule whose fix alone, left out, makes the new finding go; else the last applied."""
    codes = list(dict.fromkeys(a.code for a in passes.applied))
    for code in reversed(codes):
        trial = _run_passes(data, check, unsafe, excluded | {code})
        if not _new_failing(before, check(trial.fixed)[1], check.options):
            return code
    return codes[-1]


def _lines(text: str) -> list[str]:
    """The lines `patch` and `git apply` see: each ended by its LF (a CR before it is part of the
    line). str.splitlines() also ends a line at CR, VT, FF, U+0085 or U+2028, which made the diff
    of a file holding one of them mark "No newline at end of file" in the middle of a hunk."""
    lines = [line + "\n" for line in text.split("\n")]
    last = lines.pop()[:-1]
    if last:
        lines.append(last)
    return lines


def diff_text(before: str, after: str, label: str) -> str:
    """A unified diff as git prints it, marking a last line without newline; the one helper of
    `check --diff`, `plan --diff` and `apply`, and what it returns is safe to print: the label is
    escaped like every name vmtune prints (git quotes such names), the lines like text output
    but for their tabs, carriage returns and newlines (escape.printable_patch), so a C1 control
    or a bidi override in a domain from a pull request cannot reach the CI log or terminal."""
    import difflib

    from vmtune.escape import printable, printable_patch

    shown = printable(label)
    lines = difflib.unified_diff(_lines(before), _lines(after), f"a/{shown}", f"b/{shown}")
    return printable_patch("".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                                   for line in lines))


def unified_diff(outcome: FixOutcome, label: str) -> str:
    return diff_text(outcome.original.decode("utf-8", "replace"), outcome.fixed.decode("utf-8", "replace"), label)
