"""Reading and replacing files without following symlinks or writing where the path now leads.

A file vmtune rewrites (`--fix`, `plan --write`) is opened once, relative to its directory and
without following a symlink at the last component; its directory's and its own device and
inode are remembered (FileIdentity). The rewrite goes through a descriptor of that directory:
both identities are compared again, the new content goes to a temp file beside it (fsync,
same mode and owner), and a rename replaces the directory entry. A rename replaces a symlink
or hard link itself, never what it points to, so a file swapped for a symlink between the read
and the write cannot make vmtune (often root) overwrite the symlink's target: the swap is
refused (FileChangedError), and one landing after the last comparison only loses the swapped-in
link.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import stat
from typing import TYPE_CHECKING

from vmtune.errors import VmtuneError

if TYPE_CHECKING:  # pathlib is not imported on a plain check's path (start-up)
    from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)

# The temp file write_atomic is writing now (its directory's descriptor and name), for a signal
# handler that ends the process mid-write (a `-j` worker told to stop): abandon_write() removes it.
_writing: tuple[int, str] | None = None


def normal_name(given: str) -> str:
    """str(pathlib.PurePosixPath(given)) without importing pathlib (~3 ms of a pre-commit run's
    start-up): empty and `.` parts dropped, `..` kept, a trailing slash removed, and a leading
    `//` kept as POSIX allows. Names are printed as this gives them, as they were with Path."""
    root = ""
    if given.startswith("/"):
        stripped = given.lstrip("/")
        root = "//" if len(given) - len(stripped) == 2 else "/"
        given = stripped
    parts = [part for part in given.split("/") if part and part != "."]
    return root + "/".join(parts) if root or parts else "."


def work_tree(directory: str) -> str | None:
    """The nearest directory at or above this one holding `.git` (a work tree's top), else None:
    where git's ignores, a configuration's confinement and SARIF's relative URIs start. os.path,
    so a name too long or a directory the user cannot enter is "no .git here", not an OSError."""
    here = os.path.abspath(directory)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def others_could_write(info: os.stat_result, owners: tuple[int, ...], sticky: bool = False) -> str | None:
    """Why a user other than `owners` could have written this file or directory ("owned by uid
    65534", "writable by group or others (mode 0777)"), None if nobody else could: OpenSSH's
    StrictModes, the rule of the state directory (vmtune.live.backups), the cache (vmtune.cache)
    and discovered configurations (vmtune.config). With `sticky`, a directory others may write
    is fine when it is sticky (/tmp): they cannot rename or remove what they do not own."""
    if info.st_uid not in owners:
        return f"owned by uid {info.st_uid}"
    if info.st_mode & 0o022 and not (sticky and stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX):
        return f"writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _components(name: str) -> list[str]:
    """An absolute name and every directory above it, from / down: "/a/b" -> ["/", "/a", "/a/b"]."""
    chain = ["/"]
    for part in name.split("/"):
        if part:
            chain.append(f"{chain[-1].rstrip('/')}/{part}")
    return chain


def path_others_could_write(path: str, owners: tuple[int, ...]) -> tuple[str, str] | None:
    """(name, why) of the first thing on the way to path a user other than `owners` could have
    written or replaced, None if none: the file itself (regular or not, writable by nobody else)
    and every directory above it up to / (also not writable by others, unless sticky), both as
    named and as resolved; a symlink on the way must belong to `owners` too (its own mode means
    nothing, its directory is checked). lstat() only: a file this vetted cannot be swapped by
    another user between this check and the read, since none of the directories it is reached
    through lets them rename an entry."""
    seen: set[str] = set()
    for name in (os.path.abspath(path), os.path.realpath(path)):
        chain = _components(name)
        for here in chain:
            if here in seen:
                continue
            seen.add(here)
            try:
                info = os.lstat(here)
            except OSError as exc:  # gone meanwhile, or a directory the user cannot search
                return here, f"not to be looked at ({exc.strerror or exc})"
            if stat.S_ISLNK(info.st_mode):
                why = None if info.st_uid in owners else f"a symlink owned by uid {info.st_uid}"
            else:
                why = others_could_write(info, owners, sticky=True)  # sticky counts for directories only
            if why is not None:
                return here, why
    return None


class FileChangedError(VmtuneError):
    """The path no longer leads to the file that was read: nothing written."""


class FileIdentity:
    """Device and inode of a file and of the directory it was opened in. A value: compared and
    hashed by both. A plain class, not a dataclass: creating one costs ~0.5 ms at every start."""

    __slots__ = ("directory", "file")

    def __init__(self, directory: tuple[int, int], file: tuple[int, int]) -> None:
        self.directory = directory
        self.file = file

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FileIdentity) and (self.directory, self.file) == (other.directory, other.file)

    def __hash__(self) -> int:
        return hash((self.directory, self.file))

    def __repr__(self) -> str:
        return f"FileIdentity(directory={self.directory!r}, file={self.file!r})"


def _ident(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def open_directory(path: str | Path, expected: tuple[int, int] | None = None,
                   since: str = "it was read; nothing written") -> int:
    """A descriptor of the directory path lives in; FileChangedError if it is not `expected`."""
    fd = os.open(os.path.dirname(path) or ".", _DIR_FLAGS)
    if expected is not None and _ident(os.fstat(fd)) != expected:
        os.close(fd)
        raise FileChangedError(f"the directory changed (moved or swapped for a symlink) since {since}", str(path))
    return fd


def special_kind(mode: int) -> str | None:
    """None for a regular file, else what it is, for messages: a FIFO would block, a device
    (/dev/zero) never end, /dev/tty wait for a keyboard."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "a special file"


def read_bounded(fd: int, size: int, limit: int) -> bytes:
    """Up to limit+1 bytes of an open regular file whose fstat size is `size`: one read of that size
    plus one byte (read(limit + 1) would allocate the whole limit, 10 MiB, for every small file);
    a regular file reads short only at its end, so a short read is the whole file and costs no
    second call. A file that grew meanwhile is read on, never past limit+1 (the caller refuses that)."""
    chunks: list[bytes] = []
    total, want = 0, min(size, limit) + 1
    while total <= limit:
        asked = min(want, limit + 1 - total)
        chunk = os.read(fd, asked)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if len(chunk) < asked:
            break
        want = 1 << 16
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# The directory a walk's files were last read from, per thread: (path, descriptor, identity).
# A directory's files come one after another, and opening, checking and closing the directory
# for each file was a third of reading it. The descriptor is the directory the walk saw (its
# identity was compared when it was opened), so reading relative to it stays as safe as before.
_dirs = _thread._local()


def _walked_directory(path: str, expected: tuple[int, int]) -> int:
    """A descriptor of path's directory, which must be `expected` (device, inode); kept open for
    the next file of the same directory (one per thread, replaced when the directory changes)."""
    parent = os.path.dirname(path) or "."
    last = getattr(_dirs, "last", None)
    if last is not None and last[0] == parent and last[2] == expected:
        return last[1]
    fd = open_directory(path, expected, "the directory walk found it; not read")
    if last is not None:
        os.close(last[1])
    _dirs.last = (parent, fd, expected)
    return fd


def read_nofollow(path: str | Path, limit: int, expected_dir: tuple[int, int] | None = None
                  ) -> tuple[bytes, FileIdentity]:
    """Up to limit+1 bytes of a regular file, opened without following a symlink at its last
    component, and its identity. OSError(ELOOP) for a symlink, ValueError for another kind.

    With `expected_dir` (a walk's file), the directory's descriptor is kept for the next file."""
    path = os.fspath(path)  # a walk's names are strings: no Path made per file
    dir_fd = _walked_directory(path, expected_dir) if expected_dir is not None else \
        open_directory(path, None, "the directory walk found it; not read")
    try:
        # O_NONBLOCK: a FIFO swapped in must not hang the open; it is refused below. It changes
        # nothing for a regular file, so the descriptor is read as opened.
        fd = os.open(os.path.basename(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     dir_fd=dir_fd)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError("not a regular file")
            data = read_bounded(fd, info.st_size, limit)
        finally:
            os.close(fd)
        directory = expected_dir if expected_dir is not None else _ident(os.fstat(dir_fd))
        return data, FileIdentity(directory, _ident(info))
    finally:
        if expected_dir is None:
            os.close(dir_fd)


def _check_entry(dir_fd: int, path: str, expected: FileIdentity | None) -> os.stat_result | None:
    """The directory entry as it is now: the file that was read (expected), or for a new output,
    no entry or a regular file; FileChangedError otherwise."""
    try:
        info = os.stat(os.path.basename(path), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if expected is not None:
            raise FileChangedError("the file was removed or renamed since it was read; nothing written",
                                   str(path)) from None
        return None
    if stat.S_ISLNK(info.st_mode):
        what = "swapped for a symlink since it was read" if expected is not None else "a symlink"
        raise FileChangedError(f"{what}: vmtune does not write through symlinks; nothing written", str(path))
    if expected is not None and (not stat.S_ISREG(info.st_mode) or _ident(info) != expected.file):
        raise FileChangedError("replaced by another file since it was read; nothing written", str(path))
    if not stat.S_ISREG(info.st_mode):
        raise FileChangedError("not a regular file; nothing written", str(path))
    return info


def write_atomic(path: str | Path, data: bytes, expected: FileIdentity | None = None) -> None:
    """Replace (or create) path so a reader sees the old or the new content, never half of it.

    With `expected` (from read_nofollow), only if the directory and the file are still the ones
    that were read. Without it (reports, baselines), a symlink at path is refused rather than
    followed. FileChangedError (a VmtuneError) when refused; OSError when the system says no."""
    global _writing
    path = os.fspath(path)
    name = os.path.basename(path)
    dir_fd = open_directory(path, expected.directory if expected else None)
    try:
        info = _check_entry(dir_fd, path, expected)
        tmp = f".{name}.{os.urandom(4).hex()}.vmtune-tmp"
        _writing = (dir_fd, tmp)  # before the open: a signal right after it finds the name to remove
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o600, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    if info is not None:
                        os.fchmod(fh.fileno(), stat.S_IMODE(info.st_mode))
                        with contextlib.suppress(PermissionError):
                            os.fchown(fh.fileno(), info.st_uid, info.st_gid)
                    else:  # a new file: what open() would have given it
                        umask = os.umask(0)
                        os.umask(umask)
                        os.fchmod(fh.fileno(), 0o666 & ~umask)
                    os.fsync(fh.fileno())
                _check_entry(dir_fd, path, expected)  # the last look before the rename narrows the window
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
        finally:
            _writing = None
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def abandon_write() -> None:
    """Remove the temp file of the write under way, if any, for a process that ends now without
    unwinding (a signal handler): the file being replaced was not touched; its temp file goes too."""
    global _writing
    writing, _writing = _writing, None
    if writing is not None:
        with contextlib.suppress(OSError):  # not created yet, renamed already, or the directory gone
            os.unlink(writing[1], dir_fd=writing[0])


def write_output(path: str | Path, data: bytes, what: str) -> None:
    """A report or baseline: written atomically; a missing directory, a symlink or a permission
    problem is a one-line error (exit 2), not a traceback."""
    try:
        write_atomic(path, data)
    except FileChangedError as exc:
        raise VmtuneError(f"cannot write the {what}: {exc.message}", str(path)) from None
    except OSError as exc:
        raise VmtuneError(f"cannot write the {what}: {exc.strerror or exc}", str(path)) from None
