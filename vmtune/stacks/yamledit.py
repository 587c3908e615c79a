"""Byte-preserving edits of YAML and JSON text: how `vmtune check --fix` writes a stack's fix.

An operator's manifest is reviewed as text: its comments, key order, quoting, indentation,
document separators and line endings are theirs, and a fix that re-dumps the whole file turns a
one-line change into a diff nobody can review. So an edit here touches only the bytes of the
value it changes, or inserts the lines of the keys it adds; every other byte stays as it was.

`set_paths(data, [(doc, path, value), ...])` makes each `path` (str keys, int list indices, from
the root of document `doc`) exist and hold `value`:

- an existing scalar is replaced in place; a string keeps its quoting style ('…', "…", plain
  when plain is safe; PyYAML's own emitter decides what is safe);
- a missing key is added to the deepest mapping that exists, with any intermediate mappings:
  in a block mapping after the mapping's last entry and its nested content, at the column of
  its siblings, in block style (indentation step and sequence style detected from the file);
  in a flow mapping (`{a: 1}`, JSON) before the closing brace, in the same style (`"k": v`
  with json.dumps when the keys are double-quoted, a line of its own in multi-line JSON);
- a mapping value merges into an existing mapping key by key; an empty `{}` takes the keys
  in flow style, an empty (null) value takes them as a block below its key;
- setting a value the file already holds (`true` written `yes`, `1024` written `0x400`) is a
  no-op: the bytes stay, so applying the same fix twice changes nothing the second time.

Where a new key goes when comment lines follow the mapping's last entry: directly after the
last entry's content, before those comments. A comment between the last entry and the next
key usually introduces that next key (or is a commented-out entry), so it stays next to it.

Every edit is verified before it is kept: the edited text is parsed again with PyYAML's safe
loader and must hold `value` at `path` and be equal to the original everywhere else (every
document, deep and type-strict: `1` is not `true`). Anything that would need guessing is
refused with YamlEditError instead: a path through an alias or through a node an alias names
again (the edit would change both places), a key that only comes from a merge key (`<<`), a
list index out of range (lists are never extended), a non-null scalar where a mapping is
needed, a file larger than MAX_BYTES.

Offsets: PyYAML's marks count characters of the decoded text, so the text is decoded (UTF-8,
a BOM kept aside), edited as a str and encoded back.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from vmtune.errors import VmtuneError

MAX_BYTES = 4 * 1024 * 1024  # sources.MAX_INPUT_BYTES: the largest file vmtune reads at all

Path = tuple[str | int, ...]
Edit = tuple[int, Path, object]

_BOM = "\ufeff"
# What PyYAML's reader accepts unescaped; the other characters of a string are written escaped.
_PRINTABLE = re.compile("[\x09\x0a\x0d\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_LINE_BREAK = re.compile("\r\n|\r|\n")
_MISSING = object()


class YamlEditError(VmtuneError):
    """An edit that cannot be made without guessing, or whose result would not hold what was asked."""


def set_paths(data: bytes, edits: Sequence[tuple[int, tuple[str | int, ...], object]]) -> bytes:
    """`data` with each edit applied in order (each sees the text the previous ones left)."""
    if len(data) > MAX_BYTES:
        raise YamlEditError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not edited")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlEditError("not UTF-8: not edited") from None
    bom = text.startswith(_BOM)
    if bom:
        text = text[1:]
    try:
        spans = _document_spans(text) if len({doc for doc, _p, _v in edits}) > 1 else None
        text = _apply(text, list(edits)) if spans is None else _apply_by_document(text, spans, edits)
    except RecursionError:
        raise YamlEditError("nested too deeply to edit") from None
    return ((_BOM if bom else "") + text).encode("utf-8")


Style = tuple[str, int, int]  # (line ending, indentation step, sequence offset) of a file


def _apply(text: str, edits: list[Edit], style: Style | None = None) -> str:
    docs = _load_all(text)
    for doc, path, value in edits:
        _check_value(value)
        queue: list[tuple[Path, object]] = [(tuple(path), value)]
        while queue:  # a mapping merged into a mapping becomes one edit per key, in order
            step_path, step_value = queue.pop(0)
            text, docs, more = _edit(text, docs, doc, step_path, step_value, style)
            queue[:0] = more
    return text


# libyaml's line breaks (YAML 1.1 counts NEL, LS and PS too), to find a document's first line.
_YAML_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def _document_spans(text: str) -> list[tuple[int, int, int]] | None:
    """Each document's text as (start, end, first line - 1), for a file of several documents:
    every edit re-parses and verifies the text it edits, so editing each document on its own
    keeps `--fix` of 1,000 VMs in one file linear (the whole file per edit took 124 s of CPU
    for 200 VMs, quadratic). None when the file has directives (`%TAG` applies to documents
    after it) or cannot be split: then the whole file is edited, as before."""
    import yaml

    if re.search(r"(?m)^%", text):
        return None
    try:
        lines = [event.start_mark.line for event in yaml.parse(text, Loader=_loader())
                 if isinstance(event, yaml.DocumentStartEvent) and event.start_mark is not None]
    except yaml.YAMLError:
        return None
    offsets = [0] + [m.end() for m in _YAML_BREAK.finditer(text)]
    if not lines or any(line >= len(offsets) for line in lines):
        return None
    starts = [0] + [offsets[line] for line in lines[1:]]
    ends = [*starts[1:], len(text)]
    spans = zip(starts, ends, lines, strict=True)
    return [(start, end, line if i else 0) for i, (start, end, line) in enumerate(spans)]


def _apply_by_document(text: str, spans: list[tuple[int, int, int]], edits: Sequence[Edit]) -> str:
    by_doc: dict[int, list[Edit]] = {}
    for doc, path, value in edits:
        if not 0 <= doc < len(spans):
            raise YamlEditError(f"no document {doc} (the file has {len(spans)})")
        by_doc.setdefault(doc, []).append((0, path, value))
    parts = [text[start:end] for start, end, _line in spans]
    whole = _Tree(text)  # new lines take the file's line ending and indentation, as before
    style = (whole.eol, whole.step, whole.seq_offset)
    for doc, doc_edits in by_doc.items():
        first_line = spans[doc][2]
        try:
            if len(_load_all(parts[doc])) != 1:
                raise YamlEditError("a document that does not stand on its own: not edited")
            parts[doc] = _apply(parts[doc], doc_edits, style)
        except YamlEditError as exc:
            raise YamlEditError(exc.message, exc.source, exc.line + first_line if exc.line else None) from None
    new_text = "".join(parts)
    # The documents edited one by one must make the file they make together: the same number of
    # documents, each edited one as its own text gave it, every other one as it was.
    before, after = _load_all(text), _load_all(new_text)
    if len(after) != len(before) or not all(
            _equal(after[i], _load_all(parts[i])[0] if i in by_doc else before[i]) for i in range(len(before))):
        raise YamlEditError("the edited documents would change the file around them: not edited")
    return new_text


def _load_all(text: str) -> list[Any]:
    import yaml

    try:
        return list(yaml.load_all(text, Loader=_loader()))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = (exc.problem or exc.context or "").strip()
        raise YamlEditError(f"not valid YAML: {problem}", None, mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlEditError(f"not valid YAML: {exc}") from None


def _loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _check_value(value: object) -> None:
    """Values are what JSON and YAML both write: dicts with str keys, lists, str, int, float,
    bool, None. Anything else (a datetime, a set) has no single spelling to choose."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise YamlEditError(f"a key that is not a string: {key!r}")
            _check_value(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_value(item)
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise YamlEditError(f"cannot write a value of type {type(value).__name__}")


# --- the expected result, computed on the loaded data -------------------------------------------

def _merged(current: object, value: object) -> object:
    """`value` set onto `current`: mappings merge key by key, anything else replaces."""
    if isinstance(value, dict) and isinstance(current, dict):
        result = dict(current)
        for key, item in value.items():
            result[key] = _merged(current.get(key, _MISSING), item)
        return result
    if isinstance(value, tuple):
        return [_merged(_MISSING, item) for item in value]
    if isinstance(value, list):
        return [_merged(_MISSING, item) for item in value]
    if isinstance(value, dict):
        return {key: _merged(_MISSING, item) for key, item in value.items()}
    return value


def _set_in(current: object, path: Path, value: object) -> object:
    if not path:
        return _merged(current, value)
    key, rest = path[0], path[1:]
    if isinstance(key, int):
        if not isinstance(current, list) or not 0 <= key < len(current):
            raise YamlEditError(f"no list item {key} to edit (lists are not extended)")
        items = list(current)
        items[key] = _set_in(items[key], rest, value)
        return items
    mapping = dict(current) if isinstance(current, dict) else {}
    mapping[key] = _set_in(mapping.get(key, _MISSING), rest, value)
    return mapping


def _equal(a: object, b: object) -> bool:
    """Deep equality that tells `true` from `1` and `1.0` from `1`, and a NaN from nothing."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# --- one edit --------------------------------------------------------------------------------------

def _edit(text: str, docs: list[Any], doc: int, path: Path, value: object,
          style: Style | None = None) -> tuple[str, list[Any], list[tuple[Path, object]]]:
    """One edit: (new text, its loaded documents, edits still to make for a merge). `style`: the
    whole file's, when `text` is one of its documents."""
    if not 0 <= doc < len(docs):
        raise YamlEditError(f"no document {doc} (the file has {len(docs)})")
    planner = None
    try:
        expected = _set_in(docs[doc], path, value)
    except YamlEditError:  # a list index out of range: the planner says where
        planner = _Planner(_Tree(text, style), doc)
        planner.plan(path, value)
        raise
    if _equal(expected, docs[doc]):
        return text, docs, []  # already holds it: the bytes stay as written
    splices, more = (planner or _Planner(_Tree(text, style), doc)).plan(path, value)
    if more:
        return text, docs, more
    new_text = text
    for start, end, replacement in sorted(splices, key=lambda s: (s[0], s[1]), reverse=True):
        new_text = new_text[:start] + replacement + new_text[end:]
    try:
        new_docs = _load_all(new_text)
    except YamlEditError as exc:
        raise YamlEditError(f"setting {_dotted(path)} would not give valid YAML ({exc.message}): not edited") from None
    if len(new_docs) != len(docs) or not _equal(new_docs[doc], expected) or not all(
            _equal(new_docs[i], docs[i]) for i in range(len(docs)) if i != doc):
        raise YamlEditError(f"setting {_dotted(path)} would change more than it: not edited")
    return new_text, new_docs, []


def _dotted(path: Path) -> str:
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path).lstrip(".") or "(root)"


