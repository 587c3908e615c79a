"""The programs vmtune runs (git, and the tools a front end builds its sources with), found so
that a checked tree cannot plant one.

`shutil.which` and `subprocess` take PATH as it is: an empty or relative entry (`PATH=:/usr/bin`
or `.` in it, common in shells' dot files) makes the current directory, usually the repository
being checked, a place programs are found, and a repository can commit a `git` or `kustomize`
of its own. vmtune takes only PATH's absolute entries and never a program inside a tree it was
asked to avoid (the work trees it checks, and the current directory's)."""

from __future__ import annotations

import os
from collections.abc import Iterable


def _inside(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)


def find_program(name: str, avoid: Iterable[str] = ()) -> str | None:
    """The absolute path of the executable `name` on PATH's absolute entries, outside every tree
    of `avoid` and outside the current directory (symlinks resolved), or None."""
    trees = [os.path.realpath(tree) for tree in (*avoid, os.curdir)]
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(entry):
            continue  # "", "." and "bin" are the current directory's: the checked tree's
        candidate = os.path.join(entry, name)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        if any(_inside(os.path.realpath(candidate), tree) for tree in trees):
            continue
        return candidate
    return None
