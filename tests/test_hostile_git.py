"""No program named by the checked tree runs (#49): `vmtune check DIR` asks git which files the
tree ignores, and git reads the tree's own .git/config. An archive, a CI artifact or a copied
checkout is owned by whoever unpacked it (root on a hypervisor), so git's safe.directory does not
object to its config. Real git, real repositories; the "program" is a script that leaves a mark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DOMAINS

CLEAN = (DOMAINS / "linux-tuned.xml").read_bytes()
STORM = (DOMAINS / "win10-timer-storm.xml").read_bytes()  # findings: checked means reported


def _git(cwd: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": os.environ["PATH"], "HOME": str(cwd.parent)}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def planted_repository(tmp_path: Path) -> tuple[Path, Path]:
    """A committed tree whose .git/config names a program for every hook git has that runs one,
    with a .gitignore (rendered/) and an info/exclude (local.xml). Returns it and the marker."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo, marker = tmp_path / "artifact", tmp_path / "program-ran"
    repo.mkdir()
    _git(repo, "init", "-q")
    script = repo / "evil.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\n")
    script.chmod(0o755)
    (repo / "vm.xml").write_bytes(CLEAN)
    (repo / "rendered").mkdir()
    (repo / "rendered" / "out.xml").write_bytes(STORM)
    (repo / "local.xml").write_bytes(STORM)
    (repo / ".gitignore").write_text("rendered/\n")
    _git(repo, "add", "vm.xml", ".gitignore", "evil.sh")
    _git(repo, "commit", "-q", "-m", "x")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("local.xml\n")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("fsmonitor-watchman", "post-index-change", "pre-commit", "post-checkout"):
        shutil.copy(script, hooks / hook)
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {script}\n\thooksPath = {hooks}\n\tpager = {script}\n"
                     f"\tuntrackedCache = true\n[diff \"x\"]\n\tcommand = {script}\n")
    return repo, marker


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VMTUNE_NO_CACHE": "1"}
    return subprocess.run([sys.executable, "-m", "vmtune", "check", *args], capture_output=True, text=True,
                          cwd=repo.parent, env=env, timeout=120)


def test_the_planted_config_runs_its_program_for_git_itself(tmp_path: Path) -> None:
    """The attack is real on this git: check-ignore, as vmtune called it before, runs fsmonitor."""
    repo, marker = planted_repository(tmp_path)
    subprocess.run(["git", "-C", str(repo), "check-ignore", "--stdin", "-z"], input=b"vm.xml", capture_output=True,
                   timeout=30, check=False)
    assert marker.exists()


@pytest.mark.parametrize("args", [[], ["-f", "json"], ["--fix"]], ids=["fast-path", "json", "fix"])
def test_check_of_a_planted_tree_runs_nothing_and_still_applies_its_ignores(tmp_path: Path, args: list[str]) -> None:
    repo, marker = planted_repository(tmp_path)
    done = run(repo, *args, "artifact")
    assert not marker.exists(), marker.read_text()
    # rendered/ (.gitignore) and local.xml (.git/info/exclude) are skipped: git still decides
    assert done.returncode == 0, done.stdout + done.stderr
    assert "out.xml" not in done.stdout and "local.xml" not in done.stdout


def test_isolated_reads_nothing_of_the_trees_git_but_its_gitignore(tmp_path: Path) -> None:
    """--isolated: no config, no index, no info/exclude of the tree: local.xml is checked (its
    findings reported), rendered/ still skipped by the .gitignore the tree carries."""
    repo, marker = planted_repository(tmp_path)
    done = run(repo, "--isolated", "artifact")
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "artifact/local.xml:" in done.stdout and "out.xml" not in done.stdout
    assert "2 domain(s) checked" in done.stdout


def test_isolated_follows_no_gitdir_file_out_of_the_tree(tmp_path: Path) -> None:
    """A `.git` file naming a git directory elsewhere (its config runs a program): never read."""
    repo, marker = planted_repository(tmp_path)
    elsewhere = tmp_path / "elsewhere.git"
    shutil.move(str(repo / ".git"), elsewhere)
    (repo / ".git").write_text(f"gitdir: {elsewhere}\n")
    done = run(repo, "--isolated", "artifact")
    assert not marker.exists()
    assert done.returncode == 1 and "2 domain(s) checked" in done.stdout, done.stdout + done.stderr
