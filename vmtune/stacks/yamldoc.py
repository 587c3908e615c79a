"""YAML and JSON documents with the line of every node: what the stack front ends read.

Manifests, flavor listings and Ansible tasks come from strangers' pull requests, so loading is
bounded: the input size (sources.MAX_INPUT_BYTES), the nesting depth, the number of nodes an
alias may expand to (a "billion laughs" document stops at NODE_BUDGET, not at the memory
limit), duplicate keys (YAML forbids them; PyYAML keeps the last silently, which would hide
the setting a reviewer reads). Every error is one line naming the file and line.

A `Node` keeps the plain value (dicts in key order, lists, scalars as PyYAML's safe loader
types them) and where it was written, so a finding can point at the line of the field to
change, or of the mapping a missing field belongs in.

Two readers make the same Nodes: the native one (vmtune/stacks/_yamlnodes.c, when built) for
the common shape of a manifest, small files only, and the full loader (PyYAML's composer, then
_Converter) for everything it declines and for every error. tests/test_yamlnodes.py holds them
equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vmtune.errors import VmtuneError

# Nodes one file may expand to, aliases counted each time they are used. The largest real
# inputs (a 2,000-flavor listing, a kubectl List of 500 VMs) have ~10^5; an alias bomb 10^9.
NODE_BUDGET = 2_000_000
# Text an alias may repeat, all aliases of a file together (as much as a file holds): nodes alone
# do not bound it, and a 1 MiB name aliased by 1,000 VMs of a List (a 1 MiB file) rendered 1,000
# domains of a 1 MiB name each: 17 s and 2 GB.
ALIAS_TEXT_BUDGET = 4 * 1024 * 1024
MAX_DEPTH = 64  # KubeVirt's deepest field paths are ~15 levels; Ansible plays add ~5
# PyYAML composes a whole document before it can be counted, ~750 bytes a node: a 4 MiB file of
# one-character items is ~10^6 nodes, 0.7-1 GB and 5-7 s. A file this large is first read as a
# stream of parser events (constant memory, ~1 s a million) and refused beyond MAX_EVENTS,
# 2.5 times the largest real inputs (a kubectl List of 500 VMs: ~2x10^5 events).
COUNT_EVENTS_ABOVE = 512 * 1024  # characters
MAX_EVENTS = 500_000


class Node:
    """One YAML node: its plain value, its line (1-based), and for mappings and sequences its
    children as Nodes. `key_line` is the line of the key a mapping value belongs to."""

    __slots__ = ("children", "key_line", "line", "value")

    def __init__(self, value: Any, line: int, key_line: int, children: dict[str, Node] | list[Node] | None) -> None:
        self.value = value
        self.line = line
        self.key_line = key_line
        self.children = children

    def get(self, key: str | int) -> Node | None:
        children = self.children
        if isinstance(children, dict) and isinstance(key, str):
            return children.get(key)
        if isinstance(children, list) and isinstance(key, int) and 0 <= key < len(children):
            return children[key]
        return None

    def at(self, path: tuple[str | int, ...]) -> Node | None:
        node: Node | None = self
        for key in path:
            node = node.get(key) if node is not None else None
        return node

    def deepest(self, path: tuple[str | int, ...]) -> tuple[Node, int]:
        """The deepest node that exists along `path`, and how many steps of it exist."""
        node, depth = self, 0
        for key in path:  # Node.get inlined: placing a finding walks a path of ~6 keys
            children = node.children
            if isinstance(children, dict):
                child = children.get(key) if isinstance(key, str) else None
            elif isinstance(children, list) and isinstance(key, int):
                child = children[key] if 0 <= key < len(children) else None
            else:
                child = None
            if child is None:
                break
            node, depth = child, depth + 1
        return node, depth

    def items(self) -> Iterator[tuple[str, Node]]:
        if isinstance(self.children, dict):
            yield from self.children.items()

    def __repr__(self) -> str:
        return f"Node(line={self.line}, value={self.value!r})"


class Doc:
    """One document of a file: its position among the file's documents, and its root node."""

    __slots__ = ("index", "plain", "root", "source")

    def __init__(self, source: str, index: int, root: Node, plain: list[str] | None = None) -> None:
        self.source = source
        self.index = index
        self.root = root
        # The texts of the file's plain values (not keys) that another YAML reader may type
        # otherwise (PLAIN_STARTS), all documents' in file order, when the native reader read it;
        # None: not known (the full loader read it), the text must be searched.
        self.plain = plain

    def __repr__(self) -> str:
        return f"Doc({self.source!r}, {self.index})"


