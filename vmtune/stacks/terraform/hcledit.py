"""Fixes written into .tf files as byte splices: a literal value replaced where it is, a missing
key added to the object (or resource body) that should hold it, in the file's own layout; every
other byte stays. A value written as an expression (a variable, a function call, another
resource's attribute) is not edited: the edit is refused, and the finding says so.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.stacks.terraform.hcl import Block, Value, parse

APPEND = "+"  # a path step that adds an item to a list


class _Removal:
    """The value that removes an attribute, object key or list item (a fix that removes an
    element or XML attribute)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "REMOVE"

    def __reduce__(self) -> str:
        # Unpickled as the module's REMOVE itself, which the editor knows by identity: a fix's
        # edits come back pickled from the worker processes that checked the renderings.
        return "REMOVE"


REMOVE = _Removal()


class HclEditError(VmtuneError):
    pass


def set_paths(data: bytes, plan: list[tuple[int, tuple[str | int, ...], object]], name: str) -> bytes:
    """`data` with each (resource index, attribute path, value) set; the resource index counts the
    file's `resource "libvirt_domain"` blocks."""
    blocks = [b for b in parse(data, name) if b.type == "resource" and b.labels[:1] == ("libvirt_domain",)]
    splices: dict[tuple[int, int], list[str]] = {}
    for index in sorted({doc for doc, _p, _v in plan}):
        if index >= len(blocks):
            raise HclEditError("the resource to edit is gone", name, None)
        want: dict[Any, Any] = {}
        for doc, path, value in plan:
            if doc == index:
                _merge(want, path, value)
        _edit_body(data, blocks[index], want, splices)
    spans = sorted(splices)
    if any(a[1] > b[0] for a, b in pairwise(spans)):
        raise HclEditError("two fixes change overlapping text: fix one at a time", name, None)
    out = bytearray(data)
    for (start, end), texts in sorted(splices.items(), reverse=True):
        out[start:end] = "".join(texts).encode("utf-8")
    fixed = bytes(out)
    parse(fixed, name)  # what is written parses: a bug here is said, nothing written
    return fixed


