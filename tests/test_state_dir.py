"""The state directory is trusted like OpenSSH's StrictModes; backups are atomic and checksummed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vmtune.errors import VmtuneError
from vmtune.live import backups

from conftest import ROOT, TESTNODE_URI, run_vmtune
from helpers import options

pytestmark = pytest.mark.libvirt

NOBODY = 65534
WIN10 = "7f1a2c3e-0000-4000-8000-000000000010"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid and to mount")


def _apply_cli(state: Path) -> subprocess.CompletedProcess[str]:
    return run_vmtune("apply", "-c", TESTNODE_URI, "-d", "nginx01", "--yes", "--state-dir", str(state))


def _folder(state: Path) -> Path:
    return backups.domain_dir(state, TESTNODE_URI, WIN10)


@pytest.fixture
def testnode(libvirt_mod):  # type: ignore[no-untyped-def]
    from vmtune.live.connection import open_connection

    conn = open_connection(TESTNODE_URI)
    yield conn
    conn.close()


def _apply(conn, state: Path) -> tuple[int, list[str]]:  # type: ignore[no-untyped-def]
    from vmtune.live.apply import apply_domain

    lines: list[str] = []
    code = apply_domain(conn, "win10", options(select=["CLK002"]), yes=True, state_root=state,
                        confirm=lambda q: False, out=lines.append)
    return code, lines


@root_only
def test_a_state_dir_owned_by_another_uid_is_refused(libvirt_mod, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    result = _apply_cli(state)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"vmtune: {state}: owned by uid {NOBODY}, not by you (uid 0); refusing to use it for backups (StrictModes: "
        "owned by you, not writable by group or others, no symlinks)")
    assert "Traceback" not in result.stderr and list(state.iterdir()) == []
    history = run_vmtune("history", "-c", TESTNODE_URI, "-d", "nginx01", "--state-dir", str(state))
    assert history.returncode == 2 and f"owned by uid {NOBODY}" in history.stderr


def test_a_group_writable_state_dir_is_refused(libvirt_mod, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o770)
    result = _apply_cli(state)
    assert result.returncode == 2
    assert f"vmtune: {state}: writable by group or others (mode 0770); refusing" in result.stderr
    assert list(state.iterdir()) == []


def test_a_planted_symlink_is_not_followed_nor_chmodded(libvirt_mod, tmp_path: Path) -> None:
    """The issue: root followed a symlink planted as --state-dir, chmod 0700'd its target and wrote there."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    state = tmp_path / "state"
    state.symlink_to(victim)
    result = _apply_cli(state)
    assert result.returncode == 2
    assert f"vmtune: {state}: a symlink; refusing to use it for backups" in result.stderr
    assert (victim.stat().st_mode & 0o777) == 0o755 and list(victim.iterdir()) == []


