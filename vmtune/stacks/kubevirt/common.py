"""kubevirt/common-instancetypes as virt-operator deploys them cluster-wide: the names and specs
of its VirtualMachineClusterInstancetypes and VirtualMachineClusterPreferences
(common_instancetypes.json, written by scripts/gen-common-instancetypes from the upstream bundle,
whose version it records). VMs name `u1.large` or `windows.2k22.virtio` without carrying them."""

from __future__ import annotations

import json
import os
from typing import Any

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
