"""Turning findings into text, JSON, SARIF, GitHub annotations and JUnit XML."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmtune.report.model import Report
from vmtune.rules.base import Finding

FORMATS = ("text", "json", "sarif", "github", "junit", "openmetrics", "html")


def identity(finding: Finding) -> str:
    """What a finding is about, without line numbers: rule, domain (UUID or name), element path."""
    domain = finding.domain.uuid or finding.domain.name
    return f"{finding.rule.code}|{domain}|{finding.xpath}"


def fingerprint(finding: Finding) -> str:
    global _sha256
    if _sha256 is None:
        _sha256 = _builtin_sha256()
    return _sha256(identity(finding).encode()).hexdigest()[:32]


_sha256: Callable[[bytes], Any] | None = None


def _builtin_sha256() -> Callable[[bytes], Any]:
    """SHA-256 from CPython's built-in module: `import hashlib` loads OpenSSL (~3.5 ms, a tenth
    of a one-file `check -f sarif`) for the same digest; hashlib where the module is missing.
    Not at the top: the text report does not need it."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef]  # Python 3.11
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment]
    return sha256  # type: ignore[no-any-return]


def render(fmt: str, report: Report, show_fixes: bool = False, unsafe_fixes: bool = False,
           statistics: bool = False) -> str:
    if fmt == "json":
        from vmtune.report.jsonout import render as render_json

        return render_json(report, statistics)
    if fmt == "html":
        from vmtune.report.html import render as render_html

        return render_html(report)
    if fmt == "sarif":
        from vmtune.report.sarif import render as render_sarif

        return render_sarif(report)
    if fmt == "github":
        from vmtune.report.github import render as render_github

        return render_github(report)
    if fmt == "openmetrics":
        from vmtune.report.openmetrics import render as render_openmetrics

        return render_openmetrics(report)
    if fmt == "junit":
        from vmtune.report.junit import render as render_junit

        return render_junit(report)
    from vmtune.report.text import render as render_text

    return render_text(report, show_fixes, unsafe_fixes)