# --- the text's structure, with positions ----------------------------------------------------------

class _Node:
    """One node as the parser saw it: where it starts and ends (character offsets), its style."""

    __slots__ = ("anchor", "col", "end", "flow", "implicit", "items", "kind", "line", "pairs", "start", "style",
                 "tag", "value")

    def __init__(self, kind: str, event: Any) -> None:
        self.kind = kind  # "map" | "seq" | "scalar" | "alias"
        self.start: int = event.start_mark.index
        self.end: int = event.end_mark.index
        self.line: int = event.start_mark.line + 1
        self.col: int = event.start_mark.column
        self.anchor: str | None = getattr(event, "anchor", None)
        self.tag: str | None = getattr(event, "tag", None)
        self.flow = bool(getattr(event, "flow_style", False))
        self.style: str | None = getattr(event, "style", None) or None
        self.value: str = getattr(event, "value", None) or ""
        self.implicit: tuple[bool, bool] = getattr(event, "implicit", (True, False)) or (True, False)
        self.pairs: list[tuple[_Node, _Node]] = []
        self.items: list[_Node] = []


class _Tree:
    """The documents of a text as _Nodes, from PyYAML's events (its composer would hide aliases:
    an alias is the very node it names, with that node's positions)."""

    def __init__(self, text: str, style: Style | None = None) -> None:
        import yaml

        self.text = text
        self.docs: list[_Node] = []
        self.aliased: list[set[str]] = []  # per document: the anchors some alias names
        stack: list[_Node] = []
        pending_key: list[_Node | None] = []
        aliased: set[str] = set()

        def add(node: _Node) -> None:
            if not stack:
                self.docs.append(node)
                return
            parent = stack[-1]
            if parent.kind == "seq":
                parent.items.append(node)
            elif pending_key[-1] is None:
                pending_key[-1] = node
            else:
                key = pending_key[-1]
                assert key is not None
                parent.pairs.append((key, node))
                pending_key[-1] = None

        loader = _loader()(text)
        try:
            while True:
                event = loader.get_event()
                if event is None or isinstance(event, yaml.StreamEndEvent):
                    break
                if isinstance(event, yaml.DocumentStartEvent):
                    aliased = set()
                elif isinstance(event, yaml.DocumentEndEvent):
                    self.aliased.append(aliased)
                elif isinstance(event, yaml.ScalarEvent):
                    add(_Node("scalar", event))
                elif isinstance(event, yaml.AliasEvent):
                    aliased.add(event.anchor or "")
                    add(_Node("alias", event))
                elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                    node = _Node("map" if isinstance(event, yaml.MappingStartEvent) else "seq", event)
                    add(node)
                    stack.append(node)
                    pending_key.append(None)
                elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                    stack.pop().end = event.end_mark.index if event.end_mark else 0
                    pending_key.pop()
        except yaml.YAMLError as exc:
            raise YamlEditError(f"not valid YAML: {exc}") from None
        finally:
            loader.dispose()
        if style is None:
            self.eol = _eol(text)
            self.step, self.seq_offset = self._indentation()
        else:
            self.eol, self.step, self.seq_offset = style

    def _indentation(self) -> tuple[int, int]:
        """The file's indentation step and how far `- ` sits right of its key (0: not indented)."""
        steps: Counter[int] = Counter()
        offsets: Counter[int] = Counter()
        todo = list(self.docs)
        while todo:
            node = todo.pop()
            todo.extend(node.items)
            for key, value in node.pairs:
                todo.append(value)
                if value.kind == "map" and value.pairs and (not value.flow or _multiline_flow(self.text, value)):
                    first = value.pairs[0][0]
                    if first.line != key.line and first.col > key.col:
                        steps[first.col - key.col] += 1
                elif value.kind == "seq" and not value.flow and value.line != key.line and value.col >= key.col:
                    offsets[value.col - key.col] += 1
        step = steps.most_common(1)[0][0] if steps else 2
        offset = offsets.most_common(1)[0][0] if offsets else step
        return step, offset

    def content_end(self, node: _Node) -> int:
        """Where the node's own text ends: after its last character, not after the comments and
        blank lines a block collection's end mark includes."""
        while node.kind in ("map", "seq") and not node.flow:
            if node.kind == "map":
                key, value = node.pairs[-1]
                return max(self.content_end(key), self.content_end(value))
            node = node.items[-1]
        if node.kind == "scalar" and node.style in ("|", ">"):
            header = self.text[node.start:node.end].split("\n", 1)[0]
            if "+" not in header:  # clipped or stripped: trailing blank lines are not the value's
                return node.start + len(self.text[node.start:node.end].rstrip(" \t\r\n"))
        return node.end


