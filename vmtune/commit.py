"""The commit this vmtune was built from, for `vmtune --version`: releases are commits on main,
not tags (CHANGELOG.md), so a version number alone does not say which code runs.

Known from one of two places, and git is never run for it (a repository's own configuration can
make git run programs: core.fsmonitor, core.hooksPath...):

- a checkout: the package's directory sits in a git work tree (a clone, a worktree, an editable
  install): its HEAD, read from the files git keeps;
- an install built from a clone (`pip install .`, `pip install 'vmtune @ git+URL@SHA'`, pre-commit's
  hook environment): COMMIT_FILE beside the package, which setup.py writes at build time from the
  same files (head_commit) of the tree it builds.

Otherwise (an sdist, a copy without .git, a repository format this reader does not know) there is
no commit, and --version names the version alone. Standard library only: setup.py loads this file
by its path, before vmtune is installed.
"""

from __future__ import annotations

import re
from pathlib import Path

COMMIT_FILE = "_commit.txt"
_SHA = re.compile(r"[0-9a-f]{40}")
_MAX_BYTES = 16 << 20  # packed-refs of a large repository; nothing else git keeps here comes close
_MAX_SYMREFS = 5  # HEAD -> a branch -> ... (git itself stops at 5 levels)


def _read(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(_MAX_BYTES).decode("utf-8", "replace")


def _git_dir(work_tree: Path) -> Path | None:
    """`.git` as a directory, or the directory a `.git` file names (`gitdir: PATH`: a worktree)."""
    dot_git = work_tree / ".git"
    if dot_git.is_dir():
        return dot_git
    if not dot_git.is_file():
        return None
    text = _read(dot_git).strip()
    if not text.startswith("gitdir: "):
        return None
    return work_tree / text.removeprefix("gitdir: ")  # relative to the .git file; an absolute one stays


def _ref(name: str, git_dir: Path, common: Path) -> str | None:
    """A branch's value: its loose file (in the worktree's own directory, else the common one), or
    its line in packed-refs."""
    if not name.startswith("refs/") or ".." in name.split("/"):
        return None
    for base in (git_dir, common):
        if (base / name).is_file():
            return _read(base / name).strip()
    packed = common / "packed-refs"
    if packed.is_file():
        for line in _read(packed).splitlines():
            sha, _, ref = line.partition(" ")
            if ref == name:
                return sha
    return None


def head_commit(work_tree: Path) -> str | None:
    """The full hex name of the commit checked out in `work_tree`, or None when it has no .git or
    the files git keeps do not say (an unborn branch, a reftable repository)."""
    try:
        git_dir = _git_dir(work_tree)
        if git_dir is None or not (git_dir / "HEAD").is_file():
            return None
        common = git_dir
        if (git_dir / "commondir").is_file():  # a worktree: branches live in the main repository's
            common = git_dir / _read(git_dir / "commondir").strip()
        value: str | None = _read(git_dir / "HEAD").strip()
        for _ in range(_MAX_SYMREFS):
            if value is None or _SHA.fullmatch(value):
                return value
            if not value.startswith("ref: "):
                return None
            value = _ref(value.removeprefix("ref: ").strip(), git_dir, common)
    except OSError:
        return None
    return None


def built_from() -> str | None:
    """This package's commit: its checkout's HEAD, else the one recorded when it was built."""
    package = Path(__file__).resolve().parent
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / ".git").exists():
        return head_commit(checkout)
    try:
        recorded = _read(package / COMMIT_FILE).strip()
    except OSError:
        return None
    return recorded if _SHA.fullmatch(recorded) else None


def version_line() -> str:
    """What `vmtune --version` prints: `vmtune 0.2.0 (commit SHA)`, or the version alone."""
    from vmtune import __version__

    commit = built_from()
    return f"vmtune {__version__}" + (f" (commit {commit})" if commit else "")
