"""A `.vmtune.yaml` another user could have written is never applied (security issue #32).

Discovery stops at the top of the work tree (the directory holding `.git`); outside one, at
$HOME when the file is under it, else at the file's own directory. What it finds, and every
file that uses (`extends`, `policies`, `host`, `domcaps`, `baseline`, a policy's own `extends`),
is used only when root or the invoking user owns it and nobody else can write it or a
directory above it (sticky /tmp-like directories excepted); otherwise one warning line and the
defaults. Real files, real other-user ownership (uid 65534) and modes, the real CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT, run_vmtune

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown files to another uid")

NOBODY = 65534
OTHER = 65533  # a third user: neither root, nor the invoking user, nor a named configuration's owner
LEGACY = DOMAINS / "legacy-bigvm.xml"  # 10 findings with the default policy, exit 1
SILENCE = "ignore: [ALL]\n"  # a configuration that makes every check come back clean
POLICY_SILENCE = "rules:\n  - ignore: [ALL]\n"  # a policy that does
# What the reviewer planted: a custom check whose safe "fix" shares the host's / into the guest.
SHARE_ROOT = """\
checks:
  - code: XEVIL001
    name: share-host-root
    severity: error
    message: needs a shared folder
    select: devices
    assert: {path: filesystem, present: true}
    fix:
      safety: safe
      ensure: {path: filesystem/source, attributes: {dir: /}}
"""
IGNORED = "configuration ignored: {why}, so another user could have written it; checking with the defaults"


def findings(result: subprocess.CompletedProcess[str]) -> set[str]:
    return {f["rule"] for f in json.loads(result.stdout)["findings"]}


def plant(path: Path, text: str = SILENCE, uid: int = NOBODY, mode: int = 0o644) -> Path:
    path.write_text(text)
    os.chown(path, uid, uid)
    os.chmod(path, mode)
    return path


def shared_tmp(tmp_path: Path) -> Path:
    """A directory like /tmp: everyone may create files in it, sticky, owned by root."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    return shared


