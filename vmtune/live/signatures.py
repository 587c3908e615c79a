"""Which measured statistics confirm a finding: one signature per group of rules, with the
threshold and where it comes from (shown in each rule's documentation under "Measured by
--measure", and in docs/rules.md).

A verdict is one of:
- `measured`: the signature is there, above its threshold; the finding carries the numbers;
- `not seen`: the statistics were exposed and the signature is not in them ("not visible in
  the statistics of this run": an idle guest shows no disk latency, a quiet NIC no drops);
- `not exposed`: this host did not give the statistics the signature needs (no KVM
  statistics under TCG or with libvirt < 8.9 / QEMU < 7.1, no balloon statistics...).

Nothing here imports libvirt: it judges the values of vmtune.live.measure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

Values = dict[str, float]


class Signature(NamedTuple):
    codes: tuple[str, ...]
    group: str  # the statistics it needs: the key of DomainMeasure.missing that says they are absent
    what: str  # what is measured, in the findings' own terms
    needs: tuple[str, ...]  # values of which at least one must be exposed to judge at all
    present: Callable[[Values, int], bool]  # values, vCPUs -> the signature is there
    shown: tuple[str, ...]  # the values a finding carries
    threshold: str
    source: str
    waste: Callable[[Values], float]  # host CPU percent it costs, for ranking (0: not CPU)


def _get(v: Values, key: str) -> float:
    return v.get(key, 0.0)


def _per_vcpu(v: Values, vcpus: int, *keys: str) -> float:
    return sum(_get(v, k) for k in keys) / max(vcpus, 1)


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        ("USB001", "USB002"), "vcpu",
        "host CPU outside the vCPU threads (QEMU's main loop runs the USB frame timer)",
        ("outside_vcpu_cpu_percent",),
        lambda v, n: _get(v, "outside_vcpu_cpu_percent") >= 1.0,
        ("host_cpu_percent", "outside_vcpu_cpu_percent", "vcpu_thread_cpu_percent"),
        "host CPU outside the vCPU threads at or above 1% of one host CPU over the run",
        "vmtune's effect run (docs/effects.md): an idle guest's host CPU fell from 1.9% to 0.3% when the "
        "polled controller went; `tests/test_measure_guest.py` measures 3.2% outside the vCPU thread with a "
        "piix3-uhci and a tablet against 0.3% after vmtune's fix (QEMU 7.2, TCG); 1% sits between",
        lambda v: _get(v, "outside_vcpu_cpu_percent")),
    Signature(
        ("CLK001", "CLK002", "CLK003", "HV001"), "kvm",
        "timer exits: port I/O and MMIO exits per vCPU (ACPI PM timer, HPET, RTC reads)",
        ("io_exits_per_second", "mmio_exits_per_second"),
        lambda v, n: _per_vcpu(v, n, "io_exits_per_second", "mmio_exits_per_second") >= 1000,
        ("host_cpu_percent", "host_cpu_system_percent", "exits_per_second", "io_exits_per_second",
         "mmio_exits_per_second"),
        "port I/O plus MMIO exits at or above 1,000 per second per vCPU",
        "CLK002's incident: an idle Windows 10 at 130% host CPU, mostly sys, with a storm of IO_INSTRUCTION "
        "exits in `perf kvm stat`, and about 7% once synthetic timers were on; an enlightened idle guest "
        "reads its clock from the reference TSC page without exiting, and Windows' timer ticks run at "
        "64-1,000 Hz, so 1,000 clock-device exits a second per vCPU means the guest reads an emulated timer",
        lambda v: _get(v, "host_cpu_system_percent")),
    Signature(
        ("MEM001",), "kvm",
        "the share of guest memory KVM maps with 4 KiB pages (vm.pages_4k/2m/1g)",
        ("pages_4k_percent",),
        lambda v, n: _get(v, "pages_4k_percent") >= 50,
        ("pages_4k_percent",),
        "4 KiB pages map at least half of the guest memory KVM has mapped",
        "KVM's pages_4k/pages_2m/pages_1g statistics count the guest's mappings by page size; with "
        "hugepages or THP backing the guest most of it is 2 MiB or larger",
        lambda v: 0.0),
    Signature(
        ("CPU007", "CPU004", "CPU002", "CPU008"), "delay",
        "vCPU delay: time runnable vCPUs waited for a host CPU (steal)",
        ("vcpu_delay_percent",),
        lambda v, n: _get(v, "vcpu_delay_percent_max") >= 5,
        ("vcpu_delay_percent", "vcpu_delay_percent_max"),
        "a vCPU waited for a host CPU at least 5% of the run (vcpu.N.delay)",
        "vcpu.N.delay is the vCPU thread's run-queue wait (schedstat), what the guest sees as steal time; "
        "a dedicated, pinned vCPU waits close to 0%, and a few percent is where latency-sensitive guests "
        "notice it",
        lambda v: _get(v, "vcpu_delay_percent")),
    Signature(
        ("NET001", "NET007", "NET004", "NET003"), "net",
        "interface drops under load",
        ("net_drops_per_second",),
        lambda v, n: _get(v, "net_drops_per_second") > 0 and _get(v, "net_packets_per_second") >= 1000,
        ("net_packets_per_second", "net_drops_per_second", "net_errors_per_second"),
        "any dropped packet while the interfaces carry at least 1,000 packets a second",
        "a drop at the tap or in the guest's ring is a packet the queue could not take: one queue or 256 "
        "descriptors fill under load first",
        lambda v: 0.0),
    Signature(
        ("DSK002", "DSK003", "DSK008"), "block",
        "time per disk request",
        ("disk_requests_per_second",),
        lambda v, n: _get(v, "disk_requests_per_second") >= 10 and max(
            _get(v, "disk_read_latency_ms"), _get(v, "disk_write_latency_ms")) >= 10,
        ("disk_requests_per_second", "disk_read_latency_ms", "disk_write_latency_ms", "disk_flush_latency_ms"),
        "at least 10 requests a second and a read or write taking 10 ms or more on average",
        "block.N.rd.times/wr.times over rd.reqs/wr.reqs is QEMU's own time per request; local SSD and NVMe "
        "answer in well under 1 ms and a good SAN in a few ms, so 10 ms is queueing in the host's page "
        "cache or one busy thread",
        lambda v: 0.0),
    Signature(
        ("MEM002", "MEM007", "MEM003", "MEM009"), "balloon",
        "guest swap-in and major page faults",
        ("balloon_major_faults_per_second",),
        lambda v, n: _get(v, "balloon_swap_in_kib_per_second") > 0 or _get(v, "balloon_major_faults_per_second")
        >= 10,
        ("balloon_swap_in_kib_per_second", "balloon_major_faults_per_second", "balloon_rss_kib"),
        "any swap-in, or at least 10 major page faults a second in the guest",
        "the balloon driver's own counters (balloon.swap_in, balloon.major_fault): a guest squeezed by the "
        "balloon swaps and faults",
        lambda v: 0.0),
)
BY_CODE: dict[str, Signature] = {code: s for s in SIGNATURES for code in s.codes}
# The fixed parts of a "not exposed" verdict's text, by rule code (judge runs for every finding of --all).
_NOT_EXPOSED = {code: f"this host does not expose {s.what} (" for code, s in BY_CODE.items()}
_NO_NEEDS = {code: f"no {' or '.join(s.needs)} in the statistics" for code, s in BY_CODE.items()}
_UNEXPOSED: dict[tuple[str, str], Verdict] = {}


class Verdict(NamedTuple):
    status: str  # measured | not seen | not exposed
    what: str
    values: Values
    text: str
    waste: float


def judge(code: str, values: Values, vcpus: int, missing: dict[str, str] | None = None) -> Verdict | None:
    """The measurement a finding of `code` carries, or None when no statistic speaks to its rule."""
    sig = BY_CODE.get(code)
    if sig is None:
        return None
    shown = {k: values[k] for k in sig.shown if k in values} if values else {}
    for k in sig.needs:
        if k in values:
            break
    else:
        why = (missing and (missing.get(sig.group) or missing.get("cpu"))) or _NO_NEEDS[code]
        if shown:
            return Verdict("not exposed", sig.what, shown, f"{_NOT_EXPOSED[code]}{why})", 0.0)
        # Nothing to show: the verdict is the same for every domain of the host (no KVM
        # statistics, no balloon...), so --all builds it once. Verdicts are read, never changed.
        verdict = _UNEXPOSED.get((code, why))
        if verdict is None:
            if len(_UNEXPOSED) >= 1024:  # the texts are vmtune's own constants; this never grows far
                _UNEXPOSED.clear()
            verdict = _UNEXPOSED[(code, why)] = Verdict("not exposed", sig.what, {},
                                                        f"{_NOT_EXPOSED[code]}{why})", 0.0)
        return verdict
    numbers = ", ".join(f"{k} {_fmt(v)}" for k, v in shown.items())
    if sig.present(values, vcpus):
        return Verdict("measured", sig.what, shown, f"measured: {numbers}", sig.waste(values))
    return Verdict("not seen", sig.what, shown,
                   f"not visible in the statistics of this run ({numbers}; threshold: {sig.threshold})", 0.0)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def doc_section(code: str) -> str:
    """"## Measured by --measure" for a rule's documentation, or "" when no statistic speaks to it."""
    sig = BY_CODE.get(code)
    if sig is None:
        return ""
    return (f"## Measured by --measure\n{sig.what[0].upper()}{sig.what[1:]}. Confirmed when {sig.threshold} "
            f"({', '.join(f'`{k}`' for k in sig.shown)}); otherwise the finding says \"not visible in the statistics "
            f"of this run\", or which statistics this host does not expose. Basis: {sig.source}.\n")


