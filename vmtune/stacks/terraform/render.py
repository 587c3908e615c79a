"""A `libvirt_domain` of the new schema (provider >= 0.9) as the domain XML the provider defines:
generated.DomainToXML walks the schema's fields and libvirtxml marshals the result, adding
nothing (no default device, machine or CPU). This renderer walks the same field table
(vmtune.stacks.terraform.schema) and writes one element a line, remembering for each line the
attribute path it came from, so that a finding on an element goes back to the HCL that wrote it.

Keys the schema does not have are collected (Terraform drops them without a word) and left out.
Values unknown until apply are left out too, and collected: the caller says so.
"""

from __future__ import annotations

from typing import Any

from vmtune.stacks.terraform.hcl import Unknown
from vmtune.stacks.terraform.schema import INTERFACE_ONLY, META, PROVIDER_ONLY, ROOT, Field, Struct, struct
from vmtune.stacks.xmltext import escape, quoteattr

Path = tuple[str | int, ...]

# Unions libvirtxml marshals by hand: the branch set names the `type` of the element that holds
# it (a disk's source.file -> <disk type='file'>) or of the element itself (a graphics' vnc),
# read from libvirtxml v1.11007.0 domain.go MarshalXML methods.
_TYPED_PARENT = frozenset({"DomainDiskSource", "DomainInterfaceSource", "DomainChardevSource",
                           "DomainFilesystemSource"})
_TYPE_ATTR = {"DomainRNGBackend": "model"}
_BRANCH_NAMES = {"EGLHeadless": "egl-headless", "QEMUVDAgent": "qemu-vdagent", "GuestFWD": "guestfwd",
                 "VirtIOSerial": "virtio-serial", "XenBus": "xenbus"}
# Unions whose branch is written only when the element's own `type` names it (DomainController:
# its `type` is an attribute the user writes; the branch adds attributes, never the type).
_TYPE_SELECTS = frozenset({"DomainController"})
# Sources libvirtxml leaves out when the branch is empty (its MarshalXML returns nil): the branch
# (tf name) -> the branch's fields that must all be empty, and the source's own fields that must
# be too; the holder still gets its type (<disk type='volume'> without <source>).
_EMPTY_SOURCE: dict[str, tuple[dict[str, tuple[str, ...]], tuple[str, ...]]] = {
    "DomainDiskSource": ({"file": ("file",), "block": ("dev",), "volume": ("pool", "volume")},
                         ("startup_policy", "encryption")),
    "DomainInterfaceSource": ({"user": ("dev",)}, ()),
    "DomainChardevSource": ({"null": (), "vc": (), "std_io": (), "pty": ("path",), "unix": ("path", "mode")}, ()),
}


class Line:
    """What wrote one line of the rendered XML: the element's attribute path in the resource, its
    struct, and for a flattened element (`memory` + `memory_unit`) the value's name."""

    __slots__ = ("branch", "flat", "path", "struct")

    def __init__(self, path: Path, struct_name: str | None, flat: str | None = None,
                 branch: tuple[str, str] | None = None) -> None:
        self.path = path
        self.struct = struct_name
        self.flat = flat  # the flattened field's tf name: the element is path[:-0] + (flat,)
        self.branch = branch  # (tf, struct) of a union branch written inline on this element


class Rendering:
    def __init__(self) -> None:
        self.lines: list[str] = ["<?xml version='1.0'?>"]  # line 1: the XML declaration, never a place
        self.where: dict[int, Line] = {}  # line -> what wrote it
        self.unknown_keys: list[tuple[Path, str]] = []  # (path of the key, its name)
        self.unknown_values: list[tuple[Path, Unknown]] = []
        self.refused: list[tuple[Path, str]] = []  # what Terraform refuses before the provider sees it

    @property
    def xml(self) -> bytes:
        return ("\n".join(self.lines) + "\n").encode("utf-8")


