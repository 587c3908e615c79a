"""A small on-disk cache of parsed, validated YAML (policies and .vmtune.yaml).

Importing PyYAML costs ~25 ms and jsonschema ~135 ms; a pre-commit hook in a repository
with a `.vmtune.yaml` would pay both on every commit for a file that rarely changes. An
entry stores the full key (the file's text plus how it was validated) next to the parsed
data, and a lookup compares the key exactly, so an edited file or a changed schema is
never served stale. Broken or unwritable caches are ignored: the cache only saves time.

Location: $VMTUNE_CACHE_DIR, else $XDG_CACHE_HOME/vmtune, else ~/.cache/vmtune.
`VMTUNE_NO_CACHE=1` turns it off.

An entry decides what vmtune believes about a policy or a domain's usage, and marshal is not
safe against crafted data, so the cache is trusted as the state directory is: the directory
must be a real directory (not a symlink) owned by the invoking user and writable by nobody
else, and entries are opened without following symlinks and must be the user's own and not
writable by others. An untrusted cache is not used (it only saves time).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import zlib
from collections.abc import Callable
from typing import Any

from vmtune.fileio import others_could_write


def cache_dir() -> str | None:
    if os.environ.get("VMTUNE_NO_CACHE"):
        return None
    explicit = os.environ.get("VMTUNE_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vmtune")


def _entry_name(source: str) -> str:
    return f"parsed-{zlib.crc32(source.encode()):08x}.marshal"


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_trusted(directory: str) -> int | None:
    """A descriptor of the cache directory if it is trusted, else None. Entries are then opened
    relative to it: the directory checked is the one used, even if the path is swapped for a
    symlink meanwhile. Trailing slashes are dropped first: "dir/" would follow a symlink at dir,
    O_NOFOLLOW or not."""
    try:
        fd = os.open(directory.rstrip(os.sep) or os.sep, _DIR_FLAGS)
    except OSError:  # missing, not a directory, or a symlink (ELOOP)
        return None
    try:
        if _owned(os.fstat(fd), stat.S_ISDIR):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def lookup(source: str, key: str) -> Any | None:
    """The data stored for `source` under exactly `key`, or None."""
    directory = cache_dir()
    if directory is None:
        return None
    dir_fd = _open_trusted(directory)
    if dir_fd is None:
        return None
    try:
        fd = os.open(_entry_name(source), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        if not _owned(os.fstat(fd), stat.S_ISREG):
            return None
        with os.fdopen(fd, "rb", closefd=False) as stream:
            # loads(read()), not load(stream): load calls the stream's readinto for every object,
            # three times the time for a 10,000-file usage cache.
            stored_key, data = marshal.loads(stream.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        os.close(fd)
    return data if stored_key == key else None


def _owned(info: os.stat_result, kind: Callable[[int], bool]) -> bool:
    """The invoking user's own file of this kind, writable by nobody else."""
    return kind(info.st_mode) and others_could_write(info, (os.geteuid(),)) is None


def store(source: str, key: str, data: Any) -> None:
    directory = cache_dir()
    if directory is None:
        return
    name = _entry_name(source)
    temporary = f"{name}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    dir_fd = _open_trusted(directory)
    if dir_fd is None:
        return
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as stream:
            marshal.dump((key, data), stream)
        # readers see the old entry or the new one, never half
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except (OSError, ValueError):  # read-only home, a full disk, or data marshal cannot store
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
