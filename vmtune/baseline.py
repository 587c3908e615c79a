"""Baselines for adopting vmtune on a legacy repo: record today's findings, report only new ones.

Findings are keyed by rule, domain (UUID, else name) and element path, never by line, so
edits elsewhere in a file do not resurrect baselined findings.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from vmtune.errors import VmtuneError
from vmtune.report import identity
from vmtune.report.model import SourceResult

VERSION = 1


def write_baseline(path: Path, identities: list[str]) -> int:
    """Write the baseline; the number of entries (one per distinct finding identity)."""
    counts = Counter(identities)
    entries = []
    for key, count in sorted(counts.items()):
        rule, domain, xpath = key.split("|", 2)
        entries.append({"rule": rule, "domain": domain, "xpath": xpath, "count": count})
    from vmtune.fileio import write_output

    write_output(path, (json.dumps({"version": VERSION, "findings": entries}, indent=2) + "\n").encode(), "baseline")
    return len(entries)


MAX_BASELINE_BYTES = 64 * 1024 * 1024  # ~400,000 findings


class BaselineFilter:
    """Drops findings recorded in a baseline, as many times as it recorded them."""

    def __init__(self, path: Path) -> None:
        from vmtune.inputs import read_bytes

        data = read_bytes(path, str(path), "baseline", MAX_BASELINE_BYTES)
        try:
            document = json.loads(data)
        except ValueError as exc:  # JSONDecodeError says where, never what
            line = getattr(exc, "lineno", None)
            raise VmtuneError("cannot read baseline: not JSON", str(path), line) from None
        except RecursionError:  # '[' nested thousands deep: valid JSON no baseline has
            raise VmtuneError("cannot read baseline: not a vmtune baseline (nested too deeply)", str(path)) from None
        try:
            self.allowed = Counter({f"{e['rule']}|{e['domain']}|{e['xpath']}": _count(e.get("count", 1))
                                    for e in document["findings"]})
        except (ValueError, KeyError, TypeError, AttributeError):
            # Not a baseline vmtune wrote; say so without quoting it (it may be any file).
            raise VmtuneError("cannot read baseline: not a vmtune baseline (written by --write-baseline)",
                              str(path)) from None

    def __call__(self, result: SourceResult) -> None:
        kept = []
        for finding in result.findings:
            key = identity(finding)
            if self.allowed[key] > 0:
                self.allowed[key] -= 1
            else:
                kept.append(finding)
        result.findings = kept


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("count")
    return value
