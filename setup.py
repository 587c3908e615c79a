"""The parts of the build pyproject.toml cannot declare for every setuptools this project
supports: an optional C module, with the Python it stands in for (see its header): the reader of
YAML manifests (vmtune/stacks/_yamlnodes.c). Without a compiler or libyaml's headers it is
skipped, and vmtune reads YAML with PyYAML alone.

And the commit the package is built from, written beside it (vmtune/commit.py): releases are
commits on main, so `vmtune --version` names the commit where the build knew it."""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _commit_module():  # vmtune/commit.py by its path: vmtune itself is not importable before it is built
    spec = importlib.util.spec_from_file_location("_vmtune_commit", HERE / "vmtune" / "commit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithCommit(build_py):
    """build_py, plus vmtune/_commit.txt in the build when the tree is a git checkout (an editable
    install reads its checkout's HEAD at run time instead)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        commit = _commit_module()
        sha = commit.head_commit(HERE)
        if sha:
            target = Path(self.build_lib) / "vmtune" / commit.COMMIT_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(sha + "\n")


setup(ext_modules=[Extension("vmtune.stacks._yamlnodes", ["vmtune/stacks/_yamlnodes.c"], libraries=["yaml"],
                             optional=True)],
      cmdclass={"build_py": BuildPyWithCommit})
