"""Measurements in reports: attach a domain's measured costs to its findings, one-line summaries,
and the `vmtune measure` view (costs first, each linked to the findings that explain it)."""

from __future__ import annotations

from typing import Any

from vmtune.live.measure import DomainMeasure
from vmtune.live.signatures import BY_CODE, judge, rank

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
    # One pass (`--all` runs this for every domain): findings of rules no signature speaks to
    # get no verdict and cost one lookup; a domain's findings of one rule share one verdict.
    by_code: dict[str, Any] = {}
    verdicts: dict[int, Any] = {}
    ranked = False
    for f in result.findings:
        code = f.rule.code
        if code not in BY_CODE:
            continue
        verdict: Any = by_code.get(code)
        if verdict is None:  # judge() gives every code of BY_CODE a verdict
            verdict = by_code[code] = judge(code, m.values, m.vcpus, m.missing)
        verdicts[id(f)] = verdict
        ranked = ranked or verdict.status == "measured"
    result.verdicts = verdicts
    if ranked:  # rank() keeps the order as it is when no signature was measured
        result.findings = rank(result.findings, lambda f: verdicts.get(id(f)))


def verdict_dict(verdict: Any) -> dict[str, Any]:
    return {"status": verdict.status, "what": verdict.what,
            "values": {k: round(v, 3) for k, v in verdict.values.items()}, "text": verdict.text}


def cost(m: DomainMeasure) -> float:
    """How much a domain costs the host, for `vmtune measure --all`: its host CPU."""
    return m.values.get("host_cpu_percent", 0.0)