def _merge(want: dict[Any, Any], path: tuple[str | int, ...], value: object) -> None:
    node = want
    for key in path[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise HclEditError("two fixes disagree on one attribute", None, None)
    last = path[-1]
    if last == APPEND:
        node.setdefault(APPEND, []).append(value)
    elif value is REMOVE or node.get(last) is REMOVE:
        if node.get(last, REMOVE) is not REMOVE:
            raise HclEditError("two fixes disagree on one attribute", None, None)
        node[last] = REMOVE
    elif isinstance(value, dict) and isinstance(node.get(last), dict):
        for key, item in value.items():
            _merge(node, (last, key), item)
    else:
        node[last] = value


def _edit_body(data: bytes, block: Block, want: dict[Any, Any], splices: dict[tuple[int, int], list[str]]) -> None:
    indent = _indent_of_items(data, [i.start for i in block.attrs.values()], block.body_end)
    for key, wanted in want.items():
        item = block.attrs.get(key)
        if wanted is REMOVE:
            if item is not None:
                _remove(data, item.start, item.value, splices, key)
            continue
        if item is None:
            _insert(data, block.body_end, indent, True, key, wanted, splices, block.line)
        else:
            _edit_value(data, item.value, wanted, splices, key)


def _edit_value(data: bytes, value: Value, wanted: Any, splices: dict[tuple[int, int], list[str]], key: str) -> None:
    if isinstance(wanted, dict) and value.kind == "obj":
        close = value.end - 1
        multi = value.line != value.end_line
        indent = _indent_of_items(data, [i.start for i in value.items.values()], close)
        for sub, sub_wanted in wanted.items():
            item = value.items.get(sub)
            if sub_wanted is REMOVE:
                if item is not None:
                    _remove(data, item.start, item.value, splices, sub)
                continue
            if item is None:
                _insert(data, close, indent, multi, sub, sub_wanted, splices, value.line,
                        bool(value.items), data[:close].rstrip().endswith(b","))
            else:
                _edit_value(data, item.value, sub_wanted, splices, sub)
        return
    if isinstance(wanted, dict) and value.kind == "tup" and all(isinstance(k, int) or k == APPEND for k in wanted):
        for index, sub_wanted in wanted.items():
            if index == APPEND:
                _append(data, value, sub_wanted, splices)
            elif sub_wanted is REMOVE and 0 <= index < len(value.elems):
                _remove(data, value.elems[index].start, value.elems[index], splices, f"{key}[{index}]")
            elif 0 <= index < len(value.elems):
                _edit_value(data, value.elems[index], sub_wanted, splices, f"{key}[{index}]")
            else:
                raise HclEditError(f"{key}[{index}] is not in the file", None, value.line)
        return
    if value.kind == "lit" and not isinstance(wanted, (dict, list)):
        if value.value == wanted and type(value.value) is type(wanted):
            return
        splices.setdefault((value.start, value.end), []).append(_literal(wanted))
        return
    raise HclEditError(f"{key} is written as an expression, not a value: change it where its value comes from",
                       None, value.line)


def _remove(data: bytes, start: int, value: Value, splices: dict[tuple[int, int], list[str]], key: str) -> None:
    """Cut `key = value` (or a list item) out: its whole line(s) when it has them to itself, else
    the item and the comma that joins it to the next (or the previous) one."""
    if not _written(value):
        raise HclEditError(f"{key} is written as an expression, not a value: remove it where its value comes from",
                           None, value.line)
    end = value.end
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", end)
    line_end = len(data) if line_end < 0 else line_end
    after = data[end:line_end].strip()
    if not data[line_start:start].strip() and after in (b"", b","):
        splices.setdefault((line_start, min(line_end + 1, len(data))), []).append("")
        return
    rest = data[end:]
    gap = len(rest) - len(rest.lstrip(b" \t"))
    if rest[gap:gap + 1] == b",":  # the item and its comma, and the space before the next
        tail = rest[gap + 1:]
        cut = end + gap + 1 + (len(tail) - len(tail.lstrip(b" \t")))
        splices.setdefault((start, cut), []).append("")
        return
    head = data[:start].rstrip(b" \t")
    if head.endswith(b","):  # the last item: the comma before it goes
        splices.setdefault((len(head) - 1, end), []).append("")
        return
    splices.setdefault((start, end), []).append("")


def _written(value: Value) -> bool:
    """The value is in the file as values (no reference, call or template anywhere in it)."""
    if value.kind == "obj":
        return all(_written(i.value) for i in value.items.values())
    if value.kind == "tup":
        return all(_written(e) for e in value.elems)
    return value.kind == "lit"


def _insert(data: bytes, close: int, indent: str, multi: bool, key: str, wanted: Any,
            splices: dict[tuple[int, int], list[str]], line: int, has_items: bool = False,
            trailing_comma: bool = False) -> None:
    text = f"{key} = {_hcl(_plain(wanted), indent)}"
    if multi:
        at = data.rfind(b"\n", 0, close) + 1
        if data[at:close].strip():  # the closing brace shares its line with content: a line of its own
            splices.setdefault((close, close), []).append(f"\n{indent}{text}\n{_indent_at(data, close)}")
            return
        splices.setdefault((at, at), []).append(f"{indent}{text}\n")
        return
    before = data[:close].rstrip()
    pos = len(before)
    gap = data[pos:close].decode("utf-8")
    sep = ", " if has_items and not trailing_comma else (" " if not gap else "")
    splices.setdefault((pos, pos), []).append(f"{sep}{text}" + ("" if gap else " "))


def _append(data: bytes, value: Value, items: list[Any], splices: dict[tuple[int, int], list[str]]) -> None:
    close = value.end - 1
    if value.line == value.end_line:
        before = data[:close].rstrip()
        sep = ", " if value.elems and not before.endswith(b",") else ""
        text = sep + ", ".join(_hcl(_plain(i), "") for i in items)
        splices.setdefault((len(before), len(before)), []).append(text)
        return
    indent = _indent_of_items(data, [e.start for e in value.elems], close)
    if value.elems and not data[:close].rstrip().endswith(b","):
        last = value.elems[-1].end
        splices.setdefault((last, last), []).append(",")
    at = data.rfind(b"\n", 0, close) + 1
    splices.setdefault((at, at), []).append("".join(f"{indent}{_hcl(_plain(i), indent)},\n" for i in items))


def _indent_at(data: bytes, offset: int) -> str:
    start = data.rfind(b"\n", 0, offset) + 1
    line = data[start:offset]
    return line[:len(line) - len(line.lstrip(b" \t"))].decode("ascii", "replace")


def _indent_of_items(data: bytes, starts: list[int], close: int) -> str:
    """The indentation of the first item that starts a line, or the closing line's plus two."""
    for start in starts:
        line_start = data.rfind(b"\n", 0, start) + 1
        if not data[line_start:start].strip():
            return data[line_start:start].decode("ascii", "replace")
    return _indent_at(data, close) + "  "


def _plain(value: Any) -> Any:
    """A wanted tree back to plain values (list edits of new objects are plain lists)."""
    if isinstance(value, dict):
        if APPEND in value:
            return [_plain(v) for v in value[APPEND]]
        return {k: _plain(v) for k, v in value.items()}
    return value


def _hcl(value: Any, indent: str) -> str:
    if isinstance(value, dict):
        if all(not isinstance(v, (dict, list)) for v in value.values()) and len(value) <= 3:
            return "{ " + ", ".join(f"{k} = {_literal(v)}" for k, v in value.items()) + " }" if value else "{}"
        inner = indent + "  "
        return "{\n" + "".join(f"{inner}{k} = {_hcl(v, inner)}\n" for k, v in value.items()) + indent + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_hcl(v, indent) for v in value) + "]"
    return _literal(value)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False).replace("${", "$${").replace("%{", "%%{")
