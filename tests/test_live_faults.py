"""libvirt faults during apply: a daemon killed mid-apply, a domain undefined during apply --all,
another client's define, and the verification that tells the truth (issue 24: CLK002 stays at info
once HPET is on, and that is a success).

The daemon is Debian's libvirtd, run as an unprivileged user (uid 65534, group kvm) with its own
XDG directories: a session daemon whose definitions persist on disk across a kill, which the
embedded driver (in-process) and the test driver (in memory) cannot show.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vmtune.errors import VmtuneError
from vmtune.live import backups

from conftest import DOMAINS, TESTNODE_URI, run_vmtune
from helpers import host, options

pytestmark = pytest.mark.libvirt

NOBODY = 65534
WIN10 = "7f1a2c3e-0000-4000-8000-000000000010"
TRIALS = int(os.environ.get("VMTUNE_KILL_TRIALS", "16"))


class Daemon:
    """libvirtd in session mode for uid 65534, every path under one temp directory."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.socket = base / "runtime" / "libvirt" / "libvirt-sock"
        self.uri = f"qemu+unix:///session?socket={self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import grp

        env = {"HOME": str(self.base / "home"), "XDG_CONFIG_HOME": str(self.base / "config"),
               "XDG_CACHE_HOME": str(self.base / "cache"), "XDG_RUNTIME_DIR": str(self.base / "runtime"),
               "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        kvm = grp.getgrnam("kvm").gr_gid
        log = open(self.base / "daemon.log", "ab")  # noqa: SIM115 - the daemon keeps it
        self.proc = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={kvm}",
                                      "libvirtd"], env=env, stdout=log, stderr=log, cwd=self.base)
        import libvirt

        libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # "cannot connect" while it starts
        deadline = time.monotonic() + 60
        while True:
            try:
                libvirt.open(self.uri).close()
                return
            except libvirt.libvirtError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    log_tail = (self.base / "daemon.log").read_text()[-2000:]
                    raise RuntimeError(f"libvirtd did not start: {log_tail}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        # A daemon killed while it probed QEMU leaves the probe (qemu -machine none -daemonize) behind.
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError):
                if proc.name.isdigit() and str(self.base).encode() in (proc / "cmdline").read_bytes():
                    os.kill(int(proc.name), signal.SIGKILL)


VERIFIED = ("verified: all 1 fix(es) persisted in the new definition libvirt accepted (not verified: that the "
            "guest starts with it)")


@pytest.fixture(scope="module")
def daemon(libvirt_mod) -> Iterator[Daemon]:  # type: ignore[no-untyped-def]
    if os.geteuid() != 0 or not shutil.which("libvirtd") or not shutil.which("setpriv"):
        pytest.skip("needs root, libvirtd and setpriv to run a private libvirt daemon")
    try:
        import grp

        grp.getgrnam("kvm")
    except KeyError:
        pytest.skip("no kvm group")
    base = Path(tempfile.mkdtemp(prefix="vmtune-libvirtd-"))
    for sub in ("home", "config", "cache", "runtime"):
        (base / sub).mkdir(mode=0o700)
    for path in (base, *base.iterdir()):
        os.chown(path, NOBODY, NOBODY)
    os.chmod(base, 0o755)
    server = Daemon(base)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


def _connect(uri: str) -> Any:
    from vmtune.live.connection import open_connection

    return open_connection(uri)


def _fresh_win10(daemon: Daemon) -> str:
    """win10 defined as the fixture has it; its inactive XML as libvirt formats it."""
    from vmtune.live.connection import persistent_xml

    conn = _connect(daemon.uri)
    try:
        with contextlib.suppress(Exception):
            conn.lookupByUUIDString(WIN10).undefine()
        return persistent_xml(conn.defineXML((DOMAINS / "win10-timer-storm.xml").read_text()))
    finally:
        conn.close()


def _persisted(daemon: Daemon) -> str:
    from vmtune.live.connection import persistent_xml

    conn = _connect(daemon.uri)
    try:
        return persistent_xml(conn.lookupByUUIDString(WIN10))
    finally:
        conn.close()


def _apply(conn: Any, state: Path, **hooks: Any) -> tuple[int, list[str]]:
    from vmtune.live.apply import apply_domain

    lines: list[str] = []
    code = apply_domain(conn, WIN10, options(select=["CLK002"]), unsafe=True, yes=True, state_root=state,
                        confirm=lambda q: False, out=lines.append, **hooks)
    return code, lines


