"""Suppressions: XML comments (files) and <metadata> (the only form that survives define).

    <!-- vmtune: ignore[CLK003,NET001] reason="hpet needed by the legacy RTOS" -->
    <clock .../>                  <- the next element and its subtree

    <!-- vmtune: ignore-file[USB] reason="console-only lab VMs" -->   <- the whole file

    <metadata>
      <vmtune:vmtune xmlns:vmtune="https://vmtune.dev/xmlns/domain/1">
        <vmtune:ignore rules="CLK003" reason="..."/>                  <- the whole domain
        <vmtune:ignore rules="NET001" xpath="/domain/devices/interface[2]" reason="..."/>
      </vmtune:vmtune>
    </metadata>
"""

from __future__ import annotations

import re

from lxml import etree

from vmtune.facts.domain import VMTUNE_NS, Domain

# Patterns compiled on first use (re caches them): most comments never mention vmtune, and
# compiling both costs ~0.35 ms of a one-file check.
_MENTION = r"^\s*vmtune\s*:"  # re.I: meant as a suppression, whether or not it parses
# The space before reason= belongs to the optional group: `\]\s*(?:reason=…)?\s*$` split a run of
# spaces between two \s* in every way before failing, quadratic (a 16,000-space comment took 0.6 s).
_COMMENT = r"^\s*vmtune:\s*(ignore|ignore-file)\[([^\]]*)\](?:\s*reason=(\"[^\"]*\"|'[^']*'))?\s*$"  # re.S


def _mentions_vmtune(text: str) -> bool:
    # No character outside "vmtune".lower() matches one of its letters under re.I, so a comment
    # without it cannot match _MENTION (nor _COMMENT, which wants it in lower case).
    return "vmtune" in text.lower() and re.match(_MENTION, text, re.I) is not None


def _suppression(text: str) -> re.Match[str] | None:
    return re.match(_COMMENT, text, re.S) if "vmtune" in text else None


class Suppression:
    """One suppression comment or metadata entry. (Plain classes here and in the report model,
    not dataclasses: creating a dataclass costs ~0.5 ms at every start of a pre-commit hook.)"""

    __slots__ = ("error", "origin", "reason", "scope", "selectors", "used")

    def __init__(self, selectors: tuple[str, ...], reason: str | None, scope: etree._Element,
                 origin: etree._Element, used: set[str] | None = None, error: str | None = None) -> None:
        self.selectors = selectors
        self.reason = reason
        self.scope = scope  # findings on this element or inside it are suppressed
        self.origin = origin  # the comment or metadata element, for line numbers
        self.used: set[str] = set() if used is None else used
        self.error = error  # why it cannot work (an XPath outside the allowed subset): a SUP003 finding


# Whoever can edit a domain's metadata writes these XPaths (a live `check --all` evaluates
# every domain's): only the linear subset of vmtune.xml.xpath, and only so much per domain.
# Each costs linear time in the domain (vmtune.xml.xpath.Shape.passes), drawn from the domain's
# XPath budget; vmtune's own paths use child steps and 1-3 comparisons.
MAX_XPATH_SUPPRESSIONS = 16
MAX_XPATH_TERMS = 32  # comparisons in all xpath suppressions of one domain


def _next_element(comment: etree._Element) -> etree._Element | None:
    node = comment.getnext()
    while node is not None and not isinstance(node.tag, str):
        node = node.getnext()
    return node


def _split(text: str) -> tuple[str, ...]:
    from vmtune.rules.base import note_renamed

    selectors = tuple(s.strip() for s in text.split(",") if s.strip())
    note_renamed(selectors)  # a renamed code still suppresses its rule: said once
    return selectors


def malformed(domain: Domain) -> list[etree._Element]:
    """Comments that start like a suppression (`vmtune:`) but do not parse as one: a typo such as
    `vmtune:ignore [CLK003]` must not pass silently."""
    return [c for c in domain.comments if _mentions_vmtune(c.text or "") and not _suppression(c.text or "")]


def collect(domain: Domain) -> list[Suppression]:
    root = domain.root
    found: list[Suppression] = []
    for comment in domain.comments:
        match = _suppression(comment.text or "")
        if match is None:
            continue
        kind, codes, reason = match.groups()
        scope = root if kind == "ignore-file" else _next_element(comment)
        if scope is None:
            scope = comment  # nothing follows: it can match nothing, and will be reported unused
        found.append(Suppression(_split(codes), reason[1:-1].strip() if reason else None, scope, comment))
    meta = domain.vmtune_metadata
    if meta is not None:
        budget = _Budget()
        for ignore in meta.iterfind(f"{{{VMTUNE_NS}}}ignore"):
            scope, error = root, None
            where = ignore.get("xpath")
            if where is not None:
                scope, error = _xpath_scope(domain, ignore, where, budget)
            found.append(Suppression(_split(ignore.get("rules", "")), (ignore.get("reason") or "").strip() or None,
                                     scope, ignore, error=error))
    return found


class _Budget:
    __slots__ = ("suppressions", "terms")

    def __init__(self) -> None:
        self.suppressions = 0
        self.terms = 0


def _xpath_scope(domain: Domain, ignore: etree._Element, where: str,
                 budget: _Budget) -> tuple[etree._Element, str | None]:
    """The element an xpath= suppression covers; the ignore element itself (matching nothing)
    with the reason when the XPath is refused or finds no element."""
    from vmtune.xml.xpath import MAX_WORK, XPathNotAllowed, compile_checked

    root = domain.root
    try:
        xpath, shape = compile_checked(where)
    except XPathNotAllowed as exc:
        return ignore, f"xpath outside the allowed subset: {exc}"
    budget.suppressions += 1
    budget.terms += shape.terms
    if budget.suppressions > MAX_XPATH_SUPPRESSIONS or budget.terms > MAX_XPATH_TERMS:
        return ignore, (f"beyond the {MAX_XPATH_SUPPRESSIONS} xpath suppressions with {MAX_XPATH_TERMS} comparisons "
                        "in all evaluated per domain; not evaluated")
    # The same work budget as custom checks, which ran first: a large domain allows fewer.
    over = domain.xpath_budget.charge(shape.passes)
    if over is not None:
        return ignore, (f"not evaluated: with it, XPaths would visit {over:,} nodes of this domain's "
                        f"{domain.xpath_budget.nodes:,}, more than the {MAX_WORK:,} evaluated per domain")
    try:
        hits = xpath(root.getroottree())  # type: ignore[operator]
    except etree.XPathError as exc:  # cannot happen inside the subset; never hide the domain's findings
        return ignore, f"xpath failed: {exc}"
    if isinstance(hits, list) and hits and isinstance(hits[0], etree._Element):
        return hits[0], None
    return ignore, None


def covers(scope: etree._Element, element: etree._Element | None) -> bool:
    node = element
    while node is not None:
        if node is scope:
            return True
        node = node.getparent()
    return element is None and scope.getparent() is None


def trails_an_element(comment: etree._Element) -> bool:
    """A comment on the same line as the end of the element before it: written as if it applied
    to that element, while a suppression comment applies to the next one."""
    previous = comment.getprevious()
    while previous is not None and not isinstance(previous.tag, str):
        previous = previous.getprevious()
    if previous is None or not isinstance(comment.sourceline, int):
        return False
    last = max((e.sourceline for e in previous.iter() if isinstance(e.sourceline, int)), default=None)
    return last == comment.sourceline
