"""Live `check` tells a running guest's configuration from its persistent definition: findings
fixed in the definition (by `vmtune apply` or by hand) but still in effect in the running guest
are reported as pending a restart, in text, JSON and a metric."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from vmtune.fixer import fix_document
from vmtune.live.check import scan_host
from vmtune.live.connection import open_connection, persistent_xml
from vmtune.report import render
from vmtune.report.model import Report

from conftest import TESTNODE_URI, domain_xml
from helpers import options

pytestmark = pytest.mark.libvirt


def _report(conn, keys: list[str] | None = None) -> Report:  # type: ignore[no-untyped-def]
    results, errors = scan_host(None, keys or [], options(), conn=conn)
    assert errors == []
    report = Report()
    for result in results:
        report.add(result)
    return report


def _metric(report: Report) -> dict[str, float]:
    parser = pytest.importorskip("prometheus_client.openmetrics.parser")
    families = {f.name: f.samples for f in parser.text_string_to_metric_families(render("openmetrics", report))}
    return {s.labels["domain"]: s.value for s in families["vmtune_check_pending_restart_findings"]}


def _define_fixed(conn, name: str, select: tuple[str, ...] = (), unsafe: bool = False) -> list[str]:  # type: ignore[no-untyped-def]
    """Define the fixed definition as `vmtune apply` would; the codes it fixed."""
    outcome = fix_document(persistent_xml(conn.lookupByName(name)).encode(), name,
                           options(select=list(select), fix_select=select), unsafe)
    assert outcome.changed
    conn.defineXML(outcome.fixed.decode())
    return sorted({a.code for a in outcome.applied})


@pytest.fixture
def testnode(libvirt_mod):  # type: ignore[no-untyped-def]
    conn = open_connection(TESTNODE_URI)  # the test driver keeps the changes while this is open
    yield conn
    conn.close()


def test_fixes_defined_for_a_running_guest_are_pending_a_restart(testnode) -> None:  # type: ignore[no-untyped-def]
    assert testnode.lookupByName("win10").isActive() and not testnode.lookupByName("win10-off").isActive()
    assert _metric(_report(testnode))["win10"] == 0
    fixed = _define_fixed(testnode, "win10")
    assert fixed == ["CLK002", "HV001"]
    _define_fixed(testnode, "win10-off")  # shut off: its next start takes the new definition

    report = _report(testnode)
    by_name = {r.domain_name: r for r in report.results}
    assert sorted(f.rule.code for f in by_name["win10"].pending_restart) == fixed
    assert {f.rule.code for f in by_name["win10"].findings} == {"DSK003", "DSK008", "NET007"}  # its own infos
    assert by_name["win10-off"].pending_restart == []
    assert all(not r.pending_restart for name, r in by_name.items() if name != "win10")

    text = render("text", report)
    source = f"{TESTNODE_URI}/win10"
    assert (f"{source}: pending restart: CLK002, HV001 fixed in the definition, still in the running guest "
            "(a full shutdown and start applies the fixes; a reboot does not)\n") in text
    assert text.count("pending restart") == 1

    document = json.loads(render("json", report))
    assert [(p["domain"], p["source"], p["host"], sorted(f["rule"] for f in p["findings"]))
            for p in document["pending_restart"]] == [("win10", source, TESTNODE_URI, fixed)]
    assert {f["severity"] for f in document["pending_restart"][0]["findings"]} == {"warning"}

    gauge = _metric(report)
    assert gauge["win10"] == 2 and gauge["win10-off"] == 0
    assert sum(gauge.values()) == 2


def test_a_restart_clears_what_was_pending(testnode) -> None:  # type: ignore[no-untyped-def]
    _define_fixed(testnode, "nginx01")
    assert [f.rule.code for f in _report(testnode, ["nginx01"]).results[0].pending_restart] == ["NET001"]
    dom = testnode.lookupByName("nginx01")
    dom.destroy()
    assert _report(testnode, ["nginx01"]).results[0].pending_restart == []  # shut off: nothing running
    dom.create()  # started from the new definition
    result = _report(testnode, ["nginx01"]).results[0]
    assert result.pending_restart == [] and "NET001" not in {f.rule.code for f in result.findings}


@pytest.mark.slow
def test_embedded_qemu_guest_started_paused(embed_conn, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """A real QEMU (TCG) guest: its live XML carries runtime additions (aliases, the expanded CPU
    model, PCI addresses) that must not read as pending; a defined fix must."""
    xml = domain_xml(dtype="qemu", name="pending-tcg", vcpus=4, memory="<memory unit='MiB'>128</memory>",
                     cpu="<cpu mode='host-model'/>", machine="pc",
                     devices="<controller type='usb' model='piix3-uhci'/><input type='tablet' bus='usb'/>")
    dom = embed_conn.defineXML(xml)
    try:
        dom.createWithFlags(libvirt_mod.VIR_DOMAIN_START_PAUSED)
        assert dom.XMLDesc(0) != persistent_xml(dom, secure=False)  # the live XML differs from the definition
        before = _report(embed_conn, ["pending-tcg"]).results[0]
        assert before.pending_restart == []
        assert "USB001" in {f.rule.code for f in before.findings}
        assert _define_fixed(embed_conn, "pending-tcg", select=("USB001",), unsafe=True) == ["USB001"]
        after = _report(embed_conn, ["pending-tcg"]).results[0]
        assert [f.rule.code for f in after.pending_restart] == ["USB001"]
        assert "USB001" not in {f.rule.code for f in after.findings}
    finally:
        with contextlib.suppress(libvirt_mod.libvirtError):
            dom.destroy()
        dom.undefine()


def test_check_all_text_output_names_no_pending_restart_on_a_fresh_host(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from conftest import run_vmtune

    result = run_vmtune("check", "-c", TESTNODE_URI, "--all")
    assert result.returncode == 1 and "pending restart" not in result.stdout
