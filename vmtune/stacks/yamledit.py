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
again (the edit would change both places), a key missing from a mapping with a merge key (`<<`), a
list index out of range (lists are never extended), a non-null scalar where a mapping is
needed, a file larger than MAX_BYTES.

Offsets: PyYAML's marks count characters of the decoded text, so the text is decoded (UTF-8,
a BOM kept aside), edited as a str and encoded back. Positions come from PyYAML's events, not
its composer, which would hide an alias behind the node it names.

Cost: edits that cannot see each other (none is below another's path, their bytes do not
touch) are planned on one parse and verified with one more; the rest wait for the next round.
Fixes for every VM of a kubectl List are two parses of the file, not two per fix.

Known limits (refused or kept simple, never guessed): a whole document is never replaced; a
mapping given for a list or a non-null value is refused; new keys in a flow mapping are
written in flow style (a `{}` becomes `{key: value}` on its line, even in pretty JSON); a value
that replaces a block collection drops the comments inside it; an unused anchor or a tag on a
replaced value goes with it; keys are found by their text (a `80:` or `yes:` key, which YAML 1.1
reads as a number or a boolean, is refused, not matched); explicit `? key` entries are refused.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from vmtune.errors import VmtuneError

MAX_BYTES = 4 * 1024 * 1024  # sources.MAX_INPUT_BYTES: the largest file vmtune reads at all

MAX_KEY = 1024  # YAML reads a longer key only as an explicit `? key`; none of the stacks' keys is
Path = tuple[str | int, ...]
Edit = tuple[int, Path, object]

