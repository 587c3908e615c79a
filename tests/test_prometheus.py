"""docs/fleets.md end to end: Debian's node_exporter reads vmtune's textfiles, Debian's Prometheus
scrapes it, and the shipped alert rules and dashboard queries return what the data says.

One textfile directory holds what a fleet writes:
- vmtune.prom: `vmtune check` of domain files for hv01 (known findings, a malformed file, a file
  name that is not UTF-8);
- vmtune-host.prom: `vmtune host --root` over a fake sysfs tree for hv01;
- vmtune-live.prom and vmtune-live-host.prom: a live check of the test-driver host after a fix
  was defined for its running win10 (a restart pending), and a host run, both from a timer that
  stopped: rendered by the same code with the clock of two hours and 90 minutes ago.
Yesterday's scrapes (hv01 with fewer domains, a host hv-gone that no longer reports) are
backfilled with promtool, so "new since yesterday" and "missing" have a yesterday to compare with.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_host import BAD, make_root

from vmtune.fileio import write_output
from vmtune.report.model import Report, SourceResult
from vmtune.report.openmetrics import local_hostname
from vmtune.report.openmetrics import render as render_openmetrics

from conftest import DOMAINS, ROOT, TESTNODE_URI, run_vmtune
from helpers import options

pytestmark = [pytest.mark.slow, pytest.mark.libvirt]

PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
ALERTS = ROOT / "monitoring" / "prometheus" / "vmtune-alerts.yml"
DASHBOARD = ROOT / "monitoring" / "grafana" / "vmtune-dashboard.json"
DAY = 86400
TODAY_FILES = ["win10-timer-storm.xml", "win-stimer-broken.xml", "nginx-single-queue.xml"]
YESTERDAY_FILES = ["win10-timer-storm.xml", "win-stimer-broken.xml"]

Series = dict[tuple[tuple[str, str], ...], float]


def _need_binaries() -> None:
    missing = [b for b in (PROMETHEUS, PROMTOOL, NODE_EXPORTER) if not os.access(b, os.X_OK)]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: apt-get install prometheus prometheus-node-exporter "
                    "(scripts/test installs them)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return bytes(response.read())


def _wait(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            value = check()
            if value:
                return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _samples(text: str) -> list[Any]:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _backfill(texts: list[str], instance: str, start: float, out: Path) -> None:
    """Yesterday's scrapes of these textfiles as OpenMetrics with timestamps: one sample a minute
    from `start` for half an hour, with the labels a scrape adds. A run's timestamp stays the
    time that run finished (`start`)."""
    by_name: dict[str, list[str]] = {}
    for text in texts:
        for sample in _samples(text):
            labels = {k: v for k, v in sample.labels.items() if v} | {"instance": instance, "job": "node"}
            rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            value = start if sample.name.endswith("_last_run_timestamp_seconds") else sample.value
            by_name.setdefault(sample.name, []).append(f"{sample.name}{{{rendered}}} {value}")
    lines = []
    for name, series in by_name.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [f"{line} {start + 60 * minute:.3f}" for minute in range(31) for line in series]
    source = out.parent / "yesterday.om"
    source.write_text("\n".join(lines) + "\n# EOF\n")
    result = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@dataclass
class Fleet:
    api: str
    node_log: Path
    textfiles: Path
    hypervisor: str  # the test-driver host's name from libvirt
    runner: str  # this machine's, for the runs without --metrics-host
    stamps: dict[tuple[str, str], float] = field(default_factory=dict)  # (run, host) -> last run timestamp
    live: Report = field(default_factory=Report)
    gone_stamp: float = 0.0

    def query(self, expr: str, at: float) -> Series:
        url = f"{self.api}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        document = json.loads(_get(url))
        assert document["status"] == "success", document
        return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("instance", "job"))):
                float(r["value"][1]) for r in document["data"]["result"]}


def _key(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _live_run(textfiles: Path, now: float) -> tuple[Report, str]:
    """The test-driver host after `apply` defined win10's fixes while it runs: checked live."""
    from vmtune.fixer import fix_document
    from vmtune.live.check import scan_host
    from vmtune.live.connection import open_connection, persistent_xml

    conn = open_connection(TESTNODE_URI)
    try:
        outcome = fix_document(persistent_xml(conn.lookupByName("win10")).encode(), "win10", options(), False)
        conn.defineXML(outcome.fixed.decode())
        results, errors = scan_host(None, [], options(), conn=conn)
        hypervisor = str(conn.getHostname())
    finally:
        conn.close()
    assert errors == []
    report = Report()
    for result in results:
        report.add(result)
    write_output(textfiles / "vmtune-live.prom", render_openmetrics(report, now=now).encode(), "report")
    return report, hypervisor


