"""File names that look like options, and libvirt URIs that run a program (security issue #32).

pre-commit runs `entry args FILE...` and `xargs` appends the names it reads: in a pull request's
tree a directory named `--connect=qemu+ext:` or `--output-file=` gives names that a parser which
takes options after operands reads as options. These tests run the real pre-commit, a real
shell with xargs and the real libvirt-python on such trees and URIs, and assert that no option is
taken from a file name, that no program named by a URI runs, and what the user sees.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_ops import complete

from conftest import DOMAINS, ROOT, TESTNODE_URI

VENV_BIN = Path(sys.executable).parent
CLEAN = (DOMAINS / "linux-tuned.xml").read_bytes()  # no finding: a hook that only checks it passes
VICTIM = b"<domain type='kvm'><name>victim</name></domain>\n"


def _git(cwd: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": os.environ["PATH"], "HOME": str(cwd.parent)}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _script(path: Path, marker: Path) -> None:
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)


def hostile_tree(tmp_path: Path, ext: bool = True) -> tuple[Path, Path, Path]:
    """A pull request's tree (a git repository): the reviewer's names (without the ext transport's
    with `ext=False`, the attack that needs no libvirt-python). Returns the repository, the marker
    the pull request's script would create, and a domain file outside the tree that
    `--output-file=` would overwrite."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo, marker = tmp_path / "pr", tmp_path / "ext-script-ran"
    victim = tmp_path / "outside" / "victim.xml"
    victim.parent.mkdir()
    victim.write_bytes(VICTIM)
    repo.mkdir()
    _git(repo, "init", "-q")
    _script(repo / "evil.sh", marker)
    # `--connect=qemu+ext:/system?command=./evil.sh&x=/a.xml`: libvirt's ext transport runs ./evil.sh
    if ext:
        folder = repo / "--connect=qemu+ext:" / "system?command=." / "evil.sh&x="
        folder.mkdir(parents=True)
        (folder / "a.xml").write_bytes(CLEAN)
        (repo / "--domain=x.xml").write_bytes(CLEAN)  # a live domain to look up: the connection is opened
    # `--output-file=/…/outside/victim.xml`: the report would replace a file outside the tree
    report = repo / "--output-file=" / victim.relative_to("/")
    report.parent.mkdir(parents=True)
    report.write_bytes(CLEAN)
    (repo / "domains").mkdir()
    (repo / "domains" / "web.xml").write_bytes(CLEAN)
    _git(repo, "add", ".")
    return repo, marker, victim


def shipped_hooks_as_local() -> list[dict[str, object]]:
    """The hooks of .pre-commit-hooks.yaml exactly as shipped (id, entry, types), run by pre-commit
    as `language: system` with this environment's vmtune first on PATH: pre-commit builds the
    command line (`entry args FILE...`) as for a user, without installing vmtune from a clone."""
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return [{**hook, "language": "system"} for hook in hooks]


@pytest.mark.parametrize("ext", [True, False], ids=["ext-transport", "output-file-only"])
@pytest.mark.parametrize("hook_id", ["vmtune-check", "vmtune-fix"])
def test_real_pre_commit_takes_no_option_from_a_pull_requests_file_names(
        tmp_path: Path, hook_id: str, ext: bool) -> None:
    if ext:
        pytest.importorskip("libvirt", reason="libvirt-python is not installed (pip install '.[live]')")
    repo, marker, victim = hostile_tree(tmp_path, ext)
    hook = next(h for h in shipped_hooks_as_local() if h["id"] == hook_id)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    _git(repo, "add", ".")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "PRE_COMMIT_HOME": str(tmp_path / "pc"),
           "HOME": str(tmp_path / "home"), "VMTUNE_NO_CACHE": "1"}
    env.pop("LIBVIRT_DEFAULT_URI", None)
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=300)
    assert not marker.exists(), "the pull request's script ran: " + done.stdout
    assert victim.read_bytes() == VICTIM
    # Every name was checked as a file, and each is a clean domain: the hook passes.
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{4 if ext else 2} domain(s) checked: 0 finding(s)" in done.stdout, done.stdout


