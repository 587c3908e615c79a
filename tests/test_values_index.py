"""VAL001 reads its values from the domain's element indexes: the same elements findall gives."""

from __future__ import annotations

import pytest

from vmtune.facts.domain import Domain
from vmtune.facts.units import InvalidValue
from vmtune.rules.values import _OTHER_PATHS, _PLAIN_UNITS, _PLANS, _SURELY_VALID_DIGITS, LOCATIONS, _size, _walk
from vmtune.xml.safe import parse_domain

from conftest import CORPUS, ROOT

CRAFTED = [
    b"<domain><vcpu>1</vcpu><vcpu current='x'>2</vcpu><devices><disk><driver queues='a'/></disk></devices>"
    b"<devices><interface><driver queues='2'/><driver queues='3'/></interface><disk><boot order='1'/></disk>"
    b"</devices><!-- <vcpu>9</vcpu> --><cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1'/></cputune></domain>",
    b"<domain><cputune/><devices/><cpu><numa><cell cpus='0' memory='1'/><cell cpus='1'/></numa></cpu></domain>",
    b"<domain/>",
]


def documents() -> list[bytes]:
    files = sorted((ROOT / "fixtures").glob("*/*.xml"))
    if (CORPUS / "domains").is_dir():
        files += sorted((CORPUS / "domains").glob("*.xml"))
    return [data for f in files if (data := f.read_bytes()).lstrip().startswith((b"<domain ", b"<domain>"))] + CRAFTED


@pytest.mark.parametrize("where, attribute", [(w, a) for w, a, _ in LOCATIONS])
def test_find_all_is_findall(where: str, attribute: str | None) -> None:
    steps = tuple(where.split("/"))
    for data in documents():
        root = parse_domain(data, "x.xml")
        assert Domain(root, "x.xml").find_all(steps) == root.findall(where), (where, data[:60])


def _slot_paths(top: str, steps: tuple[tuple[int, str], ...]) -> list[str]:
    """The path from <domain> of each slot of a plan."""
    paths = [top]
    for parent, tag in steps:
        paths.append(f"{paths[parent]}/{tag}")
    return paths


def test_every_location_uses_the_index_or_findall() -> None:
    """VAL001 reads every location once, in LOCATIONS order: through a walk plan per top-level
    element (plain tag paths) or through findall (anything else; none today)."""
    assert _OTHER_PATHS == ()  # today's locations are plain tag paths
    planned = [(_slot_paths(top, steps)[slot], attribute)
               for top, steps, checks in _PLANS for slot, at_slot in checks for attribute, _r, _digits in at_slot]
    assert planned == [(w, a) for w, a, _r in LOCATIONS]


def test_walk_is_findall() -> None:
    """Each slot of a walk plan holds what findall gives for its path, in document order."""
    for data in documents():
        root = parse_domain(data, "x.xml")
        domain = Domain(root, "x.xml")
        for top, steps, _checks in _PLANS:
            tops = domain.top_tags.get(top)
            if tops is None:
                assert root.findall(top) == []
                continue
            found = _walk(domain, top, tops, steps)
            for path, elements in zip(_slot_paths(top, steps), found, strict=True):
                assert elements == root.findall(path), (path, data[:60])


def test_surely_valid_values_are_valid() -> None:
    """VAL001 skips the reader for digits within _SURELY_VALID_DIGITS (and a size's plain unit):
    the largest such value, and the smallest, is one every such reader accepts."""
    from lxml import etree

    for read, digits in _SURELY_VALID_DIGITS.items():
        for text in ("0", "9" * digits):
            for unit in _PLAIN_UNITS if read is _size else (None,):
                element = etree.Element("memory", unit=unit) if unit else etree.Element("memory")
                read(text, element)  # raises InvalidValue if the fast path were wrong
        with pytest.raises(InvalidValue):  # far more digits: past the fast path, the reader refuses
            read("9" * (digits + 1) + "9" * 10, etree.Element("memory", unit="GiB"))
