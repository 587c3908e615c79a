"""Measurements in reports: attach a domain's measured costs to its findings, and rank domains by
what they cost for the `vmtune measure` view (how a report writes them: vmtune.report.measured)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from vmtune.live.measure import NOTHING_EXPOSED, DomainMeasure
from vmtune.live.signatures import BY_CODE, judge, rank


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


def cost(m: DomainMeasure) -> float:
    """How much a domain costs the host, for `vmtune measure --all`: its host CPU."""
    return m.values.get("host_cpu_percent", 0.0)
