"""--format openmetrics: valid for Prometheus' text parser and the OpenMetrics parser, written atomically,
one metrics model for `check` and `host` (distinct families, host = the machine a series is about)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmtune.report.openmetrics import local_hostname

from conftest import DOMAINS, ROOT, TESTNODE_URI, run_vmtune


def _families(text: str) -> dict[str, list]:  # type: ignore[type-arg]
    openmetrics = pytest.importorskip("prometheus_client.openmetrics.parser")
    prometheus = pytest.importorskip("prometheus_client.parser")
    strict = {f.name: f.samples for f in openmetrics.text_string_to_metric_families(text)}
    classic = {f.name: f.samples for f in prometheus.text_string_to_metric_families(text)}
    assert set(strict) == set(classic)  # node_exporter's textfile collector reads the classic format
    return strict


def _host_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)  # a copied /dev without kvm: HOST006 (error)
    return root


def test_check_files_as_openmetrics(tmp_path: Path) -> None:
    target = tmp_path / "vmtune.prom"
    files = [str(DOMAINS / "win10-timer-storm.xml"), str(DOMAINS / "nginx-single-queue.xml")]
    result = run_vmtune("check", "-f", "openmetrics", "-o", str(target), "--metrics-host", "hv01", *files)
    assert result.returncode == 1 and result.stdout == ""
    families = _families(target.read_text())
    findings = {(s.labels["host"], s.labels["domain"], s.labels["file"], s.labels["rule"], s.labels["name"],
                 s.labels["severity"]): s.value for s in families["vmtune_check_findings"]}
    assert findings[("hv01", "win10", files[0], "CLK002", "windows-synthetic-timers-missing", "warning")] == 1
    assert findings[("hv01", "nginx01", files[1], "NET001", "virtio-net-single-queue", "warning")] == 1
    # Every finding in exactly one series: sums agree with the JSON report of the same files.
    summary = json.loads(run_vmtune("check", "-f", "json", *files).stdout)["summary"]
    for severity in ("error", "warning", "info"):
        assert sum(v for k, v in findings.items() if k[5] == severity) == summary[severity]
    fixable = {(s.labels["domain"], s.labels["safety"]): s.value for s in families["vmtune_check_fixable_findings"]}
    assert sum(fixable.values()) == summary["fixable"]
    assert fixable[("win10", "safe")] == 2 and fixable[("win10", "unsafe")] == 3  # DSK003, DSK008, NET007
    assert [(s.labels, s.value) for s in families["vmtune_check_domains"]] == [({"host": "hv01"}, 2)]
    assert [(s.labels, s.value) for s in families["vmtune_check_input_errors"]] == [({"host": "hv01"}, 0)]
    stamp = families["vmtune_check_last_run_timestamp_seconds"]
    assert stamp[0].labels == {"host": "hv01"} and stamp[0].value > 1.7e9
    assert families["vmtune_check_pending_restart_findings"] == []  # files have no running guest
    assert not list(tmp_path.glob(".vmtune.prom.*"))  # the temp file of the atomic write is gone


def test_check_and_host_runs_share_no_series_and_label_the_same_host(tmp_path: Path) -> None:
    """Both files in one textfile directory: no family in both, and without --metrics-host both
    name this machine as libvirt would."""
    check = _families(run_vmtune("check", "-f", "openmetrics", str(DOMAINS / "win10-timer-storm.xml")).stdout)
    host = _families(run_vmtune("host", "--root", str(_host_root(tmp_path)), "-f", "openmetrics").stdout)
    assert set(check) & set(host) == set()
    assert all(name.startswith("vmtune_check_") for name in check)
    assert all(name.startswith("vmtune_host_") for name in host)
    assert {s.labels["host"] for samples in check.values() for s in samples} == {local_hostname()}
    assert {s.labels["host"] for samples in host.values() for s in samples} == {local_hostname()}
    assert [(s.labels, s.value) for s in host["vmtune_host_findings"]] == [
        ({"host": local_hostname(), "rule": "HOST006", "name": "kvm-device-missing", "severity": "error"}, 1)]
    assert "domain" not in {label for samples in host.values() for s in samples for label in s.labels}


def test_host_run_takes_the_metrics_host(tmp_path: Path) -> None:
    target = tmp_path / "vmtune-host.prom"
    result = run_vmtune("host", "--root", str(_host_root(tmp_path)), "-f", "openmetrics", "-o", str(target),
                        "--metrics-host", "hv02")
    assert result.returncode == 1 and result.stdout == ""
    families = _families(target.read_text())
    assert {s.labels["host"] for samples in families.values() for s in samples} == {"hv02"}
    assert families["vmtune_host_last_run_timestamp_seconds"][0].value > 1.7e9


def test_label_values_are_escaped(tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird\\name.xml'
    odd.write_bytes((DOMAINS / "win10-timer-storm.xml").read_bytes().replace(b"<name>win10</name>",
                                                                             b'<name>a"b\\c&#10;d</name>'))
    text = run_vmtune("check", "-f", "openmetrics", str(odd)).stdout
    samples = _families(text)["vmtune_check_findings"]
    assert {s.labels["domain"] for s in samples} == {'a"b\\c\nd'}
    assert {s.labels["file"] for s in samples} == {str(odd)}


def test_undecodable_file_names_still_give_valid_utf8(tmp_path: Path) -> None:
    """A file name that is not UTF-8 must not make Prometheus reject the whole file: its undecodable
    byte becomes U+FFFD; a terminal escape in it shows as a visible escape, as in every format (#49)."""
    folder = os.fsencode(tmp_path)
    name = folder + b"/caf\xe9\x1b[31m.xml"
    with open(name, "wb") as fh:
        fh.write((DOMAINS / "win10-timer-storm.xml").read_bytes())
    result = subprocess.run([sys.executable, "-m", "vmtune", "check", "-f", "openmetrics", name],
                            capture_output=True, cwd=ROOT, timeout=120)
    assert result.returncode == 1, result.stderr
    text = result.stdout.decode("utf-8")  # strict: raises on invalid UTF-8
    files = {s.labels["file"] for s in _families(text)["vmtune_check_findings"]}
    assert files == {f"{tmp_path}/caf\ufffd\\x1b[31m.xml"}


def test_without_prometheus_client_the_format_says_what_to_install(tmp_path: Path) -> None:
    probe = ("import sys; sys.modules['prometheus_client'] = None; sys.argv = ['vmtune', *sys.argv[1:]]; "
             "from vmtune.main import main; main()")
    for args in (["check", "-f", "openmetrics", str(DOMAINS / "win10-timer-storm.xml")],
                 ["host", "--root", str(_host_root(tmp_path)), "-f", "openmetrics"]):
        result = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=ROOT,
                                timeout=120)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == ("vmtune: --format openmetrics needs prometheus_client: pip install "
                                 "'vmtune[metrics]' (or pip install prometheus-client)\n")


def test_live_domains_carry_the_hypervisors_hostname(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    live = run_vmtune("check", "-c", TESTNODE_URI, "--all", "-f", "openmetrics", "--metrics-host", "runner")
    families = _families(live.stdout)
    conn = libvirt_mod.open(TESTNODE_URI)
    try:
        hypervisor = conn.getHostname()
        names = sorted(dom.name() for dom in conn.listAllDomains(0))
    finally:
        conn.close()
    assert {s.labels["host"] for s in families["vmtune_check_findings"]} == {hypervisor}
    assert all("file" not in s.labels for s in families["vmtune_check_findings"])  # the label is for files
    assert [(s.labels, s.value) for s in families["vmtune_check_domains"]] == [({"host": hypervisor}, len(names))]
    # One pending-restart series per live domain; a fresh test-driver connection has nothing pending.
    assert sorted((s.labels["domain"], s.value) for s in families["vmtune_check_pending_restart_findings"]) == [
        (name, 0) for name in names]
    # The run's own series are about the machine that ran it.
    assert families["vmtune_check_last_run_timestamp_seconds"][0].labels == {"host": "runner"}
