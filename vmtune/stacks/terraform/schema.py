"""The `libvirt_domain` attribute tree of terraform-provider-libvirt's new schema (>= 0.9), as its
code generator builds it from libvirtxml's Go structs: one entry per struct, each field with its
Terraform name (snake_case of the Go field name), the XML name it writes, and how
(`domain_schema.json`, written by fixtures/terraform/oracle/vmtunedump/main.go from the provider's
internal/codegen at 6bd1e073 with libvirtxml v1.11007.0; provenance in fixtures/terraform/README.md).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from vmtune.record import Record

ROOT = "Domain"


class Field(Record):
    __slots__ = ("attr", "bool", "chardata", "flat_attr", "flat_of", "list", "presence", "struct", "tf", "type",
                 "value", "xml")

    def __init__(self, raw: dict[str, Any]) -> None:
        self.tf: str = raw["tf"]
        self.xml: str = raw.get("xml", "")
        self.attr: bool = raw.get("attr", False)
        self.list: bool = raw.get("list", False)
        self.struct: str | None = raw.get("struct")
        self.type: str = raw["type"].removeprefix("types.")  # String, Int64, Bool, Object, List
        self.presence: bool = raw.get("presence", False)
        self.bool: tuple[str, str] | None = tuple(raw["bool"]) if raw.get("bool") else None  # type: ignore[assignment]
        self.value: bool = raw.get("value", False)  # the chardata of a flattened element; its attrs are flat_of it
        self.flat_of: str | None = raw.get("flat_of")
        self.flat_attr: str | None = raw.get("flat_attr")
        self.chardata: bool = raw.get("chardata", False)

    @property
    def union(self) -> bool:
        """A branch of a union (libvirtxml marshals it by hand: a disk's `source.file`)."""
        return bool(self.xml) and self.xml[0].isupper()


class Struct:
    __slots__ = ("by_tf", "fields", "name")

    def __init__(self, name: str, fields: list[Field]) -> None:
        self.name = name
        self.fields = fields
        self.by_tf = {f.tf: f for f in fields}


@cache
def structs() -> dict[str, Struct]:
    # os.path, not pathlib: pathlib imports urllib.parse and ipaddress (~15 ms of every .tf check)
    with open(os.path.join(os.path.dirname(__file__), "domain_schema.json"), encoding="utf-8") as handle:
        raw = json.load(handle)
    return {name: Struct(name, [Field(f) for f in fields]) for name, fields in raw["structs"]}


def struct(name: str) -> Struct:
    return structs()[name]


# Attributes of the resource that are the provider's own, not the domain's (domain_resource.go).
PROVIDER_ONLY = frozenset({"running", "autostart", "create", "update", "destroy"})
# Terraform's meta-arguments of every resource.
META = frozenset({"count", "for_each", "depends_on", "provider", "lifecycle"})
# devices.interfaces[*].wait_for_ip: dropped before DomainToXML (prepareDomainPlan).
INTERFACE_ONLY = frozenset({"wait_for_ip"})
