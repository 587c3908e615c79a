"""Writes go to the file that was read: no symlink followed on a rewrite, none out of a walked tree."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from pathlib import Path

import pytest

from vmtune.commands.check import CheckRequest, OptionsResolver, check_files
from vmtune.errors import VmtuneError
from vmtune.fileio import FileChangedError, read_nofollow, write_atomic
from vmtune.report.model import Report

from conftest import domain_xml, run_vmtune

SECRET = b"root:$6$not-a-domain:19000:0:99999:7:::\n"
NEEDS_FIX = domain_xml(os="windows", clock="<clock offset='localtime'/>").encode()


def _fix_in_process(path: Path) -> Report:
    report = Report()
    with contextlib.redirect_stdout(io.StringIO()):
        check_files(OptionsResolver(CheckRequest(paths=[str(path)], fix=True, jobs=1, isolated=True)), report)
    return report


@pytest.mark.parametrize("named", ["file", "directory"])
def test_a_file_swapped_for_a_symlink_during_fix_never_overwrites_the_target(tmp_path: Path, named: str) -> None:
    """The issue's reproducer: a thread swaps the checked file for a symlink to a file outside,
    in a loop, while --fix FILE (or --fix DIR) runs 150 times. Before: 21-34 of 150 runs of
    --fix FILE overwrote the target."""
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = tmp_path / "shadow"
    victim = repo / "vm.xml"
    victim.write_bytes(NEEDS_FIX)
    stop = threading.Event()

    def swap() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            regular, link = repo / f".r{i}", repo / f".l{i}"
            regular.write_bytes(NEEDS_FIX)
            os.replace(regular, victim)
            os.symlink(secret, link)
            os.replace(link, victim)

    overwritten, refused, fixed = 0, 0, 0
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        for _ in range(150):
            secret.write_bytes(SECRET)
            try:
                report = _fix_in_process(victim if named == "file" else repo)
            except VmtuneError:  # iter_sources saw the path between two renames
                continue
            overwritten += secret.read_bytes() != SECRET
            messages = [e.message for e in report.errors] + [why for _, why in report.skipped if "symlink" in why]
            assert all("symlink" in m or "since it was read" in m or "not a regular file" in m
                       for m in messages), messages
            refused += bool(messages)
            fixed += not messages
    finally:
        stop.set()
        swapper.join()
    assert overwritten == 0
    assert refused > 0  # the race was really run
    assert secret.read_bytes() == SECRET and not secret.is_symlink()


def test_fix_without_a_race_still_rewrites_and_keeps_mode(tmp_path: Path) -> None:
    victim = tmp_path / "vm.xml"
    victim.write_bytes(NEEDS_FIX)
    victim.chmod(0o640)
    report = _fix_in_process(victim)
    assert report.errors == []
    assert b"hypervclock" in victim.read_bytes() and (victim.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["vm.xml"]  # no temp file left behind


def test_a_file_replaced_between_read_and_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "vm.xml"
    path.write_bytes(NEEDS_FIX)
    _data, identity = read_nofollow(path, 1 << 20)
    replacement = tmp_path / "other"
    replacement.write_bytes(b"theirs")
    os.replace(replacement, path)  # same name, another inode
    with pytest.raises(FileChangedError, match="replaced by another file since it was read; nothing written"):
        write_atomic(path, b"mine", identity)
    assert path.read_bytes() == b"theirs"


def test_a_directory_swapped_for_a_symlink_between_read_and_write_is_refused(tmp_path: Path) -> None:
    repo, elsewhere = tmp_path / "repo", tmp_path / "etc-libvirt"
    repo.mkdir()
    elsewhere.mkdir()
    (repo / "vm.xml").write_bytes(NEEDS_FIX)
    (elsewhere / "vm.xml").write_bytes(SECRET)
    _data, identity = read_nofollow(repo / "vm.xml", 1 << 20)
    os.rename(repo, tmp_path / "moved")
    os.symlink(elsewhere, repo)
    with pytest.raises(FileChangedError, match="the directory changed"):
        write_atomic(repo / "vm.xml", b"mine", identity)
    assert (elsewhere / "vm.xml").read_bytes() == SECRET


def test_fix_dir_does_not_leave_the_tree_through_symlinks(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "target.xml").write_bytes(NEEDS_FIX)
    (outside / "sub" / "deep.xml").write_bytes(NEEDS_FIX)
    (repo / "own.xml").write_bytes(NEEDS_FIX)
    (repo / "link.xml").symlink_to(outside / "target.xml")
    (repo / "linkdir").symlink_to(outside / "sub")
    result = run_vmtune("check", "--fix", "--isolated", str(repo))
    assert (outside / "target.xml").read_bytes() == NEEDS_FIX
    assert (outside / "sub" / "deep.xml").read_bytes() == NEEDS_FIX
    assert b"hypervclock" in (repo / "own.xml").read_bytes()
    assert (repo / "link.xml").is_symlink() and (repo / "linkdir").is_symlink()
    assert f"{repo}/link.xml: skipped: a symlink: not followed in a directory walk (name it to check it)" \
        in result.stdout
    assert f"{repo}/linkdir: skipped: a symlink to a directory: not followed in a directory walk" in result.stdout
    assert "deep.xml" not in result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_explicitly_named_symlink_is_read_but_not_fixed_through(tmp_path: Path) -> None:
    target = tmp_path / "real.xml"
    target.write_bytes(NEEDS_FIX)
    link = tmp_path / "link.xml"
    link.symlink_to(target)
    checked = run_vmtune("check", "--isolated", str(link))
    assert checked.returncode == 1 and "CLK001" in checked.stdout
    fixed = run_vmtune("check", "--fix", "--isolated", str(link))
    assert fixed.returncode == 2
    assert f"{link}: a symlink: vmtune does not rewrite files through symlinks (name the file it points to)" \
        in fixed.stderr
    assert "Traceback" not in fixed.stderr
    assert target.read_bytes() == NEEDS_FIX and link.is_symlink()


def test_fix_through_a_hard_link_replaces_only_the_named_entry(tmp_path: Path) -> None:
    """A rename replaces the directory entry: a hard link planted to a file elsewhere keeps its content."""
    other = tmp_path / "elsewhere.xml"
    other.write_bytes(NEEDS_FIX)
    named = tmp_path / "repo.xml"
    os.link(other, named)
    assert _fix_in_process(named).errors == []
    assert b"hypervclock" in named.read_bytes() and other.read_bytes() == NEEDS_FIX


def test_a_report_is_not_written_through_a_planted_symlink(tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_bytes(b"export PATH\n")
    (tmp_path / "report.json").symlink_to(target)
    (tmp_path / "vm.xml").write_bytes(NEEDS_FIX)
    result = run_vmtune("check", "--isolated", "-f", "json", "-o", str(tmp_path / "report.json"),
                        str(tmp_path / "vm.xml"))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"vmtune: {tmp_path}/report.json: cannot write the report: a symlink: vmtune "
                                     "does not write through symlinks; nothing written")
    assert target.read_bytes() == b"export PATH\n"


def test_a_walked_directory_swapped_for_a_symlink_before_the_read_is_not_read(tmp_path: Path) -> None:
    from vmtune.sources import iter_sources

    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "sub").mkdir(parents=True)
    outside.mkdir()
    (repo / "sub" / "vm.xml").write_bytes(NEEDS_FIX)
    (outside / "vm.xml").write_bytes(SECRET)
    (source,) = list(iter_sources([str(repo)]))
    os.rename(repo / "sub", tmp_path / "moved")
    (repo / "sub").symlink_to(outside)
    with pytest.raises(VmtuneError, match=r"the directory changed .* since the directory walk found it; not read"):
        source.read()
    with pytest.raises(VmtuneError, match="the directory changed"):
        source.load(for_write=True)


def test_plan_write_does_not_write_through_a_symlink_either(tmp_path: Path) -> None:
    from conftest import HOSTS

    target = tmp_path / "real.xml"
    target.write_bytes(NEEDS_FIX)
    link = tmp_path / "link.xml"
    link.symlink_to(target)
    result = run_vmtune("plan", "--write", "--host", str(HOSTS / "intel-2node.xml"), str(link))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"vmtune: {link}: a symlink: vmtune does not rewrite files through symlinks "
                                     "(name the file it points to)")
    assert target.read_bytes() == NEEDS_FIX


def test_a_directory_swapped_between_two_files_reads_from_the_walked_one_and_writes_nothing(tmp_path: Path) -> None:
    """Reading keeps the walked directory's descriptor from file to file: a swap after the
    first read cannot make the second come from where the new symlink leads, and a rewrite
    of it is refused, since the path no longer leads to the directory that was read."""
    from vmtune.sources import iter_sources

    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "sub").mkdir(parents=True)
    outside.mkdir()
    (repo / "sub" / "a.xml").write_bytes(NEEDS_FIX)
    (repo / "sub" / "b.xml").write_bytes(NEEDS_FIX)
    (outside / "b.xml").write_bytes(SECRET)
    first, second = iter_sources([str(repo)])
    assert first.read() == NEEDS_FIX
    os.rename(repo / "sub", tmp_path / "moved")
    (repo / "sub").symlink_to(outside)
    assert second.read() == NEEDS_FIX  # the walked directory's file, never outside/b.xml
    data, identity = second.load(for_write=True)
    assert data == NEEDS_FIX
    with pytest.raises(VmtuneError, match="the directory changed"):
        write_atomic(second.path, b"<domain/>", identity)  # type: ignore[arg-type]
    assert (outside / "b.xml").read_bytes() == SECRET
    assert (tmp_path / "moved" / "b.xml").read_bytes() == NEEDS_FIX
