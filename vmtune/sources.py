"""Finding the domain XML to check: files, directories, stdin."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from vmtune.errors import VmtuneError

# virsh refuses a domain file larger than this (VIR_FILE_READ_ALL with 10 MiB); so does vmtune,
# which also bounds the memory and time one file can cost.
MAX_INPUT_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class Source:
    name: str  # path as given, or "-" / "<stdin>"
    path: Path | None  # None for stdin
    explicit: bool  # named on the command line (errors) vs found in a directory (skips)
    stands_for: Path | None = None  # stdin read as this file (--stdin-filename): its config and ignores

    def read(self) -> bytes:
        too_big = False
        if self.path is None:
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            try:
                # Unbuffered and sized by fstat: read(MAX_INPUT_BYTES + 1) asked for a 10 MiB buffer
                # for every file; a file over the limit is refused without being read.
                with open(self.path, "rb", buffering=0) as handle:  # a regular file: iter_sources checked
                    too_big = os.fstat(handle.fileno()).st_size > MAX_INPUT_BYTES
                    data = b"" if too_big else handle.readall()
            except OSError as exc:
                raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None
        if too_big or len(data) > MAX_INPUT_BYTES:
            raise VmtuneError(f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the limit virsh has for a "
                              "domain file", self.name)
        return data


def _kind(path: Path) -> str | None:
    """None for a regular file, else what it is (FIFOs and devices would block or never end)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return exc.strerror or "unreadable"
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "not a regular file"


def _join(folder: str, name: str) -> str:
    # Path-like names without a Path per file: `folder` is already normalised (str of a Path).
    if folder == ".":
        return name
    return folder + name if folder.endswith(os.sep) else folder + os.sep + name


def walk(directory: Path, skipped: Callable[[str, str], None]) -> list[str]:
    """Regular *.xml files below a directory (names as `directory / ...` would print them), in
    order; other kinds are reported to `skipped`. One scandir per directory: a regular file's type
    comes with its entry, so only symlinks and odd entries cost a stat. Symlinked directories are
    followed once each (a loop is reported, not walked forever). Git-ignored files are still in."""
    seen: set[tuple[int, int]] = set()
    found: list[str] = []
    pending = [str(directory)]
    while pending:
        folder = pending.pop()
        try:
            info = os.stat(folder)
            entries = list(os.scandir(folder))
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            skipped(folder, "symlink loop: directory already walked")
            continue
        seen.add((info.st_dev, info.st_ino))
        subfolders: list[str] = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()  # follows symlinks, as os.walk(followlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                if not name.startswith("."):
                    subfolders.append(name)
                continue
            if not name.endswith(".xml"):
                continue
            file = _join(folder, name)
            try:
                regular = entry.is_file()
            except OSError:
                regular = False
            kind = None if regular else _kind(Path(file))
            if kind is None:
                found.append(file)
            else:
                skipped(file, kind)
        # Depth first, in name order, as os.walk: which of two ways into a directory counts as
        # the loop must not depend on the order the file system lists them.
        pending.extend(_join(folder, name) for name in sorted(subfolders, reverse=True))
    found.sort(key=lambda name: name.split(os.sep))  # Path.parts order, without Path's slow __lt__
    return found


def _all_files(directory: Path) -> Iterator[Path]:
    for root, _dirs, files in os.walk(directory):
        for name in files:
            yield Path(root) / name


def work_tree(directory: str) -> str | None:
    """The nearest directory at or above this one holding `.git` (a work tree's top), else None."""
    here = os.path.abspath(directory)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def gitignored(files: list[str]) -> set[str]:
    """The files git ignores (.gitignore, .git/info/exclude, core.excludesFile), as ruff skips
    them; nothing when git is missing or they are in no work tree. One git call per work tree
    (one per run, usually), none outside a work tree."""
    if not files:
        return set()
    import shutil
    import subprocess

    if shutil.which("git") is None:
        return set()
    by_tree: dict[str, list[str]] = {}
    folders: dict[str, str | None] = {}
    explicit_git_dir = bool(os.environ.get("GIT_DIR"))
    for file in files:
        folder = os.path.dirname(file) or "."
        if folder not in folders:
            folders[folder] = work_tree(folder) or (os.path.abspath(folder) if explicit_git_dir else None)
        top = folders[folder]
        if top is not None:
            by_tree.setdefault(top, []).append(file)
    ignored: set[str] = set()
    for top, names in by_tree.items():
        # Relative to the work tree's top as reached through the same path (a symlinked parent
        # stays out of it); git answers with the names it was given.
        relative = {os.path.relpath(os.path.abspath(name), top): name for name in names}
        try:
            done = subprocess.run(["git", "-C", top, "check-ignore", "--stdin", "-z"],
                                  input=b"\0".join(os.fsencode(r) for r in relative), capture_output=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode not in (0, 1):  # 128: not a git work tree after all
            continue
        ignored.update(relative[n] for n in (os.fsdecode(b) for b in done.stdout.split(b"\0") if b) if n in relative)
    return ignored


def iter_sources(paths: list[str], skipped: Callable[[str, str], None] | None = None,
                 stdin_filename: str | None = None) -> Iterator[Source]:
    note = skipped or (lambda _source, _reason: None)
    given_sources: list[tuple[str, Source | list[str]]] = []
    for given in paths:
        if given == "-":
            given_sources.append((given, Source(stdin_filename or "<stdin>", None, True,
                                                Path(stdin_filename) if stdin_filename else None)))
            continue
        path = Path(given)
        if path.is_dir():
            given_sources.append((str(path), walk(path, note)))
        elif path.exists():
            kind = _kind(path)
            if kind is not None:
                raise VmtuneError(f"{kind}, not a domain file (use '-' to read a stream)", given)
            given_sources.append((given, Source(given, path, True)))
        else:
            raise VmtuneError("no such file or directory", given)
    ignored = gitignored([f for _given, found in given_sources if isinstance(found, list) for f in found])
    for given, found in given_sources:
        if not isinstance(found, list):
            yield found
            continue
        kept = [f for f in found if f not in ignored]  # skipped silently, as ruff does
        if not kept:
            others = sorted({f.name.split(".", 1)[-1] for f in _all_files(Path(given)) if ".xml." in f.name})
            hint = f" (other files are checked when named: *.{', *.'.join(others)})" if others else ""
            note(given, f"no *.xml file to check in it{hint}")
        for file in kept:
            yield Source(file, Path(file), False)
