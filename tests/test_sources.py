"""Finding the files of a batch: one listing per directory, one git call per work tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT, run_vmtune


def logged_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """PATH with a `git` that records each call, then runs the real git."""
    real = shutil.which("git")
    if real is None:
        pytest.skip("git is not installed")
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


def vmtune(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", *args], capture_output=True,
                          text=True, cwd=cwd, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)


def test_one_git_call_for_every_directory_of_a_work_tree(tmp_path: Path) -> None:
    env, log = logged_git(tmp_path)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("*.rendered.xml\n")
    for folder in ("a", "b", "b/deep"):
        (repo / folder).mkdir(parents=True)
        shutil.copy(DOMAINS / "linux-tuned.xml", repo / folder / "vm.xml")
        shutil.copy(DOMAINS / "win10-timer-storm.xml", repo / folder / "out.rendered.xml")
    log.unlink(missing_ok=True)
    result = vmtune(env, repo, "a", "./b")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 domain(s) checked" in result.stdout and "rendered" not in result.stdout
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and "check-ignore" in calls[0]


def test_no_git_call_outside_a_work_tree(tmp_path: Path) -> None:
    env, log = logged_git(tmp_path)
    plain = tmp_path / "plain"
    (plain / "sub").mkdir(parents=True)
    shutil.copy(DOMAINS / "win10-timer-storm.xml", plain / "sub" / "b.xml")
    shutil.copy(DOMAINS / "win10-timer-storm.xml", plain / "a.xml")
    result = vmtune(env, tmp_path, "plain")
    assert result.returncode == 1
    assert result.stdout.index("plain/a.xml") < result.stdout.index("plain/sub/b.xml")  # path order, depth first
    assert not log.exists()


def test_names_keep_the_form_they_were_given_in(tmp_path: Path) -> None:
    env, _log = logged_git(tmp_path)
    (tmp_path / "d").mkdir()
    shutil.copy(DOMAINS / "win10-timer-storm.xml", tmp_path / "d" / "vm.xml")
    for given, shown in (("./d", "d/vm.xml"), ("d/", "d/vm.xml"), (".", "d/vm.xml"), ("d//", "d/vm.xml")):
        result = vmtune(env, tmp_path, given)
        assert result.stdout.startswith(f"== win10 ({shown})\n{shown}:"), (given, result.stdout)


NAME_TOO_LONG = "a" * 300 + ".xml"  # over NAME_MAX (255): stat fails with ENAMETOOLONG, not ENOENT


@pytest.mark.parametrize("args, message", [
    (["check", NAME_TOO_LONG], f"vmtune: {NAME_TOO_LONG}: cannot read: File name too long\n"),
    (["check", "-f", "json", f"{NAME_TOO_LONG}/x.xml"],
     f"vmtune: {NAME_TOO_LONG}/x.xml: cannot read: File name too long\n"),
    (["plan", NAME_TOO_LONG], f"vmtune: {NAME_TOO_LONG}: cannot read: File name too long\n"),
    (["check", "-p", NAME_TOO_LONG, str(DOMAINS / "linux-tuned.xml")],
     f"vmtune: {NAME_TOO_LONG}: cannot read policy: No such file or directory; built-in policies: default, "
     "latency\n"),  # a bare name not ending in .yaml reads as a mistyped built-in
])
def test_a_name_too_long_is_one_line_not_a_traceback(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_vmtune(*args, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (2, message)
