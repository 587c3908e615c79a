"""Suppressions: comments in files, metadata for live domains, reasons, unused ones."""

from __future__ import annotations

import pytest

from conftest import domain_xml
from helpers import codes, findings, fix, options

# CLK004 (rtc tickpolicy missing) fires on this clock for a guest whose OS is unknown (os=None) or
# Windows; Linux guests keep time with kvmclock and are left alone, so a Linux domain_xml() would
# make every CLK004 suppression below pass with or without the comment.
NO_RTC = "<clock offset='utc'><timer name='pit' tickpolicy='delay'/><timer name='hpet' present='no'/></clock>"
TABLET = "<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>"


def test_comment_suppresses_the_next_element_and_its_subtree_only() -> None:
    xml = domain_xml(devices=f"<!-- vmtune: ignore[USB] reason=\"serial console lab\" -->\n    {TABLET}")
    # The comment precedes the controller: USB003/USB002 on the tablet are not inside it.
    found = codes(xml)
    assert "USB002" in found
    xml = domain_xml(devices="<controller type='usb' model='qemu-xhci'/>"
                             "<!-- vmtune: ignore[USB002] reason=\"needed by the KVM switch\" -->"
                             "<input type='tablet' bus='usb'/>")
    assert "USB002" not in codes(xml) and "SUP001" not in codes(xml) and "SUP002" not in codes(xml)


def test_file_level_comment() -> None:
    xml = domain_xml(os=None, devices=TABLET, clock=NO_RTC)
    assert {"USB002", "CLK004"} <= set(codes(xml))
    xml = "<!-- vmtune: ignore-file[USB002,rtc-tickpolicy-missing] reason='lab' -->\n" + xml
    assert not {"USB002", "CLK004", "SUP001", "SUP002"} & set(codes(xml))


def test_metadata_suppression_whole_domain_and_xpath() -> None:
    meta = ("<vmtune:vmtune xmlns:vmtune='https://vmtune.dev/xmlns/domain/1'>"
            "<vmtune:ignore rules='CLK004' reason='guest runs chrony'/>"
            "<vmtune:ignore rules='USB002' xpath='/domain/devices/input[1]' reason='KVM switch'/>"
            "</vmtune:vmtune>")
    assert {"CLK004", "USB002"} <= set(codes(domain_xml(os=None, devices=TABLET, clock=NO_RTC)))
    xml = domain_xml(os=None, metadata=meta, devices=TABLET, clock=NO_RTC)  # CLK004 leaves Linux guests alone
    assert not {"CLK004", "USB002", "SUP001", "SUP002"} & set(codes(xml))


def test_missing_reason_and_unused_are_findings() -> None:
    assert "CLK004" in codes(domain_xml(os=None, clock=NO_RTC))
    xml = domain_xml(os=None, clock="<!-- vmtune: ignore[CLK004] -->\n  " + NO_RTC,
                     devices="<!-- vmtune: ignore[NET001] reason='no NIC here' -->\n    <console type='pty'/>")
    by_code = {f.rule.code: f for f in findings(xml)}
    assert "CLK004" not in by_code
    assert by_code["SUP001"].message == "suppression of CLK004 gives no reason"
    assert by_code["SUP002"].message == "suppression of NET001 matched no finding"
    assert by_code["SUP001"].line is not None


def test_suppression_of_a_rule_that_did_not_run_is_not_unused() -> None:
    xml = domain_xml(devices="<!-- vmtune: ignore[CPU007] reason='pinned by the orchestrator' -->\n"
                             "    <console type='pty'/>")
    assert "SUP002" not in codes(xml)  # CPU007 is not in the default policy


def test_suppressed_findings_are_not_fixed() -> None:
    # CLK004's fix is info: applied only when asked for, as `--fix --select CLK004` does.
    asked = options(fix_select=("CLK004",))
    unsuppressed = fix(domain_xml(os=None, clock=NO_RTC), asked)
    assert b"<timer name='rtc' tickpolicy='catchup'/>" in unsuppressed.fixed
    xml = domain_xml(os=None, clock="<!-- vmtune: ignore[CLK004] reason='x' -->\n  " + NO_RTC)
    assert not fix(xml, asked).changed


def test_unused_suppression_of_a_custom_check_is_reported(tmp_path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "p.yaml"
    policy.write_text("extends: default\nchecks:\n  - code: XORG001\n    name: needs-console\n    severity: info\n"
                      "    message: m\n    select: devices\n    assert: {path: console, present: true}\n")
    xml = domain_xml(devices="<!-- vmtune: ignore[XORG001] reason='x' -->\n    <console type='pty'/>")
    assert "SUP002" in codes(xml, options((str(policy),)))


@pytest.mark.parametrize("comment, message", [
    ("<!-- vmtune: ignore[NET999] reason='x' -->", "suppression names no rule: NET999"),
    ("<!-- vmtune: ignore-file[DKS] reason='x' -->", "suppression names no rule: DKS"),
    ("<!-- vmtune:ignore [CLK004] reason='x' -->", "comment starts with 'vmtune:' but is no suppression: "
                                                 "write <!-- vmtune: ignore[CODE] reason=\"...\" -->"),
    ("<!-- VMTune: ignore[CLK004] reason='x' -->", "comment starts with 'vmtune:' but is no suppression: "
                                                 "write <!-- vmtune: ignore[CODE] reason=\"...\" -->"),
])
def test_suppression_typos_are_reported(comment: str, message: str) -> None:
    xml = domain_xml(os=None, clock=comment + "\n  <clock offset='utc'><timer name='pit' tickpolicy='delay'/>"
                                              "<timer name='hpet' present='no'/></clock>")
    found = [f for f in findings(xml) if f.rule.code == "SUP003"]
    assert [f.message for f in found] == [message]
    assert "CLK004" in codes(xml)  # nothing was suppressed


def test_a_same_line_comment_is_told_it_applies_to_the_next_element() -> None:
    xml = domain_xml(os=None, clock="<clock offset='utc'><timer name='pit' tickpolicy='delay'/>"
                           "<timer name='hpet' present='no'/></clock> <!-- vmtune: ignore[CLK004] reason='x' -->")
    (unused,) = [f for f in findings(xml) if f.rule.code == "SUP002"]
    assert unused.note == "a suppression comment applies to the next element, not the one it follows on its line"
    assert "CLK004" in codes(xml)  # the clock it follows is not suppressed


def test_entity_declarations_are_found_in_any_case_with_their_line() -> None:
    """parse_xml looks for `<!ENTITY` (case-insensitively) only in files with a `<!`."""
    from vmtune.errors import VmtuneError
    from vmtune.xml.safe import parse_xml

    for declaration in (b"<!ENTITY x 'y'>", b"<!entity x 'y'>", b"<!EnTiTy x 'y'>"):
        with pytest.raises(VmtuneError) as raised:
            parse_xml(b"<?xml version='1.0'?>\n<!-- c -->\n<!DOCTYPE d [" + declaration + b"]>\n<domain/>", "e.xml")
        assert (raised.value.message, raised.value.line) == ("entity declarations are not allowed in domain XML", 3)
    assert parse_xml(b"<domain><name>ENTITY</name></domain>", "e.xml").tag == "domain"
