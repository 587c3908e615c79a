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
    # Without `--` and with a hostile name first, that name is an option, as for any POSIX tool:
    # the URI is still refused (one line, exit 2) and nothing runs.
    ("git ls-files -z -- '*.xml' | xargs -0 vmtune check --isolated", 2, 0),
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
