"""Where each element sits in the original bytes, so fixes can splice instead of re-serialise.

pyexpat reports the byte offset of every start tag and end tag; lxml's element order
(comments and processing instructions aside) is the same document order, so the n-th
element of `root.iter()` is the n-th start tag expat saw.
"""

from __future__ import annotations

import re
from xml.parsers import expat

from lxml import etree

from vmtune.errors import VmtuneError
from vmtune.record import Record

# A start tag up to its closing '>', skipping '>' inside quoted attribute values.
_START_TAG = re.compile(rb"<[^>\"']*(?:(?:\"[^\"]*\"|'[^']*')[^>\"']*)*>")


class Span(Record):
    """(Record, not a dataclass: see vmtune.fixer.AppliedFix.)"""

    __slots__ = ("end", "end_start", "start", "start_end")

    def __init__(self, start: int, start_end: int, end_start: int, end: int) -> None:
        self.start = start  # '<' of the start tag
        self.start_end = start_end  # just after the start tag's '>'
        self.end_start = end_start  # '<' of '</tag>' (== start_end for <tag/>)
        self.end = end  # just after the end tag (== start_end for <tag/>)

    @property
    def self_closing(self) -> bool:
        return self.end == self.start_end


def element_spans(data: bytes, source: str) -> list[Span]:
    starts: list[int] = []
    stack: list[int] = []
    pairs: dict[int, int] = {}
    parser = expat.ParserCreate(encoding="UTF-8")  # as lxml and libvirt read it (vmtune.xml.safe)
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def on_start(_name: str, _attrs: object) -> None:
        stack.append(len(starts))
        starts.append(parser.CurrentByteIndex)

    def on_end(_name: str) -> None:
        pairs[stack.pop()] = parser.CurrentByteIndex

    parser.StartElementHandler = on_start
    parser.EndElementHandler = on_end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise VmtuneError(f"malformed XML: {expat.ErrorString(exc.code)}", source, exc.lineno) from None
    spans = []
    for index, start in enumerate(starts):
        match = _START_TAG.match(data, start)
        if match is None:
            raise VmtuneError("cannot locate start tag", source)
        start_end = match.end()
        end_start = pairs[index]
        if end_start == start or data[start_end - 2:start_end] == b"/>":
            spans.append(Span(start, start_end, start_end, start_end))
        else:
            spans.append(Span(start, start_end, end_start, data.index(b">", end_start) + 1))
    return spans


def locate(data: bytes, root: etree._Element, source: str) -> dict[etree._Element, Span]:
    """Element -> span. The caller must keep `root` alive while using the mapping."""
    elements = [el for el in root.iter() if isinstance(el.tag, str)]
    spans = element_spans(data, source)
    if len(elements) != len(spans):
        raise VmtuneError("element count differs between parsers; refusing to patch", source)
    return dict(zip(elements, spans, strict=True))
