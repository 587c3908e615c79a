"""No code a checked tree or the current directory plants is ever imported or run (#49).

A pull request's tree (pre-commit's and CI's current directory, and what `vmtune check DIR`
walks) may hold `vmtune.py`, `sitecustomize.py`, `usercustomize.py`, modules named after
vmtune's dependencies, `pip.py`/`venv.py` (what scripts/vmtune's first run calls) or a
`_yamlnodes*.so`. The installed `vmtune` command and scripts/vmtune never import from the
current directory: each planted module would leave a mark and end the process. (`python -m
vmtune` is Python's own rule: it puts the current directory first; `python -P -m vmtune` does
not, which SECURITY.md says.) Also: a `.vmtune.yaml` swapped after its ownership was checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT

VENV_BIN = Path(sys.executable).parent
PLANTED = ["vmtune.py", "sitecustomize.py", "usercustomize.py", "yaml.py", "lxml.py", "typer.py", "click.py",
           "libvirt.py", "jsonschema.py", "hcl2.py", "pip.py", "venv.py", "ensurepip.py", "encodings_x.py"]
NATIVE = "_yamlnodes.cpython-311-x86_64-linux-gnu.so"


def planted_tree(tmp_path: Path) -> tuple[Path, Path]:
    tree, marks = tmp_path / "pr", tmp_path / "marks"
    (tree / "domains").mkdir(parents=True)
    marks.mkdir()
    for folder in (tree, tree / "domains", tree / "stacks"):
        folder.mkdir(exist_ok=True)
        for name in PLANTED:
            (folder / name).write_text(f"open({str(marks / name)!r}, 'w').close()\nraise SystemExit(97)\n")
        (folder / NATIVE).write_bytes(b"\x7fELF not a module")
    shutil.copy(DOMAINS / "win10-timer-storm.xml", tree / "domains" / "win10.xml")
    (tree / "domains" / "vm.yaml").write_bytes(
        (ROOT / "fixtures/stacks/kubevirt/oracle/example-vm-cirros.yaml").read_bytes())
    return tree, marks


def _ran(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())


@pytest.mark.parametrize("args", [["check", "--isolated", "domains"],  # the fast path
                                  ["check", "--isolated", "-f", "html", "domains"],  # typer's
                                  ["rule", "CLK002"]])
@pytest.mark.parametrize("command", ["installed", "scripts/vmtune"])
def test_the_vmtune_command_imports_nothing_from_the_current_or_checked_directory(
        tmp_path: Path, command: str, args: list[str]) -> None:
    tree, marks = planted_tree(tmp_path)
    program = str(VENV_BIN / "vmtune") if command == "installed" else str(ROOT / "scripts" / "vmtune")
    env = {**os.environ, "VMTUNE_NO_CACHE": "1", "PYTHONNOUSERSITE": "", "VMTUNE_VENV": str(VENV_BIN.parent)}
    done = subprocess.run([program, *args], cwd=tree, capture_output=True, text=True, env=env, timeout=300)
    assert _ran(marks) == [], done.stderr
    assert done.returncode != 97 and "Traceback" not in done.stderr, done.stderr
    # the suite's install (scripts/test's, with more extras) is used as it is, not made again
    assert "installing" not in done.stderr, "the suite's install is stale: run scripts/test"
    if args[0] == "check":
        assert done.returncode == 1, done.stderr
        if "html" not in args:
            assert "domains/win10.xml:31: CLK002 warning" in done.stdout


def test_scripts_first_run_builds_its_environment_without_importing_the_current_directory(tmp_path: Path) -> None:
    """`python3 -m venv` and `python -m pip` put the current directory first on sys.path: the
    first run of scripts/vmtune inside a pull request's tree imported its venv.py or pip.py
    (before: both were run without -P). Here pip may not reach an index (nothing is installed):
    what matters is what it imported on the way."""
    tree, marks = planted_tree(tmp_path)
    env = {**os.environ, "VMTUNE_VENV": str(tmp_path / "fresh-venv"), "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(tmp_path / "no-wheels")}
    done = subprocess.run([str(ROOT / "scripts" / "vmtune"), "--version"], cwd=tree, capture_output=True,
                          text=True, env=env, timeout=600)
    assert _ran(marks) == [], done.stderr
    assert "first run: creating" in done.stderr
    assert (tmp_path / "fresh-venv" / "bin" / "python").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another uid")
def test_a_configuration_swapped_after_its_check_is_not_read(tmp_path: Path) -> None:
    """Document.discovered() vets the path (owner, modes, directories), then _load reads it: a
    file renamed over it in between was read as it was. Now the file as opened is held to the
    same owners: the swapped-in file (another user's) is refused, and the run would ignore it."""
    from vmtune.config import _load
    from vmtune.policy.document import Document, UntrustedFileError

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    config = repo / ".vmtune.yaml"
    config.write_text("select: [CLK]\n")
    doc = Document.discovered(str(config))
    assert _load(doc, ()).select == ["CLK"]  # as vetted: read
    planted = repo / "planted"
    planted.write_text("ignore: [ALL]\n")
    os.chown(planted, 65534, 65534)
    os.replace(planted, config)  # the swap, between the check and the read
    with pytest.raises(UntrustedFileError) as refused:
        _load(doc, ())
    assert refused.value.message == ("owned by uid 65534 (replaced after it was checked), so another user could "
                                     "have written it")


PROGRAMS = ("git", "kubectl", "kustomize", "helm")


def test_programs_are_never_found_in_the_checked_tree_whatever_path_says(tmp_path: Path) -> None:
    """vmtune runs git (ignores) and kustomize or kubectl (a kustomization's build) by name. A PATH
    with an empty or relative entry (`:` or `.`, from a shell's dot files) or with an entry inside
    the checked tree would find the tree's own `git` or `kubectl` first; vmtune takes neither
    (vmtune.programs). The real tools still run: the overlay is judged as built."""
    if shutil.which("kubectl", path="/usr/local/bin:/usr/bin:/bin") is None or shutil.which("git") is None:
        pytest.skip("needs git and kubectl")
    from test_kubevirt_kustomize import _repo

    repo = _repo(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    for folder in (repo, repo / "bin"):
        folder.mkdir(exist_ok=True)
        for name in PROGRAMS:
            program = folder / name
            program.write_text(f"#!/bin/sh\ntouch {marks}/{name}\nexit 97\n")
            program.chmod(0o755)
    env = {**os.environ, "VMTUNE_NO_CACHE": "1",
           "PATH": f":.:bin:{repo / 'bin'}:{VENV_BIN}:/usr/local/bin:/usr/bin:/bin"}
    # a folder: its walk asks git what the tree ignores, and builds each overlay
    done = subprocess.run([str(VENV_BIN / "vmtune"), "check", "-f", "json", "overlays"], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=300)
    assert _ran(marks) == [], done.stderr
    assert done.returncode == 1, done.stderr
    assert '"domain": "VirtualMachine/prod-web (kustomize overlays/prod)"' in done.stdout
