"""SARIF 2.1.0 for GitHub code scanning: rules with help text, results with stable fingerprints."""

from __future__ import annotations

import os
from typing import Any

from vmtune import __version__
from vmtune.errors import InputError
from vmtune.fileio import work_tree
from vmtune.report.identify import fingerprint
from vmtune.report.jsonout import dumps
from vmtune.report.model import Report, SourceResult
from vmtune.rules.base import Rule, Severity

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


# What urllib.parse.quote(..., safe="/") leaves as it is: RFC 3986's unreserved characters and "/".
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def percent_encoded(raw: bytes) -> str:
    """urllib.parse.quote(raw, safe="/") without importing urllib.parse and pathlib (with
    ipaddress, ~3 ms of a one-file `-f sarif` run)."""
    return "".join(chr(byte) if byte in _URI_SAFE else f"%{byte:02X}" for byte in raw)


def _uri(path: str) -> str:
    """A relative URI reference: the path's bytes percent-encoded where a URI needs it (spaces,
    newlines, bytes that are not UTF-8), so any file name gives a valid, exact location.
    Relative to the repository's top (or, outside one, the current directory; `../` when the
    file is elsewhere)."""
    absolute = os.path.realpath(path)  # pathlib's resolve() raised RuntimeError on a symlink loop
    relative = os.path.relpath(absolute, work_tree(os.path.dirname(absolute)) or os.getcwd())
    return percent_encoded(os.fsencode(relative.replace(os.sep, "/")))


def _file_uri(result: SourceResult) -> str | None:
    """The checked file's URI; None for a live domain or stdin, which get logical locations."""
    return None if result.host is not None or result.source == "<stdin>" else _uri(result.source)


def _rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "help": {"text": rule.doc, "markdown": rule.doc},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"tags": [rule.category]},
    }


def render(report: Report) -> str:
    rules: list[Rule] = []
    index: dict[str, int] = {}
    results = []
    for result in report.results:
        # Once per file, not per finding: resolving a path and finding its repository stats every parent.
        file_uri = _file_uri(result) if result.findings else None
        for finding in result.findings:
            if finding.rule.code not in index:
                index[finding.rule.code] = len(rules)
                rules.append(finding.rule)
            location: dict[str, Any]
            if file_uri is not None:
                location = {"physicalLocation": {
                    "artifactLocation": {"uri": file_uri},
                    "region": {"startLine": finding.line or 1},
                }}
            else:
                location = {"logicalLocations": [{"name": result.domain_name, "fullyQualifiedName": result.source,
                                                  "kind": "resource"}]}
            results.append({
                "ruleId": finding.rule.code,
                "ruleIndex": index[finding.rule.code],
                "level": LEVELS[finding.severity],
                "message": {"text": finding.message + (f" ({finding.note})" if finding.note else "")},
                "locations": [location],
                "partialFingerprints": {"vmtune/v1": fingerprint(finding)},
            })
            verdict = result.verdict_of(finding)
            if verdict is not None:  # --measure: the statistics' verdict on this finding
                from vmtune.report.measured import verdict_dict

                results[-1]["properties"] = {"measurement": verdict_dict(verdict)}
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "vmtune", "version": __version__, "semanticVersion": __version__,
                                "rules": [_rule(r) for r in rules]}},
            "results": results,
            # SARIF's place for inputs the tool could not analyse: a malformed file is not "clean".
            "invocations": [{
                "executionSuccessful": not report.errors,
                "toolExecutionNotifications": [_notification(e) for e in report.errors],
            }],
        }],
    }
    return dumps(document)


def _notification(error: InputError) -> dict[str, Any]:
    notification: dict[str, Any] = {"level": "error", "message": {"text": error.message}}
    if error.source and error.source != "<stdin>":
        region = {"region": {"startLine": error.line}} if error.line else {}
        notification["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": _uri(error.source)},
                                                           **region}}]
    return notification
