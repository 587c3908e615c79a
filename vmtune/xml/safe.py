"""Parse untrusted XML: no entity expansion, no network, no DTD loading."""

from __future__ import annotations

import _thread

from lxml import etree

from vmtune.errors import NotADomainError, TooManyElementsError, VmtuneError


def _entity_declaration(data: bytes) -> int:
    """Offset of the first `<!ENTITY`, in any case, or -1. Found in an upper-cased copy rather
    than with a case-insensitive regex (the same ASCII matching for bytes): compiling one costs
    ~0.1 ms at every start. A file without `<!` (virsh dumpxml writes none) needs no copy; find,
    not `in`, which first tries its operand as an integer and makes and drops a TypeError. The
    one byte `!` first: a one-byte search is memchr, while a longer pattern goes through CPython's
    general search at ~3.6 instructions a byte (issue 45: ~7 K a domain file), and most domain
    XML has no `!` at all."""
    return data.upper().find(b"<!ENTITY") if data.find(b"!") != -1 and data.find(b"<!") != -1 else -1


# lxml parsers must not be shared between threads. _thread._local is what threading.local is,
# without importing threading (and weakref) at every start.
_local = _thread._local()


def _parser() -> etree.XMLParser:
    parser: etree.XMLParser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = _new_parser()
    return parser


def _new_parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_blank_text=False,
        remove_comments=False,
        # No table of ID attributes: domain XML has no xml:id and nothing looks one up (the XPath
        # subset has no id()); building it was a quarter of the parse time.
        collect_ids=False,
        # UTF-8 whatever the file declares, as libvirt reads it (virsh refuses UTF-16 and a
        # Latin-1 accent, and reads a declared UTF-7 as UTF-8). It also keeps the byte-level
        # checks sound: an entity declaration or a comment is in the bytes as written.
        encoding="utf-8",
    )


def parse_xml(data: bytes, source: str) -> etree._Element:
    """Parse bytes into an lxml root element or raise VmtuneError naming source and line."""
    entity = _entity_declaration(data)
    if entity != -1:
        # Domain XML never declares entities; refusing them closes entity-expansion attacks
        # (billion laughs, external entities) in every parser we use, lxml and pyexpat alike.
        line = data[:entity].count(b"\n") + 1
        raise VmtuneError("entity declarations are not allowed in domain XML", source, line)
    try:
        return etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        line = exc.position[0] if exc.position else None
        reason = " ".join((exc.msg or str(exc)).split(", line ")[0].split())  # one line, whatever libxml2 said
        if b"\0" in data[:4]:  # every ASCII character of UTF-16 or UTF-32 text has a zero byte
            reason += " (the file looks like UTF-16 or UTF-32; libvirt reads domain XML as UTF-8)"
        elif "encoding" in reason:
            reason += " (libvirt reads domain XML as UTF-8, whatever the file declares)"
        raise VmtuneError(f"malformed XML: {reason}", source, line) from None


def line_of(element: etree._Element | None) -> int | None:
    line = element.sourceline if element is not None else None
    return line if isinstance(line, int) else None


# The most elements vmtune checks in one domain. Real definitions have tens to hundreds (866 in the
# largest virt-install test domain); a 4096-vCPU guest listing every vCPU, its pin and 64 NUMA cells
# with full distance tables has about 12,500. Every rule, fix and report costs time and memory per
# element: 50,000 keeps a hostile domain near a second and 200 MB (SECURITY.md), where 4 MiB of
# `<x/>` (a million elements) cost 12 s and 730 MB under --fix.
MAX_ELEMENTS = 50_000


def parse_domain(data: bytes, source: str) -> etree._Element:
    root = parse_xml(data, source)
    if root.tag != "domain":
        raise NotADomainError(f"not a libvirt domain (root element <{root.tag}>)", source, line_of(root))
    # An element takes at least 4 bytes (`<a/>`) and opens with `<`: a file under 200 KB, or with
    # fewer `<` than the limit, needs no count (and an ordinary file no scan at all).
    over = len(data) > 4 * MAX_ELEMENTS and data.count(b"<") > MAX_ELEMENTS
    first_over = _element_past_limit(root) if over else None
    if first_over is not None:
        raise TooManyElementsError(f"more than {MAX_ELEMENTS:,} elements, the most vmtune checks in one domain",
                                   source, line_of(first_over))
    return root


def _element_past_limit(root: etree._Element) -> etree._Element | None:
    """Element number MAX_ELEMENTS + 1 in document order, or None. Found by libxml2 (linear, no
    Python object per element): the parsed tree is the bounded part, a Python walk would not be."""
    found = root.xpath(f"(//*)[{MAX_ELEMENTS + 1}]")
    return found[0] if isinstance(found, list) and found and isinstance(found[0], etree._Element) else None
