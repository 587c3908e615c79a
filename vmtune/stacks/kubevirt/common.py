"""kubevirt/common-instancetypes as virt-operator deploys them cluster-wide: the names and specs
of its VirtualMachineClusterInstancetypes and VirtualMachineClusterPreferences
(common_instancetypes.json, written by scripts/gen-common-instancetypes from the upstream bundle,
whose version it records). VMs name `u1.large` or `windows.2k22.virtio` without carrying them."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vmtune.stacks.frontend import StackFile

_TABLE: dict[str, Any] | None = None


def table() -> dict[str, Any]:
    global _TABLE  # read once, when a VM names an object no file given holds
    if _TABLE is None:
        # os.path, not pathlib: pathlib imports urllib, which a manifest check does not load otherwise
        with open(os.path.join(os.path.dirname(__file__), "common_instancetypes.json"), encoding="utf-8") as table_file:
            _TABLE = json.load(table_file)
    return _TABLE


def known(what: str, name: str) -> bool:
    """Whether `name` is one of common-instancetypes' instancetypes (what="instancetype") or
    preferences (what="preference")."""
    return name in table()["instancetypes" if what == "instancetype" else "preferences"]


def version() -> str:
    return f"common-instancetypes {str(table()['version'])[:12]}"


def spec(what: str, name: str) -> dict[str, Any] | None:
    """The spec of a common-instancetypes instancetype or preference, None for another name."""
    found = table()["instancetypes" if what == "instancetype" else "preferences"].get(name)
    return found if isinstance(found, dict) else None


_HOLDER: list[StackFile] = []


def holder() -> StackFile:
    """The file the table's objects are said to come from: none a fix can edit (no documents)."""
    if not _HOLDER:
        from vmtune.stacks.frontend import StackFile

        _HOLDER.append(StackFile(f"({version()}, built in)", b"", [], explicit=False))
    return _HOLDER[0]
