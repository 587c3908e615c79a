"""Apply edits to the original bytes: the smallest splices that express them.

Everything outside the touched start tags, inserted lines and removed elements stays
byte-identical: comments, quote style, attribute order, indentation, line endings.
"""

from __future__ import annotations

import re
from itertools import pairwise

from lxml import etree

from vmtune.patch.edits import Conflict, Edit, Ensure, Remove, SetAttrs, SetText, Step
from vmtune.patch.order import REQUIRED_ATTRIBUTES, rank
from vmtune.record import Record
from vmtune.xml.locate import Span, locate

# (?<!\s): a match starts where a run of spaces starts; tried from inside the run too, a tag's
# trailing spaces cost quadratic time (20,000 of them: 2.7 s).
_ATTR = re.compile(rb"(?<!\s)(\s+)([^\s=/>]+)(\s*=\s*)([\"'])(.*?)\4", re.DOTALL)
_TAG_NAME = re.compile(rb"<[^\s/>]+")


# -- file style ---------------------------------------------------------------------------------
# Plain classes, not dataclasses: see vmtune.fixer.AppliedFix.
class Style(Record):
    __slots__ = ("eol", "indent_unit", "quote")

    def __init__(self, eol: bytes, indent_unit: bytes, quote: bytes) -> None:
        self.eol = eol
        self.indent_unit = indent_unit
        self.quote = quote

    @classmethod
    def detect(cls, data: bytes) -> Style:
        eol = b"\r\n" if b"\r\n" in data else (b"\n" if b"\n" in data else b"")
        indents = re.findall(rb"\n([ \t]+)<", data)
        if any(i.startswith(b"\t") for i in indents):
            unit = b"\t"
        else:
            sizes = sorted({len(i) for i in indents})
            unit = b" " * (sizes[0] if sizes else 2)
        quote = b"'" if data.count(b"='") > data.count(b'="') else b'"'
        return cls(eol, unit if eol else b"", quote)


_BLANK = frozenset(b" \t\r\x0b\x0c")  # what bytes.strip() removes, but the newline


def _escape(value: str, quote: bytes) -> bytes:
    text = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("'", "&apos;") if quote == b"'" else text.replace('"', "&quot;")
    # A parser turns a raw tab, newline or CR in an attribute into a space (attribute-value
    # normalisation): written as references, the value libvirt reads is the value the fix set
    # (a custom check's `fix:` may carry them; without this its fix never converged).
    if "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\t", "&#9;").replace("\n", "&#10;").replace("\r", "&#13;")
    return text.encode("utf-8")


def _escape_text(value: str) -> bytes:
    # A raw CR in text reads back as a newline (end-of-line normalisation).
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;").encode("utf-8")


# -- new subtrees -----------------------------------------------------------------------------------
class NewNode:
    __slots__ = ("attrs", "children", "fresh", "key", "tag", "text")

    def __init__(self, tag: str, attrs: dict[str, str] | None = None, text: str | None = None,
                 children: list[NewNode] | None = None, key: tuple[tuple[str, str], ...] = (),
                 fresh: bool = False) -> None:
        self.tag = tag
        self.attrs: dict[str, str] = {} if attrs is None else attrs
        self.text = text
        self.children: list[NewNode] = [] if children is None else children
        self.key = key
        self.fresh = fresh  # created with new=True: never merged

    def child(self, step: Step, fresh: bool) -> NewNode:
        if not fresh:
            for existing in self.children:
                if not existing.fresh and existing.tag == step.tag and existing.key == step.key:
                    return existing
        node = NewNode(step.tag, {**dict(REQUIRED_ATTRIBUTES.get(step.tag, ())), **dict(step.key)},
                       key=step.key, fresh=fresh)
        self.children.append(node)
        return node


