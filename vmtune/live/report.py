"""Measurements in reports: attach a domain's measured costs to its findings, one-line summaries,
and the `vmtune measure` view (costs first, each linked to the findings that explain it)."""

from __future__ import annotations

from typing import Any

from vmtune.live.measure import DomainMeasure
from vmtune.live.signatures import judge, rank

# The values a summary line shows, in this order, with their unit.
SUMMARY = (("host_cpu_percent", "host CPU", "%"), ("host_cpu_system_percent", "sys", "%"),
           ("outside_vcpu_cpu_percent", "outside vCPUs", "%"), ("vcpu_delay_percent_max", "vCPU delay max", "%"),
           ("exits_per_second", "exits", "/s"), ("io_exits_per_second", "io exits", "/s"),
           ("mmio_exits_per_second", "mmio exits", "/s"), ("pages_4k_percent", "4K-mapped", "%"),
           ("net_drops_per_second", "net drops", "/s"), ("disk_requests_per_second", "disk requests", "/s"),
           ("disk_read_latency_ms", "read", " ms"), ("disk_write_latency_ms", "write", " ms"),
           ("balloon_major_faults_per_second", "major faults", "/s"))


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def measurement_line(m: DomainMeasure) -> str:
    if m.state != "running":
        why = {"stopped": "stopped between the samples", "vanished": "undefined between the samples",
               "not running": "not running"}.get(m.state, m.state)
        return f"measured: nothing ({why})"
    parts = [f"{label} {_number(m.values[key])}{unit}" for key, label, unit in SUMMARY if key in m.values]
    line = f"measured over {m.seconds:.1f} s: " + (", ".join(parts) or "no statistics")
    if m.missing:
        line += "; not exposed by this host: " + "; ".join(m.missing.values())
    return line


def attach(result: Any, m: DomainMeasure | None) -> None:
    """Give a live domain's result its measurement and each finding the verdict of its rule's
    signature; findings are then ordered by measured waste (signatures.rank)."""
    result.measurement = m
    if m is None or m.state != "running":
        return
    by_code: dict[str, Any] = {}  # one verdict per rule: a domain's findings of one rule share it
    for f in result.findings:
        if f.rule.code not in by_code:
            by_code[f.rule.code] = judge(f.rule.code, m.values, m.vcpus, m.missing)
    verdicts = {id(f): by_code[f.rule.code] for f in result.findings}
    result.verdicts = {key: v for key, v in verdicts.items() if v is not None}
    result.findings = rank(result.findings, lambda f: verdicts[id(f)])


def verdict_dict(verdict: Any) -> dict[str, Any]:
    return {"status": verdict.status, "what": verdict.what,
            "values": {k: round(v, 3) for k, v in verdict.values.items()}, "text": verdict.text}


def cost(m: DomainMeasure) -> float:
    """How much a domain costs the host, for `vmtune measure --all`: its host CPU."""
    return m.values.get("host_cpu_percent", 0.0)
