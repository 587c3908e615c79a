"""Terraform files as vmtune reads them: python-hcl2's syntax tree (lark, with positions) turned
into values that remember the bytes they came from, and the few expressions Terraform resolves
before a provider sees a plan (literals, `var.X` with a default, `local.X`, string templates of
those). Everything else (another resource's attribute, a data source, a function call,
`count.index`) is an `Unknown`: said, never judged as zero.

python-hcl2 is imported here only, when a `.tf` file is read (a check of XML or YAML never loads it).
"""

from __future__ import annotations

import functools
from typing import Any

from vmtune.errors import VmtuneError

# A .tf file past these is refused, not parsed: a repository's VM definitions are a few KB.
MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64  # nested objects and tuples of one expression


class Unknown:
    """A value known only when Terraform applies (or given where vmtune was not told): `why` says which."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"Unknown({self.why!r})"


class Value:
    """An expression of the file: `kind` "obj" (items: key -> Item), "tup" (elems: [Value]),
    "lit" (value: str, int, float, bool, None) or "expr" (any other expression; `value` is
    what vmtune could resolve it to, an Unknown when nothing). `start`/`end` are byte offsets,
    `line` the first line, `end_line` the last."""

    __slots__ = ("elems", "end", "end_line", "items", "kind", "line", "start", "value")

    def __init__(self, kind: str, start: int, end: int, line: int, end_line: int) -> None:
        self.kind = kind
        self.start = start
        self.end = end
        self.line = line
        self.end_line = end_line
        self.items: dict[str, Item] = {}
        self.elems: list[Value] = []
        self.value: Any = None


class Item:
    """`key = value` in a body or an object constructor: the key's line and the whole span."""

    __slots__ = ("end", "key", "line", "start", "value")

    def __init__(self, key: str, line: int, start: int, end: int, value: Value) -> None:
        self.key = key
        self.line = line
        self.start = start
        self.end = end
        self.value = value


class Block:
    """`type "label" ... { body }`: its attributes (as an object's items) and nested blocks."""

    __slots__ = ("attrs", "blocks", "body_end", "end", "labels", "line", "start", "type")

    def __init__(self, type_: str, labels: tuple[str, ...], line: int, start: int, end: int, body_end: int) -> None:
        self.type = type_
        self.labels = labels
        self.line = line
        self.start = start
        self.end = end
        self.body_end = body_end  # the offset of the closing brace
        self.attrs: dict[str, Item] = {}
        self.blocks: list[Block] = []


# The longest number literal read: 2**128 has 39 digits, a float's exponent form fits as well.
_NUMBER_CHARS = 64


class HclError(VmtuneError):
    pass


def parse(data: bytes, name: str) -> list[Block]:
    """The top-level blocks of a .tf file. Bad input: one HclError naming the file and line."""
    reader, tree = _read(data, name)
    return reader.body_blocks(tree.children[0] if tree.children else None)


def parse_tfvars(data: bytes, name: str) -> dict[str, Item]:
    """The `name = value` lines of a .tfvars file (terraform.tfvars, *.auto.tfvars)."""
    reader, tree = _read(data, name)
    body = tree.children[0] if tree.children else None
    found: dict[str, Item] = {}
    for child in body.children if body is not None else ():
        if getattr(child, "data", None) == "attribute":
            item = reader.attribute(child, 0)
            if item.key in found:
                raise reader.fail(f"variable {item.key!r} is given twice in this file (Terraform refuses it)",
                                  item.line)
            found[item.key] = item
        elif getattr(child, "data", None) == "block":
            raise reader.fail("a .tfvars file holds `name = value` lines only", child.meta.line)
    return found