def _render(node: NewNode, indent: bytes, style: Style, quote: bytes) -> bytes:
    attrs = b"".join(b" " + k.encode() + b"=" + quote + _escape(v, quote) + quote for k, v in node.attrs.items())
    head = b"<" + node.tag.encode() + attrs
    if node.children:
        inner = b"".join(style.eol + indent + style.indent_unit + _render(c, indent + style.indent_unit, style, quote)
                         for c in _ordered(node.tag, node.children))
        return head + b">" + inner + style.eol + indent + b"</" + node.tag.encode() + b">"
    if node.text is not None:
        return head + b">" + _escape_text(node.text) + b"</" + node.tag.encode() + b">"
    return head + b"/>"


def _ordered(parent: str, nodes: list[NewNode]) -> list[NewNode]:
    big = 10_000
    return sorted(nodes, key=lambda n: (r if (r := rank(parent, n.tag)) is not None else big))


# -- planning ------------------------------------------------------------------------------------
class PatchResult:
    __slots__ = ("applied", "conflicts", "data")

    def __init__(self, data: bytes, applied: list[str], conflicts: list[Conflict]) -> None:
        self.data = data
        self.applied = applied  # rule codes whose edits all landed
        self.conflicts = conflicts


class _Planner:
    def __init__(self, data: bytes, root: etree._Element, source: str) -> None:
        self.data = data
        self.root = root
        self.spans: dict[etree._Element, Span] = locate(data, root, source)
        self.style = Style.detect(data)
        self.attr_changes: dict[etree._Element, dict[str, str | None]] = {}
        self.attr_owner: dict[tuple[etree._Element, str], str] = {}
        self.texts: dict[etree._Element, str] = {}
        self.removed: dict[etree._Element, str] = {}
        self.inserts: dict[etree._Element, NewNode] = {}  # anchor -> pseudo node holding new children
        self.conflicts: list[Conflict] = []
        self.dropped_codes: set[str] = set()

    # Resolve intent against the tree -----------------------------------------------------------
    def _inside_removed(self, element: etree._Element) -> str | None:
        node: etree._Element | None = element
        while node is not None:
            if node in self.removed:
                return self.removed[node]
            node = node.getparent()
        return None

    def _conflict(self, kept: str, dropped: str, reason: str) -> None:
        self.conflicts.append(Conflict(kept, dropped, reason))
        self.dropped_codes.add(dropped)

    def set_attr(self, code: str, element: etree._Element, name: str, value: str | None) -> None:
        owner = self.attr_owner.get((element, name))
        changes = self.attr_changes.setdefault(element, {})
        if owner is not None and owner != code and changes.get(name) != value:
            self._conflict(owner, code, f"both set {element.tag}/@{name}")
            return
        if owner is None and element.get(name) == value:
            return
        changes[name] = value
        self.attr_owner[(element, name)] = code

    def add(self, code: str, edit: Edit) -> None:
        if isinstance(edit, Remove):
            self.removed.setdefault(edit.element, code)
        elif isinstance(edit, SetAttrs):
            for name, value in edit.attrs:
                self.set_attr(code, edit.element, name, value)
        elif isinstance(edit, SetText):
            self.texts[edit.element] = edit.text
        elif isinstance(edit, Ensure):
            self._ensure(code, edit)

    def _ensure(self, code: str, edit: Ensure) -> None:
        node = edit.parent
        steps = list(edit.steps)
        while steps:
            if edit.new and len(steps) == 1:
                break
            match = next((c for c in node if isinstance(c.tag, str) and steps[0].matches(c)
                          and c not in self.removed), None)
            if match is None:
                break
            node = match
            steps.pop(0)
        if not steps:
            for name, value in edit.attrs:
                self.set_attr(code, node, name, value)
            if edit.text is not None and (node.text or "").strip() != edit.text:
                self.texts[node] = edit.text
            return
        holder = self.inserts.setdefault(node, NewNode(node.tag if isinstance(node.tag, str) else ""))
        for index, s in enumerate(steps):
            holder = holder.child(s, fresh=edit.new and index == len(steps) - 1)
        for name, value in edit.attrs:
            if holder.attrs.get(name, value) != value:
                self._conflict("(earlier fix)", code, f"both create {holder.tag} with different @{name}")
                return
            holder.attrs[name] = value
        if edit.text is not None:
            holder.text = edit.text

    def drop_conflicting(self) -> None:
        for element in list(self.attr_changes) + list(self.texts) + list(self.inserts):
            remover = self._inside_removed(element)
            if remover is None:
                continue
            if element in self.attr_changes:
                for (el, _name), owner in list(self.attr_owner.items()):
                    if el is element and owner != remover:
                        self._conflict(remover, owner, f"{element.tag} is removed")
                self.attr_changes.pop(element, None)
            self.texts.pop(element, None)
            self.inserts.pop(element, None)

    # Produce splices -----------------------------------------------------------------------------
    # Around an element, the splicer looks at the blanks beside it, never for the newlines that
    # end its line: on a one-line domain every such search (and a copy of the rest of the line)
    # crossed the whole document for every edit: quadratic in the number of edits.
    def _blanks_before(self, pos: int) -> int:
        while pos > 0 and self.data[pos - 1] in _BLANK:
            pos -= 1
        return pos

    def _blanks_after(self, pos: int) -> int:
        while pos < len(self.data) and self.data[pos] in _BLANK:
            pos += 1
        return pos

    def _line_indent(self, span: Span) -> bytes:
        """What precedes the element on its line, if only blanks."""
        start = self._blanks_before(span.start)
        if start > 0 and self.data[start - 1] != 0x0A:  # "\n"
            return b""
        return self.data[start:span.start]

    def _tag_quote(self, span: Span) -> bytes:
        match = _ATTR.search(self.data, span.start, span.start_end)
        return match.group(4) if match else self.style.quote

    def _children(self, element: etree._Element) -> list[etree._Element]:
        return [c for c in element if isinstance(c.tag, str) and c not in self.removed]

    def _child_indent(self, element: etree._Element, span: Span) -> bytes:
        for child in element:
            if isinstance(child.tag, str):
                indent = self._line_indent(self.spans[child])
                if indent or not self.style.eol:
                    return indent
        return self._line_indent(span) + self.style.indent_unit

    def _start_tag(self, element: etree._Element, span: Span, open_tag: bool, close_tag: bool) -> bytes:
        """The start tag with attribute changes; reopened ('/>' -> '>') or closed ('>' -> '/>')."""
        tag = self.data[span.start:span.start_end]
        changes = dict(self.attr_changes.get(element, {}))
        quote = self._tag_quote(span)
        out = bytearray()
        pos = 0
        last_attr_end = _TAG_NAME.match(tag).end()  # type: ignore[union-attr]
        for match in _ATTR.finditer(tag):
            name = match.group(2).decode()
            if name in changes:
                value = changes.pop(name)
                out += tag[pos:match.start()]
                if value is not None:
                    q = match.group(4)
                    out += match.group(1) + match.group(2) + match.group(3) + q + _escape(value, q) + q
                pos = match.end()
            last_attr_end = match.end()
        out += tag[pos:last_attr_end] if pos <= last_attr_end else b""
        for name, value in changes.items():
            if value is not None:
                out += b" " + name.encode() + b"=" + quote + _escape(value, quote) + quote
        tail = tag[max(pos, last_attr_end):]
        if open_tag:
            tail = b">"
        elif close_tag:
            tail = b"/>"
        return bytes(out) + tail

    def splices(self) -> list[tuple[int, int, bytes]]:
        out: list[tuple[int, int, bytes]] = []
        collapse = self._collapsing_parents()
        for element in set(self.attr_changes) | set(self.texts) | set(self.inserts) | collapse:
            if self._inside_removed(element) is None:
                out += self._element_splices(element, element in collapse)
        for element in self.removed:
            parent = element.getparent()
            if parent is not None and (parent in collapse or self._inside_removed(parent) is not None):
                continue  # goes with its parent
            out.append(self._removal(self.spans[element]))
        return out

    def _collapsing_parents(self) -> set[etree._Element]:
        """Parents whose element children are all removed and whose remaining content is whitespace
        become self-closing: <memballoon model='none'/>, not an empty pair."""
        collapse: set[etree._Element] = set()
        for parent in {e.getparent() for e in self.removed}:
            if parent is None or self._inside_removed(parent) is not None or self._children(parent):
                continue
            if parent in self.inserts or parent in self.texts:
                continue
            if self._content_without_removed(parent, self.spans[parent]).strip() == b"":
                collapse.add(parent)
        return collapse

    def _element_splices(self, element: etree._Element, collapsed: bool) -> list[tuple[int, int, bytes]]:
        """One element's new start tag, text or inserted children."""
        span = self.spans[element]
        if collapsed:
            return [(span.start, span.end, self._start_tag(element, span, False, True))]
        if element in self.texts:
            return self._text_splices(element, span)
        new_children = self.inserts.get(element)
        if new_children is not None and (span.self_closing or not self._children(element)):
            return self._first_children_splices(element, span, new_children)
        out: list[tuple[int, int, bytes]] = []
        if element in self.attr_changes:
            out.append((span.start, span.start_end, self._start_tag(element, span, False, False)))
        if new_children is not None:
            out += self._insert_among_children(element, span, new_children, self._tag_quote(span))
        return out

    def _text_splices(self, element: etree._Element, span: Span) -> list[tuple[int, int, bytes]]:
        text = _escape_text(self.texts[element])
        if span.self_closing:
            closing = b"</" + element.tag.encode() + b">"
            return [(span.start, span.end, self._start_tag(element, span, True, False) + text + closing)]
        return [(span.start, span.start_end, self._start_tag(element, span, False, False)),
                (span.start_end, span.end_start, text)]

    def _first_children_splices(self, element: etree._Element, span: Span,
                                new_children: NewNode) -> list[tuple[int, int, bytes]]:
        """Children for an element that has none yet (self-closing or with only text/whitespace)."""
        indent = self._line_indent(span)
        quote = self._tag_quote(span)
        child_indent = self._child_indent(element, span) if not span.self_closing else \
            indent + self.style.indent_unit
        body = b"".join(self.style.eol + child_indent + _render(n, child_indent, self.style, quote)
                        for n in _ordered(element.tag, new_children.children))
        closing = self.style.eol + indent + b"</" + element.tag.encode() + b">"
        if span.self_closing:
            return [(span.start, span.end, self._start_tag(element, span, True, False) + body + closing)]
        out: list[tuple[int, int, bytes]] = []
        if element in self.attr_changes:
            out.append((span.start, span.start_end, self._start_tag(element, span, False, False)))
        if self.data[span.start_end:span.end_start].strip() == b"":
            out.append((span.start_end, span.end_start, body + self.style.eol + indent))
        else:
            out.append((span.start_end, span.start_end, body))
        return out

    def _content_without_removed(self, element: etree._Element, span: Span) -> bytes:
        content = bytearray(self.data[span.start_end:span.end_start])
        for child in element:
            if isinstance(child.tag, str) and child in self.removed:
                cs = self.spans[child]
                content[cs.start - span.start_end:cs.end - span.start_end] = b" " * (cs.end - cs.start)
        return bytes(content)

    def _insert_among_children(self, element: etree._Element, span: Span, holder: NewNode,
                               quote: bytes) -> list[tuple[int, int, bytes]]:
        children = self._children(element)
        child_indent = self._child_indent(element, span)
        ranks: list[int] = []
        current = -1
        for child in children:
            r = rank(element.tag, child.tag)
            current = r if r is not None else current
            ranks.append(current)
        groups: dict[int, list[NewNode]] = {}
        for node in _ordered(element.tag, holder.children):
            r = rank(element.tag, node.tag)
            r = 10_000 if r is None else r
            after = None
            for index, child_rank in enumerate(ranks):
                if child_rank <= r:
                    after = index
            position = self._after(self.spans[children[after]]) if after is not None else span.start_end
            groups.setdefault(position, []).append(node)
        return [(pos, pos, b"".join(self.style.eol + child_indent + _render(n, child_indent, self.style, quote)
                                   for n in nodes)) for pos, nodes in groups.items()]

    def _after(self, span: Span) -> int:
        """Insertion point after an element: past the comments that follow it to the end of its
        line (`<model type='virtio'/>  <!-- why -->`), else right after it.

        The comments are read one by one from the element on, and the line's end only reached
        through them. Before: a regex that tried every way to split the rest of the line into
        comments (exponential: 22 comments then an element, 0.6 s, doubling with each one);
        then a search for the line's end and a copy of the rest of it for every insertion
        (quadratic: 40,000 NICs on one line, 3.5 s of the splice's 8.8 s). Both took
        `<!-- a --> <e/> <!-- b -->` for comments only, one comment from '<!--' to the last '-->':
        a one-line domain ending in a comment got its insertions after it, outside the root."""
        end = pos = span.end
        while True:
            pos = self._blanks_after(pos)
            if pos == len(self.data) or self.data[pos] == 0x0A:  # "\n": only comments to the end of the line
                return end
            if not self.data.startswith(b"<!--", pos):
                return span.end
            close = self.data.find(b"-->", pos + 4)
            if close < 0 or self.data.find(b"\n", pos, close) >= 0:  # it goes on past this line
                return span.end
            end = pos = close + 3

    def _removal(self, span: Span) -> tuple[int, int, bytes]:
        """The element's bytes, or its whole line when nothing but blanks shares it."""
        start, end = self._blanks_before(span.start), self._blanks_after(span.end)
        if (start == 0 or self.data[start - 1] == 0x0A) and self.data[end:end + 1] == b"\n":
            return (start, end + 1, b"")
        return (span.start, span.end, b"")