def _host_run(root: Path, now: float) -> str:
    """`vmtune host` as run_host builds it, with the clock of `now`."""
    from vmtune.host.system import HostSystem
    from vmtune.rules.hostrules import HOST_RULES

    system = HostSystem.read(root)
    report = Report(subject="host(s)")
    report.add(SourceResult(str(root), "(host)", [f for rule in HOST_RULES for f in rule.check_host(system)],
                            host=str(root)))
    return render_openmetrics(report, now=now)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, libvirt_mod) -> Iterator[Fleet]:  # type: ignore[no-untyped-def]
    _need_binaries()
    pytest.importorskip("prometheus_client")
    base = tmp_path_factory.mktemp("prometheus")
    textfiles, data = base / "textfile", base / "data"
    textfiles.mkdir()
    start = time.time()
    node_port, prom_port = _free_port(), _free_port()
    instance = f"127.0.0.1:{node_port}"

    # Yesterday, backfilled: hv01 without nginx01 and without the oddly named file, a clean host
    # run on hv01, and a host hv-gone that reported then and not today.
    good = make_root(base / "good", {})
    yesterday = [
        run_vmtune("check", "-f", "openmetrics", "--metrics-host", "hv01",
                   *(str(DOMAINS / n) for n in YESTERDAY_FILES)).stdout,
        run_vmtune("host", "--root", str(good), "-f", "openmetrics", "--metrics-host", "hv01").stdout,
        run_vmtune("check", "-f", "openmetrics", "--metrics-host", "hv-gone", str(DOMAINS / "linux-tuned.xml")).stdout,
        run_vmtune("host", "--root", str(good), "-f", "openmetrics", "--metrics-host", "hv-gone").stdout,
    ]
    gone_stamp = round(start - DAY - 300, 3)
    _backfill(yesterday, instance, gone_stamp, data)

    # Today's files, as the documented timer writes them.
    odd = base / "files"
    odd.mkdir()
    with open(os.fsencode(odd) + b"/db-\xff.xml", "wb") as fh:  # a name that is not UTF-8
        fh.write((DOMAINS / "xen-ballooned.xml").read_bytes())
    (odd / "broken.xml").write_text("<domain><name>x</name>")
    today = [str(DOMAINS / n) for n in TODAY_FILES] + [str(odd)]
    check = run_vmtune("check", "-f", "openmetrics", "-o", str(textfiles / "vmtune.prom"), "--metrics-host", "hv01",
                       *today)
    assert check.returncode == 2 and "broken.xml" in check.stderr  # the malformed file, reported and counted
    bad = make_root(base / "bad", {**BAD["HOST002"], **BAD["HOST003"], **BAD["HOST006"]})
    host = run_vmtune("host", "--root", str(bad), "-f", "openmetrics", "-o", str(textfiles / "vmtune-host.prom"),
                      "--metrics-host", "hv01")
    assert host.returncode == 1, host.stderr
    live, hypervisor = _live_run(textfiles, now=round(start - 7200, 3))
    write_output(textfiles / "vmtune-live-host.prom", _host_run(good, now=round(start - 5400, 3)).encode(), "report")

    fleet = Fleet(f"http://127.0.0.1:{prom_port}", base / "node_exporter.log", textfiles, hypervisor,
                  local_hostname(), live=live, gone_stamp=gone_stamp)
    for name in ("vmtune.prom", "vmtune-host.prom"):
        for sample in _samples((textfiles / name).read_text()):
            if sample.name.endswith("_last_run_timestamp_seconds"):
                fleet.stamps[(sample.name.split("_")[1], sample.labels["host"])] = sample.value
    fleet.stamps[("check", fleet.runner)] = round(start - 7200, 3)
    fleet.stamps[("host", fleet.runner)] = round(start - 5400, 3)

    config = base / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [instance]}]}],
    }))
    with _process([NODE_EXPORTER, f"--web.listen-address={instance}", "--collector.disable-defaults",
                   "--collector.textfile", f"--collector.textfile.directory={textfiles}"], fleet.node_log), \
         _process([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
                   f"--web.listen-address=127.0.0.1:{prom_port}"], base / "prometheus.log"):
        _wait("node_exporter", lambda: b"node_textfile_scrape_error" in _get(f"http://{instance}/metrics"))
        _wait("Prometheus", lambda: _get(f"{fleet.api}/-/ready"))
        _wait("a scrape with the vmtune series",
              lambda: fleet.query('vmtune_check_domains{host="hv01"}', time.time()))
        _wait("the alert rules' first evaluation", lambda: all(
            rule["lastEvaluation"] > "2000" for group in json.loads(_get(f"{fleet.api}/api/v1/rules"))["data"]["groups"]
            for rule in group["rules"]))
        yield fleet