def _read(data: bytes, name: str) -> tuple[_Reader, Any]:
    if len(data) > MAX_BYTES:
        raise HclError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not read", name, None)
    try:
        text = data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        raise HclError("not UTF-8 (Terraform reads UTF-8 only)", name, data[:exc.start].count(b"\n") + 1) from None
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    _import_lark()
    from lark.exceptions import LarkError, UnexpectedInput

    try:
        # hcl2.parses_to_tree's call: it appends a newline too (lark-parser/lark#237)
        tree = _parser().parse((text if text.endswith("\n") else text + "\n") + "\n")
    except UnexpectedInput as exc:
        raise HclError("not valid HCL: " + _unexpected(exc), name, getattr(exc, "line", None)) from None
    except (LarkError, RecursionError, ValueError) as exc:
        raise HclError(f"not valid HCL ({type(exc).__name__})", name, None) from None
    return _Reader(_Offsets(text, bom), name, text), tree


def _import_lark() -> None:
    """lark imports the third-party `regex` module when it can (~25 ms of a .tf check), but uses
    it only for Lark(regex=True) or grammars with \\p{...} categories; hcl2's grammar has neither
    and hcl2 builds with regex=False, so lark takes `re`. The block lasts for lark's import only
    (a later `import regex` works), and does nothing when lark is already imported."""
    import sys

    if "lark" in sys.modules:
        return
    had = sys.modules.get("regex", False)
    sys.modules["regex"] = None  # type: ignore[assignment]
    try:
        import lark  # noqa: F401
    finally:
        if had is False:
            del sys.modules["regex"]
        else:
            sys.modules["regex"] = had  # type: ignore[assignment]


@functools.cache
def _parser() -> Any:
    """python-hcl2's own parser (hcl2.parser.parser(): its grammar, post-lexer, options and cache
    file, so lark finds the tables hcl2 cached), built without importing the `hcl2` package,
    whose __init__ loads its whole API (transformer, reconstructor, builder, rules: a sixth of a
    one-file check). The grammar and post-lexer are read from the installed package."""
    import importlib.util
    import os

    from lark import Lark

    spec = importlib.util.find_spec("hcl2")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise HclError("python-hcl2 is not installed: .tf files cannot be read", None, None)
    here = os.path.realpath(next(iter(spec.submodule_search_locations)))
    post_spec = importlib.util.spec_from_file_location("vmtune._hcl2_postlexer", os.path.join(here, "postlexer.py"))
    if post_spec is None or post_spec.loader is None:
        raise HclError("python-hcl2's post-lexer is missing: .tf files cannot be read", None, None)
    postlexer = importlib.util.module_from_spec(post_spec)
    post_spec.loader.exec_module(postlexer)
    return Lark.open("hcl2.lark", parser="lalr", cache=os.path.join(here, ".lark_cache.bin"),
                     rel_to=os.path.join(here, "parser.py"), propagate_positions=True, postlex=postlexer.PostLexer())


def _unexpected(exc: Any) -> str:
    """lark's message without the grammar's token names: where, and the character found."""
    column = getattr(exc, "column", None)
    token = getattr(exc, "token", None)
    if token is not None and getattr(token, "type", "") == "$END":
        return "the file ends inside an expression or block"
    found = getattr(exc, "char", None) or (str(token)[:1] if token is not None else "")
    said = f"unexpected {found!r}" if found and found.isprintable() and found.strip() else "unexpected input"
    return f"{said} at column {column}" if column else said


class _Offsets:
    """Character offsets (lark's) to byte offsets: one table only when the text is not ASCII."""

    def __init__(self, text: str, bom: int) -> None:
        self.bom = bom
        self.table: list[int] | None = None
        if not text.isascii():
            table = [0] * (len(text) + 1)
            total = 0
            for i, char in enumerate(text):
                table[i] = total
                total += len(char.encode("utf-8"))
            table[len(text)] = total
            self.table = table

    def __call__(self, pos: int) -> int:
        return self.bom + (self.table[pos] if self.table is not None else pos)


_META_BLOCKS = frozenset({"lifecycle", "provisioner", "connection", "dynamic", "timeouts"})