def _plan(data: bytes, root: etree._Element, edits: list[tuple[str, Edit]],
          source: str) -> tuple[_Planner, list[tuple[int, int, bytes]]] | None:
    """The planner and its splices in order, or None when two splices touch the same bytes."""
    planner = _Planner(data, root, source)
    for code, edit in edits:
        planner.add(code, edit)
    planner.drop_conflicting()
    splices = sorted(planner.splices(), key=lambda s: (s[0], s[1]))
    if any(start < previous_end for (_, previous_end, _), (start, _, _) in pairwise(splices)):
        return None
    return planner, splices


def apply_edits(data: bytes, root: etree._Element, edits: list[tuple[str, Edit]], source: str) -> PatchResult:
    """Apply (rule code, edit) pairs in order; earlier codes win conflicts.

    Fixes whose splices overlap (two rules rewriting the same bytes in ways the planner cannot
    merge) are not applied: the later code is dropped as a conflict and the file keeps those bytes."""
    order = list(dict.fromkeys(code for code, _ in edits))
    planned = _plan(data, root, edits, source)
    overlapping: list[Conflict] = []
    if planned is None:  # rare: find the codes that can go together, in rule order
        kept: list[str] = []
        planned = _plan(data, root, [], source)
        for code in order:
            trial = [(c, e) for c, e in edits if c in kept or c == code]
            attempt = _plan(data, root, trial, source)
            if attempt is None:
                overlapping.append(Conflict(", ".join(kept) or "(the file)", code,
                                            "its edits overlap bytes another fix rewrites"))
            else:
                kept.append(code)
                planned = attempt
        edits = [(c, e) for c, e in edits if c in kept]
    planner, splices = planned  # type: ignore[misc]  # _plan of no edits always plans
    out = bytearray()
    pos = 0
    for start, end, text in splices:
        out += data[pos:start] + text
        pos = end
    out += data[pos:]
    codes = [code for code in dict.fromkeys(code for code, _ in edits) if code not in planner.dropped_codes]
    return PatchResult(bytes(out), codes, planner.conflicts + overlapping)