def render(body: dict[str, Any], name: str) -> Rendering:
    """The domain XML of a resource's resolved attributes (hcl.Scope.resolve of each)."""
    out = Rendering()
    values = {k: v for k, v in body.items() if k not in META and k not in PROVIDER_ONLY}
    for required in _REQUIRED:
        if values.get(required) is None:
            out.refused.append(((), f'the argument "{required}" is required, but no definition was found'))
    _element(out, "domain", struct(ROOT), values, (), 0)
    return out


# The resource's required attributes (the generated DomainModel's "Required field"s).
_REQUIRED = ("name", "type")
_KINDS = {"String": "a string", "Int64": "a number", "Bool": "a bool"}


def _shape_error(field: Field, value: Any) -> str | None:
    """Why Terraform refuses this value for the attribute (its type conversion fails), or None."""
    if isinstance(value, Unknown) or value is None:
        return None
    if field.list:
        if not isinstance(value, list):
            return f"a list is required, but {_kind(value)} was given"
        for index, item in enumerate(value):
            if isinstance(item, Unknown) or item is None:
                continue
            if field.struct is not None and not isinstance(item, dict):
                return f"element {index}: an object is required, but {_kind(item)} was given"
            if field.struct is None and isinstance(item, (dict, list)):
                return f"element {index}: a single value is required, but {_kind(item)} was given"
        return None
    if field.struct is not None and not field.presence:
        return None if isinstance(value, dict) else f"an object is required, but {_kind(value)} was given"
    if isinstance(value, (dict, list)):
        return f"{_KINDS.get(field.type, 'a single value')} is required, but {_kind(value)} was given"
    if field.type == "Int64" and isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return "a number is required, but a string that is not one was given"
    if field.type == "Bool" and isinstance(value, str) and value not in ("true", "false"):
        return "a bool is required, but a string that is not one was given"
    return None


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string"


def _element(out: Rendering, tag: str, st: Struct, values: Any, path: Path, depth: int,
             holder: dict[str, str] | None = None) -> None:
    if not isinstance(values, dict):
        if isinstance(values, Unknown):
            out.unknown_values.append((path, values))
        return
    attrs: dict[str, str] = {}
    children: list[tuple[str, Any]] = []  # deferred: each child written after this start tag
    text: str | None = None
    branch: tuple[str, str] | None = None
    branch_taken = False
    _known(out, st, values, path)
    flat_attrs = _flat_attrs(st)
    for field in st.fields:
        if field.tf not in values or field.flat_of is not None:
            continue
        value = values[field.tf]
        if value is None:
            continue
        here = (*path, field.tf)
        if isinstance(value, Unknown):
            out.unknown_values.append((here, value))
            continue
        refused = _shape_error(field, value)
        if refused is not None:
            out.refused.append((here, refused))
            continue
        if field.union:
            if branch is not None or branch_taken:
                continue  # libvirtxml writes the first branch set (its MarshalXML's if/else order)
            branch_taken = True
            branch_type = _BRANCH_NAMES.get(field.xml, field.xml.lower())
            if st.name in _TYPE_SELECTS:
                if values.get("type") == branch_type and field.struct is not None and isinstance(value, dict):
                    branch = (field.tf, field.struct)
                    children.append(("branch", (field, value, here)))
                continue
            type_attr = _TYPE_ATTR.get(st.name, "type")
            if st.name in _TYPED_PARENT and holder is not None:
                holder[type_attr] = branch_type
            else:
                attrs[type_attr] = branch_type
            if field.struct is not None and isinstance(value, dict):
                branch = (field.tf, field.struct)
                children.append(("branch", (field, value, here)))
            elif field.value or field.type == "String":
                text = _scalar(field, value)
            continue
        if field.attr:
            scalar = _scalar(field, value)
            if scalar is not None:
                attrs[field.xml] = scalar
            continue
        if field.chardata:
            text = str(value)
            continue
        children.append(("field", (field, value, here)))
    if _left_out(st, values):
        _unknowns_in(out, values, path)  # a source left out because apply fills it in: still said
        return
    line = len(out.lines) + 1
    indent = "  " * depth
    start = f"{indent}<{tag}" + "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())
    out.where[line] = Line(path, st.name, branch=branch)
    if not children and text is None:
        out.lines.append(start + "/>")
        return
    if not children:
        out.lines.append(f"{start}>{_text(st, text)}</{tag}>")
        return
    out.lines.append(start + ">" + (_text(st, text) if text is not None else ""))
    holder_index = len(out.lines) - 1
    for kind, (field, value, here) in children:
        if kind == "branch":
            _inline(out, struct(field.struct), value, here, depth + 1, attrs, holder_index, tag)
            continue
        _child(out, st, field, value, here, depth + 1, flat_attrs, values, path, attrs, holder_index, tag)
    out.lines.append(f"{indent}</{tag}>")