_BOM = "\ufeff"
# What PyYAML's reader accepts unescaped; the other characters of a string are written escaped.
_PRINTABLE = re.compile("[\x09\x0a\x0d\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_LINE_BREAK = re.compile("\r\n|\r|\n")
_MISSING = object()
_QUOTED = re.compile(r"""\s*(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


class YamlEditError(VmtuneError):
    """An edit that cannot be made without guessing, or whose result would not hold what was asked."""


def set_paths(data: bytes, edits: Sequence[tuple[int, tuple[str | int, ...], object]],
              name: str | None = None) -> bytes:
    """`data` with the edits applied in order (as if each saw the text the previous ones left).
    `name`: the file's name, which a YamlEditError names (with the line, where there is one)."""
    try:
        return _set_paths(data, edits)
    except YamlEditError as exc:
        exc.source = exc.source or name
        raise


def _set_paths(data: bytes, edits: Sequence[tuple[int, tuple[str | int, ...], object]]) -> bytes:
    if len(data) > MAX_BYTES:
        raise YamlEditError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not edited")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlEditError("not UTF-8: not edited") from None
    bom = text.startswith(_BOM)
    if bom:
        text = text[1:]
    pending: list[Edit] = []
    for doc, path, value in edits:
        _check_value(value)
        _check_value({key: None for key in path if not isinstance(key, int)})
        pending.append((doc, tuple(path), value))
    try:
        docs = _load_all(text)
        while pending:
            try:
                text, docs, pending = _round(text, docs, pending, batch=True)
            except _Unproven:  # which edit? the same edits one by one say it
                while pending:
                    text, docs, pending = _round(text, docs, pending, batch=False)
    except RecursionError:
        raise YamlEditError("nested too deeply to edit") from None
    return ((_BOM if bom else "") + text).encode("utf-8")


class _Unproven(Exception):
    """A round of several edits did not read back as intended."""


def _round(text: str, docs: list[Any], pending: list[Edit], batch: bool) -> tuple[str, list[Any], list[Edit]]:
    """Apply the edits that can be planned on one parse of the text (all of them, usually), verify
    the result, and return the edits left for the next round.

    Re-parsing after each edit would cost one parse of the file per edit (a kubectl List of 500
    VMs with three fixes each: 1,500 parses of a megabyte). An edit waits for the next round only
    when it could see what an edit of this round changes: its path and one edited in this round
    are one below the other, or its bytes touch bytes this round changes (two new keys for one
    flow mapping), except new keys appended to one block mapping, which simply follow each other."""
    tree: _Tree | None = None
    planners: dict[int, _Planner] = {}
    expected = list(docs)
    splices: list[_Splice] = []
    edited: list[tuple[int, Path]] = []
    creating: list[tuple[int, Path]] = []  # keys this round adds that did not exist (with their path)
    deferred: list[Edit] = []
    queue = list(pending)
    while queue:
        doc, path, value = queue.pop(0)
        if not 0 <= doc < len(docs):
            raise YamlEditError(f"no document {doc} (the file has {len(docs)})")
        created = _first_missing(docs[doc], path)  # the key this edit adds to the text, if any
        if any(d == doc and _related(p, path) for d, p in edited) or any(
                d == doc and _related(p, path) for d, p, _v in deferred) or (edited and not batch) or any(
                d == doc and _related(c, path) for d, c in creating):
            deferred.append((doc, path, value))
            continue
        if tree is None:
            tree = _Tree(text)
        planner = planners.get(doc) or planners.setdefault(doc, _Planner(tree, doc))
        try:
            if _holds(expected[doc], path, value):
                continue  # already holds it: the bytes stay as written
            new_doc = _set_in(expected[doc], path, value)
        except YamlEditError:  # a list index out of range: the planner says where
            planner.plan(path, value)
            raise
        planned, more = planner.plan(path, value)
        if more:  # a mapping merged into a mapping: its keys, in order
            queue[:0] = [(doc, p, v) for p, v in more]
            continue
        merged = _merge_splices(splices, planned)
        if merged is None:
            deferred.append((doc, path, value))
            continue
        splices = merged
        expected[doc] = new_doc
        edited.append((doc, path))
        if created is not None:  # a sibling below the same new key waits: both would write that key
            creating.append((doc, created))
    if not edited:
        if deferred:  # cannot happen: the first edit of a round always gets in
            raise YamlEditError(f"setting {_dotted(deferred[0][1])}: no way to make the edit found")
        return text, docs, deferred
    pieces, at = [], 0
    for splice in splices:  # in order, none overlapping: one copy of the text, not one per edit
        pieces += [text[at:splice.start], splice.text]
        at = splice.end
    new_text = "".join([*pieces, text[at:]])
    try:
        new_docs = _load_all(new_text)
    except YamlEditError as exc:
        if len(edited) > 1:
            raise _Unproven from None
        raise YamlEditError(f"setting {_dotted(edited[0][1])} would not give valid YAML ({exc.message}): not edited",
                            None, exc.line) from None
    if len(new_docs) != len(expected) or not all(_equal(new, old) for new, old in zip(new_docs, expected,
                                                                                    strict=True)):
        if len(edited) > 1:
            raise _Unproven
        raise YamlEditError(f"setting {_dotted(edited[0][1])} would change more than it: not edited")
    return new_text, new_docs, deferred


def _first_missing(data: object, path: Path) -> Path | None:
    """The path of the first key along `path` that the data lacks, or None when all exist.
    Two edits below one missing key (`clock.utc` and `clock.timer`, no `clock` yet) would both
    write `clock:` in one round: the second waits for the next, which sees the first's."""
    current = data
    for i, key in enumerate(path):
        if isinstance(key, int):
            if not isinstance(current, list) or not 0 <= key < len(current):
                return None  # an index out of range: the planner refuses it
            current = current[key]
        elif isinstance(current, dict) and key in current:
            current = current[key]
        else:
            return path[:i + 1] if i + 1 < len(path) else None  # the last key alone is a plain addition
    return None


def _related(a: Path, b: Path) -> bool:
    """One path is the other or below it."""
    return a[:len(b)] == b or b[:len(a)] == a


class _Splice:
    """Text that replaces [start, end) of the text. `group`: the block mapping whose new keys it
    appends, so that two new keys of one mapping can be inserted at one place, in order."""

    __slots__ = ("end", "group", "start", "text")

    def __init__(self, start: int, end: int, text: str, group: int | None = None) -> None:
        self.start, self.end, self.text, self.group = start, end, text, group


def _merge_splices(splices: list[_Splice], new: list[tuple[int, int, str, int | None]]) -> list[_Splice] | None:
    """`splices` (in order of position) with `new` added, or None where they touch those already
    there (the edit waits for the next round). One edit's own splices never touch each other."""
    result = list(splices)
    starts = [splice.start for splice in splices]
    for start, end, text, group in sorted(new, key=lambda n: n[0]):
        index = bisect.bisect_left(starts, start)
        touching = [index - 1] if index and splices[index - 1].end >= start else []
        while index < len(splices) and splices[index].start <= end:
            touching.append(index)
            index += 1
        if not touching:
            result.append(_Splice(start, end, text, group))
            continue
        other = splices[touching[0]]
        if len(touching) > 1 or group is None or group != other.group or not start == end == other.start == other.end:
            return None
        result[touching[0]] = _Splice(start, end, other.text + text, group)  # new keys of one mapping, in order
    result.sort(key=lambda splice: (splice.start, splice.end))
    return result


def _holds(current: object, path: Path, value: object) -> bool:
    """The data already holds `value` at `path` (a mapping: every key of it, recursively)."""
    for key in path:
        if isinstance(key, int):
            if not isinstance(current, list) or not 0 <= key < len(current):
                return False
            current = current[key]
        elif isinstance(current, dict) and key in current:
            current = current[key]
        else:
            return False
    return _equal(_merged(current, value), current)


def _load_all(text: str) -> list[Any]:
    import yaml

    try:
        return list(yaml.load_all(text, Loader=_loader()))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # PyYAML's words without what it quotes of the file (an anchor's name, a character): errors
        # never echo the file (as vmtune.stacks.yamldoc)
        problem = _QUOTED.sub(lambda m: m.group() if re.fullmatch(r"'[,\[\]{}:?-]'", m.group().strip()) else "",
                              exc.problem or exc.context or "")
        raise YamlEditError(f"not valid YAML: {problem.strip()}", None, mark.line + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:
        line = text[:exc.position].count("\n") + 1
        raise YamlEditError("not valid YAML: a control character YAML does not allow", None, line) from None
    except yaml.YAMLError as exc:
        raise YamlEditError(f"not valid YAML: {str(exc).splitlines()[0] if str(exc) else ''}") from None


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
            if len(key) > MAX_KEY:
                raise YamlEditError(f"a key longer than {MAX_KEY} characters (YAML's limit for a key on one line)")
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


def _dotted(path: Path) -> str:
    """The path as a field name (`spec.domain.devices.disks[1].cache`), each key at most 40 characters."""
    def short(key: str) -> str:
        return key if len(key) <= 40 else key[:40] + "…"

    return "".join(f"[{key}]" if isinstance(key, int) else f".{short(key)}" for key in path).lstrip(".") or "(root)"


# --- the text's structure, with positions ----------------------------------------------------------

class _Node:
    """One node as the parser saw it: where it starts and ends (character offsets), its style."""

    __slots__ = ("anchor", "col", "end", "flow", "implicit", "items", "kind", "line", "pairs", "pending", "start",
                 "style", "tag", "value")

    def __init__(self, kind: str, event: Any, flow: bool = False) -> None:
        mark = event.start_mark
        self.kind = kind  # "map" | "seq" | "scalar" | "alias"
        self.start: int = mark.index
        self.end: int = event.end_mark.index
        self.line: int = mark.line + 1
        self.col: int = mark.column
        self.anchor: str | None = event.anchor
        self.flow = flow
        self.pending: _Node | None = None  # a mapping's key whose value comes next
        if kind in ("map", "seq"):
            self.pairs: list[tuple[_Node, _Node]] = []
            self.items: list[_Node] = []
        else:  # the one shared empty list: a scalar never gets children
            self.pairs, self.items = _NO_PAIRS, _NO_ITEMS
        if kind == "scalar":
            self.tag: str | None = event.tag
            self.style: str | None = event.style or None
            self.value: str = event.value
            self.implicit: tuple[bool, bool] = event.implicit
        else:
            self.tag = getattr(event, "tag", None)
            self.style, self.value, self.implicit = None, "", (True, False)


_NO_PAIRS: list[tuple[_Node, _Node]] = []
_NO_ITEMS: list[_Node] = []


class _Tree:
    """The documents of a text as _Nodes, from PyYAML's events (its composer would hide aliases:
    an alias is the very node it names, with that node's positions)."""

    def __init__(self, text: str) -> None:
        import yaml

        self.text = text
        self.docs: list[_Node] = []
        self.aliased: list[set[str]] = []  # per document: the anchors some alias names
        stack: list[_Node] = []
        aliased: set[str] = set()
        scalar, alias = yaml.ScalarEvent, yaml.AliasEvent
        mapping, sequence = yaml.MappingStartEvent, yaml.SequenceStartEvent
        ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
        loader = _loader()(text)
        get_event = loader.get_event
        try:
            while True:
                event = get_event()
                kind = type(event)
                if kind is scalar:
                    node = _Node("scalar", event)
                elif kind is mapping or kind is sequence:
                    node = _Node("map" if kind is mapping else "seq", event, bool(event.flow_style))
                elif kind in ends:
                    stack.pop().end = event.end_mark.index
                    continue
                elif kind is alias:
                    aliased.add(event.anchor or "")
                    node = _Node("alias", event)
                elif kind is yaml.DocumentStartEvent:
                    aliased = set()
                    continue
                elif kind is yaml.DocumentEndEvent:
                    self.aliased.append(aliased)
                    continue
                elif event is None or kind is yaml.StreamEndEvent:
                    break
                else:
                    continue
                if stack:
                    parent = stack[-1]
                    if parent.kind == "seq":
                        parent.items.append(node)
                    elif parent.pending is None:
                        parent.pending = node
                    else:
                        parent.pairs.append((parent.pending, node))
                        parent.pending = None
                else:
                    self.docs.append(node)
                if node.kind in ("map", "seq"):
                    stack.append(node)
        except yaml.YAMLError:
            raise YamlEditError("not valid YAML") from None
        finally:
            loader.dispose()
        self.eol = _eol(text)
        self.step, self.seq_offset = self._indentation()

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
        elif _PRINTABLE.fullmatch(ch) and ch not in (_BOM, "\u2028", "\u2029"):
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
    try:
        out = json.dumps(value, ensure_ascii=False, separators=separators, indent=indent, allow_nan=False)
    except ValueError:
        raise YamlEditError("JSON has no NaN or infinity: not written") from None
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


def _sibling_quotes(nodes: Sequence[_Node]) -> str | None:
    """The quotes the file writes these strings with where plain would have read the same (the
    last one that tells): its style, which a new sibling follows (`"hw:cpu_policy": "dedicated"`).
    `'1024'` tells nothing: it is quoted because it has to be."""
    for node in reversed(nodes):
        if node.kind != "scalar" or node.style in ("|", ">") or _scalar_tag(node) != "tag:yaml.org,2002:str":
            continue
        if node.style is None:
            return None
        if _scalar(node.value, False)[:1] not in ("'", '"'):
            return node.style
    return None


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

Splice = tuple[int, int, str, int | None]  # start, end, text, group (see _Splice)


class _Planner:
    def __init__(self, tree: _Tree, doc: int) -> None:
        self.tree = tree
        self.text = tree.text
        self.aliased = tree.aliased[doc]
        self.root = tree.docs[doc]
        self.json_doc = self.root.flow and _all_keys_double_quoted(self.root)

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
            raise self._error(f"{_dotted(where)} is an alias (*): edit the anchored node itself", node)
        if node.anchor is not None and node.anchor in self.aliased:
            raise self._error(f"{_dotted(where)} is anchored (&) and used again by an alias: an edit "
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
                    word = _KEY_TYPES.get(tag.rsplit(":", 1)[-1], "of another type")
                    raise self._error(f"{_dotted(where)}: the key in the file is {word}, not a string", key_node)
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
        col = node.pairs[0][0].col
        key_style = _sibling_quotes([k for k, _ in node.pairs])
        value_style = _sibling_quotes([item for _, item in node.pairs]) if isinstance(value, str) else None
        key_text = _scalar(key, False, key_style)
        child_col = col + (tree.step if isinstance(value, dict) else tree.seq_offset)
        rendered = _block(value, child_col, tree.step, tree.seq_offset, value_style)
        lines = [f"{' ' * col}{key_text}: {rendered}"] if isinstance(rendered, str) else [
            f"{' ' * col}{key_text}:", *rendered]
        return [self._insert_lines(tree.content_end(node), lines, id(node))]

    def _insert_lines(self, pos: int, lines: list[str], group: int | None = None) -> Splice:
        """Lines inserted after the line `pos` is on."""
        eol = self.tree.eol
        at = pos if pos and self.text[pos - 1] in "\r\n" else _line_end(self.text, pos)  # after `|+`
        if at is None:  # the last line has no line break: neither will the file
            return (len(self.text), len(self.text), "".join(eol + line for line in lines), group)
        return (at, at, "".join(line + eol for line in lines), group)

    def _add_flow(self, node: _Node, key: str, value: object) -> list[Splice]:
        text, eol = self.text, self.tree.eol
        json_style = self._json_style(node)
        if not node.pairs:  # `{}` becomes `{key: value}`
            return [(node.start, node.end, _flow({key: value}, json_style), None)]
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
                return [(after + 1, after + 1, f"{item_sep}{key_text}{key_sep}{rendered},", id(node))]
            return [(pos, pos, f",{item_sep}{key_text}{key_sep}{rendered}", id(node))]
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
                return [(at, at, entry + "," + eol, None)]
            return [(after + 1, after + 1, eol + entry + ",", None)]
        at = _line_end(text, pos)
        if at is not None and at <= brace:  # after the last entry's line, keeping a comment on it
            return [(at, at, entry + eol, None), (pos, pos, ",", None)]
        return [(pos, pos, "," + eol + entry, None)]

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
            if node.start == node.end and key_node is not None:  # `{a: , b: 1}` or `{a, b: 1}`: a null
                key_end = tree.content_end(key_node)
                colon = text.find(":", key_end, max(node.start, key_end))
                if colon < 0:
                    return [(key_end, key_end, ": " + inline, None)]
                if text[colon + 1:colon + 2] in (" ", "\t"):  # `a: ,`: after the space
                    return [(colon + 2, colon + 2, inline, None)]
                return [(colon + 1, colon + 1, " " + inline, None)]
            return [(node.start, end, inline, None)]
        if parent is not None and parent.kind == "map":
            assert key_node is not None
            colon = _after_blanks(text, tree.content_end(key_node))
            if text[colon:colon + 1] != ":":
                raise self._error("a complex (`? key`) mapping key: not edited", key_node)
            child_col = key_node.col + (tree.step if isinstance(value, dict) else tree.seq_offset)
            rendered = _block(value, child_col, tree.step, tree.seq_offset, style)
            if isinstance(rendered, str):
                if node.kind == "scalar" and colon < node.start < node.end:  # its bytes, not the space before
                    return [(node.start, end, rendered, None)]
                return [(colon + 1, end, " " + rendered, None)]
            # a block below the key; what stood after the colon (`null`, `~`, a flow value) goes
            splices = [self._insert_lines(max(end, colon + 1), rendered)]
            if end > colon + 1:
                splices.append((colon + 1, end, "", None))
            return splices
        # a block list's item: the value starts where the item did, after its `- ` (an empty item's
        # null is right after the `-`, and the value needs the space a `- ` has)
        lead = " " if node.start == node.end and text[node.start - 1:node.start] not in (" ", "\t") else ""
        if node.start == node.end:  # `- ` and nothing: the value takes the place of the space
            blank = re.match(r"[ \t]*(?=\r|\n|$)", text[end:end + 256])
            end += len(blank.group()) if blank else 0
        col = node.col + len(lead)
        rendered = _block(value, col, tree.step, tree.seq_offset, style)
        if isinstance(rendered, str):
            return [(node.start, end, lead + rendered, None)]
        return [(node.start, end, lead + tree.eol.join([rendered[0][col:], *rendered[1:]]), None)]


def _all_keys_double_quoted(root: _Node) -> bool:
    """A JSON document (a flow mapping or list whose every key is "quoted"): what it gains is JSON too."""
    todo = [root]
    while todo:
        node = todo.pop()
        for key, value in node.pairs:
            if key.style != '"':
                return False
            todo.append(value)
        todo.extend(node.items)
    return True


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
_KEY_TYPES = {"int": "a number", "float": "a number", "bool": "true or false", "null": "null", "timestamp": "a date"}


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