HPET_ON = "<timer name='hpet' present='yes'/>"


def test_clk002_hpet_on_a_host_without_synthetic_timers_is_a_verified_success(daemon: Daemon, tmp_path: Path) -> None:
    """Issue 24: CLK002 still fires once HPET is on; apply used to warn "libvirt dropped or
    normalised the fixes for CLK002" and exit 1. The CLI and the Ansible library agree now."""
    from vmtune.live import fleet

    _fresh_win10(daemon)
    result = run_vmtune("apply", "-c", daemon.uri, "-d", "win10", "--unsafe-fixes", "--select", "CLK002", "--yes",
                        "--state-dir", str(tmp_path / "cli"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert VERIFIED in result.stdout
    assert "warning:" not in result.stdout + result.stderr  # apply's own warnings (the findings list names severities)
    assert HPET_ON in _persisted(daemon)
    again = json.loads(run_vmtune("check", "-c", daemon.uri, "-d", "win10", "--select", "CLK002", "--format",
                                  "json").stdout)
    # Still fires, by design: without stimer Windows leans on the HPET (QEMU's Hyper-V doc), and this
    # host offers no synthetic timers, so there is nothing more to fix here.
    assert [(f["rule"], f["fix_safety"]) for f in again["findings"]] == [("CLK002", None)]

    _fresh_win10(daemon)
    (change,) = fleet.tune(daemon.uri, ["win10"], fleet.Selection(select=["CLK002"]), unsafe=True,
                           state_dir=str(tmp_path / "ansible"))
    assert change.changed and change.warnings == []
    assert VERIFIED in change.messages
    assert change.as_dict()["warnings"] == []


def test_daemon_killed_before_the_define_applies_nothing_and_keeps_no_backup(daemon: Daemon, tmp_path: Path) -> None:
    before = _fresh_win10(daemon)
    conn = _connect(daemon.uri)
    try:
        with pytest.raises(VmtuneError) as raised:
            _apply(conn, tmp_path, before_define=daemon.kill)
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        daemon.start()
    message = str(raised.value)
    assert message.startswith(f"{daemon.uri}/win10: cannot re-read the definition before the define: ")
    assert "\n" not in message
    assert backups.listing(tmp_path, daemon.uri, WIN10).backups == []
    assert _persisted(daemon) == before


def test_daemon_killed_after_the_define_keeps_the_backup_and_says_what_to_check(daemon: Daemon,
                                                                              tmp_path: Path) -> None:
    before = _fresh_win10(daemon)
    conn = _connect(daemon.uri)
    try:
        with pytest.raises(VmtuneError) as raised:
            _apply(conn, tmp_path, after_define=daemon.kill)
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        daemon.start()
    (saved,) = backups.history(tmp_path, daemon.uri, WIN10)
    message = str(raised.value)
    assert message.startswith(f"{daemon.uri}/win10: defined, but cannot re-read the definition to verify it: ")
    assert message.endswith(f"; check it with `virsh dumpxml --inactive win10`; the previous definition is kept in "
                            f"{saved.path} (vmtune rollback --domain win10 --to {saved.id})")
    assert saved.xml == before and HPET_ON in _persisted(daemon)


def test_kill_trials_never_lose_a_definition_nor_a_needed_backup(daemon: Daemon, tmp_path: Path) -> None:
    """libvirtd SIGKILLed at a random moment of the guard re-read, define and verification, then
    restarted at once (as systemd would). Whatever the moment: no traceback, one line; the domain
    is either the old or vmtune's definition; whenever it is not the old one a valid backup of the
    old one exists; "nothing applied" is only said when nothing was."""
    outcomes: Counter[str] = Counter()
    for trial in range(TRIALS):
        before = _fresh_win10(daemon)
        state = tmp_path / f"t{trial}"
        conn = _connect(daemon.uri)
        delay = random.uniform(0, 0.02)

        def kill_and_restart() -> None:
            time.sleep(delay)  # noqa: B023 - each trial's own delay, read while the trial runs
            daemon.kill()
            daemon.start()

        killer = threading.Thread(target=kill_and_restart)
        try:
            code, lines = _apply(conn, state, before_define=killer.start)
            outcome = f"exit {code}"
        except VmtuneError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(f"{daemon.uri}/win10: ")
            outcome = str(exc).split(": ", 1)[1].split(":")[0].split(" (")[0]
            lines = [str(exc)]
        finally:
            killer.join()
            with contextlib.suppress(Exception):
                conn.close()
        outcomes[outcome] += 1
        now = _persisted(daemon)
        saved = backups.history(state, daemon.uri, WIN10)
        assert now in (before,) or HPET_ON in now, lines
        if now != before:
            assert [b.xml for b in saved] == [before], (outcome, lines)
        if any("nothing applied" in line for line in lines):
            assert now == before and saved == [], lines
        if outcome == "exit 0":
            assert HPET_ON in now
    print(f"kill trials: {dict(outcomes)}")


# The test driver: in-process, no daemon needed.


def test_a_domain_undefined_during_apply_all_is_reported_and_the_rest_applied(libvirt_mod, tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str],
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """test:///default is shared by the connections of one process: a second connection undefines
    b-guest the moment `apply --all` announces it."""
    from vmtune.commands import live as cli_live

    other = _connect("test:///default")
    template = (DOMAINS / "nginx-single-queue.xml").read_text()
    names = ["a-guest", "b-guest", "c-guest"]
    for name in names:  # the fixture has no <uuid>: libvirt gives each its own
        other.defineXML(template.replace("<name>nginx01</name>", f"<name>{name}</name>"))
    printed = cli_live.say

    def out(text: str) -> None:
        printed(text)
        if text == "== b-guest":
            other.lookupByName("b-guest").undefine()

    monkeypatch.setattr(cli_live, "say", out)
    try:
        code = cli_live.run_apply(None, True, "test:///default", False, True, False, False, False, ["NET001"], [],
                                  [], None, tmp_path)
    finally:
        for name in ("a-guest", "c-guest"):
            with contextlib.suppress(Exception):
                other.lookupByName(name).undefine()
        other.close()
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "b-guest: skipped: no longer defined (undefined while apply --all ran)" in lines
    assert lines.index("== c-guest") > lines.index("== b-guest")
    after_c = lines[lines.index("== c-guest"):]
    assert VERIFIED in after_c
    assert "Traceback" not in captured.err and code in (0, 1)


def test_another_clients_define_after_vmtunes_is_reported_with_the_backup(libvirt_mod, tmp_path: Path) -> None:
    from vmtune.live.apply import apply_domain
    from vmtune.live.connection import persistent_xml

    conn = _connect(TESTNODE_URI)
    try:
        def someone_else_defines() -> None:
            theirs = persistent_xml(conn.lookupByName("nginx01")).replace(
                "</name>", "</name>\n  <description>edited by someone else</description>", 1)
            conn.defineXML(theirs)

        lines: list[str] = []
        uuid = conn.lookupByName("nginx01").UUIDString()
        code = apply_domain(conn, "nginx01", options(select=["NET001"]), yes=True, state_root=tmp_path,
                            confirm=lambda q: False, out=lines.append, after_define=someone_else_defines)
    finally:
        conn.close()
    (saved,) = backups.history(tmp_path, TESTNODE_URI, uuid)
    assert code == 1
    assert (f"warning: the definition is not the one vmtune wrote: /domain/description changed too (another "
            f"client's define after vmtune's, or libvirt's normalisation); check it with `virsh dumpxml --inactive "
            f"nginx01`; the previous definition is backup {saved.id} (vmtune rollback --domain nginx01 --to "
            f"{saved.id})") in lines
    assert not any(line.startswith("verified") for line in lines)


def test_an_edit_libvirt_did_not_keep_is_named_with_its_fix(libvirt_mod, tmp_path: Path) -> None:
    """Another client's define that reverts vmtune's edit: the warning names the fix and the edit."""
    from vmtune.live.apply import apply_domain
    from vmtune.live.connection import persistent_xml

    conn = _connect(TESTNODE_URI)
    try:
        original = persistent_xml(conn.lookupByName("win10"))
        lines: list[str] = []
        code = apply_domain(conn, "win10", options(select=["CLK002"], host_facts=host("intel-1node.xml",
                                                                                    "domcaps-no-stimer.xml")),
                            unsafe=True, yes=True, state_root=tmp_path, confirm=lambda q: False, out=lines.append,
                            after_define=lambda: conn.defineXML(original))
    finally:
        conn.close()
    assert code == 1
    assert ("warning: libvirt dropped or normalised the fixes for CLK002: "
            "/domain/clock/timer[name=hpet] @present='yes'") in lines


@pytest.mark.slow
def test_the_cli_never_shows_a_traceback_when_libvirtd_dies(daemon: Daemon, tmp_path: Path) -> None:
    """`vmtune apply --all` from the command line, libvirtd SIGKILLed at a random moment: the
    run ends with its exit code and one-line errors, whatever step the kill interrupts."""
    import sys

    from conftest import ROOT

    def run(trial: int) -> subprocess.Popen[str]:
        _fresh_win10(daemon)
        return subprocess.Popen([sys.executable, "-m", "vmtune", "apply", "--all", "-c", daemon.uri, "--yes",
                                 "--unsafe-fixes", "--state-dir", str(tmp_path / f"t{trial}")], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def warm() -> None:  # a fresh daemon computes the host's capabilities on first demand, for seconds
        conn = _connect(daemon.uri)
        conn.getCapabilities()
        conn.close()

    warm()
    codes: Counter[int] = Counter()
    for trial in range(8):
        proc = run(trial)
        assert proc.stdout is not None
        for line in proc.stdout:  # connected, listed: the apply of win10 starts now
            if line.strip() == "== win10":
                break
        time.sleep(0.02 * trial)  # then the read, capabilities, backup, guard, define, verification
        daemon.kill()
        _out, err = proc.communicate(timeout=120)
        daemon.start()
        warm()
        codes[proc.returncode] += 1
        assert "Traceback" not in err, err
        assert proc.returncode in (0, 1, 2), err
        if proc.returncode == 2:
            errors = [line for line in err.splitlines() if line.startswith("vmtune: ")]
            # the host (cannot connect, cannot list) or the domain (HOST/win10: ...), one line each
            assert errors and all(line.startswith(f"vmtune: {daemon.uri}") for line in errors), err
            assert all(line.startswith("vmtune: ") for line in err.splitlines()), err
    assert codes[2] >= 1, codes  # the kills did interrupt runs
    print(f"cli kill trials: exit codes {dict(codes)}; last stderr: {err!r}")


@pytest.mark.slow
def test_verification_raises_no_false_warning_over_the_corpus(daemon: Daemon, corpus_domains: list[Path],
                                                              tmp_path: Path) -> None:
    """Every fix (unsafe ones too, every severity) applied to each corpus domain this QEMU accepts:
    nobody else defines, so any warning would be a false one (libvirt's own normalisation:
    addresses, root ports, defaults taken for a change vmtune did not make)."""
    import re

    from vmtune.live.apply import apply_domain

    conn = _connect(daemon.uri)
    applied, refused, warned = 0, 0, []
    try:
        for path in corpus_domains:
            for dom in conn.listAllDomains(0):
                dom.undefine()
            xml = re.sub(r"<emulator>[^<]*</emulator>", "<emulator>/usr/bin/qemu-system-x86_64</emulator>",
                         path.read_text())
            try:
                dom = conn.defineXML(xml)
            except Exception:  # other arches and emulators, duplicate UUIDs: not this host's
                continue
            lines: list[str] = []
            try:
                apply_domain(conn, dom.UUIDString(), options(fix_all=True), unsafe=True, yes=True, force=True,
                             state_root=tmp_path, confirm=lambda q: False, out=lines.append)
            except VmtuneError as exc:
                # A CPU fix QEMU cannot start on this host (its /dev/kvm runs host-passthrough guests
                # only if specially built): refused before the define, true here, not a warning.
                assert "a throwaway copy of it does not start (paused) where one of the previous" in exc.message, exc
                refused += 1
                continue
            applied += any(line.startswith("verified") for line in lines)
            warned += [f"{path.name}: {line}" for line in lines if line.startswith("warning")]
        for dom in conn.listAllDomains(0):
            dom.undefine()
    finally:
        conn.close()
    assert applied >= 20 and warned == [], warned
    print(f"corpus: {applied} domains fixed and verified, {refused} refused (a copy does not start), "
          f"{len(warned)} warnings")


def test_a_define_in_the_window_libvirt_cannot_close_is_reported(daemon: Daemon, tmp_path: Path) -> None:
    """Another client defines between vmtune's guard re-read and its define: vmtune's define
    overwrites it (libvirt has no compare-and-swap) and the re-read shows vmtune's version, so
    only libvirt's define events tell. vmtune warns, names the backup, and exits 1."""
    before = _fresh_win10(daemon)
    other = _connect(daemon.uri)
    conn = _connect(daemon.uri)

    def someone_else_defines() -> None:
        other.defineXML(before.replace("</name>", "</name>\n  <description>theirs</description>", 1))

    try:
        code, lines = _apply(conn, tmp_path, after_guard=someone_else_defines)
        quiet_code, quiet_lines = _apply(conn, tmp_path / "again")  # nothing left to fix, no define
    finally:
        conn.close()
        other.close()
    (saved,) = backups.history(tmp_path, daemon.uri, WIN10)
    assert code == 1, lines
    assert ("warning: another client defined win10 while vmtune did (libvirt announced 1 other define(s) after "
            "vmtune's last re-read): a change of theirs may have been overwritten; compare `virsh dumpxml "
            "--inactive win10` with what they meant; the previous definition is backup "
            f"{saved.id} (vmtune rollback --domain win10 --to {saved.id}) (the definition vmtune read, not "
            "theirs)") in lines
    now = _persisted(daemon)
    assert HPET_ON in now and "theirs" not in now  # overwritten: the residual window, reported
    assert saved.xml == before and not any(line.startswith("verified") for line in lines)
    # Nothing left to fix, yet exit 1: CLK002 stays a warning with no fix on a host without stimer.
    assert quiet_code == 1 and "win10: nothing to fix" in quiet_lines, quiet_lines


def test_a_define_in_the_window_is_reported_on_the_test_driver_too(libvirt_mod, tmp_path: Path) -> None:
    from vmtune.live.apply import apply_domain
    from vmtune.live.connection import persistent_xml

    conn = _connect(TESTNODE_URI)
    try:
        theirs = persistent_xml(conn.lookupByName("nginx01")).replace("</name>", "</name><title>theirs</title>", 1)
        lines: list[str] = []
        code = apply_domain(conn, "nginx01", options(select=["NET001"]), yes=True, state_root=tmp_path,
                            confirm=lambda q: False, out=lines.append, after_guard=lambda: conn.defineXML(theirs))
        final = persistent_xml(conn.lookupByName("nginx01"))
    finally:
        conn.close()
    assert code == 1 and "<title>" not in final and "queues='16'" in final
    assert any(line.startswith("warning: another client defined nginx01 while vmtune did (libvirt announced 1 "
                               "other define(s)") for line in lines), lines


def _padded_domain(size: int) -> bytes:
    """win10 under another name and UUID, its <description> padded to exactly `size` bytes."""
    xml = (DOMAINS / "win10-timer-storm.xml").read_text()
    xml = xml.replace("<name>win10</name>", "<name>sizecap</name>\n  <description></description>", 1)
    xml = xml.replace(WIN10, "7f1a2c3e-0000-4000-8000-0000000051ce", 1)
    pad = size - len(xml.encode())
    assert pad > 0
    return xml.replace("<description></description>", "<description>" + "x" * pad + "</description>", 1).encode()


def test_the_domain_file_size_cap_is_the_largest_definition_libvirt_accepts(daemon: Daemon, tmp_path: Path) -> None:
    """vmtune's cap on a domain file is libvirt's own: the daemon takes a definition of exactly
    MAX_INPUT_BYTES and refuses one byte more (the RPC string limit), and vmtune checks the first
    and refuses the second with one line."""
    import libvirt

    from vmtune.sources import MAX_INPUT_BYTES

    conn = _connect(daemon.uri)
    try:
        for size in (MAX_INPUT_BYTES, MAX_INPUT_BYTES + 1):
            data = _padded_domain(size)
            assert len(data) == size
            path = tmp_path / f"{size}.xml"
            path.write_bytes(data)
            checked = run_vmtune("check", "--isolated", "--select", "CLK002", str(path))
            if size == MAX_INPUT_BYTES:
                conn.defineXML(data.decode()).undefine()  # libvirt takes it
                assert checked.returncode == 1 and "CLK002 warning" in checked.stdout
            else:
                with pytest.raises(libvirt.libvirtError, match="Unable to encode message payload"):
                    conn.defineXML(data.decode())
                assert checked.returncode == 2
                assert checked.stderr == f"vmtune: {path}: larger than 4 MiB, the largest definition libvirt accepts\n"
    finally:
        conn.close()
