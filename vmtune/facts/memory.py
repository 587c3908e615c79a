"""Memory-backing facts shared by rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmtune.facts.domain import Domain


def shared_memory(domain: Domain) -> bool:
    """Guest RAM mapped shared (MAP_SHARED), which a vhost-user backend (a vhost-user NIC or
    disk, virtiofsd) can map and KSM never merges: <memoryBacking><access mode='shared'/>, or every guest NUMA cell with
    memAccess='shared'."""
    backing = domain.memory_backing
    access = backing.find("access") if backing is not None else None
    if access is not None and access.get("mode") == "shared":
        return True
    cells = domain.guest_numa_cells
    return bool(cells) and all(c.get("memAccess") == "shared" for c in cells)
