"""Turning findings into text, JSON, SARIF, GitHub annotations and JUnit XML."""

from __future__ import annotations

from vmtune.report.model import Report

FORMATS = ("text", "json", "sarif", "github", "junit", "openmetrics", "html")


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
