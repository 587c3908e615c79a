"""Instancetypes and preferences a VM names that the files given do not hold, looked up in the
other files of the VM's git work tree.

pre-commit passes only the files a commit changed: a VM whose preference lives in another file of
the same repository was judged, and fixed, without it. The search is bounded and stays in the
work tree: the nearest directory above the VM's file that holds `.git` (vmtune.fileio.work_tree);
no symlink is followed (to a file or a directory); hidden directories (`.git`, `.github`) and
directories that are work trees of their own (a submodule, a nested checkout) are not entered;
files git ignores are left out (vmtune.sources.gitignored, as a walk does). Only `*.yaml`,
`*.yml` and `*.json` files up to MAX_FILE bytes are read, MAX_READ bytes and MAX_ENTRIES
directory entries in all, for at most SECONDS; a file is parsed only when its bytes hold
`instancetype.kubevirt.io` and one of the names looked for. When a bound stops the search, what
it did not see is said (Search.stopped).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

MAX_ENTRIES = 20_000  # directory entries looked at in one work tree
MAX_FILE = 1024 * 1024  # a larger file is not read
MAX_READ = 32 * 1024 * 1024  # bytes read in one work tree
SECONDS = 3.0
SUFFIXES = (".yaml", ".yml", ".json")
MARKER = b"instancetype.kubevirt.io"


class Search:
    """What one work tree's search found: (file name, bytes) of the files that may define a name
    looked for, and why it stopped early (None: the whole tree was looked at)."""

    __slots__ = ("found", "stopped", "top")

    def __init__(self, top: str) -> None:
        self.top = top
        self.found: list[tuple[str, bytes]] = []
        self.stopped: str | None = None


def shown_name(path: str) -> str:
    """A file's name as reports print it: relative to the current directory when below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _read(path: str, limit: int) -> bytes | None:
    """The file's bytes (at most `limit`), never through a symlink; None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read(limit + 1)
    except OSError:
        return None


class Walk:
    """The files of a work tree, bounded: depth first in name order, at most MAX_ENTRIES entries
    and SECONDS, never through a symlink, into a hidden directory (.git, .cache...) or into a
    nested work tree. Iterating yields each entry that is not a directory; `stopped` says why the
    walk ended early (a caller that stops on its own budget sets it too)."""

    def __init__(self, top: str) -> None:
        self.top = top
        self.stopped: str | None = None

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        deadline = time.monotonic() + SECONDS
        entries = 0
        pending = [self.top]
        while pending:
            folder = pending.pop()
            try:
                with os.scandir(folder) as listing:
                    listed = sorted(listing, key=lambda e: e.name)
            except OSError:
                continue  # unreadable: not searched, as a directory the user cannot enter holds nothing for them
            for entry in listed:
                entries += 1
                if entries > MAX_ENTRIES or time.monotonic() > deadline:
                    self.stopped = (f"stopped after {MAX_ENTRIES:,} entries" if entries > MAX_ENTRIES else
                                    f"stopped after {SECONDS:g} s")
                    return
                try:
                    if entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if not entry.name.startswith(".") and not os.path.lexists(os.path.join(entry.path, ".git")):
                            pending.append(entry.path)
                        continue
                except OSError:
                    continue
                yield entry


def search(top: str, names: set[str], skip: set[str], isolated: bool = False) -> Search:
    """The files of the work tree `top` that may define one of `names` (skip: absolute names of
    files already read)."""
    from vmtune.sources import gitignored

    result = Search(top)
    wanted = [name.encode("utf-8", "surrogateescape") for name in names]
    read = 0
    candidates: list[tuple[str, bytes]] = []
    walk = Walk(top)
    for entry in walk:
        try:
            if not entry.name.lower().endswith(SUFFIXES) or not entry.is_file(follow_symlinks=False):
                continue
            size = entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        path = os.path.abspath(entry.path)
        if size > MAX_FILE or path in skip:
            continue
        if read + size > MAX_READ:
            walk.stopped = f"stopped after reading {MAX_READ // (1024 * 1024)} MiB"
            break
        data = _read(path, MAX_FILE)
        if data is None or len(data) > MAX_FILE:
            continue
        read += len(data)
        if MARKER in data and any(name in data for name in wanted):
            candidates.append((path, data))
    result.stopped = walk.stopped
    ignored = gitignored([path for path, _data in candidates], isolated) if candidates else set()
    result.found = [(shown_name(path), data) for path, data in candidates if path not in ignored]
    return result
