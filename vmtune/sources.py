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
        if self.path is None:
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            try:
                with self.path.open("rb") as handle:  # a regular file: iter_sources checked
                    data = handle.read(MAX_INPUT_BYTES + 1)
            except OSError as exc:
                raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None
        if len(data) > MAX_INPUT_BYTES:
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


def walk(directory: Path, skipped: Callable[[str, str], None]) -> Iterator[Path]:
    """Regular *.xml files below a directory, in order; other kinds are reported to `skipped`.
    Symlinked directories are followed once each (a loop is reported, not walked forever)."""
    seen: set[tuple[int, int]] = set()
    found: list[Path] = []
    for root, dirs, files in os.walk(directory, followlinks=True):
        here = Path(root)
        try:
            info = here.stat()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            skipped(str(here), "symlink loop: directory already walked")
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if not name.endswith(".xml"):
                continue
            file = here / name
            kind = _kind(file)
            if kind is None:
                found.append(file)
            else:
                skipped(str(file), kind)
    ignored = gitignored(directory, found)  # skipped silently, as ruff does
    kept = [f for f in found if f not in ignored]
    if not kept:
        others = sorted({f.name.split(".", 1)[-1] for f in _all_files(directory) if ".xml." in f.name})
        hint = f" (other files are checked when named: *.{', *.'.join(others)})" if others else ""
        skipped(str(directory), f"no *.xml file to check in it{hint}")
    yield from sorted(kept, key=lambda p: p.parts)  # Path's own order, without its slow __lt__


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
            for file in walk(path, note):
                yield Source(str(file), file, False)
        elif path.exists():
            kind = _kind(path)
            if kind is not None:
                raise VmtuneError(f"{kind}, not a domain file (use '-' to read a stream)", given)
            yield Source(given, path, True)
        else:
            raise VmtuneError("no such file or directory", given)