def _inline(out: Rendering, st: Struct, values: dict[str, Any], path: Path, depth: int, holder_attrs: dict[str, str],
            holder_index: int, holder_tag: str) -> None:
    """A union branch's fields written into the element that holds it (<graphics type='vnc' port=…>)."""
    _known(out, st, values, path)
    for field in st.fields:
        value = values.get(field.tf)
        if value is None:
            continue
        if isinstance(value, Unknown):
            out.unknown_values.append(((*path, field.tf), value))
            continue
        refused = _shape_error(field, value)
        if refused is not None:
            out.refused.append(((*path, field.tf), refused))
            continue
        if field.attr:
            scalar = _scalar(field, value)
            if scalar is not None:
                holder_attrs[field.xml] = scalar
                _retag(out, holder_index, holder_tag, holder_attrs)
            continue
        _child(out, st, field, value, (*path, field.tf), depth, _flat_attrs(st), values, path, holder_attrs,
               holder_index, holder_tag)


def _left_out(st: Struct, values: dict[str, Any]) -> bool:
    """A source libvirtxml does not write: its branch is empty (the holder keeps its type)."""
    rule = _EMPTY_SOURCE.get(st.name)
    if rule is None:
        return False
    branches, own = rule
    taken = next((tf for tf in branches if isinstance(values.get(tf), dict)), None)
    first = next((f.tf for f in st.fields if f.union and values.get(f.tf) is not None
                  and not isinstance(values.get(f.tf), Unknown)), None)
    if taken is None or taken != first:
        return False
    branch = values[taken]
    return all(_empty(branch.get(key)) for key in branches[taken]) and all(_empty(values.get(key)) for key in own)