def _eol(text: str) -> str:
    found = _LINE_BREAK.search(text)
    return found.group() if found else "\n"


def _line_end(text: str, pos: int) -> int | None:
    """The offset after the line break that ends the line `pos` is on (None: the last line has none)."""
    found = _LINE_BREAK.search(text, pos)
    return found.end() if found else None


def _multiline_flow(text: str, node: _Node) -> bool:
    return bool(node.pairs) and node.pairs[-1][0].line != node.line


# --- writing values --------------------------------------------------------------------------------

def _double_quoted(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif _PRINTABLE.fullmatch(ch) and ch != _BOM:
            out.append(ch)
        elif ord(ch) <= 0xFF:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _single_quoted(value: str) -> str | None:
    if any(not _PRINTABLE.fullmatch(ch) or ch in "\r\n" or ch == _BOM for ch in value):
        return None
    return "'" + value.replace("'", "''") + "'"


def _json(value: object, separators: tuple[str, str] = (", ", ": "), indent: int | None = None) -> str:
    out = json.dumps(value, ensure_ascii=False, separators=separators, indent=indent, allow_nan=False)
    if any(not _PRINTABLE.fullmatch(ch) and ch != "\n" for ch in out) or "\u2028" in out or "\u2029" in out:
        out = json.dumps(value, ensure_ascii=True, separators=separators, indent=indent, allow_nan=False)
    return out


def _scalar(value: object, flow: bool, style: str | None = None) -> str:
    """A YAML scalar for one line of block (`flow` False) or flow context. `style`: the quoting the
    value it replaces (or its siblings) use, kept where the value is a string that allows it."""
    import yaml

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        dumped: str = yaml.safe_dump([value], default_flow_style=True)
        return dumped.strip()[1:-1]
    assert isinstance(value, str)
    if style == '"':
        return _double_quoted(value)
    if style == "'":
        return _single_quoted(value) or _double_quoted(value)
    if any(not _PRINTABLE.fullmatch(ch) or ch in "\r\n" or ch == _BOM for ch in value):
        return _double_quoted(value)
    # PyYAML's emitter knows when plain is safe (`hw:cpu_policy` is, in block context; `'1024'`,
    # `'true'`, `'- x'` are not): a list item is a context as strict as a key's.
    dumped = yaml.safe_dump([value], default_flow_style=flow, allow_unicode=True, width=2**30)
    line = dumped.rstrip("\n")
    line = line[1:-1] if flow else line[2:]
    if "\n" in line or not line:
        return _double_quoted(value)
    return line


def _chosen_quotes(node: _Node) -> str | None:
    """The quotes a scalar is written with where plain would have read the same: the file's style,
    which a new sibling follows (`"hw:cpu_policy": "dedicated"`), unlike `'1024'` which is quoted
    because it has to be."""
    if node.kind != "scalar" or node.style not in ("'", '"'):
        return None
    return node.style if _scalar(node.value, False)[:1] not in ("'", '"') else None


def _flow(value: object, json_style: bool, separators: tuple[str, str] = (", ", ": ")) -> str:
    if json_style:
        return _json(value, separators)
    if isinstance(value, dict):
        return "{" + separators[0].join(f"{_scalar(k, True)}{separators[1]}{_flow(v, False, separators)}"
                                        for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + separators[0].join(_flow(v, False, separators) for v in value) + "]"
    return _scalar(value, True)


def _block(value: object, col: int, step: int, seq_offset: int, style: str | None = None) -> str | list[str]:
    """`value` as the value of a key (or list item) whose children sit at column `col`: one
    inline text, or the lines of a block collection (each with its indentation)."""
    if isinstance(value, dict) and value:
        lines: list[str] = []
        for key, item in value.items():
            child_col = col + (step if isinstance(item, dict) else seq_offset)
            rendered = _block(item, child_col, step, seq_offset)
            if isinstance(rendered, str):
                lines.append(f"{' ' * col}{_scalar(key, False)}: {rendered}")
            else:
                lines.append(f"{' ' * col}{_scalar(key, False)}:")
                lines.extend(rendered)
        return lines
    if isinstance(value, list | tuple) and value:
        lines = []
        for item in value:
            rendered = _block(item, col + 2, step, seq_offset)
            if isinstance(rendered, str):
                lines.append(f"{' ' * col}- {rendered}")
            else:
                lines.append(f"{' ' * col}- {rendered[0][col + 2:]}")
                lines.extend(rendered[1:])
        return lines
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return _scalar(value, False, style)


# --- planning the splices of one edit --------------------------------------------------------------

Splice = tuple[int, int, str]


class _Planner:
    def __init__(self, tree: _Tree, doc: int) -> None:
        self.tree = tree
        self.text = tree.text
        self.aliased = tree.aliased[doc]
        self.root = tree.docs[doc]
        self.json_doc = self.root.flow and self.root.kind == "map" and all(
            key.style == '"' for key, _ in self.root.pairs)

    def plan(self, path: Path, value: object) -> tuple[list[Splice], list[tuple[Path, object]]]:
        """The splices of the edit, or (when a mapping merges into a mapping) the edits of its keys."""
        node, parent, key_node, in_flow = self.root, None, None, False
        if node.kind not in ("map", "seq"):
            raise self._error("the document is not a mapping or a list: not edited", node)
        for depth, step in enumerate(path):
            self._refuse_shared(node, path[:depth])
            if isinstance(step, int):
                if node.kind != "seq":
                    raise self._error(f"{_dotted(path[:depth])} is not a list", node)
                if not 0 <= step < len(node.items):
                    raise self._error(f"{_dotted(path[:depth + 1])}: no such list item ({len(node.items)} in the "
                                      "list; lists are not extended)", node)
                in_flow = in_flow or node.flow
                parent, key_node, node = node, None, node.items[step]
                continue
            if node.kind == "scalar":
                if not self._null(node):
                    raise self._error(f"{_dotted(path[:depth])} is a value, not a mapping: not replaced", node)
                return self._assign(node, parent, key_node, in_flow, _nest(path[depth:], value, path)), []
            if node.kind != "map":
                raise self._error(f"{_dotted(path[:depth])} is a list, not a mapping", node)
            found = self._find(node, step, path[:depth + 1])
            in_flow = in_flow or node.flow
            if found is None:
                return self._add(node, step, _nest(path[depth + 1:], value, path)), []
            parent, (key_node, node) = node, found
        self._refuse_shared(node, path)
        if isinstance(value, dict):
            if node.kind == "map":
                return [], [((*path, key), item) for key, item in value.items()]
            if not self._null(node):
                raise self._error(f"{_dotted(path)} is a {'list' if node.kind == 'seq' else 'value'}, not a mapping:"
                                  " not replaced", node)
        if parent is None:
            raise self._error("replacing a whole document: not supported", node)
        return self._assign(node, parent, key_node, in_flow, value), []

    # refusals
    def _error(self, message: str, node: _Node) -> YamlEditError:
        return YamlEditError(message, None, node.line)

    def _refuse_shared(self, node: _Node, where: Path) -> None:
        if node.kind == "alias":
            raise self._error(f"{_dotted(where)} is an alias (*{node.anchor}): edit the anchored node itself", node)
        if node.anchor is not None and node.anchor in self.aliased:
            raise self._error(f"{_dotted(where)} is anchored (&{node.anchor}) and used again by an alias: an edit "
                              "would change both places", node)

    def _find(self, node: _Node, key: str, where: Path) -> tuple[_Node, _Node] | None:
        merged = False
        for key_node, value_node in node.pairs:
            if key_node.kind != "scalar":
                continue
            tag = _scalar_tag(key_node)
            if tag == "tag:yaml.org,2002:merge":
                merged = True
            elif key_node.value == key:
                if tag != "tag:yaml.org,2002:str":
                    raise self._error(f"{_dotted(where)}: the key is written as a {tag.rsplit(':', 1)[-1]}, not "
                                      "a string", key_node)
                return key_node, value_node
        if merged:
            raise self._error(f"{_dotted(where)}: the mapping takes keys from a merge key (<<): not edited", node)
        return None

    def _null(self, node: _Node) -> bool:
        return node.kind == "scalar" and _scalar_tag(node) == "tag:yaml.org,2002:null"

    # adding a key to an existing mapping
    def _add(self, node: _Node, key: str, value: object) -> list[Splice]:
        if node.flow:
            return self._add_flow(node, key, value)
        tree = self.tree
        last_key, last_value = node.pairs[-1]
        col = node.pairs[0][0].col
        key_style = _chosen_quotes(last_key)
        value_style = _chosen_quotes(last_value)
        key_text = _scalar(key, False, key_style)
        child_col = col + (tree.step if isinstance(value, dict) else tree.seq_offset)
        rendered = _block(value, child_col, tree.step, tree.seq_offset, value_style if isinstance(value, str) else None)
        lines = [f"{' ' * col}{key_text}: {rendered}"] if isinstance(rendered, str) else [
            f"{' ' * col}{key_text}:", *rendered]
        return [self._insert_lines(tree.content_end(node), lines)]

    def _insert_lines(self, pos: int, lines: list[str]) -> Splice:
        """Lines inserted after the line `pos` is on."""
        eol = self.tree.eol
        at = _line_end(self.text, pos)
        if at is None:  # the last line has no line break: neither will the file
            return (len(self.text), len(self.text), "".join(eol + line for line in lines))
        return (at, at, "".join(line + eol for line in lines))

    def _add_flow(self, node: _Node, key: str, value: object) -> list[Splice]:
        text, eol = self.text, self.tree.eol
        json_style = self._json_style(node)
        if not node.pairs:  # `{}` becomes `{key: value}`
            return [(node.start, node.end, _flow({key: value}, json_style))]
        key_sep, item_sep = self._separators(node)
        key_text = _json(key) if json_style else _scalar(key, True)
        last_key, last_value = node.pairs[-1]
        pos = max(self.tree.content_end(last_value), last_key.end)
        after = _after_blanks(text, pos)
        brace = node.end - 1
        trailing_comma = after < brace and text[after] == ","  # `{a: 1,}`: the new entry gets one too
        if not _multiline_flow(text, node):
            rendered = _flow(value, json_style, ("," + item_sep, key_sep))
            if trailing_comma:
                return [(after + 1, after + 1, f"{item_sep}{key_text}{key_sep}{rendered},")]
            return [(pos, pos, f",{item_sep}{key_text}{key_sep}{rendered}")]
        # one entry a line (pretty JSON): a line of its own at the column of the last key
        col = last_key.col
        if json_style and isinstance(value, dict) and value:
            rendered = _json(value, (",", key_sep), self.tree.step).replace("\n", eol + " " * col)
        else:
            rendered = _flow(value, json_style, (", ", key_sep))
        entry = f"{' ' * col}{key_text}{key_sep}{rendered}"
        if trailing_comma:
            at = _line_end(text, after)
            if at is not None and at <= brace:
                return [(at, at, entry + "," + eol)]
            return [(after + 1, after + 1, eol + entry + ",")]
        at = _line_end(text, pos)
        if at is not None and at <= brace:  # after the last entry's line, keeping a comment on it
            return [(at, at, entry + eol), (pos, pos, ",")]
        return [(pos, pos, "," + eol + entry)]

    def _json_style(self, node: _Node) -> bool:
        if node.pairs:
            return all(key.kind == "scalar" and key.style == '"' for key, _ in node.pairs)
        return self.json_doc

    def _separators(self, node: _Node) -> tuple[str, str]:
        """The spacing after ':' and after ',' this flow mapping uses (`": "`, `", "`)."""
        text = self.text
        key, value = node.pairs[0]
        key_sep = text[key.end:value.start] if value.start > key.end else ": "
        if not re.fullmatch(r"[ \t]*:[ \t]*", key_sep):
            key_sep = ": "
        item_sep = " "
        if len(node.pairs) > 1:
            between = text[self.tree.content_end(value):node.pairs[1][0].start]
            found = re.fullmatch(r"[ \t]*,([ \t]*)", between)
            if found:
                item_sep = found.group(1)
        return key_sep, item_sep if not _multiline_flow(text, node) else " "

    # replacing a value
    def _assign(self, node: _Node, parent: _Node | None, key_node: _Node | None, in_flow: bool,
                value: object) -> list[Splice]:
        tree, text = self.tree, self.text
        end = tree.content_end(node)
        style = node.style if node.kind == "scalar" and isinstance(value, str) else None
        if in_flow:
            if self.json_doc or (parent is not None and parent.kind == "map" and self._json_style(parent)):
                inline = _json(value)
            elif isinstance(value, dict | list | tuple):
                inline = _flow(value, False)
            else:
                inline = _scalar(value, True, style)
            return [(node.start, end, inline)]
        if parent is not None and parent.kind == "map":
            assert key_node is not None
            colon = _after_blanks(text, tree.content_end(key_node))
            if text[colon:colon + 1] != ":":
                raise self._error("a complex (`? key`) mapping key: not edited", key_node)
            child_col = key_node.col + (tree.step if isinstance(value, dict) else tree.seq_offset)
            rendered = _block(value, child_col, tree.step, tree.seq_offset, style)
            if isinstance(rendered, str):
                if node.kind == "scalar" and colon < node.start < node.end:  # its bytes, not the space before
                    return [(node.start, end, rendered)]
                return [(colon + 1, end, " " + rendered)]
            # a block below the key; what stood after the colon (`null`, `~`, a flow value) goes
            splices = [self._insert_lines(max(end, colon + 1), rendered)]
            if end > colon + 1:
                splices.append((colon + 1, end, ""))
            return splices
        # a block list's item: the value starts where the item did, after its `- ` (an empty item's
        # null is right after the `-`, and the value needs the space a `- ` has)
        lead = " " if node.start == node.end and text[node.start - 1:node.start] not in (" ", "\t") else ""
        col = node.col + len(lead)
        rendered = _block(value, col, tree.step, tree.seq_offset, style)
        if isinstance(rendered, str):
            return [(node.start, end, lead + rendered)]
        return [(node.start, end, lead + tree.eol.join([rendered[0][col:], *rendered[1:]]))]


def _after_blanks(text: str, pos: int) -> int:
    """The first offset at or after `pos` that is not a space, tab, line break or comment."""
    while pos < len(text):
        ch = text[pos]
        if ch in " \t\r\n":
            pos += 1
        elif ch == "#":
            found = _LINE_BREAK.search(text, pos)
            pos = found.start() if found else len(text)
        else:
            break
    return pos


def _nest(keys: Path, value: object, path: Path) -> object:
    """{k1: {k2: value}} for the keys of a path that do not exist yet."""
    for key in reversed(keys):
        if isinstance(key, int):
            raise YamlEditError(f"{_dotted(path)}: list item {key} does not exist (lists are not extended)")
        value = {key: value}
    return value


_RESOLVER: Any = None


def _scalar_tag(node: _Node) -> str:
    """The tag PyYAML's safe loader gives the scalar (`tag:yaml.org,2002:str`, `…:int`, `…:null`)."""
    import yaml

    global _RESOLVER
    if node.tag not in (None, "!"):
        return node.tag or ""
    if _RESOLVER is None:
        _RESOLVER = yaml.resolver.Resolver()
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, node.value, node.implicit)
    return tag
