"""`terraform show -json` plans as input: each planned `libvirt_domain` rendered from its values.

The format (terraform docs/internals/json-format.md, "Plan Representation"): an object with
`format_version`, `planned_values.root_module` (`resources[]`, each `address`, `mode`, `type`,
`name`, `index`, `values`; `child_modules[]` the same, recursively) and `resource_changes[]`
(`address`, `change.after`, `change.after_unknown`). The values carry the provider schema's
attribute names, the same as the HCL, so they go through the same renderer.

Values known only after apply are left out of `after` and `values` (Terraform's omitUnknowns: an
object's unknown attribute is omitted, a list's unknown item is null) and marked `true` at their
path in `after_unknown`: they become Unknown here, said and never judged as zero.

A plan has no HCL lines: a finding is placed on the line of the resource's `"address"` key and
names the address and the attribute path; nothing is fixed in a plan (the fix belongs in the HCL).
"""

from __future__ import annotations

from typing import Any

from vmtune.errors import VmtuneError
from vmtune.stacks.frontend import StackFile
from vmtune.stacks.terraform.hcl import Unknown
from vmtune.stacks.yamldoc import Node

RESOURCE = "libvirt_domain"
# Keys of a planned resource's values that are Terraform's, not the domain's.
_NOT_DOMAIN = frozenset({"id"})
AFTER_APPLY = "after_unknown in the plan"


class Planned:
    """One planned libvirt_domain: its address, its values (unknowns as Unknown), the line of its
    `"address"` key."""

    __slots__ = ("address", "line", "values")

    def __init__(self, address: str, values: dict[str, Any], line: int) -> None:
        self.address = address
        self.values = values
        self.line = line


def is_plan(root: Any) -> bool:
    """A JSON plan (or plan-shaped output of `terraform show -json`): an object with
    format_version and planned_values or resource_changes."""
    return isinstance(root, dict) and "format_version" in root and \
        ("planned_values" in root or "resource_changes" in root)


def domains(stack_file: StackFile) -> list[Planned]:
    """The plan's libvirt_domain resources, in the order planned_values lists them, then any
    only resource_changes has. Not a plan: none."""
    if len(stack_file.docs) != 1:
        return []
    root_node = stack_file.docs[0].root
    root = root_node.value
    if not is_plan(root):
        return []
    changes: dict[str, tuple[dict[str, Any] | None, Any, Node | None]] = {}
    change_nodes = root_node.get("resource_changes")
    for index, change in enumerate(_list(root.get("resource_changes"))):
        if not _is_domain(change):
            continue
        body = change.get("change")
        if not isinstance(body, dict):
            continue
        after = body.get("after")
        node = change_nodes.get(index) if change_nodes is not None else None
        changes[str(change.get("address"))] = (after if isinstance(after, dict) else None,
                                               body.get("after_unknown"), node)
    found: list[Planned] = []
    seen: set[str] = set()
    planned = root.get("planned_values")
    if isinstance(planned, dict):
        node = root_node.get("planned_values")
        _walk(planned.get("root_module"), node.get("root_module") if node is not None else None,
              changes, found, seen, 0, stack_file.name)
    for address, (after, unknown, node) in changes.items():
        if address not in seen and after is not None:  # a destroyed resource plans no domain
            found.append(Planned(address, _with_unknowns(after, unknown), _address_line(node)))
    return found


def _walk(module: Any, node: Node | None, changes: dict[str, tuple[dict[str, Any] | None, Any, Node | None]],
          found: list[Planned], seen: set[str], depth: int, name: str) -> None:
    if not isinstance(module, dict):
        return
    if depth > 32:
        raise VmtuneError("modules nested deeper than 32 levels: not a plan vmtune reads", name,
                          node.line if node is not None else None)
    resources = node.get("resources") if node is not None else None
    for index, resource in enumerate(_list(module.get("resources"))):
        if not _is_domain(resource) or not isinstance(resource.get("values"), dict):
            continue
        address = str(resource.get("address"))
        seen.add(address)
        values = resource["values"]
        unknown: Any = None
        if address in changes:  # after_unknown says which values apply will fill in
            after, unknown, _node = changes[address]
            values = after if after is not None else values
        line = _address_line(resources.get(index) if resources is not None else None)
        found.append(Planned(address, _with_unknowns(values, unknown), line))
    children = node.get("child_modules") if node is not None else None
    for index, child in enumerate(_list(module.get("child_modules"))):
        _walk(child, children.get(index) if children is not None else None, changes, found, seen, depth + 1, name)


def _is_domain(resource: Any) -> bool:
    return isinstance(resource, dict) and resource.get("type") == RESOURCE and \
        resource.get("mode", "managed") == "managed" and isinstance(resource.get("address"), str)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _address_line(node: Node | None) -> int:
    """The line of the resource's "address" key (every node of a loaded file has one)."""
    found = node.get("address") if node is not None else None
    return found.key_line if found is not None else 1


def _with_unknowns(values: dict[str, Any], unknown: Any) -> dict[str, Any]:
    """The values with each value after_unknown marks `true` as an Unknown (Terraform's
    "after_unknown": the same shape as `after`, `true` where apply decides)."""
    out = _merge(values, unknown)
    return {k: v for k, v in out.items() if k not in _NOT_DOMAIN} if isinstance(out, dict) else {}


def _merge(value: Any, unknown: Any) -> Any:
    if unknown is True:
        return Unknown(AFTER_APPLY)
    if isinstance(unknown, dict):
        base = dict(value) if isinstance(value, dict) else {}
        for key, marks in unknown.items():
            if marks is True or isinstance(marks, (dict, list)):
                merged = _merge(base.get(key), marks)
                if merged is not None:
                    base[key] = merged
        return base if base or isinstance(value, dict) else value
    if isinstance(unknown, list):
        items = list(value) if isinstance(value, list) else []
        for index, marks in enumerate(unknown):
            if index >= len(items):
                items.append(None)
            items[index] = _merge(items[index], marks)
        return items
    return value
