"""`--measure`: what a running domain costs, from libvirt's domain statistics (`virsh domstats`).

Two samples of virConnectGetAllDomainStats (one bulk call per connection for `--all`,
virDomainListGetStats for named domains), each with a monotonic timestamp, give rates over
the interval: host CPU (cpu.time, user/system), the vCPU threads' share of it (vcpu.N.time),
vCPU run-queue delay (vcpu.N.delay, steal as the host sees it), halt polling
(cpu.haltpoll.*), the KVM statistics libvirt 8.9+ with QEMU 7.1+ passes on per vCPU
(vcpu.N.exits.sum, io_exits, mmio_exits, halt_exits, insn_emulation...) and per VM
(vm.pages_4k.cur, vm.remote_tlb_flush.sum...), the balloon's guest counters, and per
interface and disk counters (drops, requests, time per request).

Read-only: the statistics are what libvirt already keeps; nothing runs in the guest. Every
call is bounded by a timeout (a hung daemon is one line, exit 2), and a domain that stops or
vanishes between the samples is reported as such, never a traceback.

`rates()` and `totals()` are pure: they take the statistics dictionaries libvirt returns (or
that `parse_domstats` reads from recorded `virsh domstats` text) and never touch libvirt.
A value libvirt did not give is absent, never 0: what the host does not expose is said, not
invented.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from itertools import pairwise
from typing import Any

from vmtune.live.connection import bounded

DEFAULT_SECONDS = 5.0
# `apply --measure`: samples of the before and of the after, evenly spaced over the window, so
# that a comparison knows each value's spread (an idle guest's vCPU delay moves tenfold between
# seconds) and calls a difference a change only beyond it.
COMPARE_INTERVALS = 5
MAX_SECONDS = 3600.0
NS = 1e9

# KVM's per-vCPU counters that signatures read (summed over vCPUs, per second of the interval).
KVM_VCPU_COUNTERS = ("exits", "io_exits", "mmio_exits", "halt_exits", "insn_emulation", "irq_window_exits",
                     "hypercalls", "signal_exits")
_KVM_SUFFIXES = tuple(f".{c}.sum" for c in KVM_VCPU_COUNTERS)
_VCPU_KEY = re.compile(r"vcpu\.(\d+)\.(.+)")
_DEVICE_KEY = re.compile(r"(net|block)\.(\d+)\.(.+)")


class Sample:
    """One statistics call: per domain its statistics, by its raw 16-byte UUID; when (monotonic:
    the middle of the call) and when the call returned; and, when asked for, per domain its name
    and UUID as text."""

    __slots__ = ("at", "ended", "names", "stats")

    def __init__(self, at: float, stats: dict[bytes, dict[str, Any]], names: dict[bytes, tuple[str, str]],
                 ended: float | None = None) -> None:
        self.at = at
        self.stats = stats
        self.names = names
        self.ended = at if ended is None else ended


def take(conn: Any, domains: list[Any] | None, label: str, timeout: float | None = None,
         with_names: bool = True) -> Sample:
    """One sample: every running domain of the connection (domains None: one bulk call), or the
    named ones (one call for all of them). A named domain undefined since it was looked up makes
    libvirt refuse the whole list: then the bulk call is made and the missing one is simply absent."""
    from vmtune.live.connection import libvirt_module

    libvirt = libvirt_module()

    def bulk() -> Any:
        # Shut-off domains too: one running in the first sample and shut off in the second is
        # then `stopped`, not `vanished` (their records are a state and nothing else).
        return conn.getAllDomainStats(0, 0)

    def listed() -> Any:
        try:
            return conn.domainListGetStats(domains, 0, 0)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise
            return conn.getAllDomainStats(0, 0)

    at = time.monotonic()
    records = bounded(bulk if domains is None else listed, "cannot read the domain statistics", label, timeout)
    ended = time.monotonic()
    # libvirt-python hands each record over as a fresh dict of its own: kept as it comes, no copy.
    # A domain is known by its UUID (a name can be undefined and defined again between the
    # samples); the raw bytes cost libvirt-python about half what the text does, which only the
    # first sample needs (with the name, for the output). Both are read from the virDomain object
    # the call returned: local, no round trip.
    stats: dict[bytes, dict[str, Any]]
    names: dict[bytes, tuple[str, str]] = {}
    if not with_names:
        stats = {dom.UUID(): values for dom, values in records}
    else:
        stats = {}
        for dom, values in records:
            key = dom.UUID()
            stats[key], names[key] = values, (dom.name(), dom.UUIDString())
    # The middle of the call: a bulk call over 1,000 domains takes a while.
    return Sample((at + ended) / 2, stats, names, ended)


class DomainMeasure:
    """What one domain cost over the interval: `values` by stable name (docs/output.md), only
    those libvirt gave; `missing` says in words what this host did not expose; `state` is
    running, stopped (between the samples) or vanished (undefined between the samples)."""

    __slots__ = ("devices", "exposed_nothing", "intervals", "missing", "name", "seconds", "spread", "state", "uuid",
                 "values", "vcpus")

    def __init__(self, name: str, uuid: str, seconds: float, state: str = "running") -> None:
        self.name, self.uuid, self.seconds, self.state = name, uuid, seconds, state
        self.values: dict[str, float] = {}
        self.missing: dict[str, str] = {}  # group (cpu, vcpu, delay, kvm, balloon, net, block) -> what
        self.devices: dict[str, str] = {}  # which interface or disk a worst-of value is about
        self.vcpus = 0
        # With more than one interval: per value, the lowest and highest it had over the intervals
        # (the noise a comparison must exceed); values with a gap in some interval have none.
        self.intervals = 1
        self.spread: dict[str, tuple[float, float]] = {}
        # The records held none of the statistics rates() reads (missing is NOTHING_EXPOSED): every
        # such measurement gets the same verdicts (live.report.attach).
        self.exposed_nothing = False

    def get(self, key: str) -> float | None:
        return self.values.get(key)

    def as_dict(self) -> dict[str, Any]:
        out = {"domain": self.name, "uuid": self.uuid, "seconds": round(self.seconds, 3), "state": self.state,
               "vcpus": self.vcpus, "values": {k: round(v, 3) for k, v in self.values.items()},
               "devices": dict(self.devices), "not_exposed": list(self.missing.values())}
        if self.intervals > 1:
            out["intervals"] = self.intervals
            out["spread"] = {k: [round(lo, 3), round(hi, 3)] for k, (lo, hi) in self.spread.items()}
        return out


def _num(stats: dict[str, Any], key: str) -> float | None:
    value: Any = stats.get(key)
    kind = type(value)  # exact types: a bool is no counter (and --all runs this ~20 times a domain)
    return float(value) if kind is int or kind is float else None


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    """after - before of a cumulative counter, None when either side lacks it; a counter that
    went back (the guest restarted, or the device was replaced) is no measurement."""
    # _num inlined: --all runs this for every counter of every domain, most of them absent.
    b: Any = after.get(key)
    kind = type(b)
    if kind is not int and kind is not float:
        return None
    a: Any = before.get(key)
    kind = type(a)
    if kind is not int and kind is not float:
        return None
    a, b = float(a), float(b)  # compared as floats, as the values are reported
    return None if b < a else b - a


def vcpu_ids(stats: dict[str, Any]) -> list[int]:
    count = stats.get("vcpu.maximum", stats.get("vcpu.current"))
    if type(count) is int and count < 4096:  # the vCPUs libvirt lists are 0..maximum-1, some offline
        return [i for i in range(count) if f"vcpu.{i}.state" in stats or f"vcpu.{i}.time" in stats]
    if count is None:  # the vcpu group always has vcpu.current and vcpu.maximum: no vCPU statistics
        return []
    return sorted({int(m.group(1)) for k in stats if k.startswith("vcpu.") and (m := _VCPU_KEY.fullmatch(k))})


def devices(stats: dict[str, Any], kind: str) -> dict[int, str]:
    """index -> name of the interfaces (net) or disks (block) a statistics record lists."""
    count = int(_num(stats, f"{kind}.count") or 0)
    return {i: str(stats.get(f"{kind}.{i}.name", f"{kind}{i}")) for i in range(count)}


def has_kvm_stats(stats: dict[str, Any]) -> bool:
    """libvirt 8.9+ with QEMU 7.1+ on KVM pass KVM's binary statistics on (vcpu.N.exits.sum):
    a TCG guest, an older libvirt or QEMU, or another driver has none."""
    # A loop, not any() over a generator (3x slower here): --all asks this of every record.
    for k in stats:  # noqa: SIM110
        if k.endswith(_KVM_SUFFIXES) and k.startswith("vcpu."):
            return True
    return False


def rates(name: str, uuid: str, before: dict[str, Any], after: dict[str, Any], seconds: float) -> DomainMeasure:
    """Rates over `seconds` between two statistics records of one running domain.

    Written for `--all` over a thousand domains: no closures, and each group of statistics is
    looked at only when its keys are there (the values, and the order of `values` and
    `missing`, are what the output shows)."""
    m = DomainMeasure(name, uuid, seconds)
    _fill(m, before, after, exposes_nothing(after))
    return m


def exposes_nothing(stats: dict[str, Any]) -> bool:
    """A record of nothing but the domain's state (the test driver, a driver without these
    statistics): none of the keys rates() reads."""
    return stats.keys().isdisjoint(_GROUP_KEYS) and not has_kvm_stats(stats)


def _fill(m: DomainMeasure, before: dict[str, Any], after: dict[str, Any], bare: bool) -> None:
    """rates() into `m` (its seconds set); `bare`: exposes_nothing(after), which the caller may
    know already."""
    v = m.values
    missing = m.missing
    seconds = m.seconds
    if seconds <= 0:
        missing["cpu"] = "no time passed between the samples"
        return
    if bare:  # what the branches below would say, without walking them
        missing.update(NOTHING_EXPOSED)
        m.exposed_nothing = True
        return
    wall = seconds * NS
    total = _delta(before, after, "cpu.time") if "cpu.time" in after else None
    if total is not None:
        v["host_cpu_percent"] = total / wall * 100
    if "cpu.user" in after:
        d = _delta(before, after, "cpu.user")
        if d is not None:
            v["host_cpu_user_percent"] = d / wall * 100
    if "cpu.system" in after:
        d = _delta(before, after, "cpu.system")
        if d is not None:
            v["host_cpu_system_percent"] = d / wall * 100
    if total is None:
        missing["cpu"] = NO_CPU
    if "vcpu.maximum" in after or "vcpu.current" in after:
        earlier = set(vcpu_ids(before))
        ids = [i for i in vcpu_ids(after) if i in earlier]
    else:  # vcpu_ids() of a record without the vcpu group (no vcpu.maximum or vcpu.current) is []
        ids = []
    m.vcpus = len(ids)
    if ids:
        _vcpus(before, after, ids, wall, total, m)
    else:
        missing["vcpu"] = NO_VCPU
        missing["delay"] = NO_DELAY
    if "cpu.haltpoll.success.time" in after:
        success = _delta(before, after, "cpu.haltpoll.success.time")
        fail = _delta(before, after, "cpu.haltpoll.fail.time")
        if success is not None and fail is not None:
            v["haltpoll_percent"] = (success + fail) / wall * 100
    if has_kvm_stats(after) and has_kvm_stats(before):
        for counter in KVM_VCPU_COUNTERS:
            deltas = [_delta(before, after, f"vcpu.{i}.{counter}.sum") for i in ids]
            if ids and all(d is not None for d in deltas):
                v[f"{counter}_per_second"] = sum(d or 0 for d in deltas) / seconds
        flush = _delta(before, after, "vm.remote_tlb_flush.sum")
        if flush is not None:
            v["remote_tlb_flush_per_second"] = flush / seconds
    else:
        missing["kvm"] = NO_KVM
    if "vm.pages_4k.cur" in after:
        _pages(after, v)
    if "balloon.swap_in" in after or "balloon.major_fault" in after or "balloon.rss" in after:
        _balloon(before, after, seconds, m)
    else:
        missing["balloon"] = NO_BALLOON
    if "net.count" in after:
        _network(before, after, seconds, m)
    else:
        missing["net"] = NO_NET
    if "block.count" in after:
        _disks(before, after, seconds, m)
    else:
        missing["block"] = NO_BLOCK


def _vcpus(before: dict[str, Any], after: dict[str, Any], ids: list[int], wall: float, total: float | None,
           m: DomainMeasure) -> None:
    """The vCPU threads' time and run-queue delay, over the vCPUs of both samples."""
    v = m.values
    times = [_delta(before, after, f"vcpu.{i}.time") for i in ids]
    if all(t is not None for t in times):
        v["vcpu_thread_cpu_percent"] = sum(t or 0 for t in times) / wall * 100
        if total is not None:  # emulator, I/O threads, device models: what runs beside the vCPUs
            v["outside_vcpu_cpu_percent"] = max(0.0, total - sum(t or 0 for t in times)) / wall * 100
    else:
        m.missing["vcpu"] = NO_VCPU
    delays = [_delta(before, after, f"vcpu.{i}.delay") for i in ids]
    if all(d is not None for d in delays):
        shares = [(d or 0) / wall * 100 for d in delays]
        v["vcpu_delay_percent"] = sum(shares) / len(shares)
        v["vcpu_delay_percent_max"] = max(shares)
    else:
        m.missing["delay"] = NO_DELAY


