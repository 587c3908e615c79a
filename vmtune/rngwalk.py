"""Element and attribute paths of libvirt's installed domain schema (RelaxNG), for the knob inventory.

`vmtune.schema_knobs` keeps, as data, what vmtune says about each performance-relevant knob of the domain
XML; a test walks the schema libvirt installed (/usr/share/libvirt/schemas/domain.rng and the files
it includes) and fails when a path is neither judged nor excluded there, so a libvirt upgrade shows
its new knobs. This module runs only in that test and in the renderer of docs/knobs.md, never on
the check path.

The walk is deliberately simple: `<include>` is followed (a grammar's own definitions override the
included ones of the same name, as RelaxNG says, and `combine` definitions are merged), every
`<ref>` is expanded, and a definition already being expanded on the current branch is not entered
again (backing chains, nested `<source>`s), which bounds the walk. That guard hides no knob: every
definition is walked the first time a branch reaches it, so its elements and attributes are listed
at least there; only their repeats deeper in the recursion are not. Value constraints, choices and
cardinality do not matter for "which paths exist" and are ignored. Only named elements and
attributes make paths; `anyName` (free-form metadata) does not.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

SCHEMAS = Path("/usr/share/libvirt/schemas")
RNG = "{http://relaxng.org/ns/structure/1.0}"
LEAVES = frozenset({"name", "anyName", "nsName", "data", "value", "param", "text", "empty", "notAllowed",
                    "documentation", "except"})
MAX_DEPTH = 40  # paths below this depth are not listed (none of libvirt 9.0's is deeper than ~15)


def _local(el: etree._Element) -> str:
    return etree.QName(el).localname if isinstance(el.tag, str) else ""


def _load(path: Path, defines: dict[str, list[etree._Element]], seen: set[Path]) -> etree._Element | None:
    """Read a grammar and its includes into `defines`; returns the grammar's `<start>`, if any."""
    path = path.resolve()
    if path in seen:
        return None
    seen.add(path)
    root = etree.parse(str(path)).getroot()
    own: dict[str, list[etree._Element]] = {}
    start = None
    for child in root:
        name = _local(child)
        if name == "include":
            start = _load(path.parent / child.get("href", ""), defines, seen) or start
        elif name == "define":
            own.setdefault(child.get("name", ""), []).append(child)
        elif name == "start":
            start = child
    for name, bodies in own.items():
        # A plain definition replaces an included one; `combine` ones add to it.
        if any(b.get("combine") is None for b in bodies):
            defines[name] = bodies
        else:
            defines.setdefault(name, []).extend(bodies)
    return start


def _names(el: etree._Element) -> list[str]:
    """The names an `<element>` or `<attribute>` may have (its name attribute, or `<name>` children)."""
    if el.get("name"):
        return [el.get("name", "").split(":")[-1]]
    names = []
    for child in el:
        if _local(child) == "name":
            names.append((child.text or "").strip())
        elif _local(child) == "choice":
            names += [(c.text or "").strip() for c in child if _local(c) == "name"]
    return names


def schema_paths(schemas: Path = SCHEMAS, root: str = "domain.rng") -> list[str]:
    """Every element and attribute path under `<domain>`, like `cputune/quota` or `devices/disk/driver/@cache`."""
    defines: dict[str, list[etree._Element]] = {}
    start = _load(schemas / root, defines, set())
    if start is None:
        raise ValueError(f"{schemas / root}: no <start>")
    found: set[str] = set()
    # (node, path) pairs already walked; holding the nodes keeps lxml from reusing their proxies
    done: set[tuple[etree._Element, tuple[str, ...]]] = set()

    def walk(node: etree._Element, path: tuple[str, ...], stack: frozenset[str]) -> None:
        if (node, path) in done:
            return
        done.add((node, path))
        for child in node:
            kind = _local(child)
            if kind == "ref":
                name = child.get("name", "")
                if name not in stack:
                    for body in defines.get(name, []):
                        walk(body, path, stack | {name})
            elif kind in ("element", "attribute"):
                for name in _names(child):
                    sub = (*path, name if kind == "element" else "@" + name)
                    if len(sub) <= MAX_DEPTH:
                        found.add("/".join(sub))
                        if kind == "element":
                            walk(child, sub, stack)
            elif kind not in LEAVES:
                walk(child, path, stack)  # group, choice, optional, interleave, zeroOrMore...

    walk(start, (), frozenset())
    # Paths are relative to <domain>: drop its own entry and prefix.
    return sorted(p.removeprefix("domain/") for p in found if p.startswith("domain/"))


if __name__ == "__main__":
    print("\n".join(schema_paths()))