def _textfile_series(textfiles: Path) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    series = set()
    for path in sorted(textfiles.glob("*.prom")):
        for sample in _samples(path.read_text()):
            series.add((sample.name, tuple(sorted((k, v) for k, v in sample.labels.items() if v))))
    return series


def test_node_exporter_reads_both_runs_without_error_or_collision(fleet: Fleet) -> None:
    at = time.time()
    # What the issue saw: node_exporter drops a colliding series, logs it, and reports no error.
    log = fleet.node_log.read_text()
    assert "level=error" not in log and "collected before" not in log, log
    assert fleet.query("node_textfile_scrape_error", at) == {_key(__name__="node_textfile_scrape_error"): 0.0}
    names = ("vmtune.prom", "vmtune-host.prom", "vmtune-live.prom", "vmtune-live-host.prom")
    assert set(fleet.query("node_textfile_mtime_seconds", at)) == {
        _key(__name__="node_textfile_mtime_seconds", file=str(fleet.textfiles / name)) for name in names}
    # Every series of every file reached Prometheus, none twice, none merged with another.
    expected = _textfile_series(fleet.textfiles)
    scraped = {(dict(labels)["__name__"], tuple((k, v) for k, v in labels if k != "__name__"))
               for labels in fleet.query('{__name__=~"vmtune_.+"}', at)}
    assert scraped == expected
    assert len(expected) > 60


def test_the_odd_file_name_arrives_as_valid_utf8(fleet: Fleet) -> None:
    files = fleet.query('vmtune_check_findings{domain="xen-hvm-db"}', time.time())
    assert [dict(k)["file"].rsplit("/", 1)[1] for k in files] == ["db-\ufffd.xml"]


def test_sums_in_prometheus_match_the_json_report(fleet: Fleet) -> None:
    """No double counting: per host and severity, Prometheus' sum equals what `-f json` counts."""
    at = time.time()
    document = json.loads(run_vmtune("check", "-f", "json", *(str(DOMAINS / n) for n in TODAY_FILES),
                                     str(DOMAINS / "xen-ballooned.xml")).stdout)
    by_severity = fleet.query('sum by (severity) (vmtune_check_findings{host="hv01"})', at)
    assert by_severity == {_key(severity=s): float(document["summary"][s]) for s in ("error", "warning", "info")}
    live = fleet.live.counts()
    assert fleet.query(f'sum by (severity) (vmtune_check_findings{{host="{fleet.hypervisor}"}})', at) == {
        _key(severity=s): float(n) for s, n in live.items() if n}
    assert fleet.query("sum(vmtune_check_fixable_findings)", at) == {
        (): float(document["summary"]["fixable"] + fleet.live.tally.fixable)}


def test_promtool_accepts_the_rules() -> None:
    _need_binaries()
    result = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "SUCCESS: 9 rules found" in result.stdout, result.stdout + result.stderr


def _alert_expectations(fleet: Fleet, at: float) -> dict[str, Series]:
    runner, hypervisor = fleet.runner, fleet.hypervisor
    return {
        "VmtuneDomainErrors": {_key(host="hv01", domain="win-broken"): 1, _key(host=hypervisor, domain="db01"): 1,
                               _key(host=hypervisor, domain="db02"): 1},
        "VmtuneHostErrors": {_key(host="hv01"): 1},
        # nginx01 and the oddly named xen-hvm-db are new on hv01; the test-driver host did not
        # report yesterday, so its warnings are not "new".
        "VmtuneNewWarnings": {_key(host="hv01", domain="nginx01", rule="NET001"): 1,
                              _key(host="hv01", domain="xen-hvm-db", rule="MEM003"): 1},
        "VmtuneNewHostWarnings": {_key(host="hv01", rule="HOST002"): 1},
        "VmtuneInputErrors": {_key(host="hv01"): 1},
        "VmtuneCheckRunStale": {_key(host=runner): at - fleet.stamps[("check", runner)]},
        "VmtuneHostRunStale": {_key(host=runner): at - fleet.stamps[("host", runner)]},
        "VmtuneCheckRunMissing": {_key(host="hv-gone"): fleet.gone_stamp},
        "VmtuneHostRunMissing": {_key(host="hv-gone"): fleet.gone_stamp},
    }


def _approx(series: Series) -> Series:
    return {k: pytest.approx(v, abs=2e-3) for k, v in series.items()}  # type: ignore[misc]