NO_CPU = "host CPU time (cpu.time): this driver does not report it"
NO_VCPU = "per-vCPU time (vcpu.N.time)"
NO_DELAY = "vCPU delay (vcpu.N.delay: libvirt 7.9 or later, with schedstats in the host kernel)"
NO_KVM = ("KVM statistics (exits, io_exits, mmio_exits, pages_4k...): they need KVM (not TCG), "
          "libvirt 8.9 and QEMU 7.1 or later")
NO_NET = "interface counters (net.N.*): no interface, or this driver does not report them"
NO_NET_COUNTERS = "interface counters (net.N.rx/tx): libvirt gave none for"
NO_BLOCK = "disk counters (block.N.*): no disk, or this driver does not report them"
NO_BALLOON = ("the guest's swap and page-fault counters (balloon.swap_in, balloon.major_fault: a virtio balloon "
              "with statistics enabled)")


# The keys whose presence the branches of rates() test: a record with none of them (and no KVM
# statistics) measures nothing, and says so in NOTHING_EXPOSED.
_GROUP_KEYS = frozenset({"cpu.time", "cpu.user", "cpu.system", "vcpu.maximum", "vcpu.current",
                         "cpu.haltpoll.success.time", "vm.pages_4k.cur", "balloon.swap_in", "balloon.major_fault",
                         "balloon.rss", "net.count", "block.count"})
