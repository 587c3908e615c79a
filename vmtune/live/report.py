"""Measurements in reports: attach a domain's measured costs to its findings, and rank domains by
what they cost for the `vmtune measure` view (how a report writes them: vmtune.report.measured)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from vmtune.live.measure import NOTHING_EXPOSED, DomainMeasure
from vmtune.live.signatures import BY_CODE, judge, rank
from vmtune.report.measured import measurement_line


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


def shared_costs(explained: list[tuple[Any, Any]]) -> dict[str, list[tuple[Any, Any]]]:
    """(finding, verdict) pairs whose signature was measured, grouped by the cost they measure:
    one signature speaks for several rules (USB001 and USB002, the timer rules), and its cost is
    the guest's once, whichever of them explain it. In the findings' order."""
    groups: dict[str, list[tuple[Any, Any]]] = {}
    for finding, verdict in explained:
        if verdict.status == "measured":
            groups.setdefault(verdict.what, []).append((finding, verdict))
    return groups


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def measure_lines(result: Any) -> list[str]:
    """`vmtune measure`'s text for one domain: its measurement, then each measured cost once with
    the findings that explain it (one cost several rules explain is said to be shared), then the
    verdicts of the other findings."""
    from vmtune.escape import printable  # a name on its line: a newline in it cannot start another

    lines = [f"== {printable(result.domain_name)}: {measurement_line(result.measurement)}"]
    explained = [(f, result.verdicts[f.rule.code]) for f in result.findings if f.rule.code in result.verdicts]
    for what, group in shared_costs(explained).items():
        lines.append(f"  {what}: {group[0][1].text.removeprefix('measured: ')}")
        lines += [f"    explained by {f.rule.code} ({f.rule.name}): {printable(f.message)}" for f, _ in group]
        codes = sorted({f.rule.code for f, _ in group})
        if len(codes) > 1:
            lines.append(f"    one cost, shared by {_and(codes)}: not added up (their fixes remove it once)")
    lines += [f"  {f.rule.code} ({f.rule.name}): {verdict.text}" for f, verdict in explained
              if verdict.status != "measured"]
    if result.measurement.state == "running" and not any(v.status == "measured" for _, v in explained):
        lines.append("  no finding's signature is in the statistics of this run")
    return lines


def cost(m: DomainMeasure) -> float:
    """How much a domain costs the host, for `vmtune measure --all`: its host CPU."""
    return m.values.get("host_cpu_percent", 0.0)


def _stored_number(value: Any) -> float | None:
    """A number from a stored measurement (vmtune's own file, still checked: finite, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _stored_spread(measurement: dict[str, Any], key: str) -> tuple[float, float] | None:
    found = (measurement.get("spread") or {}).get(key) if isinstance(measurement.get("spread"), dict) else None
    if not isinstance(found, list) or len(found) != 2:
        return None
    low, high = _stored_number(found[0]), _stored_number(found[1])
    return (low, high) if low is not None and high is not None and low <= high else None


def _change(a: float, b: float) -> str:
    return f"{(b - a) / a * 100:+.0f}%" if a else f"{b - a:+.3f}"


def compared(a: float, b: float, before: tuple[float, float] | None, after: tuple[float, float] | None) -> str:
    """What a before/after pair says: a change only when the ranges the values took over their
    intervals do not overlap (a value without a spread is its own range); with no spread on
    either side the change is shown as it is, with that said."""
    if before is None and after is None:
        return f"{_change(a, b)} (spread not measured: one interval each)"
    low_a, high_a = before or (a, a)
    low_b, high_b = after or (b, b)
    if low_b <= high_a and low_a <= high_b:
        return "no change beyond noise"
    return _change(a, b)


def comparison(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Before and after side by side: every value both runs measured, each with its spread (the
    lowest and highest over the intervals, in parentheses) and whether it changed beyond it."""
    old, new = before.get("values"), after.get("values")
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    lines = []
    counts = [int(n) for m in (before, after) if (n := _stored_number(m.get("intervals"))) is not None]
    if counts:
        each = f"{counts[0]} intervals each" if counts == [counts[0]] * 2 else \
            " and ".join(f"{n} intervals {when}" for n, when in zip(counts, ("before", "after"), strict=False))
        lines.append(f"  (in parentheses: the lowest and highest over {each}; a difference within them is no change)")
    for key in [k for k in old if k in new]:
        a, b = _stored_number(old[key]), _stored_number(new[key])
        if a is None or b is None:
            continue
        ranges = _stored_spread(before, key), _stored_spread(after, key)
        # A value constant over its intervals (an instant one, or nothing happened) shows no range.
        shown = [f"{value:.3f}" + (f" ({r[0]:.3f}-{r[1]:.3f})" if r and r[0] < r[1] else "")
                 for value, r in zip((a, b), ranges, strict=True)]
        lines.append(f"  {key:<34} {shown[0]:>26} -> {shown[1]:<26} {compared(a, b, *ranges)}")
    return lines