def test_each_alert_expression_returns_what_the_data_says(fleet: Fleet) -> None:
    rules = {r["alert"]: r["expr"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    at = round(time.time(), 3)
    expected = _alert_expectations(fleet, at)
    assert set(rules) == set(expected)
    for name, expr in rules.items():
        assert fleet.query(expr, at) == _approx(expected[name]), name


def _firing(fleet: Fleet) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    alerts = json.loads(_get(f"{fleet.api}/api/v1/alerts"))["data"]["alerts"]
    return {(a["labels"]["alertname"], _key(**{k: v for k, v in a["labels"].items()
                                               if k not in ("alertname", "severity")}))
            for a in alerts if a["state"] == "firing"}


def test_prometheus_fires_every_alert_for_exactly_those_series(fleet: Fleet) -> None:
    expected = {(name, key) for name, series in _alert_expectations(fleet, time.time()).items() for key in series}
    # Rules evaluate every second; the first evaluations may predate the first scrape.
    deadline = time.monotonic() + 20
    while _firing(fleet) != expected and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _firing(fleet) == expected


def _dashboard_targets() -> list[tuple[str, str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            targets.append((panel["title"], target["refId"], target["expr"]))
    return targets


def test_dashboard_is_importable_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "vmtune-fleet" and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["host"]["allValue"] == ".*" and variables["host"]["includeAll"]
    for panel in dashboard["panels"]:
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    assert all('host=~"$host"' in expr for _, _, expr in _dashboard_targets())


def test_grafana_import_asks_for_the_prometheus_data_source() -> None:
    """Before: no `__inputs`, so Grafana's import dialog offered no data-source choice (the docs
    say "pick the Prometheus data source") and the dashboard opened on whatever was default.
    Import replaces each `${DS_PROMETHEUS}` with the data source picked; the `datasource`
    variable starts on it and every panel and the `$host` query go through that variable."""
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    assert list(dashboard)[:2] == ["__inputs", "__requires"]
    assert dashboard["__inputs"] == [{
        "name": "DS_PROMETHEUS", "label": "Prometheus",
        "description": "The Prometheus that scrapes node_exporter's textfile collector.",
        "type": "datasource", "pluginId": "prometheus", "pluginName": "Prometheus"}]
    required = {(r["type"], r["id"]) for r in dashboard["__requires"]}
    panel_types = {p["type"] for p in dashboard["panels"]} - {"row"}
    assert required == {("grafana", "grafana"), ("datasource", "prometheus")} | {("panel", t) for t in panel_types}
    # Every ${DS_...} is declared and every input used: nothing left unresolved after import.
    assert set(re.findall(r"\$\{(DS_[A-Z_]+)\}", text)) == {i["name"] for i in dashboard["__inputs"]}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["current"] == {"selected": True, "text": "${DS_PROMETHEUS}",
                                                  "value": "${DS_PROMETHEUS}"}
    assert variables["host"]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    imported = json.loads(text.replace("${DS_PROMETHEUS}", "prom-uid-1"))  # what the import does
    assert "${DS_" not in json.dumps(imported)
    assert {v["name"]: v for v in imported["templating"]["list"]}["datasource"]["current"]["value"] == "prom-uid-1"


def test_live_series_have_no_file_label_and_promtool_accepts_them(tmp_path: Path) -> None:
    """Before: every live series carried `file=""`; docs/output.md says the label is there only
    for files. A real live run over libvirt's test driver, next to a run over files."""
    _need_binaries()
    pytest.importorskip("prometheus_client")
    live = run_vmtune("check", "--isolated", "-c", TESTNODE_URI, "--all", "-f", "openmetrics")
    files = run_vmtune("check", "--isolated", "-f", "openmetrics", str(DOMAINS / "win10-timer-storm.xml"))
    assert live.returncode == files.returncode == 1, live.stderr + files.stderr
    live_findings = [s for s in _samples(live.stdout) if s.name == "vmtune_check_findings"]
    assert live_findings and all("file" not in s.labels for s in live_findings)
    assert "file=" not in live.stdout
    file_findings = [s for s in _samples(files.stdout) if s.name.startswith("vmtune_check_f")]
    assert file_findings and all(s.labels["file"] == str(DOMAINS / "win10-timer-storm.xml") for s in file_findings)
    for text in (live.stdout, files.stdout):
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert lint.returncode == 0 and lint.stdout == lint.stderr == "", lint.stdout + lint.stderr


def _top_rules(fleet: Fleet, at: float, metric: str) -> Series:
    return fleet.query(f"sum by (rule, name) ({metric})", at)


def test_each_dashboard_query_returns_what_the_data_says(fleet: Fleet) -> None:
    at = round(time.time(), 3)
    hypervisor, runner = fleet.hypervisor, fleet.runner
    live = fleet.live.counts()
    # win10, win-broken, nginx01, xen-hvm-db: what `-f json` counts for the same files
    summary = json.loads(run_vmtune("check", "-f", "json", *(str(DOMAINS / n) for n in TODAY_FILES),
                                    str(DOMAINS / "xen-ballooned.xml")).stdout)["summary"]
    hv01 = {s: float(summary[s]) for s in ("error", "warning", "info")}
    assert hv01["error"] == 1 and hv01["warning"] >= 5  # win-broken's HV002; the incidents' warnings
    total = {s: hv01[s] + live[s] for s in hv01}
    per_host = {_key(host="hv01", severity=s): n for s, n in hv01.items()} | {
        _key(host=hypervisor, severity=s): float(n) for s, n in live.items() if n}
    expected: dict[tuple[str, str], Series] = {
        ("Hypervisors", "A"): {(): 2},
        ("Domains checked", "A"): {(): 4 + len(fleet.live.results)},
        ("Domain findings", "A"): {_key(severity=s): n for s, n in total.items()},
        ("Domains with errors", "A"): {(): 3},
        ("Pending restarts", "A"): {(): 1},
        ("Inputs not checked", "A"): {(): 1},
        ("Findings by severity per host", "A"): per_host,
        ("Findings by severity per host", "B"): {_key(host="hv01", severity=s): 1 for s in hv01},
        ("Top rules", "B"): {_key(rule="HOST002", name="halt-polling-off"): 1,
                             _key(rule="HOST003", name="ksm-running"): 1,
                             _key(rule="HOST006", name="kvm-device-missing"): 1},
        ("Error findings per domain", "A"): {_key(host="hv01", domain="win-broken"): 1,
                                              _key(host=hypervisor, domain="db01"): 1,
                                              _key(host=hypervisor, domain="db02"): 1},
        ("Restart pending per domain", "A"): {_key(host=hypervisor, domain="win10"): 2},
        ("Age of the last run", "A"): {_key(host="hv01"): at - fleet.stamps[("check", "hv01")],
                                       _key(host=runner): at - fleet.stamps[("check", runner)]},
        ("Age of the last run", "B"): {_key(host="hv01"): at - fleet.stamps[("host", "hv01")],
                                       _key(host=runner): at - fleet.stamps[("host", runner)]},
    }
    seen = set()
    for title, ref, expr in _dashboard_targets():
        result = fleet.query(expr.replace("$host", ".*"), at)  # the variable's "All"
        key = (title, ref)
        seen.add(key)
        if key == ("Top rules", "A"):  # topk: the 10 largest sums (ties broken by Prometheus)
            sums = _top_rules(fleet, at, "vmtune_check_findings")
            assert len(result) == min(10, len(sums)) and all(sums[k] == v for k, v in result.items())
            assert min(result.values()) >= max(v for k, v in sums.items() if k not in result)
            continue
        assert result == _approx(expected[key]), key
    assert seen == set(expected) | {("Top rules", "A")}


def test_inputs_not_checked_shows_0_for_a_hypervisor_checked_from_elsewhere(fleet: Fleet) -> None:
    """Before: "Inputs not checked" lacked the `or vector(0)` of its siblings, so picking a
    hypervisor that a central runner checks over the network (its input errors are counted on
    the runner) showed "No data" instead of 0. Runs last: it adds a textfile for a while."""
    remote = Report(metrics_host="ctl01")  # ctl01 checks hv03's domains with `-c qemu+ssh://hv03/system`
    for result in fleet.live.results:
        result.hostname = "hv03"
        remote.add(result)
    extra = fleet.textfiles / "vmtune-ctl01.prom"
    write_output(extra, render_openmetrics(remote, now=time.time()).encode(), "report")
    try:
        _wait("hv03's series", lambda: fleet.query('vmtune_check_domains{host="hv03"}', time.time()))
        stats = {title: expr for title, _, expr in _dashboard_targets()}
        at = time.time()
        for title, expected in (("Inputs not checked", 0), ("Domains with errors", 2), ("Pending restarts", 1)):
            assert fleet.query(stats[title].replace("$host", "hv03"), at) == {(): expected}, title
        assert fleet.query(stats["Inputs not checked"].replace("$host", "ctl01"), at) == {(): 0}
    finally:
        extra.unlink()
        for result in fleet.live.results:
            result.hostname = fleet.hypervisor
