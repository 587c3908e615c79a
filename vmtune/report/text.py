"""Compiler-style text: `path:line: CODE severity message`, grouped per domain."""

from __future__ import annotations

from vmtune.report.model import Report
from vmtune.rules.base import FixSafety


def render(report: Report, show_fixes: bool = False, unsafe_fixes: bool = False) -> str:
    lines: list[str] = []
    for result in report.results:
        if not result.findings and not (show_fixes and result.applied) and not result.conflicts:
            continue
        lines.append(f"== {result.domain_name} ({result.source})")
        for f in result.findings:
            marker = ""
            if f.fix is not None:
                marker = " [*]" if f.fix.safety is FixSafety.SAFE else " [unsafe fix]"
            where = f"{result.source}:{f.line}" if f.line else f"{result.source}:{f.xpath}"
            lines.append(f"{where}: {f.rule.code} {f.severity} {f.message} "
                         f"({f.rule.name}){marker}")
            if f.note:
                lines.append(f"    note: {f.note}")
        if show_fixes:
            for fix in result.applied:
                lines.append(f"    fixed: {fix.code} {fix.description} [{fix.safety}]")
        for conflict in result.conflicts:
            lines.append(f"    conflict: {conflict.dropped} deferred to {conflict.kept}: {conflict.reason}")
    for source, reason in report.skipped:
        lines.append(f"{source}: skipped: {reason}")
    counts = report.counts()
    total = sum(counts.values())
    fixable_safe = sum(1 for f in report.all_findings() if f.fix and f.fix.safety is FixSafety.SAFE)
    fixable_unsafe = sum(1 for f in report.all_findings() if f.fix and f.fix.safety is FixSafety.UNSAFE)
    applied = sum(len(r.applied) for r in report.results)
    summary = (f"{len(report.results)} domain(s) checked: {total} finding(s) "
               f"({counts['error']} error, {counts['warning']} warning, {counts['info']} info)")
    if applied:
        summary += f"; {applied} fix(es) applied"
    if fixable_safe:
        summary += f"; {fixable_safe} fixable with --fix"
    if fixable_unsafe:
        summary += f"; {fixable_unsafe} more with --unsafe-fixes" if not unsafe_fixes else ""
    lines.append(summary)
    return "\n".join(lines) + "\n"
