"""What a fix asks for, in terms of the parsed tree. The splicer turns these into bytes.

Rules never produce text: they name elements of the lxml tree they were given and say
what should change. That keeps rules pure and lets the splicer merge edits per element.
"""

from __future__ import annotations

from typing import NamedTuple

from lxml import etree


class Step(NamedTuple):
    """One level of a path to ensure: a tag, plus attributes that identify it among siblings."""

    tag: str
    key: tuple[tuple[str, str], ...] = ()

    def matches(self, element: etree._Element) -> bool:
        return element.tag == self.tag and all(element.get(k) == v for k, v in self.key)


def step(tag: str, **key: str) -> Step:
    return Step(tag, tuple(key.items()))


def path(*parts: str | Step) -> tuple[Step, ...]:
    """path('features', 'hyperv', 'synic') or path('clock', step('timer', name='hpet'))."""
    return tuple(p if isinstance(p, Step) else Step(p) for p in parts)


class SetAttrs(NamedTuple):
    """Set (add or change) attributes on an existing element; a value of None removes one."""

    element: etree._Element
    attrs: tuple[tuple[str, str | None], ...]


class Ensure(NamedTuple):
    """Make parent/steps... exist (creating what is missing) and carry attrs and text.

    With new=True the last step is always created, even when a matching element exists.
    """

    parent: etree._Element
    steps: tuple[Step, ...]
    attrs: tuple[tuple[str, str], ...] = ()
    text: str | None = None
    new: bool = False


class Remove(NamedTuple):
    element: etree._Element


class SetText(NamedTuple):
    element: etree._Element
    text: str


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
