"""--format openmetrics: valid for Prometheus' text parser and the OpenMetrics parser, written atomically."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import DOMAINS, TESTNODE_URI, run_vmtune


def _families(text: str) -> dict[str, list]:  # type: ignore[type-arg]
    openmetrics = pytest.importorskip("prometheus_client.openmetrics.parser")
    prometheus = pytest.importorskip("prometheus_client.parser")
    strict = {f.name: f.samples for f in openmetrics.text_string_to_metric_families(text)}
    classic = {f.name: f.samples for f in prometheus.text_string_to_metric_families(text)}
    assert set(strict) == set(classic)  # node_exporter's textfile collector reads the classic format
    return strict


def test_check_files_as_openmetrics(tmp_path: Path) -> None:
    target = tmp_path / "vmtune.prom"
    result = run_vmtune("check", "-f", "openmetrics", "-o", str(target), str(DOMAINS / "win10-timer-storm.xml"),
                        str(DOMAINS / "nginx-single-queue.xml"))
    assert result.returncode == 1 and result.stdout == ""
    families = _families(target.read_text())
    findings = {(s.labels["domain"], s.labels["rule"], s.labels["severity"]): s.value
                for s in families["vmtune_findings"]}
    assert findings[("win10", "CLK002", "warning")] == 1 and findings[("nginx01", "NET001", "warning")] == 1
    assert families["vmtune_domains_checked"][0].value == 2
    assert {s.labels["severity"]: s.value for s in families["vmtune_findings_by_severity"]} == {
        "error": 0, "warning": 3, "info": 5}
    assert families["vmtune_input_errors"][0].value == 0
    assert families["vmtune_last_run_timestamp_seconds"][0].value > 1.7e9
    assert not list(tmp_path.glob(".vmtune.prom.*"))  # the temp file of the atomic write is gone


def test_label_values_are_escaped(tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird\\name.xml'
    odd.write_bytes((DOMAINS / "win10-timer-storm.xml").read_bytes().replace(b"<name>win10</name>",
                                                                             b'<name>a"b\\c</name>'))
    text = run_vmtune("check", "-f", "openmetrics", str(odd)).stdout
    domains = {s.labels["domain"] for s in _families(text)["vmtune_findings"]}
    assert domains == {'a"b\\c'}


def test_live_domains_and_the_host_as_openmetrics(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    live = run_vmtune("check", "-c", TESTNODE_URI, "--all", "-f", "openmetrics")
    families = _families(live.stdout)
    assert {s.labels["host"] for s in families["vmtune_findings"]} == {TESTNODE_URI}
    assert families["vmtune_domains_checked"][0].value >= 5
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    host = _families(run_vmtune("host", "--root", str(root), "-f", "openmetrics").stdout)
    assert host["vmtune_hosts_checked"][0].value == 1
    assert {s.labels["rule"] for s in host["vmtune_findings"]} >= {"HOST006"}
