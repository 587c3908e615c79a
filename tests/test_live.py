"""Live domains against real libvirt drivers: the test driver and the embedded QEMU driver."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from vmtune.errors import VmtuneError
from vmtune.facts.domain import Domain
from vmtune.xml.safe import parse_domain

from conftest import DOMAINS, ROOT, TESTNODE_URI, domain_xml, run_vmtune
from helpers import host, options

pytestmark = pytest.mark.libvirt


def _apply(conn, key, state, **kw):  # type: ignore[no-untyped-def]
    from vmtune.live.apply import apply_domain

    lines: list[str] = []
    kw.setdefault("yes", True)
    code = apply_domain(conn, key, kw.pop("opts", options()), state_root=state, confirm=lambda q: False,
                        out=lines.append, **kw)
    return code, "\n".join(lines)


@pytest.fixture
def testnode(libvirt_mod):  # type: ignore[no-untyped-def]
    from vmtune.live.connection import open_connection

    conn = open_connection(TESTNODE_URI)
    yield conn
    conn.close()


def test_check_one_live_domain(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    result = run_vmtune("check", "--connect", TESTNODE_URI, "--domain", "win10", "--format", "json")
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    clk = next(f for f in doc["findings"] if f["rule"] == "CLK002")
    assert clk["file"] is None and clk["host"] == TESTNODE_URI and clk["domain"] == "win10"
    assert clk["source"] == f"{TESTNODE_URI}/win10"


def test_check_all_on_several_hosts_with_one_unreachable(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    result = run_vmtune("check", "--all", "-c", TESTNODE_URI, "-c", "qemu+tcp://127.0.0.1:1/system",
                        "-c", "test:///default")
    assert result.returncode == 2
    assert "== win10 (" in result.stdout and "== test (test:///default/test)" in result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("vmtune:")]
    assert len(errors) == 1 and "qemu+tcp://127.0.0.1:1/system" in errors[0] and "cannot connect" in errors[0]


def test_unknown_domain_is_exit_2(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    result = run_vmtune("check", "-c", TESTNODE_URI, "--domain", "nope")
    assert result.returncode == 2 and "no such domain 'nope'" in result.stderr


def test_without_libvirt_python_live_commands_explain_the_extra() -> None:
    probe = ("import sys; sys.modules['libvirt'] = None; sys.argv = ['vmtune', 'check', '--all', '-c', "
             "'test:///default']\nfrom vmtune.main import main\nmain()")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2
    assert result.stderr.strip() == ("vmtune: live domains need libvirt-python: pip install libvirt-python (it "
                                     "builds against libvirt-dev and pkg-config), or pip install '.[live]' in a "
                                     "vmtune checkout")


def test_live_host_facts_feed_numa_rules(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """test:///default is a 2-node host (CPUs 0-7, 8-15); its state is shared within the process."""
    from vmtune.live.check import scan_host
    from vmtune.live.connection import open_connection

    conn = open_connection("test:///default")
    xml = (DOMAINS / "linux-tuned.xml").read_text().replace("<name>linux-tuned</name>", "<name>spread</name>")
    xml = xml.replace("<iothreads>1</iothreads>", "<iothreads>1</iothreads>\n  <cputune><vcpupin vcpu='0' "
                      "cpuset='1'/><vcpupin vcpu='1' cpuset='2'/><vcpupin vcpu='2' cpuset='9'/>"
                      "<vcpupin vcpu='3' cpuset='10'/><emulatorpin cpuset='0'/></cputune>")
    dom = conn.defineXML(xml.replace("7f1a2c3e-0000-4000-8000-000000000012", "7f1a2c3e-0000-4000-8000-0000000000aa"))
    try:
        results, errors = scan_host("test:///default", ["spread"], options())
        assert errors == []
        assert "CPU008" in {f.rule.code for f in results[0].findings}
    finally:
        dom.undefine()
        conn.close()


