"""JSON output: a stable contract (see docs/output.md)."""

from __future__ import annotations

import json
from typing import Any

from vmtune import __version__
from vmtune.escape import unicode_clean
from vmtune.report.model import Report

SCHEMA_VERSION = 1


def render(report: Report, statistics: bool = False) -> str:
    return dumps(document(report, statistics))


def document(report: Report, statistics: bool = False) -> dict[str, Any]:
    """The JSON document as data (the HTML report renders the same fields)."""
    findings = []
    for result in report.results:
        for f in result.findings:
            findings.append({
                "rule": f.rule.code,
                "name": f.rule.name,
                "severity": str(f.severity),
                "category": f.rule.category,
                "domain": result.domain_name,
                "uuid": f.domain.uuid,
                "file": result.source if result.host is None else None,
                "source": result.source,
                "host": result.host,
                "line": f.line,
                "xpath": f.xpath,
                "message": f.message,
                "note": f.note,
                "fixable": f.fix is not None,
                "fix_safety": str(f.fix.safety) if f.fix is not None else None,
                "fix": f.fix.description if f.fix is not None else None,
            })
    counts = report.counts()
    doc: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "tool": {"name": "vmtune", "version": __version__},
        "findings": findings,
        "fixes": [
            {"source": r.source, "domain": r.domain_name, "rule": a.code, "description": a.description,
             "safety": str(a.safety), "xpath": a.xpath}
            for r in report.results for a in r.applied
        ],
        "conflicts": [
            {"source": r.source, "kept": c.kept, "dropped": c.dropped, "reason": c.reason}
            for r in report.results for c in r.conflicts
        ],
        # Live, running guests whose definition no longer has these findings: a restart applies the fixes.
        "pending_restart": [
            {"source": r.source, "domain": r.domain_name, "host": r.host,
             "findings": [{"rule": f.rule.code, "name": f.rule.name, "severity": str(f.severity),
                           "message": f.message} for f in r.pending_restart]}
            for r in report.results if r.pending_restart
        ],
        "skipped": [{"source": s, "reason": why} for s, why in report.skipped],
        # Inputs that could not be checked (malformed XML, unreadable files): exit code 2.
        "errors": [{"source": e.source, "line": e.line, "message": e.message} for e in report.errors],
        "summary": {
            "domains": report.tally.domains,
            "findings": sum(counts.values()),
            **counts,
            "fixable": report.tally.fixable,
            "fixes_applied": report.tally.applied,
            "errors": len(report.errors),
        },
    }
    if statistics:  # --statistics: findings per rule, most frequent first, as the text report lists them
        doc["statistics"] = [
            {"rule": code, "name": report.tally.rule_names.get(code, ""), "count": count,
             "fixable": report.tally.fixable_by_rule.get(code, 0)}
            for code, count in sorted(report.tally.by_rule.items(), key=lambda item: (-item[1], item[0]))
        ]
    return doc


def dumps(document: object) -> str:
    """JSON whose every string is valid Unicode: a file name's undecodable bytes (lone
    surrogates, which strict parsers reject even as \\udcxx escapes) shown as \\xNN."""
    return json.dumps(_clean(document), indent=2) + "\n"


def _clean(value: object) -> object:
    if isinstance(value, str):
        return unicode_clean(value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
