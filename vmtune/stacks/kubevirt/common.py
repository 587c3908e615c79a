"""kubevirt/common-instancetypes as virt-operator deploys them cluster-wide: the names and specs
of its VirtualMachineClusterInstancetypes and VirtualMachineClusterPreferences, one table per bundle
version (common_instancetypes/<version>.json) and the bundle each KubeVirt release ships
(common_instancetypes/index.json), written by scripts/gen-common-instancetypes from the bundles
committed in KubeVirt's release tags. VMs name `u1.large` or `windows.2k22.virtio` without
carrying them; `--kubevirt-version` picks the release, the newest by default. The releases'
bundles differ: names come and go (`windows.2k25` since KubeVirt 1.4, `centos.7` gone in 1.4.1)
and preferences change (`windows.10` gained EFI secure boot and SMM with bundle v1.0.0, KubeVirt 1.2.1).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError

if TYPE_CHECKING:
    from vmtune.stacks.frontend import StackFile

# os.path, not pathlib: pathlib imports urllib, which a manifest check does not load otherwise
_DIR = os.path.join(os.path.dirname(__file__), "common_instancetypes")
_INDEX: dict[str, Any] | None = None
_TABLES: dict[str, dict[str, Any]] = {}


def _index() -> dict[str, Any]:
    global _INDEX  # read once, when a VM names an object no file given holds or a release is given
    if _INDEX is None:
        with open(os.path.join(_DIR, "index.json"), encoding="utf-8") as index_file:
            _INDEX = json.load(index_file)
    return _INDEX


def _release_key(tag: str) -> tuple[int, ...]:
    return tuple(int(p) for p in tag.lstrip("v").split("."))


def known_releases() -> list[str]:
    """The KubeVirt minor releases whose bundles vmtune has, oldest first (`1.1`, … `1.9`)."""
    minors = {".".join(tag.lstrip("v").split(".")[:2]) for tag in _index()["releases"]}
    return sorted(minors, key=_release_key)


def release_tag(kubevirt_version: str) -> str:
    """The KubeVirt release tag `--kubevirt-version` names: `1.4`/`v1.4` is its newest patch
    release, `v1.4.0`/`1.4.0` that one. Anything else is an error of the run (exit 2): a
    release whose bundle vmtune does not have would be judged with another's names."""
    releases = _index()["releases"]
    wanted = kubevirt_version.strip()
    wanted = "v" + (wanted[1:] if wanted[:1] in "vV" else wanted)
    if wanted in releases:
        return wanted
    patches = [tag for tag in releases if tag.startswith(wanted + ".")] if wanted.count(".") == 1 else []
    if patches:
        return max(patches, key=_release_key)
    raise VmtuneError(f"--kubevirt-version {kubevirt_version}: not a KubeVirt release whose common-instancetypes "
                      f"vmtune knows; known: {', '.join(known_releases())} (X.Y is its newest patch release; "
                      "vX.Y.Z names one)")


def bundle_of(kubevirt_version: str | None) -> str:
    """The common-instancetypes bundle version the KubeVirt release deploys; the newest release's
    when none is given."""
    if not kubevirt_version:
        return str(_index()["default"])
    return str(_index()["releases"][release_tag(kubevirt_version)]["bundle"])


def table(bundle: str) -> dict[str, Any]:
    if bundle not in _TABLES:
        if bundle not in _index()["bundles"]:  # the index names every file: never a path from input
            raise VmtuneError(f"no common-instancetypes table for bundle {bundle}")
        with open(os.path.join(_DIR, f"{bundle}.json"), encoding="utf-8") as table_file:
            _TABLES[bundle] = json.load(table_file)
    return _TABLES[bundle]


def known(what: str, name: str, bundle: str) -> bool:
    """Whether `name` is one of the bundle's instancetypes (what="instancetype") or preferences
    (what="preference")."""
    return name in table(bundle)["instancetypes" if what == "instancetype" else "preferences"]


def version(bundle: str) -> str:
    return f"common-instancetypes {bundle} ({str(table(bundle)['commit'])[:12]})"


def spec(what: str, name: str, bundle: str) -> dict[str, Any] | None:
    """The spec of the bundle's instancetype or preference `name`, None for another name."""
    found = table(bundle)["instancetypes" if what == "instancetype" else "preferences"].get(name)
    return found if isinstance(found, dict) else None


def releases_of(bundle: str) -> list[str]:
    """The KubeVirt minor releases that deploy the bundle (`1.6`…), for what a note says."""
    tags = [tag for tag, row in _index()["releases"].items() if row["bundle"] == bundle]
    return sorted({".".join(t.lstrip("v").split(".")[:2]) for t in tags}, key=_release_key)


_HOLDERS: dict[str, StackFile] = {}


def holder(bundle: str) -> StackFile:
    """The file a bundle's objects are said to come from: none a fix can edit (no documents)."""
    if bundle not in _HOLDERS:
        from vmtune.stacks.frontend import StackFile

        _HOLDERS[bundle] = StackFile(f"({version(bundle)}, built in)", b"", [], explicit=False)
    return _HOLDERS[bundle]
