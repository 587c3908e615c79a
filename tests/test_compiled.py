"""The modules compiled with mypyc (vmtune.compiled): the tests run them compiled, as a wheel
installs them, and a developer's edit of one is run from its source, never shadowed by the
module compiled before it (the wheel itself: tests/test_ops.py)."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmtune import compiled

from conftest import ROOT

MANIFEST = ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle" / "cit-fedora-n1-large.yaml"


def _built_in_place() -> bool:
    return (ROOT / "vmtune" / compiled.INPLACE_MARKER).exists()


def test_the_tests_run_the_compiled_modules() -> None:
    # scripts/test installs vmtune in place with its modules compiled (gcc and mypy are there):
    # what the suite checks is what a wheel runs. A module edited since runs from its source,
    # and this test says so until scripts/test compiles it again.
    if os.environ.get("VMTUNE_PURE"):
        pytest.skip("VMTUNE_PURE: this environment was built without compiling")
    origins = {name: importlib.import_module(name).__spec__.origin for name in compiled.MODULES}
    interpreted = [name for name, origin in origins.items()
                   if not str(origin).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
    assert not interpreted, (f"{interpreted} run from source: compile them with scripts/test "
                             "(or `.venv/bin/python setup.py build_ext --inplace`)")


def _probe(tree: Path) -> list[str]:
    """What a vmtune in `tree` imports for the compiled modules, and says of one manifest."""
    code = ("import importlib, subprocess, sys\n"
            f"names = {list(compiled.MODULES)!r}\n"
            "print(*(importlib.import_module(n).__spec__.origin for n in names), sep='\\n')\n"
            "print(getattr(importlib.import_module('vmtune.stacks.kubevirt.fields'), 'EDITED', False))\n")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          cwd=tree)
    assert said.returncode == 0, said.stderr
    checked = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", str(MANIFEST)],
                             capture_output=True, text=True, timeout=60, env=env, cwd=tree)
    return [*said.stdout.splitlines(), str(checked.returncode), checked.stdout, checked.stderr]


def test_an_edited_compiled_module_runs_from_its_source_with_the_others(tmp_path: Path) -> None:
    if not _built_in_place():
        pytest.skip("vmtune is not built in place here (no compiled modules to shadow an edit)")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "vmtune", tree / "vmtune", ignore=shutil.ignore_patterns("__pycache__"))  # keeps mtimes
    before = _probe(tree)
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    assert all(origin.endswith(suffixes) for origin in before[:len(compiled.MODULES)]), before
    assert before[len(compiled.MODULES)] == "False"
    # An edit to one module (its mtime now after the build's marker): every compiled module runs
    # from source, the edit with them, and the check says what it said.
    fields = tree / "vmtune" / "stacks" / "kubevirt" / "fields.py"
    fields.write_text(fields.read_text() + "\nEDITED = True\n")
    after = _probe(tree)
    assert after[:len(compiled.MODULES)] == [str(tree / "vmtune" / (name.split(".", 1)[1].replace(".", "/") + ".py"))
                                             for name in compiled.MODULES]
    assert after[len(compiled.MODULES)] == "True"
    assert after[len(compiled.MODULES) + 1:] == before[len(compiled.MODULES) + 1:]
    assert after[-3] == "1" and f"{MANIFEST}:28: CLK003 warning" in after[-2]


def test_a_build_removes_the_compiled_modules_it_did_not_make(tmp_path: Path) -> None:
    # A compiled module an earlier build left (a module no longer compiled; all of them once a
    # build compiles none) would name a module its shared library does not hold: `import vmtune`
    # failed (a stale build/ went into a wheel whole). A build without mypyc removes them all, in
    # the tree and in build/, with the marker, and the source runs.
    if not _built_in_place():
        pytest.skip("vmtune is not built in place here")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "vmtune", tree / "vmtune", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tree)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    gone = tree / "vmtune" / "stacks" / ("frontend" + suffix)  # a module this build does not compile
    shutil.copy(tree / "vmtune" / "stacks" / "kubevirt" / ("render" + suffix), gone)
    left = tree / "build" / "lib" / "vmtune" / "stacks" / ("frontend" + suffix)
    left.parent.mkdir(parents=True)
    shutil.copy(gone, left)
    built = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--build-lib", "build/lib"],
                           cwd=tree, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "VMTUNE_PURE": "1"})
    assert built.returncode == 0, built.stderr
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*" + suffix)) == sorted(
        str(Path(root) / "vmtune" / "stacks" / ("_yamlnodes" + suffix))
        for root in (".", "build/lib") if (ROOT / "vmtune" / "stacks" / ("_yamlnodes" + suffix)).exists())
    assert not (tree / "vmtune" / compiled.INPLACE_MARKER).exists()
    assert _probe(tree)[:len(compiled.MODULES)] == [
        str(tree / "vmtune" / (name.split(".", 1)[1].replace(".", "/") + ".py")) for name in compiled.MODULES]


def test_the_compiled_modules_run_without_mypy(tmp_path: Path) -> None:
    # mypy and its stubs are build requirements only: a check run with the compiled modules loads
    # nothing of mypy, mypyc or mypy_extensions (the build's shim of mypyc_attr stands in).
    if not _built_in_place():
        pytest.skip("vmtune is not built in place here")
    probe = ("import runpy, sys; sys.argv = ['vmtune', 'check', '--isolated', sys.argv[1]]\n"
             "try:\n    runpy.run_module('vmtune', run_name='__main__')\n"
             "except SystemExit as end:\n"
             "    print(end.code, sys.modules['vmtune.stacks.kubevirt.render'].__spec__.origin.endswith('.so'),"
             " sorted(m for m in sys.modules if m.split('.')[0] in ('mypy', 'mypyc', 'mypy_extensions', 'librt')))")
    ran = subprocess.run([sys.executable, "-c", probe, str(MANIFEST)], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ran.stdout.splitlines()[-1] == "1 True []", ran