def _looks_templated(text: str) -> bool:
    return "{{" in text or "{%" in text


class TemplatedYaml(VmtuneError):
    """A file that is a template of YAML, not YAML: --skip-non-domain skips it with one line."""


def _error(message: str, name: str, line: int | None, text: str) -> VmtuneError:
    if _looks_templated(text):
        return TemplatedYaml("templated YAML (Helm, Jinja) is not YAML: render it first (helm template …)",
                             name, line)
    return VmtuneError(message, name, line)


def load(data: bytes, name: str) -> list[Doc]:
    """The documents of a YAML or JSON file (JSON is YAML), each with a line for every node."""
    # ASCII (nearly every manifest) is UTF-8 of as many characters and no BOM: the text is made
    # only when the native reader declines the file
    text = None if data.isascii() else _utf8(data, name)
    if len(data if text is None else text) > COUNT_EVENTS_ABOVE:
        text = data.decode("ascii") if text is None else text
        _count_events(text, name)
    else:
        plain: list[str] = []
        roots = _read_natively(data, plain)
        if roots is not None:
            return [Doc(name, index, root, plain) for index, root in enumerate(roots)]
    return _load(data.decode("ascii") if text is None else text, name)


def _utf8(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise VmtuneError("not UTF-8: YAML and JSON files must be UTF-8", name, line) from None


def _load(text: str, name: str) -> list[Doc]:
    """load() through PyYAML's composer: every file the native reader declines, and every error."""
    import yaml

    deep_at = _crash_depth_line(text)
    if deep_at is not None:
        raise VmtuneError(f"nested deeper than {MAX_DEPTH} levels: not a manifest vmtune reads", name, deep_at)
    loader = _loader_class()(text)
    converter = _Converter(name, text)
    docs: list[Doc] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            docs.append(Doc(name, len(docs), converter.convert(node, 0, node.start_mark.line + 1)))
            # Aliases never cross documents, and a finished document's composed nodes are freed:
            # their ids may be reused by the next document's nodes, which must not be taken for them.
            converter.done.clear()
            converter.texts.clear()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at: int | None = mark.line + 1 if mark is not None else None
        problem = (exc.problem or exc.context or "not valid YAML").strip()
        lines = text.splitlines()
        if at is not None and 0 < at <= len(lines) and "\t" in lines[at - 1]:
            problem += " (YAML indents with spaces, never tabs)"
        raise _error(f"not valid YAML: {problem}", name, at, text) from None
    except yaml.reader.ReaderError as exc:  # a character YAML forbids: said with its line, not PyYAML's offset
        at = _offset_line(text, exc.position, loader)
        raise _error(f"not valid YAML: character #x{exc.character:04x} is not allowed ({exc.reason})", name, at,
                     text) from None
    except yaml.YAMLError as exc:
        raise _error(f"not valid YAML: {exc}", name, None, text) from None
    except RecursionError:
        raise VmtuneError(f"nested deeper than {MAX_DEPTH} levels: not a manifest vmtune reads", name) from None
    finally:
        loader.dispose()
    return docs


# PyYAML's C composer recurses once a level of nesting; libyaml before 0.2.6 (Debian 12's
# python3-yaml, any PyYAML built against such a libyaml) does not bound the nesting, and 100,000
# `[` (or `- `, `? `, `{a: `) crashed the process (SIGSEGV) before _Converter's MAX_DEPTH was
# reached. PyYAML's own wheels bundle a libyaml that refuses more than 1,000 levels; where the
# libyaml does not, the tokens are counted first, to the same 1,000 (the converter still refuses
# past MAX_DEPTH, with its line).
_COMPOSER_DEPTH = 1000
_UNBOUNDED_LIBYAML: bool | None = None


def _libyaml_unbounded() -> bool:
    """Whether PyYAML's C loader composes any depth (probed once: 1,001 `[`, parsed, not composed)."""
    global _UNBOUNDED_LIBYAML
    if _UNBOUNDED_LIBYAML is None:
        import yaml

        loader = getattr(yaml, "CSafeLoader", None)
        if loader is None:  # the pure-Python composer: Python's recursion limit, RecursionError
            _UNBOUNDED_LIBYAML = False
        else:
            depth = _COMPOSER_DEPTH + 1
            try:
                for _ in yaml.parse("[" * depth + "]" * depth, Loader=loader):
                    pass
                _UNBOUNDED_LIBYAML = True
            except yaml.YAMLError:
                _UNBOUNDED_LIBYAML = False
    return _UNBOUNDED_LIBYAML


def _crash_depth_line(text: str) -> int | None:
    """The line where collections first nest deeper than _COMPOSER_DEPTH, by libyaml's tokens,
    when PyYAML's C composer would recurse that deep unbounded; None otherwise."""
    if len(text) <= _COMPOSER_DEPTH or not _libyaml_unbounded():
        return None
    from vmtune.yamldepth import nesting_line  # here: only a text longer than the depth needs it

    return nesting_line(text, _COMPOSER_DEPTH)


def _offset_line(text: str, position: int, loader: Any) -> int:
    """The line of a reader error's position: libyaml's is a byte offset into the UTF-8 text,
    PyYAML's own reader's a character index."""
    import yaml

    if isinstance(loader, getattr(yaml, "CSafeLoader", ())):
        return text.encode("utf-8", "surrogatepass")[:position].count(b"\n") + 1
    return text[:position].count("\n") + 1


def _count_events(text: str, name: str) -> None:
    """Refuse a text of more than MAX_EVENTS parser events before it is composed; a text that is
    not YAML is left to the composer, which says where."""
    import yaml

    parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    events = 0
    try:
        while parser.check_event():
            parser.get_event()
            events += 1
            if events > MAX_EVENTS:
                raise VmtuneError(f"more than {MAX_EVENTS:,} YAML nodes and ends of collections: not read", name)
    except yaml.YAMLError:
        return
    finally:
        parser.dispose()


# Said without the tag: nothing of the file is echoed (a tag can be any text the author chose).
_UNKNOWN_TAG = "a YAML tag vmtune does not read (only YAML's standard types: no !!python/…, no custom tags)"
_STR_TAG = "tag:yaml.org,2002:str"
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
_MERGE_TAG = "tag:yaml.org,2002:merge"
# The tags plain scalars resolve to, by their text: manifests repeat the same keys and values
# ("name", "virtio", "true") file after file. Only short texts are kept, and the table is
# emptied when full, so what it holds stays small whatever the inputs.
_RESOLVED: dict[str, str] = {}
_RESOLVED_MAX = 8192
_RESOLVED_TEXT = 64
_LOADER: Any = None
# PyYAML's node classes, bound on first use (yaml is imported only when a YAML file is read).
_ScalarNode: Any = None
_MappingNode: Any = None
_SequenceNode: Any = None


def _loader_class() -> Any:
    """PyYAML's safe loader (libyaml's when built with it) whose tag resolution of plain scalars
    is remembered by text. SafeLoader has no path resolvers, so a scalar's tag depends only on
    its text and on whether it is plain: the remembered tag is the one PyYAML would give."""
    global _LOADER, _ScalarNode, _MappingNode, _SequenceNode
    if _LOADER is not None:
        return _LOADER
    import yaml

    _ScalarNode, _MappingNode, _SequenceNode = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if base.yaml_path_resolvers:  # pragma: no cover - PyYAML's SafeLoader has none
        _LOADER = base
        return base
    resolve = base.resolve
    scalar_node = yaml.ScalarNode

    class _Loader(base):  # type: ignore[misc,valid-type]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if kind is not scalar_node or not implicit[0]:
                return resolve(self, kind, value, implicit)
            tag = _RESOLVED.get(value)
            return _remember(self, value) if tag is None else tag

        # Path resolvers are what these two track, for each node libyaml composes; there are none.
        def descend_resolver(self, current_node: Any, current_index: Any) -> None:
            pass

        def ascend_resolver(self) -> None:
            pass

    _LOADER = _Loader
    return _Loader


def _remember(resolver: Any, text: str) -> str:
    """The tag PyYAML's resolver gives a plain scalar's text (implicit resolvers only: a plain
    scalar's tag depends on nothing else), remembered for texts up to _RESOLVED_TEXT characters."""
    import yaml

    return _kept(text, yaml.resolver.BaseResolver.resolve(resolver, _ScalarNode, text, (True, False)))


def _kept(text: str, tag: str) -> str:
    """`tag`, remembered in _RESOLVED as a plain scalar's, for texts up to _RESOLVED_TEXT
    characters; the table is emptied when full."""
    if len(text) <= _RESOLVED_TEXT:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[text] = tag
    return tag


# The native reader (vmtune/stacks/_yamlnodes.c): libyaml's events straight into Nodes for the
# common shape of a manifest; it declines (None) anything else, which _load then reads. False: not
# built (no compiler or libyaml headers at install), or turned off by NATIVE_VARIABLE.
NATIVE_VARIABLE = "VMTUNE_YAML_NATIVE"  # "0": always the full loader (tests compare the two)
_NATIVE: Any = None
_DECLINE = object()  # construct()'s answer for a value it cannot construct: the full loader says why


# PyYAML's implicit resolvers (yaml.resolver.Resolver, YAML 1.1), as the native reader and
# _resolve_plain use them without importing PyYAML (~12 ms of a one-manifest check). By a plain
# scalar's first character: the ones whose resolvers match only fixed words (bool, null, merge,
# value, yaml), which the native reader knows; and the number resolvers' (int, float,
# timestamp), with every character their expressions can match and the expressions themselves.
# A plain scalar that starts with another character, or holds a character its number resolvers
# cannot match, is a str (`2Gi`, `virtio`, `features`). tests/test_yamlnodes.py holds all of this
# equal to PyYAML's own table.
PLAIN_WORD_STARTS = "!&*<=FNOTYfnoty~"
PLAIN_NUMBER_CHARS = {
    "+-": "+-.0123456789:ABCDEFIN_abcdefinx",
    "0123456789": "\t +-.0123456789:ABCDEFINTZ_abcdefintx",
    ".": "+-.0123456789:AEFIN_aefin",
}
_FLOAT = ("tag:yaml.org,2002:float", "^(?:[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+][0-9]+)?\n                    "
          "|\\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?\n                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*\n"
          "                    |[-+]?\\.(?:inf|Inf|INF)\n                    |\\.(?:nan|NaN|NAN))$")
_INT = ("tag:yaml.org,2002:int", "^(?:[-+]?0b[0-1_]+\n                    |[-+]?0[0-7_]+\n                    "
        "|[-+]?(?:0|[1-9][0-9_]*)\n                    |[-+]?0x[0-9a-fA-F_]+\n                    "
        "|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$")
_TIMESTAMP = ("tag:yaml.org,2002:timestamp", "^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]\n                    "
              "|[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?\n                     (?:[Tt]|[ \\t]+)[0-9][0-9]?\n"
              "                     :[0-9][0-9] :[0-9][0-9] (?:\\.[0-9]*)?\n                     "
              "(?:[ \\t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$")
PLAIN_NUMBER_RESOLVERS = {"+-": (_FLOAT, _INT), "0123456789": (_FLOAT, _INT, _TIMESTAMP), ".": (_FLOAT,)}
# By first character, every character a number of its resolvers may hold (the first included)
_NUMBER_ALPHABETS = {start: frozenset(chars + start)
                     for starts, chars in PLAIN_NUMBER_CHARS.items() for start in starts}
# The most hyphens a text these expressions match holds after its first character: three, in a
# timestamp (two in its date, one in its zone offset); a float has one (its exponent's sign), an
# int none. tests/test_yamlnodes.py holds it to the expressions.
MOST_NUMBER_HYPHENS = 3
_NUMBER_RESOLVERS: dict[str, list[tuple[str, Any]]] | None = None
_TABLES: tuple[bytes, bytes] | None = None


def _resolver_tables() -> tuple[bytes, bytes]:
    """The first characters as the native reader reads them: 128 bytes (1: word resolvers, 2:
    number resolvers) and 128 x 128 ([first][character] a number resolver can match)."""
    global _TABLES
    if _TABLES is None:
        first, alphabets = bytearray(128), bytearray(128 * 128)
        for start in PLAIN_WORD_STARTS:
            first[ord(start)] = 1
        for starts, chars in PLAIN_NUMBER_CHARS.items():
            for start in starts:
                first[ord(start)] = 2
                for char in chars:
                    alphabets[128 * ord(start) + ord(char)] = 1
        _TABLES = bytes(first), bytes(alphabets)
    return _TABLES


def _native_reader() -> Any:
    global _NATIVE
    if _NATIVE is None:
        import os

        _NATIVE = False
        if os.environ.get(NATIVE_VARIABLE, "1") != "0":
            try:
                from vmtune.stacks import _yamlnodes  # type: ignore[attr-defined]
            except ImportError:
                pass
            else:
                _NATIVE = _yamlnodes
    return _NATIVE


def _read_natively(data: bytes, plain: list[str] | None = None) -> list[Node] | None:
    """The root Nodes, or None where the native reader declines; the texts of the plain values
    PLAIN_STARTS asks for are appended to `plain`."""
    native = _native_reader()
    if native is False:
        return None
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data  # as decode("utf-8-sig") reads it
    first, alphabets = _resolver_tables()
    roots: list[Node] | None = native.read(body, Node, _RESOLVED, _resolve_plain, _construct, _STR_TAG, _DECLINE,
                                           MAX_DEPTH, NODE_BUDGET, first, alphabets, _plain_starts(),
                                           [] if plain is None else plain)
    return roots


# The plain values (not keys) the native reader lists for a front end that reads them again by
# another YAML reader's rules (kubectl's: vmtune.stacks.kubevirt.yamltypes): those of one of
# these characters alone, and those starting with one of these others that are not a decimal
# integer of at most 18 characters. Every plain scalar kubectl may type otherwise (`y`, `08`,
# `0o17`, `1e3`, `1:20`, `-.5`, `.6_`, 19 digits, dates) is one; the others (words, short
# integers) both read alike. A manifest has a few ("8Gi", a UUID): judging them costs less than
# searching its text for the shapes (~110 k instructions a manifest).
PLAIN_ALONE = "yYnN"
PLAIN_STARTS = "0123456789._+-"
_PLAIN_TABLE: bytes | None = None


def _plain_starts() -> bytes:
    """PLAIN_ALONE and PLAIN_STARTS as the native reader reads them: 128 bytes, 1 and 2."""
    global _PLAIN_TABLE
    if _PLAIN_TABLE is None:
        table = bytearray(128)
        for char in PLAIN_ALONE:
            table[ord(char)] = 1
        for char in PLAIN_STARTS:
            table[ord(char)] = 2
        _PLAIN_TABLE = bytes(table)
    return _PLAIN_TABLE


_RESOLVER: Any = None


def no_number(text: str) -> bool:
    """Whether a text that starts as a number may is one no number resolver matches: it holds a
    character no number of its first character holds, or more hyphens after its first character
    than any does (MOST_NUMBER_HYPHENS)."""
    alphabet = _NUMBER_ALPHABETS.get(text[:1])
    return alphabet is not None and (text.count("-", 1) > MOST_NUMBER_HYPHENS or not alphabet.issuperset(text))


def _resolve_plain(text: str) -> str:
    """The tag of a plain scalar's text that the native reader could not tell and did not find in
    _RESOLVED: a string at once when no number of its first character can be it, else by the
    number resolvers' expressions (without PyYAML), else by PyYAML's resolver."""
    global _RESOLVER, _NUMBER_RESOLVERS
    if no_number(text):
        # said without the expressions: compiling them for the first such text ("8Gi", listed for
        # kubectl's typing; a UUID, a VM's firmware uuid, that starts with a digit) was ~6 M
        # instructions (4 %) of a one-manifest check
        return _kept(text, _STR_TAG)
    if _NUMBER_RESOLVERS is None:
        import re

        _NUMBER_RESOLVERS = {start: [(tag, re.compile(pattern, re.X)) for tag, pattern in resolvers]
                             for starts, resolvers in PLAIN_NUMBER_RESOLVERS.items() for start in starts}
    resolvers = _NUMBER_RESOLVERS.get(text[:1])
    if resolvers is not None:
        return _kept(text, next((tag for tag, regexp in resolvers if regexp.match(text)), _STR_TAG))
    if _RESOLVER is None:
        import yaml

        _loader_class()  # binds the node classes
        _RESOLVER = yaml.resolver.Resolver()  # SafeLoader's: the same implicit resolvers
    return _remember(_RESOLVER, text)


def plain_value(text: str) -> Any:
    """The value vmtune reads for a plain scalar's text (PyYAML's YAML 1.1 rules); the text
    itself where it does not construct."""
    tag = _RESOLVED.get(text) or _resolve_plain(text)
    if tag == _STR_TAG:
        return text
    value = _construct(tag, text)
    return text if value is _DECLINE else value


def _construct(tag: str, text: str) -> Any:
    """A plain scalar of another type than str, constructed as the full loader does; _DECLINE for
    one that does not construct (the full loader then raises the error, with its line)."""
    import yaml

    _loader_class()  # binds the node classes
    node = _ScalarNode(tag, text, yaml.Mark("", 0, 0, 0, "", 0))
    try:
        return _scalar(node, "", "")
    except VmtuneError:
        return _DECLINE


class _Converter:
    """Composed PyYAML nodes as Nodes. A node an alias names again is converted once and shared,
    but counted each time it is used: NODE_BUDGET bounds what a reader walking the values would
    visit, and an alias bomb is refused in milliseconds, not expanded."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text
        self.visits = 0
        self.done: dict[int, tuple[Node, int]] = {}  # id(composed node) -> (Node, its expanded size)
        self.texts: dict[int, int] = {}  # id(composed node) -> the characters of its text (an alias's)
        self.repeated = 0  # text repeated through aliases, against ALIAS_TEXT_BUDGET
        # Only an anchored node (`&name`) can be met twice, through an alias: without a '&' in
        # the text there is none, and the nodes need not be remembered.
        self.anchored = "&" in text

    def convert(self, node: Any, depth: int, key_line: int) -> Node:
        return self._convert(node, depth, key_line)[0]

    def _count(self, size: int, line: int) -> None:
        self.visits += size
        if self.visits > NODE_BUDGET:
            raise VmtuneError(f"more than {NODE_BUDGET:,} YAML nodes (aliases expanded): not read", self.name, line)

    def _repeat(self, key: int, node: Node, line: int) -> None:
        """Count the text an alias repeats (its strings and keys; walked once per anchor, within
        what NODE_BUDGET already allows) against ALIAS_TEXT_BUDGET."""
        chars = self.texts.get(key)
        if chars is None:
            chars = self.texts[key] = _text_size(node)
        self.repeated += chars
        if self.repeated > ALIAS_TEXT_BUDGET:
            raise VmtuneError(f"aliases repeat more than {ALIAS_TEXT_BUDGET // (1024 * 1024)} MiB of text: not read",
                              self.name, line)

    def _convert(self, node: Any, depth: int, key_line: int) -> tuple[Node, int]:
        # The hot loop of reading a manifest (~50 nodes each): the common cases (a plain or quoted
        # string, a map, a list) are tested first, by exact class and tag, without a call.
        line = node.start_mark.line + 1
        if depth > MAX_DEPTH:
            raise VmtuneError(f"nested deeper than {MAX_DEPTH} levels: not a manifest vmtune reads", self.name, line)
        if self.anchored:
            seen = self.done.get(id(node))
            if seen is not None:  # an alias: the same node again, its whole size counted again
                self._count(seen[1], line)
                self._repeat(id(node), seen[0], key_line)  # the line of the key using it
                return seen
        kind = node.__class__
        tag = node.tag
        if kind is _ScalarNode:
            # str: what SafeConstructor.construct_yaml_str returns, the node's text
            result = (Node(node.value if tag == _STR_TAG else _scalar(node, self.name, self.text), line, key_line,
                           None), 1)
        elif kind is _MappingNode and tag in _COLLECTION_TAGS:
            result = self._mapping(node, depth, key_line, line)
        elif kind is _SequenceNode and tag in _COLLECTION_TAGS:
            depth += 1
            children = []
            total = 1
            for item in node.value:
                child, size = self._convert(item, depth, item.start_mark.line + 1)
                children.append(child)
                total += size
            result = (Node([child.value for child in children], line, key_line, children), total)
        else:  # `!!python/object/apply`, a custom tag on a collection
            raise _error(_UNKNOWN_TAG, self.name, line, self.text)
        self.visits += 1
        if self.visits > NODE_BUDGET:
            self._count(0, line)
        if self.anchored:
            self.done[id(node)] = result
        return result

    def _mapping(self, node: Any, depth: int, key_line: int, line: int) -> tuple[Node, int]:
        children: dict[str, Node] = {}
        value: dict[Any, Any] = {}
        written: dict[str, int] = {}  # keys written in this mapping (not merged) -> their line
        total = 1
        depth += 1
        for key_node, value_node in node.value:
            key_at = key_node.start_mark.line + 1
            key_tag = key_node.tag
            if key_tag == _MERGE_TAG:  # `<<: *defaults`
                merged, size = self._convert(value_node, depth, key_at)
                total += size
                self._merge(merged, children, value, written, key_at)
                continue
            if key_node.__class__ is not _ScalarNode:
                raise _error("a mapping key that is not a scalar: not a manifest vmtune reads", self.name, key_at,
                             self.text)
            if key_tag == _STR_TAG:
                key_text = key_node.value
            else:
                key = _scalar(key_node, self.name, self.text)
                key_text = key if isinstance(key, str) else str(key_node.value)  # `80: x` is read by its text
            if key_text in written:
                raise VmtuneError("duplicate key (YAML forbids it; which one counts is undefined)", self.name, key_at)
            written[key_text] = key_at
            if value_node.__class__ is _ScalarNode and not self.anchored and depth <= MAX_DEPTH:
                # _convert's scalar case inlined: most values of a manifest are scalars
                at = value_node.start_mark.line + 1
                child = Node(value_node.value if value_node.tag == _STR_TAG else
                             _scalar(value_node, self.name, self.text), at, key_at, None)
                self.visits += 1
                if self.visits > NODE_BUDGET:
                    self._count(0, at)
                total += 1
            else:
                child, size = self._convert(value_node, depth, key_at)
                if child.key_line != key_at:  # shared through an alias: this use has its own key line
                    child = Node(child.value, child.line, key_at, child.children)
                total += size
            children[key_text] = child
            value[key_text] = child.value
        return Node(value, line, key_line, children), total

    def _merge(self, merged: Node, children: dict[str, Node], value: dict[Any, Any], written: dict[str, int],
               key_at: int) -> None:
        """A merge key's mappings into this one, as kubectl (sigs.k8s.io/yaml) and PyYAML agree:
        a key written after `<<` overrides it, a later `<<` overrides an earlier one, and in
        `<<: [*a, *b]` the first mapping that has a key gives it. A key written *before* a `<<`
        that sets it otherwise is where they part (kubectl takes the merged value, PyYAML and
        Ansible the written one): refused at its line rather than judged as one of them."""
        sources = merged.children if isinstance(merged.children, list) else [merged]
        given: dict[str, Node] = {}
        for source in sources:
            if not isinstance(source.children, dict):
                raise VmtuneError("a merge (<<) of something other than a mapping: not a manifest vmtune reads",
                                  self.name, key_at)
            for k, child in source.children.items():
                given.setdefault(k, child)  # the first mapping of the list wins
        for k, child in given.items():
            if k in written:
                if child.value != value[k]:
                    raise VmtuneError(f"'{k}' is written before a merge (<<, line {key_at}) that sets it too: "
                                      "kubectl takes the merged value, YAML 1.1 loaders the written one; write it "
                                      "after the merge", self.name, written[k])
                continue
            children[k] = child
            value[k] = child.value


def _text_size(node: Node) -> int:
    """The characters of the strings (and bytes) and mapping keys below a node, once each place."""
    size = 0
    stack = [node]
    while stack:
        current = stack.pop()
        children = current.children
        if isinstance(children, dict):
            size += sum(len(key) for key in children)
            stack.extend(children.values())
        elif isinstance(children, list):
            stack.extend(children)
        elif isinstance(current.value, str | bytes):
            size += len(current.value)
    return size


def _scalar(node: Any, name: str, text: str) -> Any:
    """A scalar typed as PyYAML's safe loader types it (ints, bools, nulls, floats, timestamps;
    an unknown tag such as `!!python/object` is an error, never constructed)."""
    import yaml

    global _CONSTRUCTOR
    if _CONSTRUCTOR is None:
        _CONSTRUCTOR = yaml.SafeLoader("")
    construct = _CONSTRUCTOR.yaml_constructors.get(node.tag)
    if construct is None:
        raise _error(_UNKNOWN_TAG, name, node.start_mark.line + 1, text)
    if node.tag not in _SCALAR_TAGS:  # `!!map x`: the collection constructors give a generator, no value
        raise _error(_INVALID_VALUE, name, node.start_mark.line + 1, text)
    if node.tag == _INT_TAG and node.value.count(":") > _SEXAGESIMAL_PARTS:
        raise _error(_INVALID_VALUE, name, node.start_mark.line + 1, text)
    try:
        value = construct(_CONSTRUCTOR, node)
        if value.__class__ is int and value.bit_length() > _INT_BITS:
            raise _error(f"an integer of {value.bit_length():,} bits: no value vmtune reads is that large", name,
                         node.start_mark.line + 1, text)
        return value
    # PyYAML's scalar constructors assume the text their resolver matched: an explicit tag on any
    # other text fails with whatever the text does to them (`!!int ''`: IndexError, `!!bool maybe`:
    # KeyError, `!!timestamp x`: AttributeError), never a traceback of vmtune's.
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, LookupError, AttributeError):
        raise _error(_INVALID_VALUE, name, node.start_mark.line + 1, text) from None


_CONSTRUCTOR: Any = None
_INVALID_VALUE = "not a valid YAML value of its type (a date, number or binary that does not parse)"
_INT_TAG = "tag:yaml.org,2002:int"
# A hex, octal or binary integer of any size constructs, and then ends in a ValueError wherever it
# is written in decimal (Python's 4,300-digit limit): a flavor's `disk: 0xfff…` of 5,000 digits
# ended a run with a traceback. No field of any stack holds more than 128 bits (UUIDs, masks).
_INT_BITS = 128
# YAML 1.1's base-60 integers (`1:30:00`): PyYAML sums the parts times ever larger powers of 60,
# quadratic in the parts (a 1 MiB `1:59:59:…` took 26 s, 4 MiB ~7 minutes). Python refuses a
# decimal of more than 4,300 digits; 2,400 parts are as many (60**2400 is about 10**4267).
_SEXAGESIMAL_PARTS = 2400
# The tags SafeConstructor constructs a value from a scalar for (its map, seq, set, omap and pairs
# constructors read collections).
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "binary",
                                                                   "timestamp", "str"))