@pytest.mark.parametrize("pipeline, code, checked", [
    # The documented form: `--` ends the options whatever the first name is.
    ("git ls-files -z -- '*.xml' | xargs -0 vmtune check --isolated --", 0, 4),
    # A directory first, then the names: after the first operand every argument is a file.
    ("git ls-files -z -- '*.xml' | xargs -0 vmtune check --isolated domains/", 0, 5),
    # Without `--` and with a hostile name first: an existing path is that path, never an option
    # (#49; before, the name was read as `--connect` and only the ext-URI guard stopped it).
    ("git ls-files -z -- '*.xml' | xargs -0 vmtune check --isolated", 0, 4),
    ("git ls-files -z -- '*.xml' | xargs -0 vmtune check --isolated -f json", 0, 4),
    # A CI step as users write it: the shell splits `$(git ls-files)` (no names with spaces here).
    ("vmtune check --skip-non-domain $(git ls-files '*.xml')", 0, 4),
    ("vmtune check --fix --skip-non-domain $(git ls-files '*.xml')", 0, 4),
])
def test_xargs_with_hostile_names_runs_nothing_and_overwrites_nothing(
        tmp_path: Path, pipeline: str, code: int, checked: int,
        libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    repo, marker, victim = hostile_tree(tmp_path)
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "VMTUNE_NO_CACHE": "1"}
    env.pop("LIBVIRT_DEFAULT_URI", None)
    done = subprocess.run(["sh", "-c", pipeline], cwd=repo, capture_output=True, text=True, env=env, timeout=300)
    assert not marker.exists()
    assert victim.read_bytes() == VICTIM
    assert done.returncode == (123 if code else 0), done.stdout + done.stderr  # xargs: 123 when a run failed
    if code:
        assert done.stderr == ("vmtune: qemu+ext:/system?command=./evil.sh&x=/a.xml: refused: the ext transport "
                               "runs the program of its command= parameter; give --allow-command-uri if you "
                               "mean it\n")
    elif "-f json" in pipeline:
        import json

        assert json.loads(done.stdout)["summary"]["domains"] == checked, done.stdout
    else:
        assert f"{checked} domain(s) checked: 0 finding(s)" in done.stdout, done.stdout + done.stderr


def _refusal(uri: str, reason: str) -> str:
    return f"vmtune: {uri}: refused: {reason}; give --allow-command-uri if you mean it\n"


EXT = "the ext transport runs the program of its command= parameter"
COMMAND = "command= names a program libvirt runs on this machine"


