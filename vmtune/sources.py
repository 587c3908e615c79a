"""Finding the domain XML to check: files, directories, stdin."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from vmtune.errors import VmtuneError
from vmtune.fileio import FileIdentity, read_nofollow

# virsh refuses a domain file larger than this (VIR_FILE_READ_ALL with 10 MiB); so does vmtune,
# which also bounds the memory and time one file can cost.
MAX_INPUT_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class Source:
    name: str  # path as given, or "-" / "<stdin>"
    path: Path | None  # None for stdin
    explicit: bool  # named on the command line (errors) vs found in a directory (skips)
    stands_for: Path | None = None  # stdin read as this file (--stdin-filename): its config and ignores
    directory: tuple[int, int] | None = None  # device, inode of the directory a walk found it in

    def read(self) -> bytes:
        return self.load(for_write=False)[0]

    def load(self, for_write: bool) -> tuple[bytes, FileIdentity | None]:
        """The content, and for a file the identity a rewrite must find again (write_atomic).
        A file named on the command line is read where a symlink leads, unless it is to be
        rewritten; a file found by a walk, or one to rewrite, is opened without following a
        symlink and only in the directory the walk saw."""
        identity = None
        if self.path is None:
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        elif self.explicit and not for_write:
            try:
                with self.path.open("rb") as handle:  # a regular file: iter_sources checked
                    data = handle.read(MAX_INPUT_BYTES + 1)
            except OSError as exc:
                raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None
        else:
            try:
                data, identity = read_nofollow(self.path, MAX_INPUT_BYTES, self.directory)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None
                if self.explicit:
                    raise VmtuneError("a symlink: vmtune does not rewrite files through symlinks (name the file it "
                                      "points to)", self.name) from None
                raise VmtuneError("swapped for a symlink while the directory was walked; not read",
                                  self.name) from None
            except ValueError:
                raise VmtuneError("not a regular file (changed while the directory was walked); not read",
                                  self.name) from None
        if len(data) > MAX_INPUT_BYTES:
            raise VmtuneError(f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the limit virsh has for a "
                              "domain file", self.name)
        return data, identity


def _kind(path: Path) -> str | None:
    """None for a regular file, else what it is (FIFOs and devices would block or never end)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return exc.strerror or "unreadable"
    return _mode_kind(mode)


def _mode_kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "not a regular file"


def walk(directory: Path, skipped: Callable[[str, str], None]) -> Iterator[tuple[Path, tuple[int, int]]]:
    """Regular *.xml files below a directory, in order, each with the identity (device, inode) of
    the directory it was found in; other kinds are reported to `skipped`. Symlinks are not
    followed, to files or to directories (as black and ruff stay in the tree they check): one
    that stays inside the tree names a file the walk reaches anyway, one that leaves it would
    make `--fix DIR` rewrite files elsewhere. os.fwalk opens each directory without following
    a symlink swapped in during the walk."""
    found: list[tuple[Path, tuple[int, int]]] = []
    top = directory.resolve()  # a directory named on the command line is walked where it leads
    for root, dirs, files, dir_fd in os.fwalk(top, follow_symlinks=False):
        here = directory / Path(root).relative_to(top)  # named as given
        info = os.fstat(dir_fd)
        identity = (info.st_dev, info.st_ino)
        kept_dirs = []
        for name in sorted(d for d in dirs if not d.startswith(".")):
            if _is_symlink(name, dir_fd):
                skipped(str(here / name), "a symlink to a directory: not followed in a directory walk")
            else:
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in files:
            if not name.endswith(".xml"):
                continue
            file = here / name
            kind = _kind_at(name, dir_fd)
            if kind is None:
                found.append((file, identity))
            else:
                skipped(str(file), kind)
    ignored = gitignored(directory, [f for f, _ in found])  # skipped silently, as ruff does
    kept = [(f, d) for f, d in found if f not in ignored]
    if not kept:
        others = sorted({f.name.split(".", 1)[-1] for f in _all_files(directory) if ".xml." in f.name})
        hint = f" (other files are checked when named: *.{', *.'.join(others)})" if others else ""
        skipped(str(directory), f"no *.xml file to check in it{hint}")
    yield from sorted(kept, key=lambda p: p[0].parts)  # Path's own order, without its slow __lt__


def _is_symlink(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _kind_at(name: str, dir_fd: int) -> str | None:
    """_kind for an entry of an open directory, a symlink not followed."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError as exc:
        return exc.strerror or "unreadable"
    if stat.S_ISLNK(mode):
        return "a symlink: not followed in a directory walk (name it to check it)"
    return _mode_kind(mode)


def _all_files(directory: Path) -> Iterator[Path]:
    for root, _dirs, files in os.walk(directory):
        for name in files:
            yield Path(root) / name


def gitignored(directory: Path, files: list[Path]) -> set[Path]:
    """The files git ignores (.gitignore, .git/info/exclude, core.excludesFile), as ruff skips
    them; nothing when git is missing or the directory is not in a work tree. One git call."""
    import shutil
    import subprocess

    if not files or shutil.which("git") is None:
        return set()
    try:
        done = subprocess.run(["git", "-C", str(directory), "check-ignore", "--stdin", "-z"],
                              input=b"\0".join(os.fsencode(f.resolve()) for f in files), capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode not in (0, 1):  # 128: not a git work tree
        return set()
    names = {Path(os.fsdecode(n)) for n in done.stdout.split(b"\0") if n}  # any bytes, as the names were
    return {f for f in files if f.resolve() in names}


def iter_sources(paths: list[str], skipped: Callable[[str, str], None] | None = None,
                 stdin_filename: str | None = None) -> Iterator[Source]:
    note = skipped or (lambda _source, _reason: None)
    for given in paths:
        if given == "-":
            yield Source(stdin_filename or "<stdin>", None, True, Path(stdin_filename) if stdin_filename else None)
            continue
        path = Path(given)
        if path.is_dir():
            for file, directory in walk(path, note):
                yield Source(str(file), file, False, directory=directory)
        elif path.exists():
            kind = _kind(path)
            if kind is not None:
                raise VmtuneError(f"{kind}, not a domain file (use '-' to read a stream)", given)
            yield Source(given, path, True)
        else:
            raise VmtuneError("no such file or directory", given)