NOTHING_EXPOSED = {"cpu": NO_CPU, "vcpu": NO_VCPU, "delay": NO_DELAY, "kvm": NO_KVM, "balloon": NO_BALLOON,
                   "net": NO_NET, "block": NO_BLOCK}


def _balloon(before: dict[str, Any], after: dict[str, Any], seconds: float, m: DomainMeasure) -> None:
    v = m.values
    swap_in = _delta(before, after, "balloon.swap_in") if "balloon.swap_in" in after else None
    if swap_in is not None:
        v["balloon_swap_in_kib_per_second"] = swap_in / seconds
    faults = _delta(before, after, "balloon.major_fault") if "balloon.major_fault" in after else None
    if faults is not None:
        v["balloon_major_faults_per_second"] = faults / seconds
    if swap_in is None and faults is None:
        m.missing["balloon"] = NO_BALLOON
    rss = _num(after, "balloon.rss")
    if rss is not None:
        v["balloon_rss_kib"] = rss


def _pages(stats: dict[str, Any], v: dict[str, float]) -> None:
    """KVM's count of the guest memory it maps with 4 KiB, 2 MiB and 1 GiB pages (instant values)."""
    if "vm.pages_4k.cur" not in stats:
        return
    small, large, huge = (_num(stats, "vm.pages_4k.cur"), _num(stats, "vm.pages_2m.cur"),
                          _num(stats, "vm.pages_1g.cur"))
    if small is None or large is None:
        return
    mapped = small * 4 + large * 2048 + (huge or 0) * 1024 * 1024  # KiB
    if mapped > 0:
        v["pages_4k_percent"] = small * 4 / mapped * 100


