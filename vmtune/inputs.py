"""Reading files a stranger may have named: regular files only, size-capped, one-line errors.

A configuration in a pull request can name any path; the caller confines it (see
vmtune.policy.document), and this module makes sure that what is read is an ordinary
file of bounded size: a FIFO would block forever, /dev/zero never ends, /dev/tty waits
for a keyboard. Messages never include the content.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from vmtune.errors import VmtuneError
from vmtune.fileio import read_bounded, special_kind

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

# virsh refuses a domain file larger than this (VIR_FILE_READ_ALL with 10 MiB): the cap for
# capabilities XML too.
MAX_XML_BYTES = 10 * 1024 * 1024


def read_bytes(path: Path | str, display: str, what: str, limit: int,
               vet: Callable[[os.stat_result], None] | None = None) -> bytes:
    """A regular file's bytes, at most `limit`: no FIFO (would block), device (/dev/zero never
    ends) or directory; the message never includes the content. Symlinks are followed (callers
    confine the resolved path); the file opened is the one checked, and `vet` (which raises) is
    asked about the file as opened: a file swapped in after the caller vetted its path is seen."""
    path = os.path.realpath(path)
    try:
        kind = special_kind(os.stat(path).st_mode)
        if kind is not None:
            raise VmtuneError(f"cannot read {what}: {kind}, not a regular file", display)
        # O_NONBLOCK: a FIFO swapped in after the stat must not hang us; fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise VmtuneError(f"cannot read {what}: {exc.strerror or exc}", display) from None
    try:
        info = os.fstat(fd)
        kind = special_kind(info.st_mode)
        if kind is not None:
            raise VmtuneError(f"cannot read {what}: {kind}, not a regular file", display)
        if vet is not None:
            vet(info)
        data = read_bounded(fd, info.st_size, limit)
    except OSError as exc:
        raise VmtuneError(f"cannot read {what}: {exc.strerror or exc}", display) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise VmtuneError(f"cannot read {what}: larger than {limit // 1024} KiB", display)
    return data
