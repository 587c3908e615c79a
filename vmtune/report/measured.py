"""How reports write a live domain's measurement (vmtune.live.measure) and a rule's verdict on it
(vmtune.live.signatures): the one-line summary and the verdict's fields. Here, not in vmtune.live,
so that a report's formats never import the live layer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol

    class Measure(Protocol):
        """What a summary reads of a measurement (vmtune.live.measure.DomainMeasure)."""

        state: str
        seconds: float
        values: Mapping[str, float]
        missing: Mapping[str, str]


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


def measurement_line(m: Measure) -> str:
    if m.state != "running":
        why = {"stopped": "stopped between the samples", "vanished": "undefined between the samples",
               "not running": "not running"}.get(m.state, m.state)
        return f"measured: nothing ({why})"
    parts = [f"{label} {_number(m.values[key])}{unit}" for key, label, unit in SUMMARY if key in m.values]
    line = f"measured over {m.seconds:.1f} s: " + (", ".join(parts) or "no statistics")
    if m.missing:
        line += "; not exposed by this host: " + "; ".join(m.missing.values())
    return line


def verdict_dict(verdict: Any) -> dict[str, Any]:
    return {"status": verdict.status, "what": verdict.what,
            "values": {k: round(v, 3) for k, v in verdict.values.items()}, "text": verdict.text}
