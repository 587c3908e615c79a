"""`--measure`: libvirt's domain statistics sampled twice, attached to findings.

Real components only: the libvirt test driver (in-process, and served by a real libvirtd
session daemon for the failure paths: killed, hung, refused), and `virsh domstats` recorded on
real KVM hosts and published (fixtures/measure/PROVENANCE.md). The running-guest test is in
test_measure_guest.py (QEMU under TCG).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers
from conftest import ROOT, TESTNODE_URI, run_vmtune

FIXTURES = ROOT / "fixtures" / "measure"


# --- recorded KVM statistics (one published sample each: totals, never rates) -------------------

def _recorded(name: str) -> dict[str, object]:
    from vmtune.live.measure import parse_domstats

    [(_, stats)] = parse_domstats((FIXTURES / name).read_text()).items()
    return stats


def test_recorded_windows_timer_findings_carry_the_exit_mix_of_the_published_sample() -> None:
    from vmtune.live.measure import totals
    from vmtune.live.signatures import judge_recorded

    stats = _recorded("glances-1531-win11.domstats")
    measured = totals("win11", stats)
    # Totals since the guest started: ratios and per-vCPU-second averages, no rate over wall time.
    assert not any(key.endswith("_per_second") for key in measured.values)
    assert measured.values["exits_total"] == 28094008
    assert round(measured.values["mmio_exits_share_of_exits_percent"], 2) == 23.27  # 6536664 / 28094008
    assert round(measured.values["mmio_exits_per_vcpu_second"]) == 6843  # 6536664 / 955.26 s of vCPU 0
    findings = helpers.findings((ROOT / "fixtures" / "domains" / "win10-timer-storm.xml").read_bytes())
    timer = [f for f in findings if f.rule.code in ("CLK001", "CLK002", "CLK003", "HV001")]
    assert timer
    for finding in timer:
        verdict = judge_recorded(finding.rule.code, measured.values)
        assert verdict is not None and verdict.status == "recorded"
        assert "mmio_exits_share_of_exits_percent 23.27" in verdict.text
        assert "one sample, not a rate" in verdict.text


def test_recorded_sample_without_exits_total_says_what_it_has() -> None:
    """The cockpit-machines sample has io_exits but no exits.sum: no share of exits is made up."""
    from vmtune.live.measure import totals
    from vmtune.live.signatures import judge_recorded

    measured = totals("windows-server-2022", _recorded("cockpit-machines-49-windows-server-2022.domstats"))
    assert "exits_total" not in measured.values
    assert not any(key.endswith("_share_of_exits_percent") for key in measured.values)
    assert round(measured.values["io_exits_per_vcpu_second"]) == 4376  # 182811 / 41.78 s
    verdict = judge_recorded("CLK002", measured.values)
    assert verdict is not None and "io_exits_per_vcpu_second 4376" in verdict.text
    rate_only = judge_recorded("USB001", measured.values)
    assert rate_only is not None and rate_only.status == "not judged"


def test_two_recorded_samples_give_rates_and_the_timer_signature() -> None:
    """rates() over two records: the published win11 sample and the same counters 10 s later are
    not published, so the second record is the first one with every counter unchanged: a rate of
    0, judged "not visible", never invented."""
    from vmtune.live.measure import rates
    from vmtune.live.signatures import judge

    stats = _recorded("glances-1531-win11.domstats")
    measured = rates("win11", "", stats, dict(stats), 10.0)
    assert measured.values["exits_per_second"] == 0 and measured.values["mmio_exits_per_second"] == 0
    verdict = judge("CLK002", measured.values, measured.vcpus, measured.missing)
    assert verdict is not None and verdict.status == "not seen"
    assert verdict.text.startswith("not visible in the statistics of this run")


def _records_without_groups(stats: dict[str, object]) -> list[tuple[dict[str, object], dict[str, object]]]:
    """(before, after) pairs cut from a published record: every statistics group alone, every
    group left out, and the state alone (what the test driver gives), counters grown in `after`."""
    groups = ("cpu.", "vcpu.", "balloon.", "net.", "block.", "vm.")
    pairs = []
    for keep in [(), *[(g,) for g in groups], *[tuple(x for x in groups if x != g) for g in groups]]:
        before = {k: v for k, v in stats.items() if k.startswith(("state.", *keep))}
        after = {k: (v * 2 + 1 if type(v) is int and not k.endswith((".count", ".maximum", ".current", ".state"))
                     else v) for k, v in before.items()}
        pairs.append((before, after))
    return pairs


@pytest.mark.parametrize("sample", ["glances-1531-win11.domstats", "cockpit-machines-49-windows-server-2022.domstats"])
def test_rates_of_a_record_that_exposes_nothing_says_what_the_full_walk_says(
        sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """rates() and attach() skip their walk for a record with no statistics group (the test driver's
    state-only records, a thousand per `--all`): the measurement and every rule's verdict must be
    those of the full walk, on records cut from the published samples in 13 ways."""
    from vmtune.live import measure as m
    from vmtune.live import report
    from vmtune.report.model import SourceResult
    from vmtune.rules import lookup
    from vmtune.rules.base import Finding, Severity

    rules = [lookup(code) for code in report.BY_CODE]
    findings = [Finding(rule, Severity.WARNING, "m", None, None) for rule in rules]  # type: ignore[arg-type]

    def measured(before: dict[str, object], after: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
        got = m.rates("d", "u", before, after, 5.0)
        result = SourceResult("s", "d", list(findings))
        report.attach(result, got)
        return got.as_dict() | {"missing": list(got.missing.items())}, {
            code: verdict._asdict() for code, verdict in result.verdicts.items()}

    # The published samples have no interface, disk or vm.* keys: these groups are added by their
    # documented names (virsh domstats), so that each of them also has to take the full walk.
    devices = {"net.count": 1, "net.0.name": "vnet0", **{f"net.0.{d}.{c}": 100 for d in ("rx", "tx")
                                                           for c in ("pkts", "drop", "errs")},
               "block.count": 1, "block.0.name": "vda", **{f"block.0.{op}.{c}": 1000 for op in ("rd", "wr", "fl")
                                                           for c in ("reqs", "times")},
               "vm.pages_4k.cur": 1000, "vm.pages_2m.cur": 10, "vm.remote_tlb_flush.sum": 5}
    pairs = _records_without_groups(_recorded(sample) | devices)
    fast = [measured(b, a) for b, a in pairs]
    monkeypatch.setattr(m, "_GROUP_KEYS", frozenset({"state.state"}))  # every record takes the full walk
    assert [measured(b, a) for b, a in pairs] == fast
    assert fast[0][0]["missing"] == list(m.NOTHING_EXPOSED.items())  # the state alone: nothing exposed
    assert len(fast[0][1]) == len(rules) and all(v["status"] == "not exposed" for v in fast[0][1].values())

def test_an_interface_libvirt_gives_no_counters_for_is_not_measured_as_zero() -> None:
    """libvirt 9.0 lists a user-mode NIC (no host device) as `net.count=1` and nothing else (the
    record test_measure_guest.py's guest gets): no packets or drops are invented for it, and the
    net signature says the counters are not exposed instead of "not visible" at 0 packets/s.
    Beside a tap that has counters, the tap's are measured and the other is named."""
    from vmtune.live.measure import rates
    from vmtune.live.signatures import judge

    record = {"state.state": 1, "net.count": 1}
    measured = rates("user-nic", "", record, dict(record), 2.0)
    assert not [k for k in measured.values if k.startswith("net_")] and "net" not in measured.devices
    assert measured.missing["net"] == "interface counters (net.N.rx/tx): libvirt gave none for net0"
    verdict = judge("NET004", measured.values, measured.vcpus, measured.missing)
    assert verdict is not None and verdict.status == "not exposed"
    assert verdict.text == ("this host does not expose interface drops under load (interface counters "
                            "(net.N.rx/tx): libvirt gave none for net0)")
    tap = {f"net.0.{d}.{c}": 0 for d in ("rx", "tx") for c in ("bytes", "pkts", "errs", "drop")}
    before = {"state.state": 1, "net.count": 2, "net.0.name": "vnet0", **tap}
    after = {**before, "net.0.rx.pkts": 3000, "net.0.tx.pkts": 1000, "net.0.rx.drop": 4}
    measured = rates("two-nics", "", before, after, 2.0)
    assert measured.values["net_packets_per_second"] == 2000 and measured.values["net_drops_per_second"] == 2
    assert measured.devices["net"] == "vnet0"
    assert measured.missing["net"] == "interface counters (net.N.rx/tx): libvirt gave none for net1"
    assert judge("NET004", measured.values, measured.vcpus, measured.missing).status == "measured"  # type: ignore[union-attr]


# --- the test driver: plumbing, every output format -------------------------------------------

def test_check_measure_attaches_a_verdict_to_each_finding_in_json() -> None:
    done = run_vmtune("check", "-c", TESTNODE_URI, "--domain", "win10", "--measure=0.1", "-f", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    clk = next(f for f in doc["findings"] if f["rule"] == "CLK002")
    assert clk["measurement"]["status"] == "not exposed"
    assert "KVM statistics" in clk["measurement"]["text"]
    [measured] = doc["measurements"]
    assert measured["domain"] == "win10" and measured["state"] == "running"
    assert any("host CPU time (cpu.time)" in why for why in measured["not_exposed"])
    assert measured["values"] == {}  # the test driver reports no counters: nothing is invented


def test_check_without_measure_keeps_its_json_fields() -> None:
    doc = json.loads(run_vmtune("check", "-c", TESTNODE_URI, "--domain", "win10", "-f", "json").stdout)
    assert "measurements" not in doc and all("measurement" not in f for f in doc["findings"])


def test_measure_needs_live_domains() -> None:
    done = run_vmtune("check", "--measure", str(ROOT / "fixtures" / "domains" / "win10-timer-storm.xml"))
    assert done.returncode == 2
    assert done.stderr == "vmtune: --measure reads running domains: give --domain NAME or --all\n"


def test_bare_measure_takes_the_default_a_number_after_it_and_operands_stay_operands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vmtune.cli import marked_arguments

    monkeypatch.chdir(tmp_path)
    assert marked_arguments(["check", "--measure", "--all"]) == ["check", "--measure=5", "--all"]
    assert marked_arguments(["check", "--measure", "20", "--all"]) == ["check", "--measure=20", "--all"]
    assert marked_arguments(["apply", "--measure", "2.5", "-d", "w"]) == ["apply", "--measure=2.5", "-d", "w"]
    assert marked_arguments(["check", "--", "--measure"]) == ["check", "--", "--measure"]
    assert marked_arguments(["check", "a.xml", "--measure"]) == ["check", "a.xml", "--measure"]
    assert marked_arguments(["rule", "--measure"]) == ["rule", "--measure"]  # not its option: click says so
    (tmp_path / "20").write_text("")  # an existing `20` is a file to check, not seconds
    assert marked_arguments(["check", "--measure", "20"]) == ["check", "--measure=5", "20"]


def test_measure_then_seconds_measures_that_long(tmp_path: Path) -> None:
    """`--measure 20 FILE` read 20 as a file after measuring 5 s (#47): 20 is the seconds, and
    the error is the one about what --measure reads, naming no file `20`."""
    done = run_vmtune("check", "--measure", "20", str(ROOT / "fixtures" / "domains" / "win10-timer-storm.xml"))
    assert (done.returncode, done.stderr) == (2, "vmtune: --measure reads running domains: give --domain NAME "
                                                 "or --all\n")
    done = run_vmtune("check", "--measure", "0", "--all")
    assert done.returncode == 2 and "not 0" in done.stderr, done.stderr


@pytest.mark.parametrize("seconds", ["0", "-1", "99999"])
def test_measure_seconds_out_of_range_is_one_line(seconds: str) -> None:
    done = run_vmtune("check", "-c", TESTNODE_URI, "--all", f"--measure={seconds}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "seconds between 0 and 3600" in done.stderr


def test_measure_command_lists_each_domain_with_what_the_host_does_not_expose() -> None:
    done = run_vmtune("measure", "-c", TESTNODE_URI, "--all", "--for", "0.1")
    assert done.returncode == 0, done.stderr
    assert "== win10: measured over " in done.stdout
    assert "CLK002 (windows-synthetic-timers-missing): this host does not expose timer exits" in done.stdout
    assert "win10-off" not in done.stdout  # shut off: nothing to measure, not listed among the costs


def test_stopped_and_vanished_between_samples_are_reported(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.measure import measure
    from vmtune.report.measured import measurement_line

    conn = libvirt_mod.open(TESTNODE_URI)
    stopping, vanishing = conn.lookupByName("db01"), conn.lookupByName("db02")

    def meanwhile(_seconds: float) -> None:
        stopping.destroy()
        vanishing.destroy()
        vanishing.undefine()

    measured = {m.name: m for m in measure(conn, [stopping, vanishing], 0.1, "test", sleep=meanwhile)}
    assert measured["db01"].state == "stopped" and measured["db02"].state == "vanished"
    assert measurement_line(measured["db01"]) == "measured: nothing (stopped between the samples)"
    assert measurement_line(measured["db02"]) == "measured: nothing (undefined between the samples)"
    conn.close()


class _Counting:
    """The test driver's connection, its statistics records grown by counters (the test driver
    gives a state and nothing else): each running domain but one gets its own cpu, vcpu, net and
    block counters under libvirt's documented names (virsh domstats, as in the published samples),
    growing by a known amount per domain between two calls, so a rate computed from the wrong
    records, the wrong domain's record or the wrong interval shows. Domains, names, UUIDs and
    states are the driver's own; `handed` keeps each call's records as measure() received them."""

    def __init__(self, conn, bare: str) -> None:  # type: ignore[no-untyped-def]
        self.conn, self.bare, self.calls = conn, bare, 0
        self.handed: list[dict[str, dict[str, object]]] = []

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.conn, name)

    def getAllDomainStats(self, stats: int, flags: int):  # type: ignore[no-untyped-def]
        records = []
        for n, (dom, record) in enumerate(self.conn.getAllDomainStats(stats, flags), start=1):
            if record["state.state"] == 1 and dom.name() != self.bare:
                record = record | _counters(n, self.calls)
            records.append((dom, record))
        self.handed.append({dom.name(): record for dom, record in records})
        self.calls += 1
        return records


def _counters(n: int, call: int) -> dict[str, object]:
    """Domain n's counters at the call-th sample: each grows by a multiple of n per sample."""
    grow = n * call
    return {"cpu.time": 10**12 + grow * 3 * 10**8, "vcpu.current": 2, "vcpu.maximum": 2,
            **{f"vcpu.{i}.{k}": 10**11 + grow * (i + 1) * 10**8 for i in (0, 1) for k in ("time", "delay")},
            **{f"vcpu.{i}.state": 1 for i in (0, 1)},
            "net.count": 1, "net.0.name": "vnet0",
            "net.0.rx.pkts": 5000 + grow * 700, "net.0.tx.pkts": 5000 + grow * 300,
            "net.0.rx.drop": grow * 2, "net.0.tx.drop": 0, "net.0.rx.errs": 0, "net.0.tx.errs": grow,
            "block.count": 1, "block.0.name": "vda", "block.0.rd.reqs": 100 + grow * 40,
            "block.0.rd.times": 10**9 + grow * 40 * 2_000_000, "block.0.wr.reqs": 100, "block.0.wr.times": 10**9}


def test_measure_of_every_domain_is_what_rates_says_of_its_two_records(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """measure() judges records from the first sample while the interval runs and fills them in
    from the second: each domain's rates must be those of its own two records over the interval
    measure() reports, the values computed here by hand; a running domain whose records expose
    nothing (db01 here: what the test driver gives) is said so, and shut-off ones are not running."""
    from vmtune.facts.domain import Domain
    from vmtune.live import measure as m
    from vmtune.live.check import measurements_of
    from vmtune.xml.safe import parse_domain

    conn = _Counting(libvirt_mod.open(TESTNODE_URI), bare="db01")
    states = {dom.name(): stats["state.state"] for dom, stats in conn.conn.getAllDomainStats(0, 0)}
    assert len(states) >= 4 and set(states.values()) >= {1, 5}  # running, shut off
    measured = m.measure(conn, None, 0.05, "test")
    assert [d.name for d in measured] == list(states)
    first, second = conn.handed
    counted = 0
    for n, got in enumerate(measured, start=1):
        if states[got.name] != 1:
            assert got.state == "not running" and not got.values, got.name
            continue
        assert got.state == "running" and got.seconds >= 0.05
        assert got.as_dict() == m.rates(got.name, got.uuid, first[got.name], second[got.name], got.seconds).as_dict()
        if got.name == "db01":
            assert got.exposed_nothing and not got.values
            assert list(got.missing.items()) == list(m.NOTHING_EXPOSED.items())
            continue
        counted += 1
        s = got.seconds  # the samples' distance as measure() took it; every counter grew by a multiple of n
        assert not got.exposed_nothing and got.vcpus == 2
        assert got.values["host_cpu_percent"] == pytest.approx(n * 0.3 / s * 100)
        assert got.values["vcpu_thread_cpu_percent"] == pytest.approx(n * 0.3 / s * 100)  # (1 + 2) x 0.1 s
        assert got.values["outside_vcpu_cpu_percent"] == pytest.approx(0, abs=1e-9)
        assert got.values["vcpu_delay_percent"] == pytest.approx(n * 0.15 / s * 100)  # mean of 0.1 s and 0.2 s
        assert got.values["vcpu_delay_percent_max"] == pytest.approx(n * 0.2 / s * 100)
        assert got.values["net_packets_per_second"] == pytest.approx(n * 1000 / s)
        assert got.values["net_drops_per_second"] == pytest.approx(n * 2 / s)
        assert got.values["net_errors_per_second"] == pytest.approx(n / s)
        assert got.values["disk_requests_per_second"] == pytest.approx(n * 40 / s)
        assert got.values["disk_read_latency_ms"] == pytest.approx(2.0)
        assert got.devices == {"net": "vnet0", "disk_read": "vda"}
    assert counted >= 3
    chosen = [Domain(parse_domain(conn.lookupByName(n).XMLDesc(2).encode(), n), n) for n in reversed(states)]
    found = measurements_of(conn.conn, chosen, None, 0.05, "test")
    assert [(f.name, f.uuid) for f in found] == [(d.name, d.uuid) for d in chosen]
    assert [f.state for f in found] == ["running" if states[d.name] == 1 else "not running" for d in chosen]
    conn.conn.close()


def test_measurements_in_openmetrics_sarif_and_html(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    metrics = run_vmtune("check", "-c", TESTNODE_URI, "--domain", "win10", "--measure=0.1", "-f", "openmetrics")
    assert 'vmtune_check_finding_measurement{domain="win10",host=' in metrics.stdout
    assert 'rule="CLK002",status="not exposed"} 1.0' in metrics.stdout
    sarif = json.loads(run_vmtune("check", "-c", TESTNODE_URI, "--domain", "win10", "--measure=0.1",
                                  "-f", "sarif").stdout)
    results = sarif["runs"][0]["results"]
    assert all(r["properties"]["measurement"]["status"] for r in results)
    html = run_vmtune("check", "-c", TESTNODE_URI, "--domain", "win10", "--measure=0.1", "-f", "html").stdout
    assert "measure: this host does not expose timer exits" in html


# --- a real libvirtd (session daemon, serving the test driver): killed, hung, refused --------------

@pytest.fixture
def libvirtd(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A libvirtd session daemon of its own, run as `nobody` (root cannot run a session daemon):
    the test driver over a real RPC connection. Yields (URI, pid file)."""
    if os.geteuid() != 0 or shutil.which("runuser") is None or not Path("/usr/sbin/libvirtd").exists():
        pytest.skip("needs root, runuser and /usr/sbin/libvirtd")
    base = Path(f"/tmp/measure-lvd-{os.getpid()}-{tmp_path.name}"[:90])
    shutil.rmtree(base, ignore_errors=True)
    for sub in ("run", "cfg", "cache", "home"):
        (base / sub).mkdir(parents=True)
    shutil.chown(base, "nobody")
    for sub in base.iterdir():
        shutil.chown(sub, "nobody")
    env = [f"HOME={base}/home", f"XDG_RUNTIME_DIR={base}/run", f"XDG_CONFIG_HOME={base}/cfg",
           f"XDG_CACHE_HOME={base}/cache", "LIBVIRT_LOG_OUTPUTS=1:file:/dev/null"]
    daemon = subprocess.Popen(["runuser", "-u", "nobody", "--", "env", *env, "/usr/sbin/libvirtd"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socket = base / "run" / "libvirt" / "libvirt-sock"
    pidfile = base / "run" / "libvirt" / "libvirtd.pid"
    deadline = time.monotonic() + 60
    while not (socket.exists() and pidfile.exists()):
        assert time.monotonic() < deadline and daemon.poll() is None, "libvirtd did not start"
        time.sleep(0.1)
    yield f"test+unix:///default?socket={socket}", pidfile
    pid = int(pidfile.read_text().split()[0]) if pidfile.exists() else None
    if pid is not None and daemon.poll() is None:
        for sig in (signal.SIGCONT, signal.SIGKILL):  # a stopped daemon is woken to die
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        # runuser stops itself when its child is stopped (as su does) and reaps nothing until it is
        # continued: woken too, or the wait below took its whole 30 s after the hung-daemon test.
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon.pid, signal.SIGCONT)
    try:
        daemon.wait(30)
    except subprocess.TimeoutExpired:
        daemon.kill()  # runuser, started here
        daemon.wait(10)
    shutil.rmtree(base, ignore_errors=True)


def _vmtune(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "vmtune", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, **(env or {})})


def _between_samples(run: subprocess.Popen[str]) -> None:
    """Wait until vmtune sleeps between its two samples (one of its threads in nanosleep: the
    sampler's time.sleep): a fixed delay raced vmtune's start-up on a loaded machine, and a daemon
    stopped before the first sample is another case than this test's."""
    deadline = time.monotonic() + 60
    tasks = Path(f"/proc/{run.pid}/task")
    while time.monotonic() < deadline and run.poll() is None:
        with contextlib.suppress(OSError):
            if any("nanosleep" in (task / "wchan").read_text() for task in tasks.iterdir()):
                return
        time.sleep(0.01)
    pytest.fail(f"vmtune never slept between its samples: exit {run.poll()}")


def test_libvirtd_killed_between_samples_is_one_line(libvirtd: tuple[str, Path]) -> None:
    uri, pidfile = libvirtd
    run = _vmtune("check", "-c", uri, "--domain", "test", "--measure=3")
    _between_samples(run)
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 2, (out, err)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "cannot read the domain statistics" in err or "cannot" in err


def test_hung_libvirtd_times_out_with_one_line(libvirtd: tuple[str, Path]) -> None:
    uri, pidfile = libvirtd
    run = _vmtune("check", "-c", uri, "--domain", "test", "--measure=2", env={"VMTUNE_LIBVIRT_TIMEOUT": "3"})
    _between_samples(run)
    os.kill(int(pidfile.read_text().split()[0]), signal.SIGSTOP)  # accepts, never answers
    out, err = run.communicate(timeout=60)
    assert run.returncode == 2, (out, err)
    assert err.endswith("cannot read the domain statistics: libvirt did not answer within 3 s\n"), err
    assert err.count("\n") == 1


def _stopped(pidfile: Path) -> int:
    pid = int(pidfile.read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)  # the socket still accepts; nothing answers
    return pid


def test_a_daemon_that_never_answers_the_open_is_one_line(libvirtd: tuple[str, Path]) -> None:
    """Before: `check -c URI` on a stopped daemon waited forever in virConnectOpen."""
    uri, pidfile = libvirtd
    _stopped(pidfile)
    started = time.monotonic()
    run = _vmtune("check", "-c", uri, "--domain", "test", env={"VMTUNE_LIBVIRT_TIMEOUT": "3"})
    out, err = run.communicate(timeout=60)
    assert run.returncode == 2, (out, err)
    assert err == f"vmtune: {uri}: cannot connect: libvirt did not answer within 3 s\n"
    assert time.monotonic() - started < 30


def test_a_daemon_that_stops_answering_after_the_open_ends_each_later_call(libvirtd: tuple[str, Path],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call after the open (capabilities, lookups, XML, defines) is bounded by libvirt's
    keepalive, which vmtune sets from the same timeout: before, they waited forever."""
    from vmtune.errors import VmtuneError
    from vmtune.live.connection import host_facts, libvirt_faults, lookup_domain, open_connection

    uri, pidfile = libvirtd
    monkeypatch.setenv("VMTUNE_LIBVIRT_TIMEOUT", "3")
    conn = open_connection(uri)
    assert lookup_domain(conn, "test").name() == "test"  # answered while the daemon runs
    _stopped(pidfile)
    started = time.monotonic()
    with pytest.raises(VmtuneError) as failed, libvirt_faults(uri, "cannot read the host"):
        host_facts(conn)
    assert time.monotonic() - started < 20
    assert str(failed.value) == f"{uri}: cannot read the host: libvirt did not answer within 3 s"


def test_permission_denied_is_one_line(libvirtd: tuple[str, Path]) -> None:
    """The daemon's socket is its owner's (0700): a client without the capability to override file
    permissions (root with an empty bounding set: as any other user) is refused, in one line."""
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux)")
    uri, _ = libvirtd
    done = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", sys.executable, "-m", "vmtune",
                           "measure", "-c", uri, "--domain", "test", "--for", "0.1"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 2, done
    assert done.stderr.startswith("vmtune: ") and done.stderr.count("\n") == 1
    assert "Permission denied" in done.stderr


def test_apply_measure_stores_before_and_after_with_the_backup(libvirtd: tuple[str, Path],
                                                              tmp_path: Path) -> None:
    import libvirt

    uri, _ = libvirtd
    # The daemon's test:///default lives while a connection holds it: this one keeps it across runs.
    conn = libvirt.open(uri)
    state = str(tmp_path / "state")
    applied = run_vmtune("apply", "-c", uri, "--domain", "test", "--unsafe-fixes", "--yes", "--state-dir", state,
                         "--measure=0.5")
    assert applied.returncode in (0, 1), applied.stderr
    assert "test: before: measured over 0.5 s: no statistics; not exposed by this host: " in applied.stdout
    assert "measurement stored with backup" in applied.stdout
    early = run_vmtune("apply", "-c", uri, "--domain", "test", "--state-dir", state, "--measure", "--after")
    assert early.returncode == 1, early.stdout + early.stderr
    assert "test: not restarted yet (MEM003 still in the running guest)" in early.stdout
    dom = conn.lookupByName("test")
    dom.destroy()
    dom.create()  # the full shutdown and start the new definition needs
    for where in (["--domain", "test"], ["--all"]):  # a dry run compares, and stores nothing
        dry = run_vmtune("apply", "-c", uri, *where, "--state-dir", state, "--measure", "--after", "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "and after the restart" in dry.stdout and "test: --dry-run: the after is not stored" in dry.stdout
        assert "after:" not in run_vmtune("history", "--domain", "test", "--state-dir", state).stdout
    after = run_vmtune("apply", "-c", uri, "--domain", "test", "--state-dir", state, "--measure", "--after")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "measured before (backup " in after.stdout and "and after the restart, 0.5 s each:" in after.stdout
    history = run_vmtune("history", "--domain", "test", "--state-dir", state)
    assert re.search(r"\n    before: 0\.\d s, no values; after: 0\.\d s, no values\n", history.stdout), history.stdout
    conn.close()


def test_measure_all_on_two_connections_measures_each_host_once() -> None:
    second = f"test://{ROOT / 'fixtures' / 'hosts' / 'testnode' / 'node.xml'}?second"
    done = run_vmtune("check", "-c", TESTNODE_URI, "-c", second, "--all", "--measure=0.1", "-f", "json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    hosts = {m["host"] for m in doc["measurements"]}
    assert hosts == {TESTNODE_URI, second}
    assert {m["domain"] for m in doc["measurements"] if m["state"] == "not running"} == {"win10-off"}


def test_measure_json_links_each_domain_to_its_findings() -> None:
    done = run_vmtune("measure", "-c", TESTNODE_URI, "--domain", "win10", "--for", "0.1", "-f", "json")
    assert done.returncode == 0, done.stderr
    [win10] = json.loads(done.stdout)
    assert win10["domain"] == "win10" and win10["values"] == {}
    assert {e["rule"] for e in win10["explained_by"]} >= {"CLK002", "HV001"}
    assert all(e["status"] == "not exposed" for e in win10["explained_by"])


# --- apply --measure --all: one measurement of every domain, each "before" with its own backup ------

def _copies(conn: object, names: list[str], running: bool = True, source: str | None = None) -> dict[str, str]:
    """Define copies of the daemon's `test` domain (or of its definition `source`, as it was
    before `apply` fixed MEM003) under new names and UUIDs, started unless `running` is False.
    Returns name -> UUID."""
    import libvirt

    if source is None:
        source = conn.lookupByName("test").XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)  # type: ignore[attr-defined]
    made = {}
    for name in names:
        xml = re.sub(r"<uuid>[^<]*</uuid>", "", source.replace("<name>test</name>", f"<name>{name}</name>"))
        dom = conn.defineXML(xml)  # type: ignore[attr-defined]
        if running:
            dom.create()
        made[name] = dom.UUIDString()
    return made


def _stored(state: Path, uuid: str) -> list[dict[str, object]]:
    """The measurements stored with a domain's backups (<id>.measure), oldest first."""
    return [json.loads(p.read_text()) for p in sorted(state.glob(f"*/{uuid}/*.measure"))]


def test_apply_measure_all_stores_each_domains_before_and_compares_after_each_restart(
        libvirtd: tuple[str, Path], tmp_path: Path) -> None:
    """`apply --measure --all`: every domain measured in one run, each applied one's own "before"
    stored with its backup; a domain that fails (its backup directory is one others can write)
    does not stop the others and makes the exit code 2. `--after --all` says per domain which
    still needs its full restart, compares the restarted one, measuring as long as the longest
    stored "before" (and says so), and `history` shows both."""
    import libvirt

    from vmtune.live.backups import host_key
    from vmtune.live.connection import host_name

    uri, _ = libvirtd
    conn = libvirt.open(uri)  # keeps the daemon's test:///default (and the copies) across runs
    original = conn.lookupByName("test").XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    uuids = {"test": conn.lookupByName("test").UUIDString(), **_copies(conn, ["test2", "test-bad"]),
             **_copies(conn, ["test-off"], running=False)}
    state = tmp_path / "state"
    bad = state / host_key(host_name(conn)) / uuids["test-bad"]
    bad.mkdir(parents=True, mode=0o700)
    bad.chmod(0o770)  # group-writable: refused as untrusted, for this domain only
    applied = run_vmtune("apply", "-c", uri, "--all", "--unsafe-fixes", "--yes", "--state-dir", str(state),
                         "--measure=0.3")
    assert applied.returncode == 2, applied.stdout + applied.stderr
    assert applied.stderr.count("\n") == 1 and applied.stderr.startswith("vmtune: ") \
        and f"{uuids['test-bad']}: writable by group or others (mode 0770)" in applied.stderr, applied.stderr
    out = applied.stdout
    for name in ("test", "test2"):
        assert f"\n{name}: before: measured over 0.3 s: no statistics; not exposed by this host: " in out
        assert re.search(rf"\n{name}: measurement stored with backup \d", out), out
        [stored] = _stored(state, uuids[name])
        assert stored["before"]["domain"] == name and stored["before"]["uuid"] == uuids[name]  # type: ignore[index]
        assert "after" not in stored
    assert "\ntest-off: not running: nothing measured before the change\n" in out
    assert "test-off is shut off: the new definition takes effect at its next start." in out  # applied
    assert _stored(state, uuids["test-off"]) == []
    assert "\n== test-bad\n== test-off\n" in out  # refused before anything was done to it
    assert out.endswith("measurements stored for 2 domain(s): after each guest's next full shutdown and start, "
                        "`vmtune apply --all --measure --after` measures again and compares\n")
    bad.chmod(0o700)

    # A domain applied alone with a longer interval: --after --all measures as long as the longest.
    uuids |= _copies(conn, ["test3"], source=original)
    alone = run_vmtune("apply", "-c", uri, "--domain", "test3", "--unsafe-fixes", "--yes", "--state-dir",
                       str(state), "--measure=0.6")
    assert alone.returncode in (0, 1) and "measurement stored with backup" in alone.stdout, alone.stdout + alone.stderr
    early = run_vmtune("apply", "-c", uri, "--all", "--state-dir", str(state), "--measure", "--after")
    assert early.returncode == 1, early.stdout + early.stderr
    for name in ("test", "test2", "test3"):
        assert f"{name}: not restarted yet (MEM003 still in the running guest): after a full shutdown and start, " \
               "run `vmtune apply --all --measure --after` again\n" in early.stdout
    assert early.stdout.endswith("not compared: 2 with no `apply --measure` before stored\n"), early.stdout
    assert "==" not in early.stdout and early.stderr == ""

    for name in ("test", "test3"):
        dom = conn.lookupByName(name)
        dom.destroy()
        dom.create()  # the full shutdown and start the new definition needs
    later = run_vmtune("apply", "-c", uri, "--all", "--state-dir", str(state), "--measure", "--after")
    assert later.returncode == 1, later.stdout + later.stderr  # test2 still waits for its restart
    assert re.search(r"\ntest: measured before \(backup [^,]+, 0\.3 s\) and after the restart \(0\.6 s, the longest "
                     r"before of this run\):\n", "\n" + later.stdout), later.stdout
    assert re.search(r"\ntest3: measured before \(backup [^)]+\) and after the restart, 0\.6 s each:\n",
                     later.stdout), later.stdout
    assert "test2: not restarted yet (MEM003 still in the running guest)" in later.stdout
    [stored] = _stored(state, uuids["test"])
    assert stored["after"]["domain"] == "test" and stored["after"]["seconds"] >= 0.6  # type: ignore[index]
    again = run_vmtune("apply", "-c", uri, "--all", "--state-dir", str(state), "--measure", "--after")
    assert again.stdout.endswith("not compared: 2 with no `apply --measure` before stored, 2 compared already\n")

    history = run_vmtune("history", "--all", "--state-dir", str(state))
    assert history.returncode == 0, history.stderr
    assert re.search(r"== test on .*\n.*\n    before: 0\.3 s, no values; after: 0\.6 s, no values\n",
                     history.stdout), history.stdout
    assert re.search(r"== test2 on .*\n.*\n    before: 0\.3 s, no values\n", history.stdout), history.stdout
    conn.close()


class _CountingConnection:
    """The real libvirt connection, with its statistics calls counted (nothing else changed)."""

    def __init__(self, conn: object) -> None:
        self.conn = conn
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.conn, name)
        if name not in ("getAllDomainStats", "domainListGetStats"):
            return attr

        def counted(*args: object) -> object:
            self.calls.append(name)
            return attr(*args)  # type: ignore[operator]
        return counted


def test_apply_measure_all_takes_one_bulk_statistics_call_per_sample_whatever_the_number_of_domains(
        libvirtd: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import libvirt

    from vmtune.commands.live import run_apply_measured
    from vmtune.live import connection
    from vmtune.live.measure import COMPARE_INTERVALS

    uri, _ = libvirtd
    conn = libvirt.open(uri)
    _copies(conn, [f"copy{i}" for i in range(5)] + ["rtl\u202eevil"])  # a bidi override in a name
    opened: list[_CountingConnection] = []
    real_open = connection.open_connection

    def counting_open(target: str) -> _CountingConnection:
        opened.append(_CountingConnection(real_open(target)))
        return opened[-1]

    monkeypatch.setattr(connection, "open_connection", counting_open)
    state = tmp_path / "state"

    def run(after: bool) -> int:
        return run_apply_measured(None, True, uri, 0.2, after, True, True, False, False, False, [], [], [], None,
                                  state)

    assert run(False) in (0, 1)
    out = capsys.readouterr().out
    assert out.count(": measurement stored with backup ") == 7, out  # test and its 6 copies
    assert "\u202e" not in out and "\nrtl\\u202eevil: measurement stored with backup " in out
    # COMPARE_INTERVALS intervals: one sample more than intervals, each one bulk call for all 7.
    samples = ["getAllDomainStats"] * (COMPARE_INTERVALS + 1)
    assert [c.calls for c in opened] == [samples]
    assert run(True) == 1
    assert capsys.readouterr().out.count(": not restarted yet (MEM003 still in the running guest)") == 7
    assert [c.calls for c in opened][1:] == [samples]
    conn.close()


def test_apply_measure_needs_a_domain_or_all_as_apply_does() -> None:
    for args in ([], ["--domain", "win10", "--all"]):
        done = run_vmtune("apply", "-c", TESTNODE_URI, *args, "--measure")
        assert done.returncode == 2 and done.stderr == "vmtune: apply needs --domain NAME or --all (not both)\n"


# --- apply --measure: repeated samples, the spread, and no change called where there is only noise ----

def _replayed(name: str) -> dict[str, object]:
    """A measurement as `apply --measure` stores it, made from real timed records: an idle TCG guest
    under libvirt's embedded driver sampled 6 times a second apart (fixtures/measure/record_idle.py)."""
    from vmtune.live.measure import measured_over

    recorded = json.loads((FIXTURES / name).read_text())
    return measured_over(recorded["domain"], "", [(s["at"], s["stats"]) for s in recorded["samples"]]).as_dict()


def test_an_idle_guests_noise_is_no_change() -> None:
    """Issue 47: an idle guest's vCPU delay read "0.17 -> 1.65 (+892%)". The same idle guest with and
    without its USB controller (SeaBIOS idle: the controller is never started, so nothing changes):
    vCPU delay 0.732 -> 0.139 is a fifth, inside what it moved between seconds (0.022-3.107). Only
    the balloon's resident size, constant within each run, differs beyond its spread."""
    from vmtune.live.report import comparison

    before, after = _replayed("idle-tcg-usb.json"), _replayed("idle-tcg-nousb.json")
    assert before["intervals"] == after["intervals"] == 5
    assert comparison(before, after) == [
        "  (in parentheses: the lowest and highest over 5 intervals each; a difference within them is no change)",
        "  host_cpu_percent                          1.783 (1.358-1.976) -> 1.647 (1.577-1.706)        no change "
        "beyond noise",
        "  host_cpu_user_percent                     1.239 (0.669-1.423) -> 1.219 (0.618-1.700)        no change "
        "beyond noise",
        "  host_cpu_system_percent                   0.544 (0.268-0.689) -> 0.428 (0.000-0.988)        no change "
        "beyond noise",
        "  vcpu_thread_cpu_percent                   0.514 (0.000-0.985) -> 0.576 (0.000-0.977)        no change "
        "beyond noise",
        "  outside_vcpu_cpu_percent                  1.270 (0.390-1.760) -> 1.071 (0.604-1.700)        no change "
        "beyond noise",
        "  vcpu_delay_percent                        0.732 (0.022-3.107) -> 0.139 (0.056-0.456)        no change "
        "beyond noise",
        "  vcpu_delay_percent_max                    0.732 (0.022-3.107) -> 0.139 (0.056-0.456)        no change "
        "beyond noise",
        "  haltpoll_percent                                        0.000 -> 0.000                      no change "
        "beyond noise",
        "  balloon_rss_kib                                     41512.000 -> 39288.000                  -5%",
    ]


@pytest.mark.parametrize(("a", "b", "before", "after", "said"), [
    (0.17, 1.65, (0.02, 3.1), (0.05, 2.0), "no change beyond noise"),  # the numbers, within the spread
    (4.13, 0.43, (3.9, 4.4), (0.3, 0.6), "-90%"),  # the USB fix's drop, beyond it
    (4.13, 4.0, None, (3.9, 4.2), "no change beyond noise"),  # a stored before without spread: the after's
    (0.17, 1.65, None, None, "+871% (spread not measured: one interval each)"),  # stored before this change
    (0.0, 0.5, (0.0, 0.0), (0.4, 0.6), "+0.500"),
])
def test_a_difference_is_a_change_only_beyond_the_spread(a: float, b: float, before: tuple[float, float] | None,
                                                         after: tuple[float, float] | None, said: str) -> None:
    from vmtune.live.report import compared

    assert compared(a, b, before, after) == said


def test_one_cost_two_findings_explain_is_shared_never_added_up() -> None:
    """USB001 and USB002 share one signature (host CPU outside the vCPU threads): `vmtune measure`
    says the cost once with both findings and that it is shared; `check --measure` says so on the
    second finding. The measurement: the idle guest with piix3-uhci and a tablet, recorded."""
    from vmtune.live.measure import measured_over
    from vmtune.live.report import attach, measure_lines
    from vmtune.report.model import Report, SourceResult
    from vmtune.report.text import render

    from conftest import domain_xml

    xml = domain_xml(name="idle-usb", devices="<controller type='usb' index='0' model='piix3-uhci'/>"
                                              "<input type='tablet' bus='usb'/>")
    recorded = json.loads((FIXTURES / "idle-tcg-usb.json").read_text())
    result = SourceResult("idle-usb", "idle-usb", helpers.findings(xml.encode()))
    attach(result, measured_over("idle-usb", "", [(s["at"], s["stats"]) for s in recorded["samples"]]))
    assert [f.rule.code for f in result.findings] == ["USB001", "USB002"]
    assert measure_lines(result)[1:] == [
        "  host CPU outside the vCPU threads (QEMU's main loop runs the USB frame timer): host_cpu_percent 1.78, "
        "outside_vcpu_cpu_percent 1.27, vcpu_thread_cpu_percent 0.51",
        "    explained by USB001 (usb-polling-controller): USB controller piix3-uhci is polled (idle host CPU)",
        "    explained by USB002 (usb-tablet-without-graphics): USB tablet on a guest without graphics keeps a polled "
        "USB controller busy",
        "    one cost, shared by USB001 and USB002: not added up (their fixes remove it once)",
    ]
    text = render(Report([result]))
    assert "\n    measured: host_cpu_percent 1.78, outside_vcpu_cpu_percent 1.27, vcpu_thread_cpu_percent 0.51\n" \
           in text
    assert "\n    measured: host_cpu_percent 1.78, outside_vcpu_cpu_percent 1.27, vcpu_thread_cpu_percent 0.51 (the " \
           "same cost as USB001's: shared, not added up)\n" in text
