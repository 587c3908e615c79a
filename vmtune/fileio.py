"""Replacing a file safely: temp file in the same directory, fsync, rename, same mode."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Replace (or create) path so a reader sees the old or the new content, never half of it."""
    target = path.resolve()  # a symlinked file is updated where it lives, the link kept
    info = target.stat() if target.exists() else None
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".vmtune-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if info is not None:
            os.chmod(tmp, stat.S_IMODE(info.st_mode))
            with contextlib.suppress(PermissionError):
                os.chown(tmp, info.st_uid, info.st_gid)
        else:  # a new file: what open() would have given it
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_output(path: Path, data: bytes, what: str) -> None:
    """A report or baseline: written atomically; a missing directory or a permission problem is
    a one-line error (exit 2), not a traceback."""
    from vmtune.errors import VmtuneError

    try:
        write_atomic(path, data)
    except OSError as exc:
        raise VmtuneError(f"cannot write the {what}: {exc.strerror or exc}", str(path)) from None