def _unknowns_in(out: Rendering, value: Any, path: Path) -> None:
    """Every Unknown under `value` (a left-out source's), collected with its path."""
    if isinstance(value, Unknown):
        out.unknown_values.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _unknowns_in(out, item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _unknowns_in(out, item, (*path, index))


def _empty(value: Any) -> bool:
    """Empty as libvirtxml sees it: unset, unknown until apply (the provider leaves it unset), or ""."""
    return value is None or isinstance(value, Unknown) or value == ""


def _retag(out: Rendering, index: int, tag: str, attrs: dict[str, str]) -> None:
    line = out.lines[index]
    indent = line[:len(line) - len(line.lstrip())]
    rest = line[line.index(">", len(indent)):] if not line.rstrip().endswith("/>") else "/>"
    # the start tag is rewritten whole: attributes a later field adds (a source's type) join it
    head = f"{indent}<{tag}" + "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())
    body = line[len(indent):]
    end = _start_tag_end(body)
    out.lines[index] = head + (body[end:] if end is not None else rest)


def _start_tag_end(body: str) -> int | None:
    """Where a start tag of `body` ends (the index of its '>' or '/>'), quotes respected."""
    quote = None
    for i, char in enumerate(body):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == ">":
            return i - 1 if i and body[i - 1] == "/" else i
    return None


def _child(out: Rendering, st: Struct, field: Field, value: Any, here: Path, depth: int,
           flat_attrs: dict[str, list[Field]], values: dict[str, Any], path: Path, holder_attrs: dict[str, str],
           holder_index: int, holder_tag: str) -> None:
    indent = "  " * depth
    if field.value:  # flattened: <memory unit='GiB'>8</memory>
        attrs = {}
        for attr_field in flat_attrs.get(field.tf, ()):
            got = values.get(attr_field.tf)
            if isinstance(got, Unknown):
                out.unknown_values.append(((*path, attr_field.tf), got))
            elif got is not None:
                scalar = _scalar(attr_field, got)
                if scalar is not None:
                    attrs[attr_field.flat_attr or attr_field.xml] = scalar
        out.where[len(out.lines) + 1] = Line(path, st.name, flat=field.tf)
        start = f"{indent}<{field.xml}" + "".join(f" {k}={quoteattr(v)}" for k, v in attrs.items())
        out.lines.append(f"{start}>{escape(str(_scalar(field, value)))}</{field.xml}>")
        return
    if field.presence:
        if value is True:
            out.where[len(out.lines) + 1] = Line(here, field.struct)
            out.lines.append(f"{indent}<{field.xml}/>")
        return
    if field.list:
        if not isinstance(value, list):
            return
        for index, item in enumerate(value):
            if isinstance(item, Unknown):
                out.unknown_values.append(((*here, index), item))
            elif field.struct is not None:
                _element(out, field.xml, struct(field.struct), item, (*here, index), depth)
            elif item is not None:
                out.where[len(out.lines) + 1] = Line((*here, index), None)
                out.lines.append(f"{indent}<{field.xml}>{escape(str(item))}</{field.xml}>")
        return
    if field.struct is not None:
        sub = struct(field.struct)
        if sub.name in _TYPED_PARENT:
            # the branch names the holder's type: the holder's start tag is already written
            before = dict(holder_attrs)
            _element(out, field.xml, sub, value, here, depth, holder=holder_attrs)
            if holder_attrs != before:
                _retag(out, holder_index, holder_tag, holder_attrs)
            return
        _element(out, field.xml, sub, value, here, depth)
        return
    scalar = _scalar(field, value)
    if scalar is not None:
        out.where[len(out.lines) + 1] = Line(here, None)
        out.lines.append(f"{indent}<{field.xml}>{escape(scalar)}</{field.xml}>")


def _text(st: Struct, text: str | None) -> str:
    if text is None:
        return ""
    if st.name == "DomainMetadata":
        # innerxml: written as it is (libvirtxml's `xml:",innerxml"`), on one line so that the
        # lines after it keep their places (whitespace between its elements means nothing)
        return " ".join(part.strip() for part in text.splitlines() if part.strip())
    return escape(text)


def _flat_attrs(st: Struct) -> dict[str, list[Field]]:
    found: dict[str, list[Field]] = {}
    for field in st.fields:
        if field.flat_of is not None:
            found.setdefault(field.flat_of, []).append(field)
    return found


def _known(out: Rendering, st: Struct, values: dict[str, Any], path: Path) -> None:
    """Keys the schema does not define here: Terraform drops them (hashicorp/terraform#33570)."""
    for key in values:
        if key in st.by_tf or (not path and (key in META or key in PROVIDER_ONLY)):
            continue
        if st.name == "DomainInterface" and key in INTERFACE_ONLY:
            continue
        out.unknown_keys.append(((*path, key), st.name))


def _scalar(field: Field, value: Any) -> str | None:
    if isinstance(value, (dict, list)):
        return None
    if field.bool is not None:
        if isinstance(value, bool):
            return field.bool[0] if value else field.bool[1]
        if isinstance(value, str) and value in ("true", "false"):
            return field.bool[0] if value == "true" else field.bool[1]
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
