"""Whether libvirt kept what vmtune defined: the edits themselves, not whether a rule still fires.

A rule can still fire after its fix persisted (CLK002 stays at info once HPET is the fallback
timer), and a rule can stop firing although libvirt dropped part of an edit; so after a define,
vmtune compares three definitions as sets of facts (an element exists, an attribute or its
text has a value):

- old: what libvirt had (already in libvirt's normal form: it came from XMLDesc),
- sent: old with vmtune's edits,
- after: what libvirt has now.

Every fact vmtune changed (sent vs old) must hold in `after`: otherwise libvirt dropped or
rewrote that edit. Every fact that differs between old and after outside the elements vmtune
touched is a change vmtune did not make: another client's define that landed after vmtune's
(or libvirt normalising something beyond the edited elements); the backup then holds the
definition vmtune replaced.

Elements are keyed by their tag and identifying attributes (name, type, index, dev, ...), not
their position, because libvirt re-orders some siblings (controllers by type and index) when it
formats a definition.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from lxml import etree

from vmtune.xml.safe import parse_xml

# Attributes that say which element it is rather than how it is set.
IDENTITY = ("name", "type", "index", "dev", "id", "vcpu", "iothread", "cellid", "device")
# What libvirt assigns itself when it formats a definition: device addresses (re-assigned when
# vmtune removes one, or when a device is added or removed beside them) and the PCI
# controllers (root ports) it adds to give new devices a slot. Neither vmtune's edits nor
# other clients' changes are judged on them.
ASSIGNED_BY_LIBVIRT = re.compile(r"/address(\[[^\]]*\])?(#\d+)?(/|$)|/alias(/|$)|/devices/controller\[type=pci[,\]]")

Fact = tuple[str, str]  # (element key path, "" for the element itself, "@attr" or "#text")


def _segment(element: etree._Element) -> str:
    tag = etree.QName(element).localname
    ident = ",".join(f"{a}={element.get(a)}" for a in IDENTITY if element.get(a) is not None)
    return f"{tag}[{ident}]" if ident else tag


def facts(xml: str | bytes, source: str = "definition") -> dict[Fact, str]:
    """Every element, attribute and non-blank text of a definition, keyed independently of order."""
    root = parse_xml(xml.encode() if isinstance(xml, str) else xml, source)
    out: dict[Fact, str] = {}

    def walk(element: etree._Element, prefix: str) -> None:
        seen: Counter[str] = Counter()
        for child in element:
            if not isinstance(child.tag, str):  # comments, processing instructions
                continue
            seg = _segment(child)
            seen[seg] += 1
            key = f"{prefix}/{seg}" + (f"#{seen[seg]}" if seen[seg] > 1 else "")
            out[(key, "")] = ""
            for name, value in child.attrib.items():
                out[(key, f"@{etree.QName(name).localname}")] = str(value)
            if child.text and child.text.strip():
                out[(key, "#text")] = child.text.strip()
            walk(child, key)

    top = f"/{_segment(root)}"
    out[(top, "")] = ""
    for name, value in root.attrib.items():
        out[(top, f"@{etree.QName(name).localname}")] = str(value)
    walk(root, top)
    return out


def _judged(found: dict[Fact, str]) -> dict[Fact, str]:
    return {fact: value for fact, value in found.items() if not ASSIGNED_BY_LIBVIRT.search(fact[0])}


def describe(fact: Fact, value: str | None) -> str:
    path, what = fact
    path = re.sub(r"^/domain\[[^\]]*\]", "/domain", path)
    if what == "":
        return f"{path} {'present' if value is not None else 'absent'}"
    if value is None:
        return f"{path} {what} absent"
    return f"{path} {what}='{value}'"


@dataclass
class Verdict:
    """missing: vmtune's edits libvirt did not keep (with the codes they belong to);
    foreign: changes vmtune did not make."""

    missing: dict[str, list[str]] = field(default_factory=dict)  # code (or "?") -> edits
    foreign: list[str] = field(default_factory=list)

    @property
    def kept(self) -> bool:
        return not self.missing and not self.foreign


def _tags_only(path: str) -> str:
    """/domain/clock/timer[name=hpet]#2 and /domain/clock/timer[3] both -> /domain/clock/timer"""
    return re.sub(r"\[[^\]]*\]|#\d+", "", path)


def _owner(path: str, codes: dict[str, str]) -> str:
    """The applied fix (or fixes) whose finding points at the nearest enclosing element."""
    plain = _tags_only(path)
    best: list[str] = []
    best_len = -1
    for code, xpath in codes.items():
        where = _tags_only(xpath).rstrip("/")
        if (plain == where or plain.startswith(where + "/")) and len(where) >= best_len:
            best = [code] if len(where) > best_len else [*best, code]
            best_len = len(where)
    return "/".join(sorted(best)) or "?"


def _under(path: str, touched: set[str]) -> bool:
    return any(path == t or path.startswith(t + "/") for t in touched)


def verify(old: str, sent: str, after: str, codes: dict[str, str] | None = None) -> Verdict:
    """Compare what libvirt has (after) with what vmtune sent; `codes`: applied rule code -> the
    xpath of its finding, to say which fix an edit that did not persist belongs to."""
    before, wanted, now = (_judged(facts(xml, label)) for xml, label in ((old, "old"), (sent, "sent"),
                                                                          (after, "after")))
    verdict = Verdict()
    changed = {f: v for f, v in wanted.items() if before.get(f) != v}
    removed = [f for f in before if f not in wanted]
    for fact, value in changed.items():
        if now.get(fact) != value:
            verdict.missing.setdefault(_owner(fact[0], codes or {}), []).append(describe(fact, value))
    for fact in removed:
        if fact in now:
            verdict.missing.setdefault(_owner(fact[0], codes or {}), []).append(describe(fact, None))
    # Elements vmtune added, changed or removed: libvirt may fill in defaults below them.
    touched = {f[0] for f in changed} | {f[0] for f in removed}
    foreign = {fact[0] for fact in set(before) | set(now)
               if before.get(fact) != now.get(fact) and fact not in changed and fact not in removed
               and not _under(fact[0], touched)}
    # One line per element (its outermost changed ancestor), not per attribute.
    for path in sorted(foreign):
        if not _under(path, foreign - {path}):
            verdict.foreign.append(re.sub(r"^/domain\[[^\]]*\]", "/domain", path))
    return verdict
