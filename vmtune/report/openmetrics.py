"""OpenMetrics text (also valid Prometheus text exposition) for node_exporter's textfile
collector: one run's findings as gauges a fleet dashboard can sum and alert on.

    vmtune check --all -f openmetrics -o /var/lib/node_exporter/textfile/vmtune.prom

`-o` writes atomically (temp file and rename), so the collector never reads half a file.
"""

from __future__ import annotations

import time
from collections import Counter

from vmtune.report.model import Report
from vmtune.rules.base import FixSafety


def _label(value: str) -> str:
    """A label value: backslash, double quote and newline escaped (both formats agree on these)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{key}="{_label(value)}"' for key, value in pairs.items()) + "}"


def render(report: Report, now: float | None = None) -> str:
    by_finding: Counter[tuple[str, str, str, str, str, str]] = Counter()
    fixable: Counter[tuple[str, str]] = Counter()
    for result in report.results:
        host = result.host or ""
        for finding in result.findings:
            by_finding[(host, result.domain_name, result.source, finding.rule.code, finding.rule.name,
                        str(finding.severity))] += 1
            if finding.fix is not None:
                fixable[(host, "safe" if finding.fix.safety is FixSafety.SAFE else "unsafe")] += 1
    lines = [
        "# HELP vmtune_findings Findings of the last vmtune run, by domain, rule and severity.",
        "# TYPE vmtune_findings gauge",
    ]
    for (host, domain, source, code, name, severity), count in sorted(by_finding.items()):
        labels = {"host": host, "domain": domain, "source": source, "rule": code, "name": name,
                  "severity": severity}
        lines.append(f"vmtune_findings{_labels(labels)} {count}")
    lines += [
        "# HELP vmtune_findings_by_severity Findings of the last run per severity.",
        "# TYPE vmtune_findings_by_severity gauge",
    ]
    lines += [f'vmtune_findings_by_severity{{severity="{severity}"}} {count}'
              for severity, count in sorted(report.counts().items())]
    lines += [
        "# HELP vmtune_fixable_findings Findings with a fix, by the safety of the fix.",
        "# TYPE vmtune_fixable_findings gauge",
    ]
    lines += [f"vmtune_fixable_findings{_labels({'host': host, 'safety': safety})} {count}"
              for (host, safety), count in sorted(fixable.items())]
    lines += [
        f"# HELP vmtune_{report.subject.removesuffix('(s)')}s_checked What the last run checked.",
        f"# TYPE vmtune_{report.subject.removesuffix('(s)')}s_checked gauge",
        f"vmtune_{report.subject.removesuffix('(s)')}s_checked {report.tally.domains}",
        "# HELP vmtune_input_errors Inputs the last run could not check (malformed, unreachable).",
        "# TYPE vmtune_input_errors gauge",
        f"vmtune_input_errors {len(report.errors)}",
        "# HELP vmtune_last_run_timestamp_seconds When the last run finished, in seconds since the epoch.",
        "# TYPE vmtune_last_run_timestamp_seconds gauge",
        f"vmtune_last_run_timestamp_seconds {time.time() if now is None else now:.3f}",
        "# EOF",
    ]
    return "\n".join(lines) + "\n"
