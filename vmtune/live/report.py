"""Measurements in reports: attach a domain's measured costs to its findings, one-line summaries,
and the `vmtune measure` view (costs first, each linked to the findings that explain it)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from vmtune.live.measure import NOTHING_EXPOSED, DomainMeasure
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
    """Give a live domain's result its measurement and each of its rules the verdict of the rule's
    signature; findings are then ordered by measured waste (signatures.rank)."""
    result.measurement = m
    if m is None or m.state != "running":
        return
    # Per rule, not per finding (`--all` runs this for every domain): a verdict depends on the
    # rule and the measurement only. Rules no signature speaks to get none.
    if m.exposed_nothing:  # a host that exposes nothing: every such domain shares one read-only table
        result.verdicts = _nothing_measured()
        return
    verdicts: dict[str, Any] = {}
    ranked = False
    for f in result.findings:
        code = f.rule.code
        if code in verdicts or code not in BY_CODE:
            continue
        verdict = judge(code, m.values, m.vcpus, m.missing)
        if verdict is not None:  # always, for a code of BY_CODE
            verdicts[code] = verdict
            ranked = ranked or verdict.status == "measured"
    result.verdicts = verdicts
    if ranked:  # rank() keeps the order as it is when no signature was measured
        result.findings = rank(result.findings, result.verdict_of)


_NOTHING_MEASURED: dict[str, Any] = {}


def _nothing_measured() -> Mapping[str, Any]:
    """Every signature's verdict on a measurement with no values and NOTHING_EXPOSED missing (the
    same on every such domain: judge() reads neither the domain nor its vCPUs without values).
    Verdicts are looked up by a finding's rule, so the table serves every domain as it is."""
    if not _NOTHING_MEASURED:
        _NOTHING_MEASURED.update({code: judge(code, {}, 0, NOTHING_EXPOSED) for code in BY_CODE})
    return _NOTHING_VIEW


_NOTHING_VIEW = MappingProxyType(_NOTHING_MEASURED)


def verdict_dict(verdict: Any) -> dict[str, Any]:
    return {"status": verdict.status, "what": verdict.what,
            "values": {k: round(v, 3) for k, v in verdict.values.items()}, "text": verdict.text}


def cost(m: DomainMeasure) -> float:
    """How much a domain costs the host, for `vmtune measure --all`: its host CPU."""
    return m.values.get("host_cpu_percent", 0.0)