def test_apply_backup_verify_history_and_rollback(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.apply import rollback_domain
    from vmtune.live.backups import history
    from vmtune.live.connection import persistent_xml

    state = tmp_path / "state"
    before = persistent_xml(testnode.lookupByName("win10"))
    old_umask = os.umask(0)
    try:
        code, out = _apply(testnode, "win10", state, opts=options(select=["CLK002"]))
    finally:
        os.umask(old_umask)
    assert code == 0, out
    after = persistent_xml(testnode.lookupByName("win10"))
    assert "<stimer state='on'/>" in after and "<synic state='on'/>" in after
    assert ("verified: all 1 fix(es) persisted in the new definition libvirt accepted (not verified: that the guest "
            "starts with it)") in out.splitlines()
    assert "running: the new definition takes effect after a full shutdown and start" in out
    saved = history(state, TESTNODE_URI, "7f1a2c3e-0000-4000-8000-000000000010")
    assert len(saved) == 1 and saved[0].xml == before and saved[0].meta["changes"] == ["CLK002"]
    assert stat.S_IMODE(saved[0].path.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved[0].path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(state.stat().st_mode) == 0o700

    lines: list[str] = []
    assert rollback_domain(testnode, "win10", backup_id=None, state_root=state, yes=True,
                           confirm=lambda q: False, out=lines.append) == 0
    assert persistent_xml(testnode.lookupByName("win10")) == before
    assert len(history(state, TESTNODE_URI, "7f1a2c3e-0000-4000-8000-000000000010")) == 2  # rollback is undoable


def test_apply_dry_run_and_declined_confirmation_change_nothing(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.connection import persistent_xml

    before = persistent_xml(testnode.lookupByName("nginx01"))
    code, out = _apply(testnode, "nginx01", tmp_path, dry_run=True)
    assert code == 1 and "+      <driver queues='16'/>" in out and "dry run" in out
    code, out = _apply(testnode, "nginx01", tmp_path, yes=False)
    assert "not applied" in out
    assert persistent_xml(testnode.lookupByName("nginx01")) == before
    assert not [p for p in tmp_path.rglob("*.xml") if p.is_file()]


def test_concurrent_change_aborts_apply(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.connection import persistent_xml

    dom = testnode.lookupByName("nginx01")
    concurrent = persistent_xml(dom).replace("<vcpu placement='static'>16</vcpu>", "<vcpu placement='static'>8</vcpu>")

    def someone_else_edits() -> None:
        testnode.defineXML(concurrent)

    with pytest.raises(VmtuneError, match="definition changed since it was read; nothing applied"):
        _apply(testnode, "nginx01", tmp_path, before_define=someone_else_edits)
    assert persistent_xml(testnode.lookupByName("nginx01")) == concurrent
    assert not [p for p in tmp_path.rglob("*.xml") if p.is_file()]  # no backup for a change that did not happen


def test_managed_domain_is_refused_without_force(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(VmtuneError, match="managed by nova"):
        _apply(testnode, "instance-0000002a", tmp_path)
    code, _ = _apply(testnode, "instance-0000002a", tmp_path, force=True)
    assert code == 0


def test_check_gives_nova_advice(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    result = run_vmtune("check", "-c", TESTNODE_URI, "-d", "instance-0000002a")
    assert "note: managed by OpenStack nova: image property hw_vif_multiqueue_enabled=true" in result.stdout


def test_cli_apply_and_rollback_need_yes_without_a_terminal(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Each CLI run opens a fresh test-driver connection, so the change is not persistent; what
    # matters here is the flow: diff, refusal without confirmation, the error for no backups.
    result = run_vmtune("apply", "-c", TESTNODE_URI, "-d", "nginx01", "--state-dir", str(tmp_path))
    assert result.returncode == 2 and "[y/N]" in result.stderr  # end of input is no answer: not a success
    assert "no answer on stdin (end of input): give --yes to apply, or --dry-run to look" in result.stderr
    declined = run_vmtune("apply", "-c", TESTNODE_URI, "-d", "nginx01", "--state-dir", str(tmp_path), stdin=b"n\n")
    assert declined.returncode == 1 and "not applied" in declined.stdout
    result = run_vmtune("rollback", "-c", TESTNODE_URI, "-d", "nginx01", "--state-dir", str(tmp_path))
    assert result.returncode == 2 and "no backups for this domain" in result.stderr
    result = run_vmtune("history", "-c", TESTNODE_URI, "-d", "nginx01", "--state-dir", str(tmp_path))
    assert result.returncode == 0 and "nginx01: no backups" in result.stdout


@pytest.mark.slow
def test_embedded_qemu_apply_round_trip(embed_conn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real define/verify round trip, gated on this host's real domain capabilities."""
    from vmtune.live.backups import history
    from vmtune.live.connection import persistent_xml

    for name in ("nginx-single-queue.xml", "win10-timer-storm.xml"):
        embed_conn.defineXML((DOMAINS / name).read_text())
    code, out = _apply(embed_conn, "nginx01", tmp_path, opts=options(select=["NET001"]))
    assert code == 0, out
    assert "<driver queues='16'/>" in persistent_xml(embed_conn.lookupByName("nginx01"))
    assert "verified" in out and "shut off" in out

    # This host's KVM offers no Hyper-V synthetic timers (domcapabilities lists spinlocks and
    # vendor_id only) on most machines here: then the Windows timer fix must be HPET, unsafe.
    from vmtune.live.connection import host_facts

    facts = host_facts(embed_conn, "x86_64", "kvm")
    code, out = _apply(embed_conn, "win10", tmp_path, opts=options(select=["CLK002"]), unsafe=True)
    defined = persistent_xml(embed_conn.lookupByName("win10"))
    if facts.hyperv_features is not None and "stimer" not in facts.hyperv_features:
        assert "<timer name='hpet' present='yes'/>" in defined and "stimer" not in defined
    else:
        assert "<stimer state='on'/>" in defined
    assert len(history(tmp_path, embed_conn.getURI(), embed_conn.lookupByName("win10").UUIDString())) == 1


def test_apply_live_pins_emulator_threads_of_a_running_domain(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.connection import open_connection

    policy = tmp_path / "hk.yaml"
    policy.write_text("extends: default\nrules:\n  - select: [CPU004]\n    params: {housekeeping_cpus: '0'}\n")
    conn = open_connection("test:///default")
    xml = (DOMAINS / "linux-tuned.xml").read_text().replace("<name>linux-tuned</name>", "<name>pinned</name>")
    xml = xml.replace("7f1a2c3e-0000-4000-8000-000000000012", "7f1a2c3e-0000-4000-8000-0000000000bb")
    xml = xml.replace("<iothreads>1</iothreads>", "<iothreads>1</iothreads>\n  <cputune>" + "".join(
        f"<vcpupin vcpu='{v}' cpuset='{v + 2}'/>" for v in range(4)) + "</cputune>")
    dom = conn.defineXML(xml)
    dom.create()
    try:
        code, out = _apply(conn, "pinned", tmp_path / "state", opts=options((str(policy),), select=["CPU004"]),
                           unsafe=True, live=True)
        assert code == 0, out
        assert "pinned live: emulator threads to [0]" in out
        assert dom.emulatorPinInfo(libvirt_mod.VIR_DOMAIN_AFFECT_LIVE)[:4] == (True, False, False, False)
    finally:
        dom.destroy()
        dom.undefine()
        conn.close()


def test_live_cross_domain_rules_see_the_other_domains(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """db01 and db02 on the test-driver host are both pinned 1:1 to CPUs 2-3."""
    result = run_vmtune("check", "-c", TESTNODE_URI, "-d", "db01", "--select", "CPU013", "--format", "json")
    findings = json.loads(result.stdout)["findings"]
    assert [(f["rule"], f["severity"], f["message"]) for f in findings] == [
        ("CPU013", "error", "vCPU pins 2-3 are shared with db02 (both dedicated)")]


def test_live_placement_fix_avoids_the_other_domains_pins(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.check import scan_host

    # The test driver reports no NUMA cells for a node file: the topology comes from --host.
    opts = options(("latency",), host_facts=host("intel-2node.xml"), select=["CPU007"])
    results, errors = scan_host(TESTNODE_URI, ["linux-tuned"], opts)
    assert errors == []
    fix = results[0].findings[0].fix
    # node 0 has only one free core left (db01/db02 hold CPUs 2-3 and their siblings 10-11)
    assert fix is not None and fix.description == "pin to node 1 CPUs 5-6,13-14"


def test_live_host_facts_include_free_hugepages(embed_conn) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.connection import host_facts

    facts = host_facts(embed_conn, "x86_64", "qemu")
    assert facts.cells and facts.free_2m_pages is not None
    assert set(facts.free_2m_pages) == {c.id for c in facts.cells}


def test_plan_live_domains_prints_places_and_leaves_nova_alone(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The test driver's custom nodes have no NUMA cells, so --host gives the topology; the domains are live."""
    args = ("plan", "--isolated", "-c", TESTNODE_URI, "--host", str(ROOT / "fixtures/hosts/intel-2node.xml"))
    printed = run_vmtune(*args)
    assert printed.returncode == 1, printed.stderr  # legacy-big and nginx01 (16 vCPUs) do not fit a 4-core node
    lines = printed.stdout.splitlines()
    assert "instance-0000002a: managed by nova, which places it; left as it is" in lines
    # db01 and db02 are pinned to the same CPUs (CPU013's error): db02 moves, to node 0's free core.
    assert "db02: vCPU pins 2-3 are shared with db01 (both dedicated): planned anew" in lines
    assert ("db02: node 0, vCPU->CPU 0->1, 1->9; emulator and I/O threads on 0,8; memory (4 GiB) bound to node 0"
            in lines)
    assert ("win10: node 1, vCPU->CPU 0->7, 1->15; emulator and I/O threads on 4,12; memory (4 GiB) bound to node 1"
            in lines)
    written = run_vmtune(*args, "--write", "--yes", "--state-dir", str(tmp_path))
    assert written.returncode == 1, written.stderr
    assert "+    <vcpupin vcpu='0' cpuset='1'/>" in written.stdout
    assert "verified: win10 is pinned to node 1" in written.stdout
    assert "verified: db02 is pinned to node 0" in written.stdout
    assert len([p for p in tmp_path.rglob("*.xml") if p.is_file()]) == 3  # one backup per placed domain
    unanswered = run_vmtune(*args, "--write", "--state-dir", str(tmp_path / "declined"))  # end of input: no answer
    assert unanswered.returncode == 2 and "verified" not in unanswered.stdout
    assert "vmtune: no answer on stdin (end of input): give --yes to apply, or --dry-run to look" in unanswered.stderr
    declined = run_vmtune(*args, "--write", "--state-dir", str(tmp_path / "declined"), stdin=b"n\nn\nn\n")
    assert declined.returncode == 1 and "not placed" in declined.stdout and "verified" not in declined.stdout


def test_place_domain_persists_verifies_and_rolls_back(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.host.planner import Placement
    from vmtune.live.apply import place_domain, rollback_domain
    from vmtune.live.connection import persistent_xml

    before = persistent_xml(testnode.lookupByName("linux-tuned"))
    placement = Placement("linux-tuned", 1, {0: 5, 1: 13, 2: 6, 3: 14}, frozenset({4, 12}))
    lines: list[str] = []
    assert place_domain(testnode, "linux-tuned", placement, dry_run=True, state_root=tmp_path,
                        confirm=lambda q: True, out=lines.append) == 1  # pending
    assert "dry run: nothing placed" in lines and persistent_xml(testnode.lookupByName("linux-tuned")) == before
    assert place_domain(testnode, "linux-tuned", placement, yes=True, state_root=tmp_path,
                        confirm=lambda q: False, out=lines.append) == 0
    after = persistent_xml(testnode.lookupByName("linux-tuned"))
    assert ("<vcpupin vcpu='3' cpuset='14'/>\n    <emulatorpin cpuset='4,12'/>\n"
            "    <iothreadpin iothread='1' cpuset='4,12'/>") in after
    assert "<memory mode='strict' nodeset='1'/>" in after
    assert "verified: linux-tuned is pinned to node 1" in lines
    lines.clear()
    assert place_domain(testnode, "linux-tuned", placement, yes=True, state_root=tmp_path,
                        confirm=lambda q: False, out=lines.append) == 0
    assert lines == ["linux-tuned: already placed"]
    assert rollback_domain(testnode, "linux-tuned", backup_id=None, state_root=tmp_path, yes=True,
                           confirm=lambda q: False, out=lines.append) == 0
    assert persistent_xml(testnode.lookupByName("linux-tuned")) == before


def test_place_domain_aborts_on_a_concurrent_change(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.host.planner import Placement
    from vmtune.live.apply import place_domain
    from vmtune.live.connection import persistent_xml

    dom = testnode.lookupByName("win10")
    concurrent = persistent_xml(dom).replace("<vcpu placement='static'>2</vcpu>", "<vcpu placement='static'>4</vcpu>")
    with pytest.raises(VmtuneError, match="definition changed since it was read; nothing applied"):
        place_domain(testnode, "win10", Placement("win10", 0, {0: 1, 1: 9}, frozenset({0, 8})), yes=True,
                     state_root=tmp_path, confirm=lambda q: True, out=lambda _: None,
                     before_define=lambda: testnode.defineXML(concurrent))
    assert persistent_xml(testnode.lookupByName("win10")) == concurrent
    assert not [p for p in tmp_path.rglob("*.xml") if p.is_file()]


def test_plan_takes_files_or_a_connection(tmp_path: Path) -> None:
    both = run_vmtune("plan", "--isolated", "-c", "test:///default", str(DOMAINS / "win10-timer-storm.xml"))
    assert both.returncode == 2 and both.stderr.strip() == "vmtune: plan takes domain files or --connect, not both"
    neither = run_vmtune("plan", "--isolated", "--host", str(ROOT / "fixtures/hosts/intel-2node.xml"))
    assert neither.returncode == 2 and neither.stderr.strip() == "vmtune: plan needs domain files or --connect URI"


def test_embedded_qemu_accepts_a_planned_placement(embed_conn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Plan against this machine's real capabilities, then let libvirt's QEMU driver define the result."""
    from vmtune.host.planner import plan
    from vmtune.live.apply import place_domain
    from vmtune.live.connection import host_facts, persistent_xml

    embed_conn.defineXML(domain_xml(name="placed", vcpus=1, memory="<memory unit='MiB'>256</memory>"))
    facts = host_facts(embed_conn)
    domain = Domain(parse_domain(persistent_xml(embed_conn.lookupByName("placed")).encode(), "placed"), "placed")
    first = min(facts.known_cpus)
    result = plan(facts, [domain], [], frozenset({first}))
    placement = result.for_domain("placed")
    assert placement is not None, result.misfits
    lines: list[str] = []
    assert place_domain(embed_conn, "placed", placement, yes=True, state_root=tmp_path, confirm=lambda q: False,
                        out=lines.append) == 0, lines
    defined = persistent_xml(embed_conn.lookupByName("placed"))
    assert f"<emulatorpin cpuset='{first}'/>" in defined
    assert f"<memory mode='strict' nodeset='{placement.node}'/>" in defined
    assert "verified: placed is pinned to node" in "\n".join(lines)


def test_place_domain_live_re_pins_a_running_domain(embed_conn, libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real QEMU process (TCG, no boot device: it idles in the firmware) gets its threads re-pinned."""
    from vmtune.host.planner import Placement
    from vmtune.live.apply import place_domain

    if embed_conn.getCPUMap()[0] < 2:
        pytest.skip("needs a host with two CPUs")
    xml = domain_xml(name="placed-live", vcpus=1, dtype="qemu", memory="<memory unit='MiB'>64</memory>", cpu="")
    dom = embed_conn.defineXML(xml)
    dom.create()
    try:
        lines: list[str] = []
        placement = Placement("placed-live", 0, {0: 1}, frozenset({0}))
        assert place_domain(embed_conn, "placed-live", placement, yes=True, live=True, state_root=tmp_path,
                            confirm=lambda q: False, out=lines.append) == 0, lines
        assert {"pinned live: vCPU 0 to [1]", "pinned live: emulator threads to [0]"} <= set(lines), lines
        assert dom.vcpuPinInfo(libvirt_mod.VIR_DOMAIN_AFFECT_LIVE) == [(False, True)]
        assert dom.emulatorPinInfo(libvirt_mod.VIR_DOMAIN_AFFECT_LIVE) == (True, False)
    finally:
        dom.destroy()
        dom.undefine()


def test_apply_all_goes_through_every_domain_and_skips_nova(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = run_vmtune("apply", "--all", "-c", TESTNODE_URI, "--yes", "--state-dir", str(tmp_path))
    assert result.returncode == 1, result.stderr  # some findings have only unsafe fixes
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("== ")] == [
        "== db01", "== db02", "== instance-0000002a", "== legacy-big", "== linux-tuned", "== nginx01", "== win10",
        "== win10-off"]
    assert ("instance-0000002a: skipped: managed by nova, which rewrites the definition (--force redefines it "
            "anyway)") in lines
    assert ("verified: all 1 fix(es) persisted in the new definition libvirt accepted (not verified: that the guest "
            "starts with it)") in lines  # nginx01: NET001
    backups = {p.parent.name for p in tmp_path.rglob("*.xml") if p.is_file()}
    # nginx01 and the two win10s; legacy-big has only unsafe fixes, nova's domain is skipped
    assert len(backups) == 3 and "5b8f1c2e-0000-4000-8000-00000000002a" not in backups
    neither = run_vmtune("apply", "-c", TESTNODE_URI)
    assert neither.returncode == 2 and neither.stderr.strip() == "vmtune: apply needs --domain NAME or --all (not both)"


def test_apply_labels_each_fix_it_left_out_with_the_options_it_needs(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """Before: with --unsafe-fixes the info findings still said `[unsafe fix not applied]`, though
    what they lack is their rule named with --select."""
    unsafe = run_vmtune("apply", "-c", TESTNODE_URI, "--domain", "win10", "--unsafe-fixes", "--dry-run")
    assert unsafe.returncode == 1, unsafe.stderr
    left = [line for line in unsafe.stdout.splitlines() if "fix not applied" in line]
    assert left == [
        f"{TESTNODE_URI}/win10:45: DSK003 info 1 virtio disk(s) served by QEMU's main loop "
        "[unsafe fix not applied: needs --select DSK003]",
        f"{TESTNODE_URI}/win10:46: DSK008 info image-file disk vda goes through the host page cache: cache mode "
        "writeback, QEMU's default [unsafe fix not applied: needs --select DSK008]",
        f"{TESTNODE_URI}/win10:56: NET007 info virtio NIC keeps 256-descriptor rx rings "
        "[unsafe fix not applied: needs --select NET007]"]
    bare = run_vmtune("apply", "-c", TESTNODE_URI, "--domain", "win10", "--dry-run")
    assert (f"{TESTNODE_URI}/win10:45: DSK003 info 1 virtio disk(s) served by QEMU's main loop "
            "[unsafe fix not applied: needs --unsafe-fixes --select DSK003]") in bare.stdout.splitlines()
    named = run_vmtune("apply", "-c", TESTNODE_URI, "--domain", "win10", "--dry-run", "--select", "DSK003")
    assert named.returncode == 0 and named.stdout.splitlines() == [
        f"{TESTNODE_URI}/win10:38: DSK003 info 1 virtio disk(s) served by QEMU's main loop "
        "[unsafe fix not applied: needs --unsafe-fixes]", "win10: nothing to fix"]
