"""`vmtune check` / `vmtune fix` on files (live domains: vmtune.live)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from vmtune.errors import NotADomainError, VmtuneError
from vmtune.report.model import Report, SourceResult
from vmtune.rules.base import Severity

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@dataclass
class CheckRequest:
    paths: list[str]
    fix: bool = False
    diff: bool = False
    unsafe_fixes: bool = False
    show_fixes: bool = False
    output_format: str = "text"
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    fail_on: str = "warning"
    policies: list[str] = field(default_factory=lambda: ["default"])
    host: Path | None = None
    domcaps: Path | None = None
    os_family: str | None = None
    connect: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    all_domains: bool = False


def build_options(request: CheckRequest):  # type: ignore[no-untyped-def]
    from vmtune.engine import CheckOptions
    from vmtune.facts.host import load_host
    from vmtune.policy.load import load_policies

    policy = load_policies(request.policies)
    host = load_host(str(request.host) if request.host else None, str(request.domcaps) if request.domcaps else None)
    for selector in (*request.select, *request.ignore):
        from vmtune.policy.model import selector_matches

        if not any(selector_matches(selector, r) for r in policy.rules):
            raise VmtuneError(f"unknown rule selector '{selector}'")
    return CheckOptions(policy=policy, host=host, os_override=request.os_family,  # type: ignore[arg-type]
                        select=request.select, ignore=request.ignore)


def check_files(request: CheckRequest, options, report: Report) -> None:  # type: ignore[no-untyped-def]
    from vmtune.engine import check_domain
    from vmtune.facts.domain import Domain
    from vmtune.sources import iter_sources
    from vmtune.xml.safe import parse_domain

    for source in iter_sources(request.paths):
        try:
            data = source.read()
            if request.fix or request.diff:
                from vmtune.fileio import write_atomic
                from vmtune.patch.fixer import fix_document, unified_diff

                outcome = fix_document(data, source.name, options, request.unsafe_fixes)
                if outcome.changed and request.diff:
                    sys.stdout.write(unified_diff(outcome, source.name))
                elif outcome.changed and source.path is None:
                    sys.stdout.buffer.write(outcome.fixed)  # stdin --fix: the fixed document on stdout
                elif outcome.changed and source.path is not None:
                    write_atomic(source.path, outcome.fixed)
                report.results.append(SourceResult(source.name, outcome.domain.name, outcome.findings,
                                                   outcome.applied, outcome.conflicts))
            else:
                domain = Domain(parse_domain(data, source.name), source.name, options.os_override)
                report.results.append(SourceResult(source.name, domain.name, check_domain(domain, options)))
        except NotADomainError as exc:
            if source.explicit:
                report.errors.append(str(exc))
            else:
                report.skipped.append((source.name, exc.message))
        except VmtuneError as exc:
            report.errors.append(str(exc))


def emit(report: Report, request: CheckRequest) -> None:
    # With --diff or stdin --fix, stdout carries the patch/document, so the report goes to stderr.
    to_stderr = request.diff or (request.fix and "-" in request.paths)
    stream = sys.stderr if to_stderr else sys.stdout
    if request.output_format == "json":
        from vmtune.report.jsonout import render as render_json

        stream.write(render_json(report))
    else:
        from vmtune.report.text import render as render_text

        stream.write(render_text(report, request.show_fixes, request.unsafe_fixes))
    for error in report.errors:
        print(f"vmtune: {error}", file=sys.stderr)


def run_check(request: CheckRequest) -> int:
    report = Report()
    try:
        options = build_options(request)
        if request.domains or request.all_domains or request.connect:
            from vmtune.live.check import check_live

            check_live(request, options, report)
        if request.paths:
            check_files(request, options, report)
        elif not (request.domains or request.all_domains):
            raise VmtuneError("nothing to check: give files, directories, '-', --domain or --all")
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return EXIT_ERROR
    emit(report, request)
    if report.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if report.failing(Severity.parse(request.fail_on)) else EXIT_CLEAN