def domain_in(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "vm.xml"
    shutil.copy(LEGACY, target)
    return target


DEFAULTS = {"CPU001", "CLK003", "NET004", "USB001"}  # some of what the default policy finds in LEGACY


def test_a_configuration_above_a_file_outside_a_work_tree_is_not_looked_for(tmp_path: Path) -> None:
    """/tmp/.vmtune.yaml (another user's) above /tmp/alice/vm.xml: the walk used to go up to / and
    apply it; it now stops at the file's directory, so the check is the default one."""
    shared = shared_tmp(tmp_path)
    plant(shared / ".vmtune.yaml")
    vm = domain_in(shared / "alice")
    result = run_vmtune("check", "--format", "json", str(vm))
    assert result.returncode == 1 and findings(result) >= DEFAULTS
    assert result.stderr == ""  # not discovered at all: nothing to warn about
    # Even one root owns: above the file's directory, outside a work tree, nothing is looked for.
    os.chown(shared / ".vmtune.yaml", 0, 0)
    assert findings(run_vmtune("check", "--format", "json", str(vm))) >= DEFAULTS


def test_a_planted_configuration_cannot_make_check_fix_share_the_hosts_root(tmp_path: Path) -> None:
    """The reviewer's attack: root's `check --fix` applied a stranger's custom check and wrote
    `<filesystem><source dir='/'/>` into the definition. The file is fixed by the defaults only."""
    shared = shared_tmp(tmp_path)
    plant(shared / ".vmtune.yaml", SHARE_ROOT)
    vm = domain_in(shared / "alice")
    result = run_vmtune("check", "--fix", str(vm))
    fixed = vm.read_text()
    assert "<filesystem" not in fixed and "XEVIL001" not in result.stdout
    assert result.returncode == 1 and "NET004" in result.stdout


@pytest.mark.parametrize(("setup", "why"), [
    # the configuration itself: another user's, in a sticky directory like /tmp
    (lambda d, c: (os.chmod(d, 0o1777), plant(c)), "owned by uid 65534"),
    # root's, but others (o+w) or the group (g+w) may write it
    (lambda d, c: plant(c, uid=0, mode=0o646), "writable by group or others (mode 0646)"),
    (lambda d, c: plant(c, uid=0, mode=0o664), "writable by group or others (mode 0664)"),
])
def test_a_configuration_others_could_write_is_ignored_with_one_line(
        tmp_path: Path, setup: Callable[[Path, Path], object], why: str) -> None:
    folder = tmp_path / "vms"
    vm = domain_in(folder)
    config = folder / ".vmtune.yaml"
    setup(folder, config)
    result = run_vmtune("check", "--format", "json", str(vm))
    assert result.returncode == 1 and findings(result) >= DEFAULTS
    assert result.stderr == f"vmtune: warning: {config}: {IGNORED.format(why=why)}\n"


@pytest.mark.parametrize(("mode", "uid", "why"), [
    (0o777, 0, "writable by group or others (mode 0777)"),  # a directory anyone may rename entries in
    (0o775, 0, "writable by group or others (mode 0775)"),
    (0o755, NOBODY, "owned by uid 65534"),  # another user's directory: they can swap the file
])
def test_a_configuration_in_a_directory_others_control_is_ignored(tmp_path: Path, mode: int, uid: int,
                                                                  why: str) -> None:
    """The configuration is root's and 0644, but a directory above it is not: the walk to / is
    checked (as OpenSSH's StrictModes and vmtune's state directory do)."""
    above = tmp_path / "above"
    vm = domain_in(above / "vms")
    config = plant(above / "vms" / ".vmtune.yaml", uid=0)
    os.chown(above, uid, uid)
    os.chmod(above, mode)
    result = run_vmtune("check", "--format", "json", str(vm))
    assert result.returncode == 1 and findings(result) >= DEFAULTS
    assert result.stderr == f"vmtune: warning: {config}: {IGNORED.format(why=f'{above} is {why}')}\n"


def test_the_stdin_flow_does_not_pick_up_a_planted_parent_configuration(tmp_path: Path) -> None:
    """`virsh dumpxml vm | vmtune check --fix -` in /tmp/work: the configuration of the current
    directory's work tree applies, or without one only the current directory's; never /tmp's."""
    shared = shared_tmp(tmp_path)
    plant(shared / ".vmtune.yaml", SHARE_ROOT)
    work = shared / "work"
    work.mkdir()
    result = run_vmtune("check", "--fix", "-", stdin=LEGACY.read_bytes(), cwd=work)
    assert "<filesystem" not in result.stdout and "XEVIL001" not in result.stderr
    assert "NET004" in result.stderr and result.returncode == 1
    # --stdin-filename: the file's directory, as for a file.
    named = run_vmtune("check", "--fix", "--stdin-filename", str(work / "vm.xml"), "-", stdin=LEGACY.read_bytes(),
                       cwd=tmp_path)
    assert "<filesystem" not in named.stdout and "NET004" in named.stderr
    # Planted in the current directory itself (a sticky one): found, and ignored with one line.
    config = plant(work / ".vmtune.yaml", SHARE_ROOT)
    os.chmod(work, 0o1777)
    beside = run_vmtune("check", "--fix", "-", stdin=LEGACY.read_bytes(), cwd=work)
    assert "<filesystem" not in beside.stdout
    assert beside.stderr.splitlines()[0] == \
        f"vmtune: warning: {config}: {IGNORED.format(why='owned by uid 65534')}"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real repository, cloned as root (the CI case): its configuration is root's, 0644."""
    origin = tmp_path / "origin"
    domain_in(origin / "hosts")
    (origin / ".vmtune.yaml").write_text("ignore: [NET004]\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    subprocess.run([*git, "-C", str(origin), "add", "."], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "init"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    return clone


def test_a_legitimate_configuration_in_a_clone_still_applies(repo: Path) -> None:
    assert oct(os.stat(repo / ".vmtune.yaml").st_mode & 0o777) == "0o644"
    result = run_vmtune("check", "--format", "json", "hosts", cwd=repo)
    assert result.stderr == "" and "NET004" not in findings(result) and DEFAULTS - {"NET004"} <= findings(result)
    stdin = run_vmtune("check", "--format", "json", "-", stdin=(repo / "hosts" / "vm.xml").read_bytes(),
                       cwd=repo / "hosts")
    assert stdin.stderr == "" and "NET004" not in findings(stdin)


@pytest.mark.parametrize("key", ["extends", "policies", "host"])
def test_a_reference_another_user_could_have_written_ignores_the_configuration(repo: Path, key: str) -> None:
    """The configuration is legitimate, a file it names is not: it is ignored as a whole."""
    drop = repo / "drop"
    drop.mkdir()
    name = "caps.xml" if key == "host" else "policy.yaml"
    plant(drop / name, POLICY_SILENCE if key != "host" else "<capabilities/>")
    value = f"[drop/{name}]" if key == "policies" else f"drop/{name}"
    (repo / ".vmtune.yaml").write_text(f"ignore: [NET004]\n{key}: {value}\n")
    result = run_vmtune("check", "--format", "json", "hosts", cwd=repo)
    assert result.returncode == 1 and findings(result) >= DEFAULTS  # NET004 too: the defaults
    assert result.stderr == (f"vmtune: warning: {repo}/.vmtune.yaml: configuration ignored: {repo}/.vmtune.yaml:"
                             f"2: {key} 'drop/{name}': owned by uid 65534, so another user could have written "
                             "it; checking with the defaults\n")


def test_a_policy_extending_a_planted_one_ignores_the_configuration(repo: Path) -> None:
    """A policy's own `extends` is looked at when the configuration is, not at the first check."""
    (repo / "policies").mkdir()
    (repo / "policies" / "team.yaml").write_text("extends: ../drop/evil.yaml\n")
    drop = repo / "drop"
    drop.mkdir(mode=0o755)
    os.chmod(drop, 0o777)  # root's directory, but anyone may put a file there
    (drop / "evil.yaml").write_text(SHARE_ROOT)
    (repo / ".vmtune.yaml").write_text("policies: [policies/team.yaml]\n")
    vm = repo / "hosts" / "vm.xml"
    result = run_vmtune("check", "--fix", str(vm), cwd=repo)
    assert "<filesystem" not in vm.read_text() and "XEVIL001" not in result.stdout
    assert result.stderr == (f"vmtune: warning: {repo}/.vmtune.yaml: configuration ignored: "
                             f"{repo}/policies/team.yaml:1: extends '../drop/evil.yaml': {drop} is writable by "
                             "group or others (mode 0777), so another user could have written it; checking with "
                             "the defaults\n")


def test_a_configuration_named_on_the_command_line_is_read_wherever_it_is(tmp_path: Path) -> None:
    """--config is the user's choice: read even when another user owns it; what it names may be
    its owner's, root's or the user's, but not a third user's (exit 2, one line)."""
    shared = shared_tmp(tmp_path)
    config = plant(shared / "site.yaml", "policies: [team.yaml]\n")
    plant(shared / "team.yaml", POLICY_SILENCE)  # the same owner as the configuration the user chose
    vm = domain_in(tmp_path / "vms")
    chosen = run_vmtune("check", "--config", str(config), str(vm))
    assert chosen.returncode == 0 and chosen.stderr == ""
    os.chown(shared / "team.yaml", OTHER, OTHER)
    third = run_vmtune("check", "--config", str(config), str(vm))
    assert third.returncode == 2 and third.stdout == ""
    assert third.stderr == (f"vmtune: {config}:1: policies 'team.yaml': owned by uid {OTHER}, so another user could "
                            "have written it\n")


def test_a_configuration_in_home_applies_to_files_under_home_only(tmp_path: Path) -> None:
    """Outside a work tree the walk goes up to $HOME (the user's own tree), never above it."""
    home = tmp_path / "home"
    vm = domain_in(home / "vms" / "lab")
    (home / ".vmtune.yaml").write_text("ignore: [NET004]\n")
    (tmp_path / ".vmtune.yaml").write_text(SILENCE)  # above $HOME: never looked at
    env = {**os.environ, "HOME": str(home)}

    def check(path: Path) -> set[str]:
        done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--format", "json", str(path)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert done.stderr == ""
        return findings(done)

    assert "NET004" not in check(vm) and DEFAULTS - {"NET004"} <= check(vm)
    outside = domain_in(tmp_path / "elsewhere" / "deep")
    assert check(outside) >= DEFAULTS


def test_a_parallel_run_warns_once(tmp_path: Path) -> None:
    """Worker processes inherit what the parent already said: one line, not one per worker."""
    folder = tmp_path / "many"
    folder.mkdir()
    text = LEGACY.read_bytes()
    for index in range(200):
        (folder / f"vm{index:03}.xml").write_bytes(text)
    config = plant(folder / ".vmtune.yaml")
    result = run_vmtune("check", "--jobs", "2", "--statistics", str(folder))
    assert result.returncode == 1
    assert result.stderr == f"vmtune: warning: {config}: {IGNORED.format(why='owned by uid 65534')}\n"


@pytest.mark.parametrize("target", ["roots-own.yaml", "/etc/shadow"])
def test_a_symlink_another_user_planted_cannot_choose_a_configuration(tmp_path: Path, target: str) -> None:
    """In a sticky directory anyone may add a `.vmtune.yaml` symlink to a file root owns, there
    (written for something else) or anywhere: the link is the other user's, so nothing is used,
    and the run is not failed for it either (it was: `outside the repository`, exit 2)."""
    shared = shared_tmp(tmp_path)
    plant(shared / "roots-own.yaml", SILENCE, uid=0)
    link = shared / ".vmtune.yaml"
    link.symlink_to(target)
    os.lchown(link, NOBODY, NOBODY)
    vm = domain_in(shared)
    result = run_vmtune("check", "--format", "json", str(vm))
    assert result.returncode == 1 and findings(result) >= DEFAULTS
    assert result.stderr == f"vmtune: warning: {link}: {IGNORED.format(why='a symlink owned by uid 65534')}\n"


def test_a_checkout_cloned_with_umask_0000_needs_config(tmp_path: Path, repo: Path) -> None:
    """GitLab Runner's Docker executor clones as root with umask 0000 (files 0666, directories
    0777): discovery ignores the configuration, saying why; `--config` reads it, and what it
    names, which is no more exposed than the configuration the user chose."""
    (repo / "policies").mkdir()
    (repo / "policies" / "team.yaml").write_text("extends: default\nrules:\n  - ignore: [NET004]\n")
    (repo / ".vmtune.yaml").write_text("policies: [policies/team.yaml]\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(repo), "commit", "-qm",
                    "policy"], check=True)
    ci = tmp_path / "builds"
    subprocess.run(["sh", "-c", 'umask 0000 && git clone -q "$0" "$1"', str(repo), str(ci)], check=True)
    assert oct(os.stat(ci / "policies" / "team.yaml").st_mode & 0o777) == "0o666"
    discovered = run_vmtune("check", "--format", "json", "hosts", cwd=ci)
    assert discovered.returncode == 1 and findings(discovered) >= DEFAULTS
    assert discovered.stderr == (f"vmtune: warning: {ci}/.vmtune.yaml: configuration ignored: {ci} is writable by "
                                 "group or others (mode 0777), so another user could have written it; checking with "
                                 "the defaults\n")
    named = run_vmtune("check", "--config", ".vmtune.yaml", "--format", "json", "hosts", cwd=ci)
    assert named.stderr == "" and "NET004" not in findings(named) and findings(named) >= DEFAULTS - {"NET004"}


def test_a_configuration_parsed_before_is_not_served_from_the_cache_once_untrusted(tmp_path: Path) -> None:
    """The parsed-YAML cache (vmtune.cache) is keyed by the file's name and text, looked up only
    after the file was vetted: the same file, now another user's, is not used."""
    folder = tmp_path / "vms"
    vm = domain_in(folder)
    config = plant(folder / ".vmtune.yaml", "ignore: [NET004]\n", uid=0)
    trusted = run_vmtune("check", "--format", "json", str(vm))
    assert trusted.stderr == "" and "NET004" not in findings(trusted)
    os.chown(config, NOBODY, NOBODY)
    planted = run_vmtune("check", "--format", "json", str(vm))
    assert "NET004" in findings(planted)
    assert planted.stderr == f"vmtune: warning: {config}: {IGNORED.format(why='owned by uid 65534')}\n"


def test_the_warning_escapes_the_name_and_quotes_nothing_from_the_file(tmp_path: Path) -> None:
    """A name with a newline and an ESC cannot forge a line or colour a log; the planted file is
    not even read, so nothing of it (here a secret-looking line) can appear."""
    folder = tmp_path / "vms\n::error::forged\x1b[31m"
    vm = domain_in(folder)
    plant(folder / ".vmtune.yaml", "SECRET-TOKEN: hunter2\n")
    result = run_vmtune("check", "--format", "json", str(vm))
    escaped = str(folder).replace("\n", "\\n").replace("\x1b", "\\x1b")
    assert result.stderr == (f"vmtune: warning: {escaped}/.vmtune.yaml: "
                             f"{IGNORED.format(why='owned by uid 65534')}\n")
    assert "SECRET" not in result.stdout + result.stderr and result.returncode == 1
