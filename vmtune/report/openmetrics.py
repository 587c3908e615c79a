"""OpenMetrics text (also valid Prometheus text exposition) for node_exporter's textfile
collector: one run's findings as gauges a fleet dashboard can sum and alert on.

    vmtune check --all -f openmetrics -o /var/lib/prometheus/node-exporter/vmtune.prom
    vmtune host -f openmetrics -o /var/lib/prometheus/node-exporter/vmtune-host.prom

One model for both runs, so their files sit side by side in one textfile directory: `check`
writes only `vmtune_check_*` families and `host` only `vmtune_host_*`, so no series is
exported twice. Every series carries `host`, the machine it is about: a live domain's
hypervisor as libvirt names it (getHostname()), otherwise `--metrics-host` or this machine's
name as libvirt would give it. Each finding is counted in exactly one series, so `sum()` over
any label gives the right total; nothing is pre-aggregated.

prometheus_client (the `metrics` extra) builds the exposition: metric and label validation,
escaping, `# EOF`. It is imported only when this format is asked for. The file itself is
written by vmtune's atomic writer like every `-o` report (fsync, mode kept), not by
prometheus_client's write_to_textfile, which writes the classic format without fsync.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.report.model import Report, SourceResult
from vmtune.rules.base import FixSafety

INSTALL_HINT = ("--format openmetrics needs prometheus_client: pip install 'vmtune[metrics]' "
                "(or pip install prometheus-client)")

Labels = tuple[str, ...]


def local_hostname() -> str:
    """This machine's name as libvirt's getHostname() gives it (virGetHostname): the kernel's
    hostname when it is qualified or localhost, else its canonical name from the resolver unless
    that is localhost. A local `check -c qemu:///system` and `vmtune host` then label the same
    host alike."""
    name = socket.gethostname()
    if "." in name or name.startswith("localhost"):
        return name
    try:
        canonical = socket.getaddrinfo(name, None, 0, 0, 0, socket.AI_CANONNAME)[0][3]
    except (OSError, IndexError):
        return name
    return canonical if canonical and not canonical.startswith("localhost") else name


def _utf8(text: str) -> str:
    """Valid UTF-8 whatever the input: a file name's undecodable bytes (surrogate escapes) and
    lone surrogates become U+FFFD, so Prometheus never rejects the whole file over one name."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def _label(text: str) -> str:
    """A label value as the text formats show a name (escape.printable): a domain or manifest
    name is a stranger's, and the exposition is printed in CI logs (`##[error …]` was a GitHub
    command) and on terminals (ESC). prometheus_client escapes only `\\`, `"` and newline, so
    every other control and the runners' `##[` become visible escapes (`\x1b`, `\x23#[`):
    such a name's series no longer joins another exporter's, every other name's does."""
    from vmtune.escape import printable

    text = _utf8(text)
    if text.isprintable() and "##" not in text:
        return text
    return "\n".join(printable(line) for line in text.split("\n"))  # a newline: written \n by the format


def _client() -> tuple[Any, Any, Any]:
    try:
        from prometheus_client import CollectorRegistry
        from prometheus_client.core import GaugeMetricFamily
        from prometheus_client.openmetrics.exposition import generate_latest
    except ImportError:
        raise VmtuneError(INSTALL_HINT) from None
    return CollectorRegistry, GaugeMetricFamily, generate_latest


class Family:
    """A gauge family being filled: samples summed per label set, so two results with the same
    labels (one domain name reached through two URIs of one host) still give one valid series."""

    def __init__(self, name: str, documentation: str, labels: Labels, unit: str = "") -> None:
        self.name, self.documentation, self.labels, self.unit = name, documentation, labels, unit
        self.samples: dict[Labels, float] = {}

    def add(self, values: Iterable[str], value: float = 1) -> None:
        key = tuple(_label(v) for v in values)
        self.samples[key] = self.samples.get(key, 0) + value

    def metric(self, gauge: Any) -> Any:
        # Samples one by one rather than add_metric, whose label names are fixed per family: a
        # live domain's series has no `file` label at all (it was `file=""`, which docs/output.md
        # said did not exist and which a textfile reader that is not Prometheus sees).
        family = gauge(self.name, self.documentation, unit=self.unit)
        for values, value in sorted(self.samples.items()):
            family.add_sample(family.name, {k: v for k, v in zip(self.labels, values, strict=True)
                                            if k != "file" or v}, value)
        return family