def _network(before: dict[str, Any], after: dict[str, Any], seconds: float, m: DomainMeasure) -> None:
    names = devices(after, "net")
    if before.get("net.count") is None or not names:
        m.missing["net"] = NO_NET
        return
    worst: tuple[float, str] | None = None
    totals = {"packets": 0.0, "drops": 0.0, "errors": 0.0}
    counted, uncounted = 0, []
    for i, ifname in names.items():
        if before.get(f"net.{i}.name") != after.get(f"net.{i}.name"):
            continue  # hot-plugged or replaced between the samples
        rx, tx = _delta(before, after, f"net.{i}.rx.pkts"), _delta(before, after, f"net.{i}.tx.pkts")
        if rx is None and tx is None:
            # libvirt lists the interface but gives no counters for it (user-mode networking has no
            # host device; a failed read is skipped), or they went back: no measurement, not 0.
            uncounted.append(ifname)
            continue
        counted += 1
        packets = (rx or 0) + (tx or 0)
        drops = sum(_delta(before, after, f"net.{i}.{d}.drop") or 0 for d in ("rx", "tx"))
        errors = sum(_delta(before, after, f"net.{i}.{d}.errs") or 0 for d in ("rx", "tx"))
        totals["packets"] += packets
        totals["drops"] += drops
        totals["errors"] += errors
        if worst is None or drops > worst[0]:
            worst = (drops, ifname)
    if uncounted:
        m.missing["net"] = f"{NO_NET_COUNTERS} {', '.join(uncounted)}"
    if not counted:
        return
    m.values["net_packets_per_second"] = totals["packets"] / seconds
    m.values["net_drops_per_second"] = totals["drops"] / seconds
    m.values["net_errors_per_second"] = totals["errors"] / seconds
    if worst is not None and worst[0] > 0:
        m.devices["net"] = worst[1]


