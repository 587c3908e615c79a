"""Whether a file is the Terraform front end's: a `.tf` file (its name is the test, as for
Terraform itself), or the JSON of `terraform show -json` that plans a `libvirt_domain` (by its
bytes: the plan's own keys and the resource type; the front end reads its structure). Apart
from the front end, so asking loads no HCL parser."""

from __future__ import annotations


def wants(data: bytes, name: str) -> bool:
    lower = name.lower()
    if lower.endswith(".tf"):
        return True
    return lower.endswith(".json") and b'"format_version"' in data and b'"libvirt_domain"' in data and \
        (b'"planned_values"' in data or b'"resource_changes"' in data)
