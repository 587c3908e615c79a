"""Element paths that survive edits: identify siblings by what they are, not where they are.

`/domain/devices/input[@type='tablet'][@bus='usb']` stays the same when a mouse is added
before the tablet; lxml's positional `/domain/devices/input[2]` would not. Used for
finding identities (baselines, SARIF fingerprints) and the JSON `xpath` field.
"""

from __future__ import annotations

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
    qname = etree.QName(element)
    name = qname.localname if not qname.namespace else f"*[local-name()={_quote(qname.localname)}]"
    if parent is None:
        return name
    # Identifying predicates even for an only child: adding a sibling later must not change the path.
    attrs, child = _keys(element)
    step = name + "".join(f"[@{a}={_quote(v)}]" for a, v in attrs)
    if child is not None:
        step += f"[{child[0]}/@{child[1]}={_quote(child[2])}]"
    matching = [c for c in parent.iterchildren(element.tag) if _selected_by(c, attrs, child)]
    if len(matching) > 1:
        step += f"[{matching.index(element) + 1}]"
    return step


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


def stable_path(element: etree._Element) -> str:
    steps = []
    node: etree._Element | None = nearest_element(element)
    while node is not None:
        steps.append(_step(node))
        node = node.getparent()
    return "/" + "/".join(reversed(steps))
