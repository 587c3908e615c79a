"""`vmtune host`: the host rules over sysfs and /proc, reported like domain findings."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from vmtune.errors import VmtuneError
from vmtune.host.system import HostSystem
from vmtune.policy.model import selector_matches
from vmtune.report import render
from vmtune.report.model import Report, SourceResult
from vmtune.rules.base import Severity
from vmtune.rules.hostrules import HOST_RULES


def run_host(root: Path, output_format: str, fail_on: str, ignore: list[str], output_file: Path | None = None,
             metrics_host: str | None = None) -> int:
    if not os.path.isdir(root):
        # Nothing to read is not a healthy host: a mistyped --root used to report 0 findings (exit 0).
        print(f"vmtune: {VmtuneError('not a directory: no host root to read', str(root))}", file=sys.stderr)
        return 2
    system = HostSystem.read(root)
    findings = [f for rule in HOST_RULES if not any(selector_matches(s, rule) for s in ignore)
                for f in rule.check_host(system)]
    label = socket.gethostname() if str(root) == "/" else str(root)
    report = Report(subject="host(s)", metrics_host=metrics_host)
    report.add(SourceResult(label, "(host)", list(findings), host=label, fail_on=Severity.parse(fail_on)))
    try:
        text = render(output_format, report)
        if output_file is None:
            sys.stdout.write(text)
        else:
            from vmtune.fileio import write_output

            write_output(output_file, text.encode("utf-8"), "report")
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return 2
    return 1 if report.failing() else 0
