"""Compiler-style text: `path:line: CODE severity message`, grouped per domain.

Everything that came from input (names, paths, messages quoting attribute values) passes
vmtune.escape.printable on its way into a line: a newline or ESC in a domain name is shown
as \n or \x1b, never a forged line or a terminal sequence; a zero-width space as \u200b;
a CI runner's command as \x23#[ or, where a line starts, \x3a: (never `##[`, never `::`).
"""

from __future__ import annotations

from vmtune.escape import printable as _p
from vmtune.report.model import LABELS, Report, SourceResult, Tally
from vmtune.rules.base import FixSafety

_COLORS = {"error": "\033[1;31m", "warning": "\033[33m", "info": "\033[36m"}
_BOLD, _RESET = "\033[1m", "\033[0m"


# A finding's message and note as printed, by their text: the same few texts recur across a run's
# findings (1,000 manifests: 3,692 findings, 134 distinct messages and notes, ~0.8 M characters),
# and escaping one reads every character (str.isprintable, ~24 instructions each) where a lookup
# hashes it (~2). Emptied when full: the texts come from the inputs.
_SHOWN: dict[str, str] = {}
_SHOWN_MAX = 4096


def _shown(text: str) -> str:
    shown = _SHOWN.get(text)
    if shown is None:
        if len(_SHOWN) >= _SHOWN_MAX:
            _SHOWN.clear()
        shown = _SHOWN[text] = _p(text)
    return shown


def _paint(text: str, code: str, color: bool) -> str:
    return f"{code}{text}{_RESET}" if color else text


def render_result(result: SourceResult, show_fixes: bool = False, dry_run: bool = False, color: bool = False) -> str:
    if not (result.findings or (show_fixes and result.applied) or result.conflicts or result.pending_restart
            or result.measurement is not None):
        return ""
    source = _p(result.source)
    lines = [f"== {_p(result.domain_name)} ({source})"]
    costs: dict[str, str] = {}  # a measured cost -> the first finding that carries it (one cost, several rules)
    # Read once per result, not per finding: every finding of every file passes here (a third of
    # this function's instructions on corpus-2000 went to _paint and verdict_of calls that, without
    # colour or --measure, return what they were given).
    fail_on, measured = result.fail_on, bool(result.verdicts)
    for f in result.findings:
        rule, its_fix = f.rule, f.fix
        if its_fix is None:
            marker = ""
        elif its_fix.safety is not FixSafety.SAFE:
            marker = " [unsafe fix]"
        else:
            # [*]: a bare --fix applies it; a suggestion's fix needs its rule named with --select
            marker = " [*]" if f.severity >= fail_on else f" [fix: --select {rule.code}]"
        line = f.line  # an lxml sourceline lookup for a finding still on its tree: read once
        where = f"{source}:{line}" if line else f"{source}:{_p(f.xpath)}"
        label = LABELS[f.severity]
        if color:
            lines.append(f"{where}: {_paint(rule.code, _BOLD, color)} {_paint(label, _COLORS[label], color)} "
                         f"{_shown(f.message)} ({rule.name}){marker}")
        else:
            lines.append(f"{where}: {rule.code} {label} {_shown(f.message)} ({rule.name}){marker}")
        if f.note:
            lines.append(f"    note: {_shown(f.note)}")
        verdict = result.verdict_of(f) if measured else None
        if verdict is not None and verdict.status == "measured":
            first = costs.setdefault(verdict.what, f.rule.code)
            shared = "" if first == f.rule.code else f" (the same cost as {first}'s: shared, not added up)"
            lines.append(f"    {verdict.status}: {_p(verdict.text.removeprefix('measured: '))}{shared}")
        elif verdict is not None:
            lines.append(f"    measure: {_p(verdict.text)}")
    if show_fixes:
        for fix in result.applied:
            lines.append(f"    {'would fix' if dry_run else 'fixed'}: {fix.code} {_p(fix.description)} [{fix.safety}]")
    for conflict in result.conflicts:
        lines.append(f"    conflict: {conflict.dropped} deferred to {conflict.kept}: {_p(conflict.reason)}")
    if result.pending_restart:
        codes = ", ".join(sorted({f.rule.code for f in result.pending_restart}))
        lines.append(f"{source}: pending restart: {codes} fixed in the definition, still in the running guest "
                     "(a full shutdown and start applies the fixes; a reboot does not)")
    if result.measurement is not None:
        from vmtune.report.measured import measurement_line

        lines.append(f"{source}: {_p(measurement_line(result.measurement))}")
    return "\n".join(lines) + "\n"


def render_footer(report: Report, unsafe_fixes: bool = False) -> str:
    lines = [f"{_p(source)}: skipped: {_p(reason)}" for source, reason in report.skipped]
    tally = report.tally
    counts = tally.by_severity
    summary = (f"{tally.domains} {report.subject} checked: {sum(counts.values())} finding(s) "
               f"({counts['error']} error, {counts['warning']} warning, {counts['info']} info)")
    if tally.baselined:
        summary += f"; {tally.baselined} more hidden by the baseline"
    if tally.applied and report.dry_run:
        summary += f"; would apply {tally.applied} fix(es)"
    elif tally.applied:
        summary += f"; {tally.applied} fix(es) applied"
    if tally.fixable:
        summary += f"; {_fixable(tally)}"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def _fixable(tally: Tally) -> str:
    """`N fixable: A with --fix, B with --fix --select CODE, ...`: every finding with a fix (the
    `fixable` of JSON, HTML and statistics), split by the command that applies it, so each hint
    does what it says (an unsafe suggestion's fix needs --unsafe-fixes and its rule named)."""
    buckets = ((tally.safe_fixable, ""), (tally.suggested_fixable, " --select CODE"),
               (tally.unsafe_fixable, " --unsafe-fixes"),
               (tally.unsafe_suggested_fixable, " --unsafe-fixes --select CODE"))
    # --fix edits files; a live domain's definition is fixed by `vmtune apply` (check refuses --fix there).
    ways = ", ".join(f"{count} with {_fix_command(tally.domains, tally.live_domains, flags)}"
                     for count, flags in buckets if count)
    return f"{tally.fixable} fixable: {ways}"


def _fix_command(domains: int, live: int, flags: str) -> str:
    """The command that applies a fix: files, live domains, or both in one run."""
    if not live:
        return f"--fix{flags}"
    if live == domains:
        return f"`vmtune apply{flags}`"
    return f"--fix{flags} (files) or `vmtune apply{flags}` (live domains)"


def render(report: Report, show_fixes: bool = False, unsafe_fixes: bool = False) -> str:
    return "".join(render_result(r, show_fixes, report.dry_run) for r in report.results) + \
        render_footer(report, unsafe_fixes)


def render_statistics(report: Report) -> str:
    """--statistics: findings per rule, most frequent first (ruff's layout)."""
    from vmtune.rules import BY_CODE

    rows = sorted(report.tally.by_rule.items(), key=lambda item: (-item[1], item[0]))
    # A policy's custom checks are named by it: printable like any input, though its schema already
    # allows only [a-z0-9-] names and X... codes.
    return "".join(f"{count:>5}  {_p(code):<7} {_p(BY_CODE[code].name) if code in BY_CODE else ''}\n"
                   for code, count in rows)
