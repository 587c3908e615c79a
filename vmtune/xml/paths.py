"""Element paths that survive edits: identify siblings by what they are, not where they are.

`/domain/devices/input[@type='tablet'][@bus='usb']` stays the same when a mouse is added
before the tablet; lxml's positional `/domain/devices/input[2]` would not. Used for
finding identities (baselines, SARIF fingerprints) and the JSON `xpath` field.
"""

from __future__ import annotations

from lxml import etree

KEY_ATTRIBUTES = ("name", "type", "model", "bus", "dev", "index", "vcpu", "iothread", "id", "cellid")
KEY_CHILDREN = {"disk": ("target", "dev"), "interface": ("mac", "address"), "hostdev": ("source/address", "bus")}


def _quote(value: str) -> str:
    return f"'{value}'" if "'" not in value else f'"{value}"'


def _predicates(element: etree._Element) -> list[str]:
    preds = [f"[@{a}={_quote(v)}]" for a in KEY_ATTRIBUTES if (v := element.get(a)) is not None]
    child = KEY_CHILDREN.get(str(element.tag))
    if child is not None:
        node = element.find(child[0])
        if node is not None and node.get(child[1]) is not None:
            preds.append(f"[{child[0]}/@{child[1]}={_quote(node.get(child[1]) or '')}]")
    return preds


def _step(element: etree._Element) -> str:
    parent = element.getparent()
    tag = element.tag if isinstance(element.tag, str) else "node()"
    qname = etree.QName(element)
    name = tag if not qname.namespace else f"*[local-name()={_quote(qname.localname)}]"
    if parent is None:
        return name
    # Identifying predicates even for an only child: adding a sibling later must not change the path.
    same = [c for c in parent if c.tag == element.tag]
    preds = _predicates(element)
    # XPath predicates also select siblings that carry more attributes: count those too.
    matching = [c for c in same if set(preds) <= set(_predicates(c))]
    step = name + "".join(preds)
    if len(matching) > 1:
        step = f"{step}[{matching.index(element) + 1}]" if preds else f"{name}[{same.index(element) + 1}]"
    return step


def stable_path(element: etree._Element) -> str:
    steps = []
    node: etree._Element | None = element
    while node is not None:
        steps.append(_step(node))
        node = node.getparent()
    return "/" + "/".join(reversed(steps))
