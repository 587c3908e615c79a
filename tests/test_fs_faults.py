"""File-system faults on every path vmtune is given: one line and exit 2, never a traceback, a
hang or a summary that claims files were checked when they were not read.

Permission faults need a user file modes apply to. As root (CI), vmtune runs without the two
capabilities that let root ignore them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): a directory of
mode 000 is then unreadable to its owner, root included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT, TESTNODE_URI, run_vmtune
from helpers import options

WIN10_XML = DOMAINS / "win10-timer-storm.xml"
# More than PATH_MAX (4096 bytes) in components the file system accepts (NAME_MAX is 255).
TOO_LONG = "/".join(["d" * 200] * 21)
DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@lru_cache(maxsize=1)
def _unprivileged_prefix() -> tuple[str, ...] | None:
    """How to run vmtune so that file modes apply; None when this machine cannot."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        return None
    probe = subprocess.run([*DROP_DAC, "true"], capture_output=True, check=False)
    return tuple(DROP_DAC) if probe.returncode == 0 else None


def run_unprivileged(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    prefix = _unprivileged_prefix()
    if prefix is None:
        pytest.skip("needs setpriv and CAP_SETPCAP to run vmtune without root's permission override")
    return subprocess.run([*prefix, sys.executable, "-m", "vmtune", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """tmp_path/tree with a.xml, and locked/ (mode 000) holding b.xml; unlocked after, so pytest can clean up."""
    tree = tmp_path / "tree"
    (tree / "locked").mkdir(parents=True)
    shutil.copy(WIN10_XML, tree / "a.xml")
    shutil.copy(WIN10_XML, tree / "locked" / "b.xml")
    (tree / "locked").chmod(0o000)
    try:
        yield tree
    finally:
        (tree / "locked").chmod(0o700)


# -- check and fix: directories that cannot be read ------------------------------------------

def test_an_unreadable_directory_named_is_an_error_not_an_empty_directory(locked: Path) -> None:
    """Was: 'tree/locked: skipped: no *.xml file to check in it' and '0 domain(s) checked', exit 0:
    a pre-commit run passed without reading the files."""
    result = run_unprivileged("check", "--isolated", "locked", cwd=locked)
    assert result.returncode == 2, result
    assert result.stderr == "vmtune: locked: cannot read the directory: Permission denied; its files were not checked\n"
    assert "no *.xml file" not in result.stdout


def test_an_unreadable_directory_in_a_walk_is_an_error_and_the_rest_is_checked(locked: Path) -> None:
    """Was: 'tree/locked: skipped: changed while the directory was walked: not followed' (it had
    not changed), exit 1 as if every file had been checked."""
    result = run_unprivileged("check", "--isolated", "tree", cwd=locked.parent)
    assert result.returncode == 2, result
    assert "tree/a.xml:" in result.stdout and "changed while" not in result.stdout
    assert result.stderr == ("vmtune: tree/locked: cannot read the directory: Permission denied; its files were not "
                             "checked\n")
    before = (locked / "a.xml").read_bytes()
    fixed = run_unprivileged("check", "--isolated", "--fix", "tree", cwd=locked.parent)
    assert fixed.returncode == 2 and fixed.stderr == result.stderr
    assert (locked / "a.xml").read_bytes() != before  # the readable file is still fixed


def test_plan_refuses_to_place_around_a_directory_it_cannot_read(locked: Path) -> None:
    """Was: the unreadable directory's domains left out of the plan silently (their CPUs free for others)."""
    result = run_unprivileged("plan", "--isolated", "--host", str(ROOT / "fixtures/hosts/intel-2node.xml"), "tree",
                              cwd=locked.parent)
    assert result.returncode == 2, result
    assert result.stderr == ("vmtune: tree/locked: cannot read the directory: Permission denied; its files were not "
                             "checked\n")


# -- configuration and policy files named on the command line --------------------------------

@pytest.mark.parametrize(("option", "what"), [("--config", "configuration"), ("-p", "policy")])
def test_a_config_or_policy_path_too_long_is_one_line(tmp_path: Path, option: str, what: str) -> None:
    """Was a traceback: looking for the trust root's .git raised ENAMETOOLONG (pathlib's exists())."""
    result = run_vmtune("check", "--isolated", option, f"{TOO_LONG}/x.yaml", str(WIN10_XML), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {TOO_LONG}/x.yaml: cannot read {what}: File name too long\n"


@pytest.mark.parametrize(("option", "what"), [("--config", "configuration"), ("-p", "policy")])
def test_a_config_or_policy_in_a_directory_the_user_cannot_enter_is_one_line(locked: Path, option: str,
                                                                             what: str) -> None:
    """Was a traceback: pathlib's exists() raised EACCES on locked/.git."""
    result = run_unprivileged("check", "--isolated", option, "locked/x.yaml", "a.xml", cwd=locked)
    assert result.returncode == 2, result
    assert result.stderr == f"vmtune: locked/x.yaml: cannot read {what}: Permission denied\n"


# -- SARIF locations of --stdin-filename -----------------------------------------------------

@pytest.mark.parametrize("name", ["loop/a.xml", f"{TOO_LONG}/a.xml"], ids=["symlink-loop", "path-too-long"])
def test_sarif_takes_any_stdin_filename(tmp_path: Path, name: str) -> None:
    """Was a traceback: Path.resolve() raises RuntimeError on a symlink loop, and pathlib's
    exists() OSError on a name too long. The name is only a label: the report is written."""
    (tmp_path / "loop").symlink_to("loop")
    result = run_vmtune("check", "--isolated", "-f", "sarif", "--stdin-filename", name, "-",
                        stdin=WIN10_XML.read_bytes(), cwd=tmp_path)
    assert result.returncode == 1 and result.stderr == ""
    (run,) = json.loads(result.stdout)["runs"]
    assert run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("/a.xml")


# -- history --all: the state directory ------------------------------------------------------

def test_history_all_refuses_an_untrusted_state_dir_in_one_line(tmp_path: Path) -> None:
    """Was a traceback (UntrustedStateError escaped); apply, history -d and rollback refuse it in one line."""
    state = tmp_path / "state"
    (state / "test_default" / "6695eb01-f6a4-8304-79aa-97f2502e193f").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    (state / "test_default").chmod(0o770)
    result = run_vmtune("history", "--all", "--state-dir", str(state))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {state}/test_default: writable by group or others (mode 0770); refusing to "
                             "use it for backups (StrictModes: owned by you, not writable by group or others, no "
                             "symlinks)\n")


def test_history_all_on_a_file_is_not_an_empty_state_dir(tmp_path: Path) -> None:
    """Was 'no backups in FILE', exit 0: apply refuses the same --state-dir as not a directory."""
    state = tmp_path / "state"
    state.write_text("")
    result = run_vmtune("history", "--all", "--state-dir", str(state))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"vmtune: {state}: not a directory; refusing to use it for backups")


def test_history_all_escapes_the_state_dir_it_cannot_read(locked: Path) -> None:
    """Was: the name printed raw (an ESC from it reached the terminal) with Python's '[Errno 13] ...: NAME'."""
    state = locked / "locked" / "st\x1b[31m"
    result = run_unprivileged("history", "--all", "--state-dir", str(state), cwd=locked)
    assert result.returncode == 2, result
    assert result.stderr == f"vmtune: {locked}/locked/st\\x1b[31m: cannot read the backups: Permission denied\n"


@pytest.mark.libvirt
def test_a_backup_that_cannot_be_discarded_does_not_hide_why_nothing_was_applied(libvirt_mod, tmp_path: Path
                                                                                ) -> None:  # type: ignore[no-untyped-def]
    """The definition changed under apply: the backup goes and the error says so. With a state
    directory deeper than PATH_MAX (saved through descriptors, removed by name), the removal
    raised ENAMETOOLONG and a traceback replaced 'nothing applied'."""
    from vmtune.errors import VmtuneError
    from vmtune.live.apply import apply_domain
    from vmtune.live.connection import open_connection, persistent_xml

    state = tmp_path / TOO_LONG
    conn = open_connection(TESTNODE_URI)
    try:
        theirs = persistent_xml(conn.lookupByName("nginx01")).replace("</name>", "</name><title>theirs</title>", 1)
        with pytest.raises(VmtuneError, match="the definition changed since it was read; nothing applied"):
            apply_domain(conn, "nginx01", options(select=["NET001"]), yes=True, state_root=state,
                         confirm=lambda q: False, out=lambda line: None, before_define=lambda: conn.defineXML(theirs))
        assert "<title>theirs</title>" in persistent_xml(conn.lookupByName("nginx01"))
    finally:
        conn.close()


# -- host --root: a copy of sysfs and /proc is input ------------------------------------------

def _host_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for relative, text in {"proc/cmdline": "ro quiet",
                           "sys/module/kvm/parameters/halt_poll_ns": "200000",
                           "sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": "8"}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text + "\n")
    return root


def _host(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vmtune", "host", "--root", str(root)], capture_output=True,
                          text=True, cwd=ROOT, timeout=30)


def test_host_root_with_a_fifo_does_not_hang(tmp_path: Path) -> None:
    """Was: open() of the FIFO blocked for good (the run never ended)."""
    root = _host_root(tmp_path)
    os.mkfifo(root / "sys/module/kvm/parameters/pi_inject_timer")
    result = _host(root)
    assert result.returncode in (0, 1) and result.stderr == ""
    assert "1 host(s) checked" in result.stdout


@pytest.mark.parametrize(("relative", "content"), [
    ("proc/cmdline", b"\xff\xfe"),
    ("sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", b"lots\n"),
    ("sys/devices/system/node/node0x/hugepages/hugepages-2048kB/nr_hugepages", b"8\n"),
    ("sys/devices/system/cpu/cpu2x/cpufreq/scaling_governor", b"performance\n"),
], ids=["not-utf8", "not-a-number", "node-name", "cpu-name"])
def test_host_root_with_unexpected_content_is_read_as_absent(tmp_path: Path, relative: str, content: bytes) -> None:
    """Was a traceback (UnicodeDecodeError, int() of the text or of the directory name)."""
    root = _host_root(tmp_path)
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(content)
    result = _host(root)
    assert result.returncode in (0, 1) and result.stderr == ""
    assert "1 host(s) checked" in result.stdout
