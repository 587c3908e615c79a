"""The knob inventory (vmtune/schema_knobs.py) against libvirt's installed domain schema, and docs/knobs.md.

Every element and attribute path of /usr/share/libvirt/schemas/domain.rng must be judged by a rule
or excluded with a reason; a libvirt upgrade that adds a knob fails here, naming it. The schema tests
are skipped where libvirt's schemas are not installed (CI and scripts/test install libvirt).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vmtune.rngwalk import SCHEMAS, schema_paths
from vmtune.rules import BY_CODE
from vmtune.schema_knobs import KNOBS, STATUSES, Knob, cited_codes, owner, render_markdown, stale, unmatched

from conftest import ROOT

needs_schema = pytest.mark.skipif(not (SCHEMAS / "domain.rng").is_file(),
                                  reason=f"libvirt's schemas are not installed ({SCHEMAS})")


@pytest.fixture(scope="module")
def paths() -> list[str]:
    return schema_paths()


@needs_schema
def test_every_schema_path_is_judged_or_excluded(paths: list[str]) -> None:
    assert len(paths) > 2000, "the walk lost most of the schema"
    missing = unmatched(paths)
    assert not missing, ("knobs of the installed libvirt schema with no entry in vmtune/schema_knobs.py "
                         "(give each the rules that judge it, or a reason and source):\n  " + "\n  ".join(missing))


@needs_schema
def test_no_inventory_entry_is_stale(paths: list[str]) -> None:
    dead = stale(paths)
    assert not dead, ("entries of vmtune/schema_knobs.py that own no path of the installed schema "
                      "(removed, misspelt, or shadowed by a more specific entry):\n  " + "\n  ".join(dead))


@needs_schema
def test_the_inventory_covers_the_sections_of_issue_35(paths: list[str]) -> None:
    """The schema walk reaches every section the inventory is about (a broken walk would pass vacuously)."""
    for expected in ("cputune/global_quota", "memtune/hard_limit", "numatune/memnode/@nodeset",
                     "memoryBacking/hugepages/page/@size", "blkiotune/device/weight", "iothreadids/iothread/@id",
                     "features/hyperv/stimer/direct/@state", "features/kvm/pv-ipi/@state", "features/pvspinlock/@state",
                     "features/pmu/@state", "features/apic/@eoi", "features/ioapic/@driver", "features/smm/@state",
                     "clock/timer/@tickpolicy", "cpu/maxphysaddr/@bits", "cpu/cache/@mode", "cpu/numa/cell/@memAccess",
                     "cpu/topology/@dies", "os/type/@machine", "os/@firmware", "vcpus/vcpu/@enabled",
                     "resource/partition", "devices/disk/driver/@detect_zeroes", "devices/disk/driver/@queue_size",
                     "devices/controller/driver/@iothread", "devices/interface/driver/host/@mrg_rxbuf",
                     "devices/interface/driver/@rx_queue_size", "devices/interface/backend/@type",
                     "devices/memballoon/@freePageReporting", "devices/rng/rate/@bytes", "devices/watchdog/@model",
                     "devices/input/@bus", "devices/video/model/@type", "devices/sound/@model",
                     "devices/serial/target/@type", "devices/channel/target/@name"):
        assert expected in paths, expected
        assert owner(expected) is not None, expected


@needs_schema
def test_a_libvirt_upgrade_that_adds_a_knob_fails_naming_it(tmp_path: Path) -> None:
    """A copy of the installed schemas with one more KVM feature, as a newer libvirt would have."""
    for rng in SCHEMAS.glob("*.rng"):
        shutil.copy(rng, tmp_path / rng.name)
    common = tmp_path / "domaincommon.rng"
    text = common.read_text()
    anchor = '<element name="poll-control">'
    assert anchor in text
    common.write_text(text.replace(anchor, '<element name="pv-sched-yield"><ref name="featurestate"/></element>'
                                           '</optional><optional>' + anchor, 1))
    assert unmatched(schema_paths(tmp_path)) == ["features/kvm/pv-sched-yield", "features/kvm/pv-sched-yield/@state"]


def test_every_cited_rule_exists() -> None:
    for knob in KNOBS:
        missing = cited_codes(knob) - set(BY_CODE)
        assert not missing, f"{knob.path} cites unknown rules {sorted(missing)}"


def test_entries_are_well_formed() -> None:
    assert len({k.path for k in KNOBS}) == len(KNOBS), "an inventory path is listed twice"
    for knob in KNOBS:
        assert knob.status in STATUSES, knob
        assert (knob.status == "judged") == bool(knob.rules), knob
        if not knob.rules:
            assert knob.reason and knob.source, f"{knob.path}: no rule, so it needs a reason and its source"
        assert bool(knob.gap) == bool(knob.gap_source), f"{knob.path}: a gap needs its source"
        assert not (knob.gap and knob.status == "candidate"), knob.path


def test_the_most_specific_entry_owns_a_path() -> None:
    knobs = (Knob("devices/*/address/**", status="no-cost", reason="r", source="s"),
             Knob("devices/hostdev/**", status="workload", reason="r", source="s"),
             Knob("devices/hostdev", rules=("USB001",)))
    assert owner("devices/hostdev/address/@bus", knobs) is knobs[1]
    assert owner("devices/disk/address/@bus", knobs) is knobs[0]
    assert owner("devices/hostdev", knobs) is knobs[2]
    assert owner("devices/disk", knobs) is None


def test_walker_follows_includes_overrides_combines_and_stops_at_cycles(tmp_path: Path) -> None:
    (tmp_path / "base.rng").write_text("""<grammar xmlns="http://relaxng.org/ns/structure/1.0">
  <define name="extra"><empty/></define>
  <define name="src"><element name="source"><attribute name="file"/><optional><ref name="chain"/></optional>
  </element></define>
  <define name="chain"><element name="backingStore"><ref name="src"/></element></define>
</grammar>""")
    (tmp_path / "top.rng").write_text("""<grammar xmlns="http://relaxng.org/ns/structure/1.0">
  <start><ref name="domain"/></start>
  <include href="base.rng"/>
  <define name="extra"><attribute name="overridden"/></define>
  <define name="domain"><element name="domain"><ref name="extra"/><ref name="more"/><ref name="src"/>
    <element><choice><name>a</name><name>b</name></choice><empty/></element></element></define>
  <define name="more"><attribute name="one"/></define>
  <define name="more" combine="choice"><attribute name="two"/></define>
</grammar>""")
    assert schema_paths(tmp_path, "top.rng") == [
        "@one", "@overridden", "@two", "a", "b", "source", "source/@file", "source/backingStore"]


def test_docs_knobs_md_is_up_to_date() -> None:
    actual = (ROOT / "docs" / "knobs.md").read_text()
    assert actual == render_markdown(), "docs/knobs.md is stale: run `python -m vmtune.schema_knobs > docs/knobs.md`"


def test_docs_knobs_md_links_every_cited_rule_to_its_documentation() -> None:
    text = (ROOT / "docs" / "knobs.md").read_text()
    rules_md = (ROOT / "docs" / "rules.md").read_text()
    for code in sorted({c for k in KNOBS for c in k.rules}):
        rule = BY_CODE[code]
        assert f"(rules.md#{code.lower()}-{rule.name})" in text
        assert f"### {code} {rule.name}\n" in rules_md