def _uris(script: Path) -> list[tuple[str, str]]:
    """URIs with which libvirt runs `script` on this machine (each is checked to, below), as
    libvirt reads them: any case for the transport, `;` between parameters, %-escapes in names."""
    return [
        (f"qemu+ext:///system?command={script}", EXT),
        (f"test+EXT:///default?command={script}", EXT),
        (f"qemu+ssh://localhost/system?no_tty=1;command={script}", COMMAND),
        (f"qemu+ssh://localhost/system?Comm%61nd={script}&no_tty=1", COMMAND),
    ]


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("command", [
    ["check", "--all", "--connect"],  # the fast path
    ["check", "--all", "-f", "html", "-c"],  # typer (html is not a fast format)
    ["plan", "-c"], ["apply", "--all", "--yes", "-c"], ["history", "--all", "-c"], ["rollback", "-d", "vm", "-c"],
], ids=lambda c: c[0] if isinstance(c, list) else str(c))
def test_a_uri_that_runs_a_program_is_refused_without_the_flag(
        tmp_path: Path, command: list[str], case: int, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    _script(tmp_path / "tunnel.sh", marker)
    uri, reason = _uris(tmp_path / "tunnel.sh")[case]
    done = subprocess.run([sys.executable, "-m", "vmtune", *command, uri], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", _refusal(uri, reason))
    assert not marker.exists()


@pytest.mark.parametrize("case", range(4))
def test_the_flag_opens_it_as_libvirt_would(tmp_path: Path, case: int, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """The other side: with --allow-command-uri libvirt runs the program, so each URI refused above
    does run one (the script is no RPC server: the connection then fails, exit 2)."""
    marker = tmp_path / "ran"
    _script(tmp_path / "tunnel.sh", marker)
    uri, _reason = _uris(tmp_path / "tunnel.sh")[case]
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--allow-command-uri", "--all", "-c", uri],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
    assert marker.exists(), done.stderr
    assert done.returncode == 2 and "refused" not in done.stderr


@pytest.mark.parametrize("uri", [
    "qemu+ssh://user@host/system?netcat=/opt/nc", "qemu+libssh://host/system?NETCAT=nc", "xen+ext://host/",
    "qemu:///system?command=x", "qemu+tls://host/system?a=1&command=", "qemu+ssh://host/system?x=1#y&command=/x",
])
def test_every_way_of_naming_a_program_is_refused(uri: str) -> None:
    from vmtune.live.uri import runs_program

    assert runs_program(uri) is not None


@pytest.mark.parametrize("uri", [
    "qemu:///system", "qemu:///session", TESTNODE_URI, "qemu+ssh://root@hv01/system?keyfile=/k&no_verify=1",
    "qemu+unix:///system?socket=/run/libvirt/virtqemud-sock&mode=direct", "qemu+ssh://hv/system?proxy=native",
    "qemu+tls://hv01.example.org/system?pkipath=/etc/pki", "qemu:///embed?root=/tmp/x", "hail", "qemu+extra://h/",
    "qemu+ssh://hv/system?commander=1",
])
def test_uris_that_name_a_place_are_opened(uri: str) -> None:
    from vmtune.live.uri import runs_program

    assert runs_program(uri) is None


def test_the_default_uri_is_the_users_choice(tmp_path: Path, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """LIBVIRT_DEFAULT_URI is the user's own setting, as for every libvirt client: opened as given."""
    marker = tmp_path / "ran"
    _script(tmp_path / "tunnel.sh", marker)
    env = {**os.environ, "LIBVIRT_DEFAULT_URI": f"qemu+ext:///system?command={tmp_path / 'tunnel.sh'}"}
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--all"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert marker.exists() and done.returncode == 2 and "refused" not in done.stderr


def test_completion_never_opens_a_uri_that_runs_a_program(tmp_path: Path, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    _script(tmp_path / "tunnel.sh", marker)
    ext = f"qemu+ext:///system?command={tmp_path / 'tunnel.sh'}"
    assert complete(f"vmtune check --connect {ext} -d ") == []
    assert complete(f"vmtune check --allow-command-uri -c {ext} -d ") == []
    assert complete("vmtune apply -d ", {"LIBVIRT_DEFAULT_URI": ext}) == []
    assert not marker.exists()
    # A URI that names a place still completes, next to a refused one.
    assert complete(f"vmtune apply -c {TESTNODE_URI} -d win") == ["win10", "win10-off"]


def test_an_option_after_a_file_is_a_file_and_the_error_says_where_options_go(tmp_path: Path) -> None:
    one = str(DOMAINS / "linux-tuned.xml")
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", one, "-o", str(tmp_path / "r")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stderr) == (2, "vmtune: -o: no such file or directory (options go before the first "
                                                 "file and before '--': after either, every argument is a file)\n")
    assert not (tmp_path / "r").exists()


MANIFEST = (ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle" / "example-vm-cirros.yaml").read_bytes()  # info only


@pytest.mark.parametrize("hook_id", ["vmtune-check-manifests", "vmtune-fix-manifests"])
def test_real_pre_commit_takes_no_option_from_a_pull_requests_manifest_names(tmp_path: Path, hook_id: str) -> None:
    """The manifest hooks (`types_or: [yaml, json]`, one process for every file) end their entry
    with `--` as the XML hooks do: a manifest named `--fix.yaml`, `-f=json.yaml` or
    `--output-file=/…/victim.yaml` is a manifest, and the YAML file outside the tree keeps its bytes."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "pr"
    victim = tmp_path / "outside" / "victim.yaml"
    victim.parent.mkdir()
    victim.write_bytes(MANIFEST)
    repo.mkdir()
    _git(repo, "init", "-q")
    for name in ("--fix.yaml", "-f=json.yaml", "--select=XYZ999.yaml", "vm.yaml"):
        (repo / name).write_bytes(MANIFEST)
    report = repo / "--output-file=" / victim.relative_to("/")
    report.parent.mkdir(parents=True)
    report.write_bytes(MANIFEST.replace(b"name: vm-cirros", b"name: other"))
    hook = next(h for h in shipped_hooks_as_local() if h["id"] == hook_id)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    _git(repo, "add", ".")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "PRE_COMMIT_HOME": str(tmp_path / "pc"),
           "HOME": str(tmp_path / "home"), "VMTUNE_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=300)
    assert victim.read_bytes() == MANIFEST
    assert all((repo / name).read_bytes() == MANIFEST for name in ("--fix.yaml", "-f=json.yaml", "vm.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 domain(s) checked" in done.stdout and '"findings"' not in done.stdout, done.stdout


WIN10 = (DOMAINS / "win10-timer-storm.xml").read_bytes()  # two warnings (HV001, CLK002), three infos


def _pre_commit_with_args(tmp_path: Path, hook_id: str, args: list[str]) -> tuple[Path, Path,
                                                                                   subprocess.CompletedProcess[str]]:
    repo, marker, victim = hostile_tree(tmp_path, ext=False)
    (repo / "domains" / "win10.xml").write_bytes(WIN10)
    hook = {**next(h for h in shipped_hooks_as_local() if h["id"] == hook_id), "args": args}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    _git(repo, "add", ".")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "PRE_COMMIT_HOME": str(tmp_path / "pc"),
           "HOME": str(tmp_path / "home"), "VMTUNE_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=300)
    assert not marker.exists()
    assert victim.read_bytes() == VICTIM
    return repo, victim, done


@pytest.mark.parametrize("args, code, summary", [
    ([], 1, "3 domain(s) checked: 5 finding(s) (0 error, 2 warning, 3 info)"),
    # Before (#49): `--fail-on: no such file or directory`, the entry's `--` made args operands.
    (["--fail-on", "error"], 0, "3 domain(s) checked: 5 finding(s) (0 error, 2 warning, 3 info)"),
    (["--select", "CLK"], 1, "3 domain(s) checked: 1 finding(s) (0 error, 1 warning, 0 info)"),
    (["--ignore=HV001,CLK002", "-q"], 0, None),
])
def test_pre_commit_args_are_options_and_a_pull_requests_names_still_files(
        tmp_path: Path, args: list[str], code: int, summary: str | None) -> None:
    """`args:` in .pre-commit-config.yaml, as every pre-commit user configures a hook, next to a
    pull request whose names look like options (`--output-file=/…/victim.xml`): the args are
    options, each name is a file (three domains checked), nothing outside the tree is written."""
    _repo, _victim, done = _pre_commit_with_args(tmp_path, "vmtune-check", args)
    assert done.returncode == code, done.stdout + done.stderr
    assert "no such file" not in done.stdout
    if summary:
        assert summary in done.stdout, done.stdout
    else:
        assert "domain(s) checked" not in done.stdout  # --quiet


def test_the_fix_hook_with_args_fixes_and_writes_no_report_outside_the_tree(tmp_path: Path) -> None:
    repo, _victim, done = _pre_commit_with_args(tmp_path, "vmtune-fix", ["--select", "CLK002"])
    assert done.returncode == 1 and "files were modified by this hook" in done.stdout, done.stdout
    fixed = (repo / "domains" / "win10.xml").read_bytes()
    assert fixed == WIN10.replace(b"</hyperv>", b"  <synic state='on'/>\n      <stimer state='on'/>\n    </hyperv>") \
        or (b"<stimer state='on'/>" in fixed and fixed.count(b"\n") > WIN10.count(b"\n"))
    assert (repo / "domains" / "web.xml").read_bytes() == CLEAN


@pytest.mark.parametrize("argv, operands", [
    (["--fail-on", "error", "--output-file=x"], ["--output-file=x"]),  # an existing path wherever options may be
    (["-o", "--output-file=x", "a.xml"], ["a.xml"]),  # an option's value is its value, as click takes it
    (["-qo", "r.json", "--isolated"], ["--isolated"]),  # -qo: a cluster ending in a value option takes the next
    (["--", "--fix"], ["--fix"]),
    (["--fix", "-"], ["-"]),
    (["--fix", "--dangling"], ["--dangling"]),  # a dangling link is a name in the tree too
])
def test_an_existing_path_is_an_operand_in_both_parsers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        argv: list[str], operands: list[str]) -> None:
    """The fast path (vmtune.main) and the typer path (vmtune.cli.marked_arguments) agree."""
    from vmtune.cli import marked_arguments
    from vmtune.main import _parse

    monkeypatch.chdir(tmp_path)
    (tmp_path / "--output-file=x").write_text("")
    (tmp_path / "--isolated").mkdir()
    (tmp_path / "--dangling").symlink_to(tmp_path / "nowhere")
    marked = marked_arguments(["check", *argv])
    assert (marked[marked.index("--") + 1:] if "--" in marked else marked[-1:]) == operands
    parsed = _parse(argv)
    if argv[0] in ("-o", "-qo"):
        assert parsed is None  # an option-like value, a cluster: typer's path takes them, as marked above
    else:
        assert parsed is not None and parsed[0] == operands