class _Reader:
    def __init__(self, offsets: _Offsets, name: str, text: str) -> None:
        self.text = text
        self.at = offsets
        self.name = name

    def fail(self, message: str, line: int) -> HclError:
        return HclError(message, self.name, line)

    def body_blocks(self, body: Any) -> list[Block]:
        blocks: list[Block] = []
        if body is None:
            return blocks
        for child in body.children:
            data = getattr(child, "data", None)
            if data == "block":
                blocks.append(self.block(child))
            elif data == "attribute":
                pass  # a top-level attribute is not Terraform's; terraform validate says so
        return blocks

    def block(self, node: Any) -> Block:
        kids = [c for c in node.children if getattr(c, "data", None) != "new_line_or_comment"]
        type_ = self.name_of(kids[0])
        labels: list[str] = []
        body = None
        close = node.meta.end_pos - 1
        for kid in kids[1:]:
            data = getattr(kid, "data", None)
            if data == "string":
                labels.append(self.plain_string(kid))
            elif data == "identifier":
                labels.append(self.name_of(kid))
            elif data == "body":
                body = kid
        block = Block(type_, tuple(labels), node.meta.line, self.at(node.meta.start_pos), self.at(node.meta.end_pos),
                      self.at(close))
        if body is None:
            return block
        for child in body.children:
            data = getattr(child, "data", None)
            if data == "attribute":
                item = self.attribute(child, 0)
                if item.key in block.attrs:
                    raise self.fail(f"attribute {item.key!r} is defined twice in this block (Terraform refuses it)",
                                    item.line)
                block.attrs[item.key] = item
            elif data == "block":
                block.blocks.append(self.block(child))
        return block

    def attribute(self, node: Any, depth: int) -> Item:
        kids = [c for c in node.children if hasattr(c, "data")]
        key = self.name_of(kids[0])
        value = self.value(kids[-1], depth)
        return Item(key, node.meta.line, self.at(node.meta.start_pos), self.at(node.meta.end_pos), value)

    @staticmethod
    def name_of(node: Any) -> str:
        return str(node.children[0])

    def plain_string(self, node: Any) -> str:
        parts = []
        for part in node.children:
            if getattr(part, "data", None) == "string_part":
                for token in part.children:
                    if hasattr(token, "data"):
                        raise self.fail("a block label cannot hold an interpolation", node.meta.line)
                    parts.append(_unescape(str(token)))
        return "".join(parts)

    def value(self, node: Any, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise self.fail(f"nested deeper than {MAX_DEPTH} levels: not read", node.meta.line)
        while getattr(node, "data", None) == "expr_term" and len(
                [c for c in node.children if getattr(c, "data", None) != "new_line_or_comment"]) == 1 and \
                hasattr(node.children[0], "data") and node.children[0].data in _SIMPLE:
            node = node.children[0]
        meta = node.meta
        end = meta.start_pos + len(self.text[meta.start_pos:meta.end_pos].rstrip())  # lark counts trailing space
        found = Value("expr", self.at(meta.start_pos), self.at(end), meta.line, meta.end_line)
        data = node.data
        if data == "object":
            found.kind = "obj"
            for elem in node.children:
                if getattr(elem, "data", None) != "object_elem":
                    continue
                item = self.object_elem(elem, depth + 1)
                if item.key in found.items:
                    raise self.fail(f"key {item.key!r} is given twice in this object (Terraform refuses it)",
                                    item.line)
                found.items[item.key] = item
        elif data == "tuple":
            found.kind = "tup"
            found.elems = [self.value(c, depth + 1) for c in node.children
                           if hasattr(c, "data") and c.data != "new_line_or_comment"]
        elif data in ("int_lit", "float_lit"):
            found.kind = "lit"
            text = str(node.children[0])
            if len(text) > _NUMBER_CHARS:  # int() refuses 4,300 digits with a ValueError: said, at its line
                raise self.fail(f"a number of {len(text):,} characters: no value vmtune reads is that large",
                                meta.line)
            found.value = int(text) if data == "int_lit" and text.isdigit() else float(text)
        elif data == "literal_value":
            found.kind = "lit"
            found.value = {"TRUE": True, "FALSE": False, "NULL": None}.get(node.children[0].type)
        elif data == "string" and all(not hasattr(t, "data") for p in node.children if hasattr(p, "data")
                                      for t in p.children):
            found.kind = "lit"
            found.value = "".join(_unescape(str(t)) for p in node.children if hasattr(p, "data") for t in p.children)
        elif data in ("heredoc_template", "heredoc_template_trim") and "${" not in str(node.children[0]) \
                and "%{" not in str(node.children[0]):
            found.kind = "lit"
            found.value = _heredoc(str(node.children[0]), data.endswith("trim"))
        else:
            found.value = node  # resolved later (Scope.resolve): references, templates, calls
        return found

    def object_elem(self, node: Any, depth: int) -> Item:
        kids = [c for c in node.children if hasattr(c, "data") and c.data != "new_line_or_comment"]
        key_node = kids[0].children[0] if kids[0].children else kids[0]
        key_node = key_node.children[0] if getattr(key_node, "data", None) == "expr_term" else key_node
        if getattr(key_node, "data", None) == "identifier":
            key = self.name_of(key_node)
        elif getattr(key_node, "data", None) == "string":
            key = self.plain_string(key_node)
        else:
            raise self.fail("an object key vmtune cannot resolve (write it as a name or a string)", node.meta.line)
        value = self.value(kids[-1], depth)
        return Item(key, node.meta.line, self.at(node.meta.start_pos), self.at(node.meta.end_pos), value)


_SIMPLE = frozenset({"object", "tuple", "int_lit", "float_lit", "literal_value", "string", "heredoc_template",
                     "heredoc_template_trim", "get_attr_expr_term", "identifier", "function_call", "conditional"})
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def _unescape(text: str) -> str:
    if "\\" not in text and "$${" not in text and "%%{" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if nxt in "uU":
                width = 4 if nxt == "u" else 8
                digits = text[i + 2:i + 2 + width]
                if len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits) and \
                        int(digits, 16) < 0x110000:
                    out.append(chr(int(digits, 16)))
                    i += 2 + width
                    continue
        out.append(char)
        i += 1
    return "".join(out).replace("$${", "${").replace("%%{", "%{")