def test_a_symlink_planted_below_the_state_dir_is_refused(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    (state / backups.host_key(TESTNODE_URI)).symlink_to(victim)
    with pytest.raises(VmtuneError, match="a symlink; refusing to use it for backups"):
        _apply(testnode, state)
    assert list(victim.iterdir()) == []


@root_only
def test_a_parent_owned_by_another_user_is_refused(libvirt_mod, tmp_path: Path) -> None:
    parent = tmp_path / "home-of-nobody"
    parent.mkdir()
    os.chown(parent, NOBODY, NOBODY)
    result = _apply_cli(parent / "state")
    assert result.returncode == 2
    assert f"vmtune: {parent}: a parent of the state directory is owned by uid {NOBODY}" in result.stderr
    assert list(parent.iterdir()) == []


def test_a_parent_symlink_root_made_is_followed(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """/var/lib -> /srv/var-lib on a hypervisor: a link made by root in a directory only root can
    write is no one else's choice; what it leads to is checked as any parent is."""
    (tmp_path / "disk" / "var-lib").mkdir(parents=True)
    (tmp_path / "var-lib").symlink_to(tmp_path / "disk" / "var-lib")
    assert _apply(testnode, tmp_path / "var-lib" / "vmtune")[0] == 0
    assert len(backups.history(tmp_path / "disk" / "var-lib" / "vmtune", TESTNODE_URI, WIN10)) == 1


@root_only
def test_a_parent_symlink_another_user_made_is_refused(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: anyone may create entries
    (tmp_path / "theirs").mkdir()
    (shared / "link").symlink_to(tmp_path / "theirs")
    os.lchown(shared / "link", NOBODY, NOBODY)
    with pytest.raises(VmtuneError, match="a parent of the state directory is a symlink another user could have made"):
        _apply(testnode, shared / "link" / "vmtune")
    assert list((tmp_path / "theirs").iterdir()) == []


def _two_backups(conn, state: Path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """Two good backups (apply, then rollback); returns their ids, oldest first."""
    from vmtune.live.apply import rollback_domain

    assert _apply(conn, state)[0] == 0
    assert rollback_domain(conn, "win10", backup_id=None, state_root=state, yes=True, confirm=lambda q: False,
                           out=lambda line: None) == 0
    ids = [b.id for b in backups.history(state, TESTNODE_URI, WIN10)]
    assert len(ids) == 2
    return ids[0], ids[1]


def _plant(folder: Path, stem: str, xml: bytes, meta: dict[str, object] | None) -> None:
    (folder / f"{stem}.xml").write_bytes(xml)
    (folder / f"{stem}.xml").chmod(0o600)
    if meta is not None:
        (folder / f"{stem}.json").write_text(json.dumps(meta))
        (folder / f"{stem}.json").chmod(0o600)


def test_history_and_rollback_skip_incomplete_and_mismatched_backups(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The issue: a full disk left a 0-byte .xml, a kill an orphan; history listed both and rollback
    restored the empty one. Now neither is listed or restored, and both commands say why."""
    import hashlib

    from vmtune.live.apply import rollback_domain
    from vmtune.live.connection import persistent_xml

    state = tmp_path / "state"
    first, second = _two_backups(testnode, state)
    folder = _folder(state)
    good = (folder / f"{first}.xml").read_bytes()
    meta = json.loads((folder / f"{first}.json").read_text())
    _plant(folder, "20990101T000000000001Z", b"", {**meta, "sha256": hashlib.sha256(b"").hexdigest(), "size": 0})
    _plant(folder, "20990101T000000000002Z", good, None)  # orphan: killed before its .json
    _plant(folder, "20990101T000000000003Z", good.replace(b"win10", b"evil"), meta)  # checksum mismatch
    _plant(folder, "20990101T000000000004Z", b"", {**meta, "sha256": None})  # empty, no checksum
    (folder / "20990101T000000000005Z.json").write_text(json.dumps(meta))  # .json alone
    (folder / "20990101T000000000005Z.json").chmod(0o600)

    listing = backups.listing(state, TESTNODE_URI, WIN10)
    assert [b.id for b in listing.backups] == [first, second]
    assert {p.name: why for p, why in listing.skipped} == {
        "20990101T000000000001Z.xml": "empty (0 bytes)",
        "20990101T000000000002Z.xml": "incomplete: no .json beside it (interrupted while it was written?)",
        "20990101T000000000003Z.xml": "checksum mismatch: the file is not what vmtune wrote",
        "20990101T000000000004Z.xml": "empty (0 bytes)",
        "20990101T000000000005Z.json": "incomplete: no .xml beside it",
    }
    lines: list[str] = []
    # The newest usable backup, named: a bare rollback restores the newest an apply made (`first`,
    # which win10 already has after _two_backups), not the rollback's own backup.
    assert rollback_domain(testnode, "win10", backup_id=second, state_root=state, yes=True,
                           confirm=lambda q: False, out=lines.append) == 0
    assert f"skipped {folder}/20990101T000000000003Z.xml: checksum mismatch: the file is not what vmtune wrote" \
        in lines
    assert any(line.startswith(f"restored backup {second};") for line in lines), lines
    assert persistent_xml(testnode.lookupByName("win10")) == (folder / f"{second}.xml").read_text()
    with pytest.raises(VmtuneError, match="backup '20990101T000000000001Z' cannot be restored: empty"):
        rollback_domain(testnode, "win10", backup_id="20990101T000000000001Z", state_root=state, yes=True,
                        confirm=lambda q: False, out=lines.append)


@root_only
def test_a_backup_planted_by_another_uid_is_never_restored(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The issue: rollback defined a planted backup with a <disk type='block'> on /dev/sda."""
    import hashlib

    from vmtune.live.apply import rollback_domain
    from vmtune.live.connection import persistent_xml

    state = tmp_path / "state"
    first, _second = _two_backups(testnode, state)
    folder = _folder(state)
    evil = (folder / f"{first}.xml").read_text().replace(
        "<devices>", "<devices><disk type='block' device='disk'><source dev='/dev/sda'/>"
                     "<target dev='vdz' bus='virtio'/></disk>").encode()
    meta = {**json.loads((folder / f"{first}.json").read_text()), "sha256": hashlib.sha256(evil).hexdigest()}
    _plant(folder, "20990101T000000000009Z", evil, meta)
    os.chown(folder / "20990101T000000000009Z.xml", NOBODY, NOBODY)
    os.chown(folder / "20990101T000000000009Z.json", NOBODY, NOBODY)
    before = persistent_xml(testnode.lookupByName("win10"))
    lines: list[str] = []
    rollback_domain(testnode, "win10", backup_id=None, state_root=state, yes=True, confirm=lambda q: False,
                    out=lines.append)
    assert f"skipped {folder}/20990101T000000000009Z.xml: .json: owned by uid {NOBODY}, not by you (planted?)" \
        in lines
    assert "/dev/sda" not in persistent_xml(testnode.lookupByName("win10")) and before != ""


def test_backups_are_written_atomically_with_a_checksum(testnode, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    state = tmp_path / "state"
    assert _apply(testnode, state)[0] == 0
    folder = _folder(state)
    (saved,) = backups.history(state, TESTNODE_URI, WIN10)
    meta = json.loads((folder / f"{saved.id}.json").read_text())
    data = (folder / f"{saved.id}.xml").read_bytes()
    assert meta["sha256"] == hashlib.sha256(data).hexdigest() and meta["size"] == len(data)
    assert sorted(p.name for p in folder.iterdir()) == [f"{saved.id}.json", f"{saved.id}.xml"]  # no temp left


KILL_BETWEEN = """
import os, signal, sys
from pathlib import Path
from vmtune.live import backups
real = backups._write_private
def write(dir_fd, name, data):
    if name.endswith(".json"):
        os.kill(os.getpid(), signal.SIGKILL)  # the moment between the .xml and its sidecar
    real(dir_fd, name, data)
backups._write_private = write
backups.save(Path(sys.argv[1]), sys.argv[2], sys.argv[3], "win10", "<domain/>", "apply", ["CLK002"])
"""


def test_a_kill_between_xml_and_json_leaves_nothing_history_offers(libvirt_mod, tmp_path: Path) -> None:
    state = tmp_path / "state"
    killed = subprocess.run([sys.executable, "-c", KILL_BETWEEN, str(state), TESTNODE_URI, WIN10], cwd=ROOT,
                            capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL
    folder = _folder(state)
    (orphan,) = [p for p in folder.iterdir() if p.suffix == ".xml"]
    assert backups.history(state, TESTNODE_URI, WIN10) == []
    result = run_vmtune("history", "-c", TESTNODE_URI, "-d", "win10", "--state-dir", str(state))
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        f"skipped {orphan}: incomplete: no .json beside it (interrupted while it was written?)", "win10: no backups"]
    rollback = run_vmtune("rollback", "-c", TESTNODE_URI, "-d", "win10", "--yes", "--state-dir", str(state))
    assert rollback.returncode == 2 and "no backups for this domain" in rollback.stderr


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs of our own, unmounted after."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@root_only
def test_a_full_state_dir_leaves_no_empty_backup_and_applies_nothing(testnode, small_fs: Path) -> None:  # type: ignore[no-untyped-def]
    from vmtune.live.connection import persistent_xml

    state = small_fs / "state"
    _folder(state).mkdir(parents=True, mode=0o700)
    for parent in (state, _folder(state).parent, _folder(state)):
        parent.chmod(0o700)
    filler = small_fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    before = persistent_xml(testnode.lookupByName("win10"))
    with pytest.raises(VmtuneError, match="cannot write backup: No space left on device; nothing applied"):
        _apply(testnode, state)
    assert persistent_xml(testnode.lookupByName("win10")) == before
    assert list(_folder(state).iterdir()) == []  # no 0-byte .xml, no temp file


@root_only
def test_a_read_only_state_dir_is_one_line_and_applies_nothing(libvirt_mod, small_fs: Path) -> None:
    state = small_fs / "state"
    state.mkdir(mode=0o700)
    remount = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True)
    if remount.returncode != 0:
        pytest.skip("cannot remount read-only here")
    result = _apply_cli(state)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(f"vmtune: {state}/") and \
        result.stderr.splitlines()[-1].endswith("cannot write backup: Read-only file system; nothing applied")
    assert "Traceback" not in result.stderr
