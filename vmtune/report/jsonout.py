"""JSON output: a stable contract (see docs/output.md)."""

from __future__ import annotations

from typing import Any

from vmtune import __version__
from vmtune.escape import json_uncommanded, unicode_clean
from vmtune.report.model import Report

try:  # the C escaper json.dumps uses, without the json package's decoder and scanner (~1.8 ms a start)
    from _json import encode_basestring_ascii as _quote
except ImportError:  # an interpreter without CPython's accelerator: the same escaper, in Python
    from json.encoder import encode_basestring_ascii as _quote

SCHEMA_VERSION = 1
_INFINITY = float("inf")


def render(report: Report, statistics: bool = False) -> str:
    return dumps(document(report, statistics))


def document(report: Report, statistics: bool = False) -> dict[str, Any]:
    """The JSON document as data (the HTML report renders the same fields)."""
    findings: list[dict[str, Any]] = []
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
            if result.measurement is not None:  # --measure only: other documents keep their fields
                verdict = result.verdict_of(f)
                findings[-1]["measurement"] = _verdict(verdict) if verdict is not None else None
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
    measured = [r.measurement.as_dict() | {"host": r.host} for r in report.results if r.measurement is not None]
    if measured:  # --measure: each domain's measured costs (docs/output.md)
        doc["measurements"] = measured
    if statistics:  # --statistics: findings per rule, most frequent first, as the text report lists them
        doc["statistics"] = [
            {"rule": code, "name": report.tally.rule_names.get(code, ""), "count": count,
             "fixable": report.tally.fixable_by_rule.get(code, 0)}
            for code, count in sorted(report.tally.by_rule.items(), key=lambda item: (-item[1], item[0]))
        ]
    return doc


def _verdict(verdict: Any) -> dict[str, Any]:
    from vmtune.report.measured import verdict_dict

    return verdict_dict(verdict)


def dumps(document: object) -> str:
    """`json.dumps(document, indent=2)` plus a newline, byte for byte, with every string valid
    Unicode: a file name's undecodable bytes (lone surrogates, which strict parsers reject even as
    \\udcxx escapes) shown as \\xNN; and a string's `##[` written `\\u0023#[`, the same value to
    a parser and no command to a CI runner reading the log (escape.json_uncommanded).

    Written out here because json.dumps with an indent runs the standard library's pure-Python
    encoder, whose nested generators pass every piece through each level above it: a hostile
    domain's 16,000 findings took 2.6 s as JSON and 4.5 s as SARIF. This appends each piece once
    and leaves string escaping to the same C function json uses."""
    out: list[str] = []
    _encode(document, "\n", out)
    out.append("\n")
    return json_uncommanded("".join(out))  # printed to a CI log, a name's `##[` would be a command


def _encode(value: object, newline: str, out: list[str]) -> None:
    """Append `value` as JSON; `newline` is a newline plus the indent of the current level."""
    if isinstance(value, str):
        out.append(_quote(unicode_clean(value)))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            name = _KEYS.get(key) if isinstance(key, str) else None
            if name is None:
                name = _quote(unicode_clean(_key(key)))
            if isinstance(item, str):  # most values: one piece, no call
                out.append(f"{separator}{name}: {_quote(unicode_clean(item))}")
            elif item is None or isinstance(item, bool | int):  # the other fields of a finding
                out.append(f"{separator}{name}: {_scalar(item)}")
            else:
                out.append(f"{separator}{name}: ")
                _encode(item, inner, out)
            separator = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            out.append(separator)
            _encode(item, inner, out)
            separator = "," + inner
        out.append(newline + "]")
    else:
        out.append(_scalar(value))


# The document's own field names, quoted once (a finding has 16, each written for every finding).
_KEYS = {key: _quote(key) for key in (
    "rule", "name", "severity", "category", "domain", "uuid", "file", "source", "host", "line", "xpath",
    "message", "note", "fixable", "fix_safety", "fix", "description", "safety", "reason")}


def _key(key: object) -> str:
    return key if isinstance(key, str) else _scalar(key)  # json.dumps turns 1, 1.5, True, None into text


def _scalar(value: object) -> str:
    """What json.dumps writes for None, booleans and numbers (NaN and infinities as it writes them)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (_INFINITY, -_INFINITY):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
