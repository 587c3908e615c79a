"""VAL001 reads its values from the domain's element indexes: the same elements findall gives."""

from __future__ import annotations

import pytest

from vmtune.facts.domain import Domain
from vmtune.facts.units import InvalidValue
from vmtune.rules.values import _GROUPS, _OTHER_PATHS, _PLAIN_UNITS, _SURELY_VALID_DIGITS, LOCATIONS, _size
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


def test_every_location_uses_the_index_or_findall() -> None:
    """VAL001 reads every location once, in LOCATIONS order: through its group of a top-level
    element (plain tag paths) or through findall (anything else; none today)."""
    assert _OTHER_PATHS == ()  # today's locations are plain tag paths
    planned = [("/".join((top, *steps)), attribute)
               for top, groups in _GROUPS for steps, checks in groups for attribute, _r, _digits in checks]
    assert planned == [(w, a) for w, a, _r in LOCATIONS]


def test_below_is_findall() -> None:
    """Each group's elements are what findall gives for its path, in document order."""
    for data in documents():
        root = parse_domain(data, "x.xml")
        domain = Domain(root, "x.xml")
        for top, groups in _GROUPS:
            tops = domain.top_tags.get(top)
            if tops is None:
                assert root.findall(top) == []
                continue
            for steps, _checks in groups:
                path = "/".join((top, *steps))
                assert domain.below(tops, steps) == root.findall(path), (path, data[:60])
        domain = Domain(root, "x.xml")  # the device index is <devices>' child index, which the walk reads
        for devices in domain.top_tags.get("devices", [])[:1]:
            assert domain._devices_by_tag is domain._children[devices]


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