def _disks(before: dict[str, Any], after: dict[str, Any], seconds: float, m: DomainMeasure) -> None:
    names = devices(after, "block")
    if before.get("block.count") is None or not names:
        m.missing["block"] = NO_BLOCK
        return
    requests = 0.0
    worst: dict[str, tuple[float, str]] = {}
    for i, disk in names.items():
        if before.get(f"block.{i}.name") != after.get(f"block.{i}.name"):
            continue
        for op, label in (("rd", "read"), ("wr", "write"), ("fl", "flush")):
            reqs = _delta(before, after, f"block.{i}.{op}.reqs")
            spent = _delta(before, after, f"block.{i}.{op}.times")
            if reqs is None:
                continue
            requests += reqs
            if reqs > 0 and spent is not None:
                latency = spent / reqs / 1e6  # ms per request
                if label not in worst or latency > worst[label][0]:
                    worst[label] = (latency, disk)
    m.values["disk_requests_per_second"] = requests / seconds
    for label, (latency, disk) in worst.items():
        m.values[f"disk_{label}_latency_ms"] = latency
        m.devices[f"disk_{label}"] = disk


def totals(name: str, stats: dict[str, Any]) -> DomainMeasure:
    """What one recorded sample can tell without a second one: ratios of totals since the guest
    started, never rates (seconds is 0). The exit mix (io_exits/exits, mmio_exits/exits) and exits
    per second of vCPU run time are averages over the guest's whole life, said as such."""
    m = DomainMeasure(name, str(stats.get("uuid", "")), 0.0, "recorded")
    v = m.values
    ids = vcpu_ids(stats)
    m.vcpus = len(ids)
    cpu, system = _num(stats, "cpu.time"), _num(stats, "cpu.system")
    if cpu and system is not None:
        v["system_share_of_host_cpu_percent"] = system / cpu * 100
    if has_kvm_stats(stats):
        sums = {c: sum(_num(stats, f"vcpu.{i}.{c}.sum") or 0 for i in ids) for c in KVM_VCPU_COUNTERS}
        present = {c for c in KVM_VCPU_COUNTERS if any(f"vcpu.{i}.{c}.sum" in stats for i in ids)}
        exits = sums["exits"] if "exits" in present else None
        counted = [i for i in ids if any(f"vcpu.{i}.{c}.sum" in stats for c in present)]
        run = sum(_num(stats, f"vcpu.{i}.time") or 0 for i in counted) / NS  # their vCPU seconds
        for counter in present:
            v[f"{counter}_total"] = sums[counter]
            if exits and counter != "exits":
                v[f"{counter}_share_of_exits_percent"] = sums[counter] / exits * 100
            if run > 0:
                v[f"{counter}_per_vcpu_second"] = sums[counter] / run
    else:
        m.missing["kvm"] = "KVM statistics (exits, io_exits, mmio_exits...)"
    _pages(stats, v)
    return m