def _heredoc(token: str, trim: bool) -> str:
    """A heredoc's text: the lines between its marker lines, the common indentation removed for <<-."""
    lines = token.split("\n")
    body = lines[1:-2] if lines and lines[-1] == "" else lines[1:-1]
    if trim:
        indents = [len(line) - len(line.lstrip(" \t")) for line in body if line.strip()]
        cut = min(indents, default=0)
        body = [line[cut:] for line in body]
    return "\n".join(body) + ("\n" if body else "")


# -- resolving expressions --------------------------------------------------------------------------------

class Scope:
    """What `var.X` and `local.X` are in one directory's files: variable defaults (or values of
    tfvars given), locals' expressions."""

    def __init__(self) -> None:
        self.variables: dict[str, Value | None] = {}  # None: declared without a default
        self.locals: dict[str, Value] = {}
        # values given from outside, resolved: a .tfvars file's, a module call's arguments
        self.given: dict[str, Any] = {}
        self._resolving: set[str] = set()

    def add(self, blocks: list[Block]) -> None:
        for block in blocks:
            if block.type == "variable" and block.labels:
                default = block.attrs.get("default")
                self.variables.setdefault(block.labels[0], default.value if default else None)
            elif block.type == "locals":
                for key, item in block.attrs.items():
                    self.locals.setdefault(key, item.value)

    def resolve(self, value: Value) -> Any:
        """The plain value of an expression: dicts, lists, scalars; an Unknown where Terraform
        knows it only at apply time or vmtune was not given it."""
        if value.kind == "lit":
            return value.value
        if value.kind == "obj":
            return {k: self.resolve(i.value) for k, i in value.items.items()}
        if value.kind == "tup":
            return [self.resolve(v) for v in value.elems]
        if isinstance(value.value, Unknown):
            return value.value
        return self._expr(value.value, value)

    def reference(self, value: Value) -> str | None:
        """`var.X` / `local.X` when the expression is just that reference."""
        node = value.value
        if value.kind != "expr" or isinstance(node, Unknown) or getattr(node, "data", None) != "get_attr_expr_term":
            return None
        return _dotted_ref(node)

    def _expr(self, node: Any, where: Value) -> Any:
        data = getattr(node, "data", None)
        if data == "expr_term" and len(node.children) == 1 and hasattr(node.children[0], "data"):
            return self._expr(node.children[0], where)
        if data == "get_attr_expr_term":
            ref = _dotted_ref(node)
            if ref is None:
                return Unknown("an expression vmtune does not evaluate")
            kind, _dot, key = ref.partition(".")
            if kind == "var":
                if key not in self.variables:
                    return Unknown(f"var.{key} is not declared in the files given")
                if key in self.given:
                    return self.given[key]
                default = self.variables[key]
                if default is None:
                    return Unknown(f"var.{key} has no default (its value is given at plan time)")
                return self._guarded(f"var.{key}", default)
            if kind == "local":
                found = self.locals.get(key)
                if found is None:
                    return Unknown(f"local.{key} is not defined in the files given")
                return self._guarded(f"local.{key}", found)
            if kind in ("count", "each"):
                return Unknown(f"{ref} differs between the resource's instances")
            return Unknown(f"{ref} is known only when Terraform applies")
        if data == "int_lit":
            text = str(node.children[0])
            return int(text) if text.isdigit() else float(text)
        if data == "float_lit":
            return float(str(node.children[0]))
        if data == "literal_value":
            return {"TRUE": True, "FALSE": False, "NULL": None}.get(node.children[0].type)
        if data == "unary_op" and str(node.children[0]) == "-":
            inner = self._expr(node.children[1], where)
            return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else \
                (inner if isinstance(inner, Unknown) else Unknown("a negated non-number"))
        if data == "string":
            return self._template(node, where)
        if data == "function_call":
            return Unknown(f"{_name(node)}(...) is a function call vmtune does not evaluate")
        if data == "conditional":
            return Unknown("a conditional expression vmtune does not evaluate")
        return Unknown("an expression vmtune does not evaluate")

    def _guarded(self, name: str, value: Value) -> Any:
        if name in self._resolving:
            return Unknown(f"{name} refers to itself")
        self._resolving.add(name)
        try:
            return self.resolve(value)
        finally:
            self._resolving.discard(name)

    def _template(self, node: Any, where: Value) -> Any:
        parts: list[str] = []
        for part in node.children:
            if not hasattr(part, "data"):
                continue
            for token in part.children:
                if not hasattr(token, "data"):
                    parts.append(_unescape(str(token)))
                    continue
                if token.data != "interpolation":
                    return Unknown("a template directive vmtune does not evaluate")
                inner = [c for c in token.children if hasattr(c, "data")]
                got = self._expr(inner[0], where) if inner else Unknown("an empty interpolation")
                if isinstance(got, Unknown):
                    return got
                if isinstance(got, bool):
                    got = "true" if got else "false"
                if not isinstance(got, (str, int, float)):
                    return Unknown("an interpolation of a value that is not a string or number")
                parts.append(str(got))
        return "".join(parts)


def _name(node: Any) -> str:
    first = node.children[0]
    return str(first.children[0]) if hasattr(first, "data") else str(first)


def _dotted_ref(node: Any) -> str | None:
    """`var.mem` as "var.mem" (two names, nothing else); None for longer or indexed references."""
    kids = [c for c in node.children if hasattr(c, "data")]
    if len(kids) != 2 or kids[1].data != "get_attr":
        head = kids[0] if kids else None
        if head is not None and getattr(head, "data", None) == "expr_term":
            inner = head.children[0]
            if getattr(inner, "data", None) == "identifier":
                return f"{_name(inner)}.…"
        return None
    head = kids[0]
    if getattr(head, "data", None) == "expr_term":
        head = head.children[0]
    if getattr(head, "data", None) == "get_attr_expr_term":
        inner = _dotted_ref(head)
        return None if inner is None else f"{inner}.{_name(next(c for c in kids[1].children if hasattr(c, 'data')))}"
    if getattr(head, "data", None) != "identifier":
        return None
    attr = next(c for c in kids[1].children if hasattr(c, "data"))
    return f"{_name(head)}.{_name(attr)}"
