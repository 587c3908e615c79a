"""One backup file per change to a live definition, readable by the owner only.

Layout: STATE/<host>/<domain uuid>/<id>.xml with <id>.json beside it (what changed, why).
The secure XML holds graphics passwords, hence 0700 directories and 0600 files whatever
the umask.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vmtune.errors import VmtuneError


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

    @property
    def xml(self) -> str:
        return self.path.read_text(encoding="utf-8")


def _private_dir(path: Path) -> None:
    for part in reversed([path, *path.parents]):
        if not part.exists():
            part.mkdir(mode=0o700)
            os.chmod(part, 0o700)  # mkdir's mode is masked by the umask
    os.chmod(path, 0o700)


def _private_write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def domain_dir(root: Path, uri: str, uuid: str) -> Path:
    return root / host_key(uri) / uuid


def save(root: Path, uri: str, uuid: str, name: str, xml: str, action: str, changes: list[str]) -> Backup:
    folder = domain_dir(root, uri, uuid)
    try:
        _private_dir(folder)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = folder / f"{stamp}.xml"
        _private_write(path, xml)
        meta: dict[str, object] = {
            "id": stamp, "host": uri, "uuid": uuid, "domain": name, "action": action, "changes": changes,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _private_write(folder / f"{stamp}.json", json.dumps(meta, indent=2) + "\n")
    except OSError as exc:
        raise VmtuneError(f"cannot write backup: {exc.strerror or exc}", str(folder)) from None
    return Backup(stamp, path, meta)


def discard(backup: Backup) -> None:
    for path in (backup.path, backup.path.with_suffix(".json")):
        path.unlink(missing_ok=True)


def history(root: Path, uri: str, uuid: str) -> list[Backup]:
    folder = domain_dir(root, uri, uuid)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.xml")):
        meta_path = path.with_suffix(".json")
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        out.append(Backup(path.stem, path, meta))
    return out
