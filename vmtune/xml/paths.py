"""Element paths that survive edits: identify siblings by what they are, not where they are.

`/domain/devices/input[@type='tablet'][@bus='usb']` stays the same when a mouse is added
before the tablet; lxml's positional `/domain/devices/input[2]` would not. Used for
finding identities (baselines, SARIF fingerprints) and the JSON `xpath` field.
"""

from __future__ import annotations

from operator import itemgetter

from lxml import etree

KEY_ATTRIBUTES = ("name", "type", "model", "bus", "dev", "index", "vcpu", "id", "cellid")
# Keys only where they identify the element: a disk driver's iothread= is a setting a fix may add.
TAG_KEY_ATTRIBUTES = {"iothreadpin": ("iothread",), "iothreadsched": ("iothreads",)}
KEY_CHILDREN = {"disk": ("target", "dev"), "interface": ("mac", "address"), "hostdev": ("source/address", "bus")}


def _quote(value: str) -> str:
    return f"'{value}'" if "'" not in value else f'"{value}"'


def _keys(element: etree._Element) -> tuple[list[tuple[str, str]], tuple[str, str, str] | None]:
    keys = KEY_ATTRIBUTES + TAG_KEY_ATTRIBUTES.get(str(element.tag), ())
    attrs = [(a, v) for a in keys if (v := element.get(a)) is not None]
    child = KEY_CHILDREN.get(str(element.tag))
    if child is not None:
        node = element.find(child[0])
        value = node.get(child[1]) if node is not None else None
        if value is not None:
            return attrs, (child[0], child[1], value)
    return attrs, None


def _selected_by(candidate: etree._Element, attrs: list[tuple[str, str]], child: tuple[str, str, str] | None) -> bool:
    """Would the XPath predicates of attrs/child select this sibling too?"""
    if any(candidate.get(a) != v for a, v in attrs):
        return False
    if child is None:
        return True
    node = candidate.find(child[0])
    return node is not None and node.get(child[1]) == child[2]


def _step(element: etree._Element) -> str:
    parent = element.getparent()
    tag = str(element.tag)
    # Clark notation, read as etree.QName would (without building one: a step for every finding)
    name = tag if tag[0] != "{" else f"*[local-name()={_quote(tag.partition('}')[2])}]"
    if parent is None:
        return name
    # Identifying predicates even for an only child: adding a sibling later must not change the path.
    attrs, child = _keys(element)
    step = name + "".join(f"[@{a}={_quote(v)}]" for a, v in attrs)
    if child is not None:
        step += f"[{child[0]}/@{child[1]}={_quote(child[2])}]"
    cached = _large_groups.get((parent, element.tag))
    if cached is not None and element in cached:
        return step + cached[element]
    siblings = list(parent.iterchildren(element.tag))
    if len(siblings) > LARGE_GROUP:
        root = parent.getroottree().getroot()
        if _large_groups_root and _large_groups_root[0] is not root:
            # Another document: drop the last one's groups, so a batch of large hostile files
            # does not keep earlier trees (hundreds of MB each) alive.
            _large_groups.clear()
        _large_groups_root[:] = [root]
        positions = _large_groups[(parent, element.tag)] = _group_positions(siblings)
        if len(_large_groups) > 8:  # a few parents at a time: a path's steps
            del _large_groups[next(iter(_large_groups))]
        return step + positions[element]
    if len(siblings) == 1:  # the element alone: nothing else its predicates could select
        return step
    matching = [c for c in siblings if _selected_by(c, attrs, child)]
    if len(matching) > 1:
        step += f"[{matching.index(element) + 1}]"
    return step


# Siblings of one tag beyond this many get their positions from one pass over them, kept for the
# next element of the group: the comparison above, per element, is quadratic in the group (a
# domain of 4,000 identical disks took 34 s to report as JSON, a 10 MiB one days). Real domains
# have a few dozen devices of a kind and never get here.
LARGE_GROUP = 64
_large_groups: dict[tuple[etree._Element, object], dict[etree._Element, str]] = {}
_large_groups_root: list[etree._Element] = []  # the document those groups belong to


def _group_positions(siblings: list[etree._Element]) -> dict[etree._Element, str]:
    """The position predicate ("" or "[n]") _step gives each of these same-tag siblings, in time
    linear in their number for a bounded number of key shapes. A sibling is selected by an
    element's predicates when its keys include the element's keys (same values): for each shape
    (the set of key names an element has), the siblings are counted by their keys projected on
    that shape, in document order."""
    keyed = []
    canonical: dict[tuple[str, ...], tuple[str, ...]] = {}  # one object per shape: compared with `is`
    for sibling in siblings:
        attrs, child = _keys(sibling)
        keys = dict(attrs)
        if child is not None:
            keys[f"{child[0]}/@{child[1]}"] = child[2]
        shape = tuple(sorted(keys))
        keyed.append((sibling, keys, canonical.setdefault(shape, shape)))
    # A shape's key values as one hashable value (itemgetter: one call, not a loop per sibling).
    project = {shape: (itemgetter(*shape) if shape else lambda _keys: ()) for shape in canonical.values()}
    within = {shape: [(s, project[s]) for s in canonical.values() if set(s) <= set(shape)]
              for shape in canonical.values()}
    counts: dict[tuple[tuple[str, ...], object], int] = {}
    rank: dict[etree._Element, int] = {}
    for sibling, keys, shape in keyed:
        for sub, values in within[shape]:
            group = (sub, values(keys))
            seen = counts.get(group, 0)
            if sub is shape:
                rank[sibling] = seen
            counts[group] = seen + 1
    positions = {}
    for sibling, keys, shape in keyed:
        total = counts[(shape, project[shape](keys))]
        positions[sibling] = f"[{rank[sibling] + 1}]" if total > 1 else ""
    return positions


def nearest_element(node: etree._Element) -> etree._Element:
    """A comment or processing instruction stands for the element it precedes (a suppression
    comment applies to the next element), else the element that holds it."""
    if isinstance(node.tag, str):
        return node
    following = node.getnext()
    while following is not None and not isinstance(following.tag, str):
        following = following.getnext()
    if following is not None:
        return following
    parent = node.getparent()
    return parent if parent is not None else node.getroottree().getroot()


def stable_path(element: etree._Element, known: dict[etree._Element, str] | None = None) -> str:
    """The element's path. `known`: the paths already made in this tree, by element, read and
    extended (the findings of one domain share their ancestors, and often their element). Only
    while the tree is not edited: a sibling added or removed changes the paths after it."""
    if known is None:
        known = {}
    unknown = []  # the element and its ancestors up to the first whose path is known
    node: etree._Element | None = nearest_element(element)
    path = None
    while node is not None and (path := known.get(node)) is None:
        unknown.append(node)
        node = node.getparent()
    path = path or ""
    for node in reversed(unknown):
        path = known[node] = f"{path}/{_step(node)}"
    return path
