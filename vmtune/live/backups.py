"""One backup file per change to a live definition, readable by the owner only.

Layout: STATE/<host>/<domain uuid>/<id>.xml with <id>.json beside it (what changed, why, and
the sha256 of the .xml). The secure XML holds graphics passwords, hence 0700 directories and
0600 files whatever the umask.

vmtune runs as root and `rollback` defines what it finds here, so the state directory is
trusted the way OpenSSH's StrictModes trusts ~/.ssh: every directory from / down is opened
without following symlinks (above the state directory, a symlink root or the user made in a
directory nobody else can write, such as /home -> /var/home, is followed); the ones above the
state directory must belong to root or the invoking user and not be writable by others
(unless sticky, as /tmp is); the state directory and everything in it must belong to the
invoking user and not be writable by group or others.
Anything else is refused (UntrustedStateError, one line, exit 2). A backup is written to a
temp file, fsync'd and renamed, its sidecar last; `history` and `rollback` list only backups
whose sidecar is there and whose checksum matches, and say which files they skipped and why.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.fileio import others_could_write

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UntrustedStateError(VmtuneError):
    """A state directory another user could have written to: refused."""


def state_dir(override: str | None = None) -> Path:
    if override:
        return Path(override)
    if os.environ.get("VMTUNE_STATE_DIR"):
        return Path(os.environ["VMTUNE_STATE_DIR"])
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]) / "vmtune"
    if os.geteuid() == 0:
        return Path("/var/lib/vmtune")
    return Path.home() / ".local" / "state" / "vmtune"


def host_key(uri: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", uri).strip("_") or "default"


@dataclass(frozen=True)
class Backup:
    id: str
    path: Path
    meta: dict[str, object]
    text: str | None = field(default=None, repr=False, compare=False)  # the verified content, when listed

    @property
    def xml(self) -> str:
        if self.text is not None:
            return self.text
        return self.path.read_text(encoding="utf-8")


@dataclass
class Listing:
    """A domain's usable backups, oldest first, and the files skipped: (path, why)."""

    backups: list[Backup] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def _untrusted(path: Path, why: str) -> UntrustedStateError:
    return UntrustedStateError(f"{why}; refusing to use it for backups (StrictModes: owned by you, not writable "
                               "by group or others, no symlinks)", str(path))


def _check_dir(fd: int, path: Path, inside: bool) -> None:
    info = os.fstat(fd)
    uid = os.geteuid()
    # The state directory and below: the invoking user's alone. Above it: root's or yours, and
    # nobody else may rename entries (sticky /tmp is fine).
    why = others_could_write(info, (uid,) if inside else (0, uid), sticky=not inside)
    if why is None:
        return
    if not inside:
        raise _untrusted(path, f"a parent of the state directory is {why}")
    raise _untrusted(path, f"{why}, not by you (uid {uid})" if info.st_uid != uid else why)