def _file(result: SourceResult) -> str:
    # Empty for live domains: Family.metric leaves the label out.
    return result.source if result.host is None else ""


def check_families(report: Report, now: float) -> list[Family]:
    """`vmtune check`: per domain and rule, per host, and the run's own series."""
    run_host = report.metrics_host or local_hostname()
    findings = Family("vmtune_check_findings", "Findings of the last vmtune check, per domain, rule and severity.",
                      ("host", "domain", "file", "rule", "name", "severity"))
    fixable = Family("vmtune_check_fixable_findings", "Findings of the last vmtune check that have a fix, per "
                     "domain and safety of the fix (safe: --fix or apply; unsafe: --unsafe-fixes).",
                     ("host", "domain", "file", "safety"))
    pending = Family("vmtune_check_pending_restart_findings", "Findings fixed in a live domain's persistent "
                     "definition but still present in the running guest: a full shutdown and start applies them. "
                     "One series per live domain checked (0: nothing pending).", ("host", "domain"))
    domains = Family("vmtune_check_domains", "Domains the last vmtune check checked, per host.", ("host",))
    errors = Family("vmtune_check_input_errors", "Inputs the last vmtune check could not check (malformed files, "
                    "unreachable hosts), on the host that ran it.", ("host",))
    last = Family("vmtune_check_last_run_timestamp_seconds", "When the last vmtune check finished, on the host "
                  "that ran it, in seconds since the epoch.", ("host",), unit="seconds")
    # --measure: per finding the verdict of its rule's signature (status: measured, not seen, not
    # exposed), and per domain the measured values; both label sets are bounded (rule codes, the
    # four statuses, vmtune's fixed list of value names).
    verdicts = Family("vmtune_check_finding_measurement", "With --measure: 1 per finding and the verdict of the "
                      "statistics on it (measured, not seen, not exposed).", ("host", "domain", "rule", "status"))
    values = Family("vmtune_check_measured", "With --measure: what the domain cost over the run, per measured "
                    "value (percent of one host CPU, per second, ms per request).", ("host", "domain", "value"))
    for result in report.results:
        # A live domain is on its hypervisor; a file is about the run's host (--metrics-host).
        host = result.hostname if result.host is not None and result.hostname else run_host
        where = (host, result.domain_name, _file(result))
        domains.add((host,))
        for finding in result.findings:
            findings.add((*where, finding.rule.code, finding.rule.name, str(finding.severity)))
            if finding.fix is not None:
                fixable.add((*where, "safe" if finding.fix.safety is FixSafety.SAFE else "unsafe"))
        if result.host is not None:
            pending.add((host, result.domain_name), len(result.pending_restart))
        for finding in result.findings:
            verdict = result.verdict_of(finding)
            if verdict is not None:
                verdicts.add((host, result.domain_name, finding.rule.code, verdict.status))
        if result.measurement is not None:
            for name, value in result.measurement.values.items():
                values.add((host, result.domain_name, name), round(value, 3))
    if not domains.samples:
        domains.add((run_host,), 0)
    errors.add((run_host,), len(report.errors))
    last.add((run_host,), round(now, 3))
    families = [findings, fixable, pending, domains, errors, last]
    return families + [family for family in (verdicts, values) if family.samples]


def host_families(report: Report, now: float) -> list[Family]:
    """`vmtune host`: the host rules' findings, and the run's timestamp."""
    host = report.metrics_host or local_hostname()
    findings = Family("vmtune_host_findings", "Findings of the last vmtune host (the hypervisor's own KVM and "
                      "kernel settings), per rule and severity.", ("host", "rule", "name", "severity"))
    for result in report.results:
        for finding in result.findings:
            findings.add((host, finding.rule.code, finding.rule.name, str(finding.severity)))
    last = Family("vmtune_host_last_run_timestamp_seconds", "When the last vmtune host finished, in seconds "
                  "since the epoch.", ("host",), unit="seconds")
    last.add((host,), round(now, 3))
    return [findings, last]


def render(report: Report, now: float | None = None) -> str:
    registry_class, gauge, generate_latest = _client()
    stamp = time.time() if now is None else now
    families = host_families(report, stamp) if report.subject == "host(s)" else check_families(report, stamp)

    class Collector:
        def collect(self) -> Iterator[Any]:
            for family in families:
                yield family.metric(gauge)

    registry = registry_class(auto_describe=False)
    registry.register(Collector())
    return str(generate_latest(registry).decode("utf-8"))
