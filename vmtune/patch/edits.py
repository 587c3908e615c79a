"""What a fix asks for, in terms of the parsed tree. The splicer turns these into bytes.

Rules never produce text: they name elements of the lxml tree they were given and say
what should change. That keeps rules pure and lets the splicer merge edits per element.
"""

from __future__ import annotations

from lxml import etree

from vmtune.record import Record

# The records below are values (vmtune.record: a NamedTuple costs ~0.15 ms to create at every start).


class Step(Record):
    """One level of a path to ensure: a tag, plus attributes that identify it among siblings."""

    __slots__ = ("key", "tag")

    def __init__(self, tag: str, key: tuple[tuple[str, str], ...] = ()) -> None:
        self.tag = tag
        self.key = key

    def matches(self, element: etree._Element) -> bool:
        return element.tag == self.tag and all(element.get(k) == v for k, v in self.key)


def step(tag: str, **key: str) -> Step:
    return Step(tag, tuple(key.items()))


def path(*parts: str | Step) -> tuple[Step, ...]:
    """path('features', 'hyperv', 'synic') or path('clock', step('timer', name='hpet'))."""
    return tuple(p if isinstance(p, Step) else Step(p) for p in parts)


class SetAttrs(Record):
    """Set (add or change) attributes on an existing element; a value of None removes one."""

    __slots__ = ("attrs", "element")

    def __init__(self, element: etree._Element, attrs: tuple[tuple[str, str | None], ...]) -> None:
        self.element = element
        self.attrs = attrs


class Ensure(Record):
    """Make parent/steps... exist (creating what is missing) and carry attrs and text.

    With new=True the last step is always created, even when a matching element exists.
    """

    __slots__ = ("attrs", "new", "parent", "steps", "text")

    def __init__(self, parent: etree._Element, steps: tuple[Step, ...], attrs: tuple[tuple[str, str], ...] = (),
                 text: str | None = None, new: bool = False) -> None:
        self.parent = parent
        self.steps = steps
        self.attrs = attrs
        self.text = text
        self.new = new


class Remove(Record):
    __slots__ = ("element",)

    def __init__(self, element: etree._Element) -> None:
        self.element = element


class SetText(Record):
    __slots__ = ("element", "text")

    def __init__(self, element: etree._Element, text: str) -> None:
        self.element = element
        self.text = text


Edit = SetAttrs | Ensure | Remove | SetText


def set_attrs(element: etree._Element, attrs: dict[str, str | None]) -> SetAttrs:
    return SetAttrs(element, tuple(attrs.items()))


def ensure(parent: etree._Element, steps: tuple[Step, ...], attrs: dict[str, str] | None = None,
           text: str | None = None, new: bool = False) -> Ensure:
    return Ensure(parent, steps, tuple((attrs or {}).items()), text, new)


class Conflict:
    """Two fixes disagreed; the first (in rule order) won. (Not a dataclass: see FileIdentity.)"""

    __slots__ = ("dropped", "kept", "reason")

    def __init__(self, kept: str, dropped: str, reason: str) -> None:
        self.kept = kept
        self.dropped = dropped
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conflict) and (self.kept, self.dropped, self.reason) == (
            other.kept, other.dropped, other.reason)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return f"Conflict(kept={self.kept!r}, dropped={self.dropped!r}, reason={self.reason!r})"