def rank(items: list[Any], verdict_of: Callable[[Any], Verdict | None]) -> list[Any]:
    """Findings by measured waste: those whose signature was measured first (most host CPU first,
    then in their order), the others after them in their original order."""
    measured = []
    for position, item in enumerate(items):
        verdict = verdict_of(item)
        if verdict is not None and verdict.status == "measured":
            measured.append((-verdict.waste, position, item))
    if not measured:
        return items
    first = [item for _, _, item in sorted(measured, key=lambda entry: entry[:2])]
    chosen = {id(item) for item in first}
    return first + [item for item in items if id(item) not in chosen]


RECORDED_TIMER_KEYS = ("io_exits_share_of_exits_percent", "mmio_exits_share_of_exits_percent",
                       "io_exits_per_vcpu_second", "mmio_exits_per_vcpu_second", "system_share_of_host_cpu_percent")


def judge_recorded(code: str, values: Values) -> Verdict | None:
    """What one recorded sample (totals since the guest started, not rates) says about a finding:
    for the timer rules the exit mix and the clock-device exits per second of vCPU run time,
    averaged over the guest's life; the other signatures need a rate and are not judged."""
    sig = BY_CODE.get(code)
    if sig is None:
        return None
    if code not in ("CLK001", "CLK002", "CLK003", "HV001"):
        return Verdict("not judged", sig.what, {}, "one recorded sample gives totals, not the rates this rule's "
                       "signature needs", 0.0)
    shown = {k: values[k] for k in RECORDED_TIMER_KEYS if k in values}
    if not any(k.startswith(("io_", "mmio_")) for k in shown):
        return Verdict("not exposed", sig.what, shown, "the recorded statistics have no io_exits or mmio_exits", 0.0)
    numbers = ", ".join(f"{k} {_fmt(v)}" for k, v in shown.items())
    return Verdict("recorded", sig.what, shown, f"recorded totals since the guest started (one sample, not a "
                   f"rate): {numbers}; a rate needs two samples (--measure)", 0.0)
