"""The flags and habits of the linters infra engineers know (ruff, hadolint), as a user meets them."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import DOMAINS, ROOT, run_vmtune

STORM = str(DOMAINS / "win10-timer-storm.xml")


def test_version_names_the_commit_of_the_checkout() -> None:
    """Releases are commits on main (no tags are published): --version says which one runs. Before,
    the version alone, the same for every commit since the release."""
    from vmtune import __version__

    result = run_vmtune("--version")
    if not (ROOT / ".git").exists():  # an unpacked sdist: no commit to name
        assert result.returncode == 0 and result.stdout == f"vmtune {__version__}\n"
        return
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert result.returncode == 0 and result.stdout == f"vmtune {__version__} (commit {head})\n"


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_the_commit_is_read_from_every_layout_git_leaves(tmp_path: Path) -> None:
    """HEAD on a branch (a loose ref, then packed), detached (pre-commit checks a commit out so),
    in a linked worktree (`.git` is a file); none on an unborn branch or without .git."""
    from vmtune.commit import head_commit

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    assert head_commit(repo) is None  # unborn: no commit yet
    (repo / "a").write_text("a")
    _git(repo, "add", "a")
    _git(repo, "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    assert head_commit(repo) == first
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists() and head_commit(repo) == first
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = _git(repo, "rev-parse", "HEAD")
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"), first)
    assert (tmp_path / "linked" / ".git").is_file() and head_commit(tmp_path / "linked") == first
    _git(tmp_path / "linked", "switch", "-q", "-c", "side")
    _git(tmp_path / "linked", "commit", "-q", "--allow-empty", "-m", "three")
    assert head_commit(tmp_path / "linked") == _git(tmp_path / "linked", "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "--detach", first)
    assert head_commit(repo) == first != second
    assert head_commit(tmp_path) is None  # no .git


def test_exit_zero_and_exit_non_zero_on_fix(tmp_path: Path) -> None:
    assert run_vmtune("check", "--exit-zero", STORM).returncode == 0
    bad = tmp_path / "bad.xml"
    bad.write_text("<domain>")
    assert run_vmtune("check", "--exit-zero", str(bad)).returncode == 2  # input errors stay errors
    target = tmp_path / "nginx.xml"
    shutil.copy(DOMAINS / "nginx-single-queue.xml", target)
    fixed = run_vmtune("check", "--fix", "--select", "NET001", "--exit-non-zero-on-fix", str(target))
    assert fixed.returncode == 1 and "1 fix(es) applied" in fixed.stdout
    again = run_vmtune("check", "--fix", "--select", "NET001", "--exit-non-zero-on-fix", str(target))
    assert again.returncode == 0


def test_statistics_and_quiet() -> None:
    stats = run_vmtune("check", "--statistics", STORM)
    assert stats.stdout.splitlines()[:5] == ["    1  CLK002  windows-synthetic-timers-missing",
                                             "    1  DSK003  virtio-disk-without-iothread",
                                             "    1  DSK008  file-disk-host-page-cache",
                                             "    1  HV001   hyperv-baseline-missing",
                                             "    1  NET007  virtio-net-queue-size-default"]
    assert "==" not in stats.stdout and stats.returncode == 1
    quiet = run_vmtune("check", "--quiet", STORM)
    assert quiet.returncode == 1 and "domain(s) checked" not in quiet.stdout and "HV001 warning" in quiet.stdout


def test_stdin_filename_names_the_report_and_finds_its_configuration(tmp_path: Path) -> None:
    (tmp_path / "hosts").mkdir()
    (tmp_path / ".git").mkdir()  # a repository: discovery goes up to its top, as for a file there
    (tmp_path / ".vmtune.yaml").write_text("per-file-ignores:\n  'hosts/*.xml': [HV001]\n")
    result = run_vmtune("check", "--stdin-filename", "hosts/win10.xml", "-",
                        stdin=(DOMAINS / "win10-timer-storm.xml").read_bytes(), cwd=tmp_path)
    assert "hosts/win10.xml:31: CLK002 warning" in result.stdout and "HV001" not in result.stdout


def test_output_format_is_an_alias_of_format() -> None:
    assert run_vmtune("check", "--output-format", "json", STORM).stdout.lstrip().startswith("{")


def _on_a_terminal(*args: str, env: dict[str, str]) -> str:
    """Run vmtune with stdout on a pseudo-terminal, as a user's shell would."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "vmtune", *args], stdout=follower, stderr=subprocess.DEVNULL,
                            cwd=ROOT, env={**os.environ, **env})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_only_and_never_with_no_color() -> None:
    plain = {"NO_COLOR": "", "FORCE_COLOR": ""}
    assert "\x1b[33mwarning" in _on_a_terminal("check", STORM, env=plain)
    assert "\x1b[" not in _on_a_terminal("check", STORM, env={**plain, "NO_COLOR": "1"})
    assert "\x1b[" not in run_vmtune("check", STORM).stdout  # a pipe
    assert "\x1b[33mwarning" in run_vmtune("check", "--color", "always", STORM).stdout
    forced = subprocess.run([sys.executable, "-m", "vmtune", "check", STORM], capture_output=True, text=True,
                            cwd=ROOT, env={**os.environ, "FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "\x1b[33mwarning" in forced.stdout


def _policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return str(path)


def test_policy_mistakes_are_the_policys_errors_with_a_suggestion(tmp_path: Path) -> None:
    typo = _policy(tmp_path, "extends: default\nrules:\n  - select: [NET001]\n    params: {max_queue: 4}\n")
    result = run_vmtune("check", "-p", typo, STORM)
    assert result.returncode == 2 and result.stderr == (
        f"vmtune: {typo}:4: invalid policy: parameter 'max_queue' is not taken by NET001 (they take: max_queues, "
        "min_vcpus_warning); did you mean 'max_queues'?\n")
    bad = _policy(tmp_path, "extends: default\nrules:\n  - select: [NET001]\n    params: {max_queues: many}\n")
    result = run_vmtune("check", "-p", bad, STORM)
    assert result.returncode == 2 and "parameter 'max_queues' of NET001: expected a non-negative integer, not " \
        "'many'" in result.stderr and "internal error" not in result.stderr
    named = run_vmtune("check", "-p", "latncy", STORM, cwd=tmp_path)
    assert named.returncode == 2 and named.stderr.endswith(
        "cannot read policy: No such file or directory; built-in policies: default, latency; did you mean "
        "'latency'?\n")
    select = run_vmtune("check", "--isolated", "--select", "NET01", STORM)
    assert select.returncode == 2
    assert select.stderr == "vmtune: unknown rule selector 'NET01' on the command line; did you mean 'NET001'?\n"


def test_an_empty_configuration_is_no_error(tmp_path: Path) -> None:
    (tmp_path / ".vmtune.yaml").write_text("# nothing yet\n")
    shutil.copy(DOMAINS / "linux-tuned.xml", tmp_path / "vm.xml")
    result = run_vmtune("check", "vm.xml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_directory_walks_respect_gitignore_and_say_when_nothing_matched(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        import pytest

        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("rendered/\n")
    (tmp_path / "rendered").mkdir()
    (tmp_path / "templates").mkdir()
    shutil.copy(DOMAINS / "win10-timer-storm.xml", tmp_path / "rendered" / "win10.xml")
    shutil.copy(DOMAINS / "win10-timer-storm.xml", tmp_path / "templates" / "win10.xml.j2")
    result = run_vmtune("check", ".", cwd=tmp_path)
    assert result.returncode == 0 and "win10.xml" not in result.stdout  # ignored, silently, as ruff does
    templates = run_vmtune("check", "templates", cwd=tmp_path)
    assert templates.returncode == 0 and templates.stdout.startswith(
        "templates: skipped: no *.xml file to check in it (other files are checked when named: *.xml.j2)\n")
    assert run_vmtune("check", "templates/win10.xml.j2", cwd=tmp_path).returncode == 1


def test_baselines_say_what_they_wrote_and_what_they_hid(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    wrote = run_vmtune("check", "--write-baseline", str(baseline), STORM)
    assert wrote.returncode == 0
    assert wrote.stderr == f"vmtune: wrote 5 baseline entries (5 finding(s)) to {baseline}\n"
    hid = run_vmtune("check", "--baseline", str(baseline), STORM)
    assert hid.returncode == 0 and hid.stdout.endswith("0 finding(s) (0 error, 0 warning, 0 info); 5 more hidden "
                                                       "by the baseline\n")
    (tmp_path / ".vmtune.yaml").write_text("baseline: baseline.json\n")
    shutil.copy(DOMAINS / "win10-timer-storm.xml", tmp_path / "vm.xml")
    configured = run_vmtune("check", "vm.xml", cwd=tmp_path)
    assert configured.returncode == 0 and "5 more hidden by the baseline" in configured.stdout


def test_rules_show_the_range_their_findings_take_and_host_output_speaks_of_the_host(tmp_path: Path) -> None:
    listing = run_vmtune("rules").stdout.splitlines()
    assert next(line for line in listing if line.startswith("NET002")).split()[2:4] == ["info|error", "fix:unsafe"]
    assert next(line for line in listing if line.startswith("DSK002")).split()[3] == "fix:safe|unsafe"
    assert "Applies to: the host vmtune runs on (`vmtune host`), not domains" in run_vmtune("rule", "HOST001").stdout
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    result = run_vmtune("host", "--root", str(root))
    assert "1 host(s) checked" in result.stdout and "domain(s)" not in result.stdout


def test_an_error_is_exactly_one_line(tmp_path: Path) -> None:
    nul = tmp_path / "nul.xml"
    nul.write_bytes(b"<domain>\0</domain>")
    result = run_vmtune("check", str(nul))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"vmtune: {nul}:1: malformed XML: ")