def _open_dir(root: Path, below: list[str], create: bool) -> int | None:
    """A descriptor of root/below..., every component opened without following symlinks and
    checked; created (0700) when `create`, else None when missing."""
    root = root.absolute()
    parts = [(name, False) for name in root.parts[1:]]
    parts[-1:] = [(parts[-1][0], True)] if parts else []
    parts += [(name, True) for name in below]
    fd = os.open("/", _DIR)
    path = Path("/")
    try:
        for name, inside in parts:
            path = path / name
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    return None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=fd)
                child = os.open(name, _DIR, dir_fd=fd)
                if inside and os.fstat(child).st_uid == os.geteuid():
                    os.fchmod(child, 0o700)  # mkdir's mode is masked by the umask
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                if not _is_link(fd, name):
                    raise _untrusted(path, "not a directory") from None
                if inside or not _trusted_link(fd, name):
                    raise _untrusted(path, "a symlink" if inside else "a parent of the state directory is a symlink "
                                     "another user could have made") from None
                # /var/lib -> /srv/var-lib, /home -> /var/home: made by root in a directory only
                # root can write; what it leads to is checked like any parent.
                child = os.open(name, _DIR & ~os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
            _check_dir(fd, path, inside)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _trusted_link(dir_fd: int, name: str) -> bool:
    """A symlink root or the invoking user owns, in a directory nobody else may write to."""
    link = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    return link.st_uid in (0, os.geteuid()) and not os.fstat(dir_fd).st_mode & 0o022


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def exists(root: Path) -> bool:
    """Whether the state directory is there (False: nothing backed up yet), checked as `apply`
    checks it: UntrustedStateError for a symlink, a file or a directory others can write;
    OSError when it cannot be looked at."""
    fd = _open_dir(root, [], create=False)
    if fd is None:
        return False
    os.close(fd)
    return True


def domain_dir(root: Path, uri: str, uuid: str) -> Path:
    return root / host_key(uri) / uuid


def _write_private(dir_fd: int, name: str, data: bytes) -> None:
    """name in dir_fd, 0600, all or nothing: temp file, fsync, rename."""
    tmp = f".{name}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def save(root: Path, uri: str, uuid: str, name: str, xml: str, action: str, changes: list[str]) -> Backup:
    """Write the backup (.xml, then its .json with the sha256 of the .xml), each atomically."""
    folder = domain_dir(root, uri, uuid)
    data = xml.encode("utf-8")
    try:
        fd = _open_dir(root, [host_key(uri), uuid], create=True)
        assert fd is not None
        try:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            meta: dict[str, object] = {
                "id": stamp, "host": uri, "uuid": uuid, "domain": name, "action": action, "changes": changes,
                "time": datetime.now(UTC).isoformat(timespec="seconds"),
                "sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
            }
            _write_private(fd, f"{stamp}.xml", data)
            try:
                _write_private(fd, f"{stamp}.json", (json.dumps(meta, indent=2) + "\n").encode())
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(f"{stamp}.xml", dir_fd=fd)
                raise
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise VmtuneError(f"cannot write backup: {exc.strerror or exc}; nothing applied", str(folder)) from None
    return Backup(stamp, folder / f"{stamp}.xml", meta, xml)


def discard(backup: Backup) -> None:
    """Remove the backup of a definition that was not replaced (nothing to roll back). Best
    effort: it runs while another error is being reported (a rejected define, a changed
    definition), which an OSError here would hide behind a traceback; a backup that stays
    (the state directory gone read-only, a path too long to unlink by name) is harmless."""
    for path in (backup.path, backup.path.with_suffix(".json")):
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _read_private(dir_fd: int, name: str) -> bytes:
    """A file of the state directory: regular, not a symlink, the user's, not writable by others."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        why = others_could_write(info, (os.geteuid(),))
        if why is not None:
            raise ValueError(f"{why}, not by you (planted?)" if info.st_uid != os.geteuid() else why)
        return handle.read()


def _entries(dir_fd: int) -> Iterator[str]:
    with os.scandir(dir_fd) as scan:
        for entry in scan:
            if not entry.name.startswith("."):
                yield entry.name


def _verify(dir_fd: int, stem: str) -> tuple[dict[str, object], str]:
    """The sidecar and content of one backup, or ValueError saying why it is not usable."""
    try:
        raw = _read_private(dir_fd, f"{stem}.json")
    except FileNotFoundError:
        raise ValueError("incomplete: no .json beside it (interrupted while it was written?)") from None
    except OSError as exc:
        raise ValueError(f".json: {'a symlink' if exc.errno == errno.ELOOP else exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f".json: {exc}") from None
    try:
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise ValueError
    except ValueError:
        raise ValueError(".json is not a backup record") from None
    try:
        data = _read_private(dir_fd, f"{stem}.xml")
    except OSError as exc:
        raise ValueError("a symlink" if exc.errno == errno.ELOOP else str(exc.strerror or exc)) from None
    if not data:
        raise ValueError("empty (0 bytes)")
    digest = meta.get("sha256")
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        raise ValueError("checksum mismatch: the file is not what vmtune wrote")
    try:
        return meta, data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8: not a definition vmtune saved") from None


def listing(root: Path, uri: str, uuid: str) -> Listing:
    """Every backup of a domain that can be restored, and what was skipped and why.
    UntrustedStateError when the directories themselves cannot be trusted."""
    folder = domain_dir(root, uri, uuid)
    result = Listing()
    try:
        fd = _open_dir(root, [host_key(uri), uuid], create=False)
    except OSError as exc:
        raise VmtuneError(f"cannot read backups: {exc.strerror or exc}", str(folder)) from None
    if fd is None:
        return result
    try:
        names = set(_entries(fd))
        stems = sorted({n[:-4] for n in names if n.endswith(".xml")})
        for orphan in sorted(n for n in names if n.endswith(".json") and n[:-5] not in stems):
            result.skipped.append((folder / orphan, "incomplete: no .xml beside it"))
        for stem in stems:
            try:
                meta, text = _verify(fd, stem)
            except ValueError as exc:
                result.skipped.append((folder / f"{stem}.xml", str(exc)))
                continue
            result.backups.append(Backup(stem, folder / f"{stem}.xml", meta, text))
    finally:
        os.close(fd)
    return result


def newest_change(saved: list[Backup]) -> Backup | None:
    """The backup a bare `rollback` restores: the newest one a change (apply, plan) made. A
    rollback's own backup holds the changed definition it replaced, so restoring it would put
    the change back; skipping those makes a second rollback a no-op, as in the Ansible module."""
    return next((b for b in reversed(saved) if b.meta.get("action") != "rollback"), None)


def history(root: Path, uri: str, uuid: str) -> list[Backup]:
    """The usable backups of a domain, oldest first (listing() also says what was skipped)."""
    return listing(root, uri, uuid).backups


def _measure_path(backup: Backup) -> Path:
    return backup.path.with_suffix(".measure")


def read_measurements(backup: Backup) -> dict[str, Any]:
    """The measurements `apply --measure` stored with a backup: {"before": ..., "after": ...}
    (either may be missing); {} when there are none or the file is not one vmtune wrote."""
    try:
        fd = os.open(_measure_path(backup), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as handle:
            data = json.loads(handle.read(1 << 20))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_measurement(backup: Backup, when: str, values: dict[str, Any]) -> None:
    """Store a measurement beside the backup (`<id>.measure`, private, written atomically)."""
    data = read_measurements(backup) | {when: values}
    path = _measure_path(backup)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _write_private(fd, path.name, (json.dumps(data, indent=2) + "\n").encode())
    except OSError as exc:
        raise VmtuneError(f"cannot store the measurement: {exc.strerror or exc}", str(path)) from None
    finally:
        os.close(fd)