def parse_domstats(text: str) -> dict[str, dict[str, Any]]:
    """`virsh domstats` output (Domain: 'NAME' then key=value lines) -> name -> statistics, with
    integers as libvirt gives them and anything else as text."""
    out: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        found = re.fullmatch(r"Domain: '(.*)'", stripped)
        if found:
            current = out.setdefault(found.group(1), {})
            continue
        if current is None or "=" not in stripped:
            continue
        key, _, value = stripped.partition("=")
        current[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
    return out


def measure(conn: Any, domains: list[Any] | None, seconds: float, label: str, timeout: float | None = None,
            sleep: Callable[[float], None] = time.sleep,
            meanwhile: Callable[[list[DomainMeasure]], None] | None = None,
            intervals: int = 1) -> list[DomainMeasure]:
    """Two samples `seconds` apart of the domains (None: every running one), as DomainMeasures in
    the order of the first sample. A domain of the first sample that is not running in the second
    is `stopped` or `vanished`, with no values.

    `intervals` > 1 takes that many more samples, evenly spaced over the same `seconds`: the
    values are still the rates from the first sample to the last, and each also gets its spread,
    the lowest and highest rate over the intervals (spread()). One call per sample whatever the
    number of domains.

    The DomainMeasures are made from the first sample while the interval runs and filled in once
    the second is taken: `meanwhile(them)`, called then, lets a caller find the measurement of each
    of its domains while it waits (they hold no values before measure() returns)."""
    first = take(conn, domains, label, timeout)
    # The interval runs from the end of the first call, not from the end of reading its records:
    # what depends on the first sample alone is done while waiting, and the samples stay
    # `seconds` apart.
    out = [DomainMeasure(name, uuid, 0.0) for name, uuid in first.names.values()]
    # Per domain: is it running with a record that exposes nothing? Records with the same keys
    # expose the same statistics, so for most domains the second sample only confirms this.
    plan = [(key, m, before, before.get("state.state") in _RUNNING and exposes_nothing(before))
            for (key, before), m in zip(first.stats.items(), out, strict=True)]
    if meanwhile is not None:
        meanwhile(out)
    between: list[Sample] = []
    for step in range(1, max(1, intervals)):
        sleep(max(0.0, first.ended + seconds * step / intervals - time.monotonic()))
        between.append(take(conn, domains, label, timeout, with_names=False))
    sleep(max(0.0, first.ended + seconds - time.monotonic()))
    second = take(conn, domains, label, timeout, with_names=False)  # names: the first sample's
    elapsed = second.at - first.at
    later = second.stats
    timed = elapsed > 0
    for key, m, before, bare in plan:
        m.seconds = elapsed
        after = later.get(key)
        if after is None:
            m.state = "vanished"
        elif bare and timed and after.keys() == before.keys() and after.get("state.state") in _RUNNING:
            m.missing.update(NOTHING_EXPOSED)  # _fill's first branch, without the call
            m.exposed_nothing = True
        elif before.get("state.state") not in _RUNNING:
            m.state = "not running"
        elif after.get("state.state") not in _RUNNING:
            m.state = "stopped"
        else:
            _fill(m, before, after, exposes_nothing(after))
    if between:
        samples = [first, *between, second]
        for key, m, _before, _bare in plan:
            if m.state == "running" and m.values:
                m.intervals = len(samples) - 1
                m.spread = spread([(s.at, s.stats.get(key)) for s in samples], m)
    return out


def measured_over(name: str, uuid: str, records: list[tuple[float, dict[str, Any]]]) -> DomainMeasure:
    """What measure() makes of one running domain's timed records (at least two): the rates from
    the first to the last, and with more than two records each value's spread over the intervals."""
    (start, first), (end, last) = records[0], records[-1]
    m = rates(name, uuid, first, last, end - start)
    if len(records) > 2 and m.values:
        m.intervals = len(records) - 1
        m.spread = spread([(at, stats) for at, stats in records], m)
    return m


def spread(records: list[tuple[float, dict[str, Any] | None]], m: DomainMeasure) -> dict[str, tuple[float, float]]:
    """Per value of `m`: the lowest and highest rates() gives over each consecutive pair of the
    timed records of one domain. A value missing from any interval (a record missing, a counter
    that went back) gets no spread: it cannot say how noisy it is."""
    seen: dict[str, list[float]] = {key: [] for key in m.values}
    for (start, before), (end, after) in pairwise(records):
        if before is None or after is None or end <= start:
            return {}
        part = rates(m.name, m.uuid, before, after, end - start).values
        for key, found in seen.items():
            if key in part:
                found.append(part[key])
    wanted = len(records) - 1
    return {key: (min(found), max(found)) for key, found in seen.items() if len(found) == wanted}


class Measured:
    """The measurements of one run, found by a domain's UUID, or by its name for a definition that
    carries none (the name index is built only then: `--all` reads a thousand UUIDs)."""

    __slots__ = ("_by_name", "by_uuid", "samples")

    def __init__(self, samples: list[DomainMeasure]) -> None:
        self.samples = samples
        self.by_uuid = {m.uuid: m for m in samples}
        self._by_name: dict[str, DomainMeasure] | None = None

    def of(self, uuid: str | None, name: str) -> DomainMeasure:
        """The domain's measurement; a domain in neither sample was shut off (or undefined) before
        the first."""
        found = self.by_uuid.get(uuid.lower()) if uuid else None
        if found is None:
            if self._by_name is None:
                self._by_name = {m.name: m for m in self.samples}
            found = self._by_name.get(name)
        return found if found is not None else DomainMeasure(name, uuid or "", 0.0, "not running")


# VIR_DOMAIN_RUNNING = 1 (PAUSED = 3 counts nothing; the others are not running at all)
_RUNNING = (1, None)


def _running(stats: dict[str, Any]) -> bool:
    return stats.get("state.state") in _RUNNING


def by_name(measures: Iterable[DomainMeasure]) -> dict[str, DomainMeasure]:
    return {m.name: m for m in measures}
