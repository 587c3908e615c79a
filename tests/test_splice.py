"""Byte-level golden tests for the format-preserving patcher."""

from __future__ import annotations

import pytest

from vmtune.patch.edits import Remove, SetText, ensure, path, set_attrs, step
from vmtune.patch.splice import apply_edits
from vmtune.xml.safe import parse_domain

from helpers import fix, options

WIN_META = ("<metadata><libosinfo:libosinfo xmlns:libosinfo=\"http://libosinfo.org/xmlns/libvirt/domain/1.0\">"
            "<libosinfo:os id=\"http://microsoft.com/win/10\"/></libosinfo:libosinfo></metadata>")


def patch(data: bytes, make_edits) -> bytes:  # type: ignore[no-untyped-def]
    root = parse_domain(data, "t.xml")
    return apply_edits(data, root, [("T001", e) for e in make_edits(root)], "t.xml").data


def timer_case(text: str) -> bytes:
    return text.replace("META", WIN_META).encode()


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # single quotes, 2 spaces
        ("<domain type='kvm'>\n  <name>w</name>\n  META\n  <features>\n    <hyperv>\n      <relaxed state='on'/>\n"
         "    </hyperv>\n  </features>\n  <clock offset='localtime'>\n    <timer name='hpet' present='no'/>\n"
         "    <timer name='hypervclock' present='yes'/>\n  </clock>\n</domain>\n",
         "<domain type='kvm'>\n  <name>w</name>\n  META\n  <features>\n    <hyperv>\n      <relaxed state='on'/>\n"
         "      <vpindex state='on'/>\n      <synic state='on'/>\n      <stimer state='on'/>\n"
         "    </hyperv>\n  </features>\n  <clock offset='localtime'>\n    <timer name='hpet' present='no'/>\n"
         "    <timer name='hypervclock' present='yes'/>\n  </clock>\n</domain>\n"),
        # double quotes, 4 spaces
        ('<domain type="kvm">\n    <name>w</name>\n    META\n    <features>\n        <hyperv>\n'
         '            <relaxed state="on"/>\n        </hyperv>\n    </features>\n    <clock offset="localtime">\n'
         '        <timer name="hpet" present="no"/>\n        <timer name="hypervclock" present="yes"/>\n'
         '    </clock>\n</domain>\n',
         '<domain type="kvm">\n    <name>w</name>\n    META\n    <features>\n        <hyperv>\n'
         '            <relaxed state="on"/>\n            <vpindex state="on"/>\n            <synic state="on"/>\n'
         '            <stimer state="on"/>\n        </hyperv>\n    </features>\n    <clock offset="localtime">\n'
         '        <timer name="hpet" present="no"/>\n        <timer name="hypervclock" present="yes"/>\n'
         '    </clock>\n</domain>\n'),
        # tabs and CRLF, no trailing newline
        ("<domain type='kvm'>\r\n\t<name>w</name>\r\n\tMETA\r\n\t<features>\r\n\t\t<hyperv>\r\n"
         "\t\t\t<relaxed state='on'/>\r\n\t\t</hyperv>\r\n\t</features>\r\n\t<clock offset='localtime'>\r\n"
         "\t\t<timer name='hpet' present='no'/>\r\n\t\t<timer name='hypervclock' present='yes'/>\r\n"
         "\t</clock>\r\n</domain>",
         "<domain type='kvm'>\r\n\t<name>w</name>\r\n\tMETA\r\n\t<features>\r\n\t\t<hyperv>\r\n"
         "\t\t\t<relaxed state='on'/>\r\n\t\t\t<vpindex state='on'/>\r\n\t\t\t<synic state='on'/>\r\n"
         "\t\t\t<stimer state='on'/>\r\n\t\t</hyperv>\r\n\t</features>\r\n\t<clock offset='localtime'>\r\n"
         "\t\t<timer name='hpet' present='no'/>\r\n\t\t<timer name='hypervclock' present='yes'/>\r\n"
         "\t</clock>\r\n</domain>"),
        # self-closing <hyperv/> is opened; comment after relaxed-like sibling and before hyperv stay put
        ("<?xml version='1.0'?>\n<!-- top -->\n<domain type='kvm'>\n  <name>w</name>\n  META\n  <features>\n"
         "    <acpi/> <!-- acpi stays -->\n    <!-- hyperv next -->\n    <hyperv />\n  </features>\n"
         "  <clock offset='localtime'>\n    <timer name='hpet' present='no'/>\n"
         "    <timer name='hypervclock' present='yes'/>\n  </clock>\n</domain>\n",
         "<?xml version='1.0'?>\n<!-- top -->\n<domain type='kvm'>\n  <name>w</name>\n  META\n  <features>\n"
         "    <acpi/> <!-- acpi stays -->\n    <!-- hyperv next -->\n    <hyperv>\n      <vpindex state='on'/>\n"
         "      <synic state='on'/>\n      <stimer state='on'/>\n    </hyperv>\n  </features>\n"
         "  <clock offset='localtime'>\n    <timer name='hpet' present='no'/>\n"
         "    <timer name='hypervclock' present='yes'/>\n  </clock>\n</domain>\n"),
        # missing parents: no <features> at all; created after <os>, in libvirt's order
        ("<domain type='kvm'>\n  <name>w</name>\n  META\n  <os>\n    <type arch='x86_64'>hvm</type>\n  </os>\n"
         "  <cpu mode='host-passthrough'/>\n  <clock offset='localtime'>\n    <timer name='hpet' present='no'/>\n"
         "    <timer name='hypervclock' present='yes'/>\n  </clock>\n</domain>\n",
         "<domain type='kvm'>\n  <name>w</name>\n  META\n  <os>\n    <type arch='x86_64'>hvm</type>\n  </os>\n"
         "  <features>\n    <hyperv>\n      <vpindex state='on'/>\n      <synic state='on'/>\n"
         "      <stimer state='on'/>\n    </hyperv>\n  </features>\n"
         "  <cpu mode='host-passthrough'/>\n  <clock offset='localtime'>\n    <timer name='hpet' present='no'/>\n"
         "    <timer name='hypervclock' present='yes'/>\n  </clock>\n</domain>\n"),
    ],
    ids=["single-2sp", "double-4sp", "tab-crlf-noeol", "selfclosing-comments", "missing-parents"],
)
def test_windows_timer_fix_golden(before: str, after: str) -> None:
    outcome = fix(timer_case(before), options(select=["CLK002"]))
    assert outcome.fixed == timer_case(after)


def test_attribute_added_with_the_tags_quote_and_others_untouched() -> None:
    data = b"<domain type=\"kvm\">\n  <name>a</name>\n  <devices>\n    <disk type='file'>\n" \
           b"      <driver name='qemu'   type='qcow2' />\n    </disk>\n  </devices>\n</domain>\n"
    out = patch(data, lambda r: [set_attrs(r.find("devices/disk/driver"), {"discard": "unmap", "type": "raw"})])
    assert out == data.replace(b"<driver name='qemu'   type='qcow2' />",
                               b"<driver name='qemu'   type='raw' discard='unmap' />")


def test_attribute_removed() -> None:
    data = b"<domain type='kvm'>\n  <cpu mode='custom' match='exact' check='partial'/>\n</domain>\n"
    out = patch(data, lambda r: [set_attrs(r.find("cpu"), {"match": None, "mode": "host-passthrough"})])
    assert out == b"<domain type='kvm'>\n  <cpu mode='host-passthrough' check='partial'/>\n</domain>\n"


def test_remove_element_takes_its_line_and_keeps_neighbours() -> None:
    data = b"<domain>\n  <devices>\n    <!-- keep -->\n    <input type='tablet' bus='usb'/>\n" \
           b"    <input type='keyboard' bus='ps2'/>\n  </devices>\n</domain>\n"
    out = patch(data, lambda r: [Remove(r.find("devices/input"))])
    assert out == b"<domain>\n  <devices>\n    <!-- keep -->\n    <input type='keyboard' bus='ps2'/>\n" \
                  b"  </devices>\n</domain>\n"


def test_removing_all_children_collapses_the_parent() -> None:
    data = b"<domain>\n  <devices>\n    <memballoon model='virtio'>\n      <stats period='10'/>\n" \
           b"      <address type='pci' bus='0x05'/>\n    </memballoon>\n  </devices>\n</domain>\n"

    def edits(root):  # type: ignore[no-untyped-def]
        mb = root.find("devices/memballoon")
        return [set_attrs(mb, {"model": "none"}), *[Remove(c) for c in mb]]

    assert patch(data, edits) == b"<domain>\n  <devices>\n    <memballoon model='none'/>\n  </devices>\n</domain>\n"


def test_set_text_and_new_sibling_elements() -> None:
    data = b"<domain>\n  <memory unit='GiB'>4</memory>\n  <currentMemory unit='GiB'>2</currentMemory>\n" \
           b"  <vcpu>2</vcpu>\n  <devices/>\n</domain>\n"

    def edits(root):  # type: ignore[no-untyped-def]
        return [SetText(root.find("currentMemory"), "4"), ensure(root, path("iothreads"), text="1"),
                ensure(root, path("devices", step("controller", type="pci", model="pcie-root-port")), new=True),
                ensure(root, path("devices", step("controller", type="pci", model="pcie-root-port")), new=True)]

    assert patch(data, edits) == (
        b"<domain>\n  <memory unit='GiB'>4</memory>\n  <currentMemory unit='GiB'>4</currentMemory>\n"
        b"  <vcpu>2</vcpu>\n  <iothreads>1</iothreads>\n  <devices>\n"
        b"    <controller type='pci' model='pcie-root-port'/>\n"
        b"    <controller type='pci' model='pcie-root-port'/>\n  </devices>\n</domain>\n")


def test_namespaces_unknown_elements_and_entities_in_text_survive() -> None:
    data = (b"<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
            b"  <name>a&amp;b</name>\n  <clock offset='utc'/>\n  <devices/>\n  <qemu:commandline>\n"
            b"    <qemu:arg value='-S'/>\n  </qemu:commandline>\n  <mystery foo='1'/>\n</domain>\n")
    out = patch(data, lambda r: [ensure(r, path("clock", step("timer", name="rtc")), {"tickpolicy": "catchup"})])
    assert out == data.replace(b"  <clock offset='utc'/>\n",
                               b"  <clock offset='utc'>\n    <timer name='rtc' tickpolicy='catchup'/>\n  </clock>\n")


def test_conflicting_fixes_first_rule_wins_and_is_reported() -> None:
    data = b"<domain>\n  <cpu mode='custom'/>\n</domain>\n"
    root = parse_domain(data, "t.xml")
    cpu = root.find("cpu")
    result = apply_edits(data, root, [("A001", set_attrs(cpu, {"mode": "host-model"})),
                                      ("B001", set_attrs(cpu, {"mode": "host-passthrough"}))], "t.xml")
    assert result.data == b"<domain>\n  <cpu mode='host-model'/>\n</domain>\n"
    assert result.applied == ["A001"]
    assert [(c.kept, c.dropped) for c in result.conflicts] == [("A001", "B001")]


def test_edits_inside_a_removed_element_are_dropped_as_conflicts() -> None:
    data = b"<domain>\n  <devices>\n    <input type='tablet' bus='usb'/>\n  </devices>\n</domain>\n"
    root = parse_domain(data, "t.xml")
    tablet = root.find("devices/input")
    result = apply_edits(data, root, [("A001", Remove(tablet)), ("B001", set_attrs(tablet, {"bus": "virtio"}))],
                         "t.xml")
    assert result.data == b"<domain>\n  <devices/>\n</domain>\n"
    assert result.applied == ["A001"]


def test_fix_is_idempotent_on_fixtures() -> None:
    from conftest import DOMAINS

    for path_ in sorted(DOMAINS.glob("*.xml")):
        once = fix(path_.read_bytes(), unsafe=True)
        twice = fix(once.fixed, unsafe=True)
        assert twice.fixed == once.fixed, path_.name


def test_edits_that_rewrite_the_same_bytes_become_a_conflict_not_a_crash() -> None:
    """A text replacement of <disk> and an attribute change of its <driver> touch the same bytes."""
    from vmtune.patch.edits import SetText, set_attrs
    from vmtune.patch.splice import apply_edits
    from vmtune.xml.safe import parse_domain

    data = (b"<domain type='kvm'>\n  <devices>\n    <disk type='file'>\n      <driver name='qemu'/>\n"
            b"    </disk>\n  </devices>\n</domain>\n")
    root = parse_domain(data, "x.xml")
    disk = root.find("devices/disk")
    result = apply_edits(data, root, [("AAA001", SetText(disk, "x")),
                                      ("BBB001", set_attrs(disk.find("driver"), {"cache": "none"}))], "x.xml")
    assert result.applied == ["AAA001"]
    assert [(c.kept, c.dropped) for c in result.conflicts] == [("AAA001", "BBB001")]
    assert b"cache" not in result.data


def test_paths_of_comments_and_processing_instructions_name_the_nearest_element() -> None:
    from vmtune.xml.paths import stable_path
    from vmtune.xml.safe import parse_domain

    root = parse_domain(b"<domain><devices><!-- c --><disk type='file'/><?pi x?></devices></domain>", "x.xml")
    comment, disk, pi = list(root.find("devices"))
    assert stable_path(comment) == stable_path(disk) == "/domain/devices/disk[@type='file']"
    assert stable_path(pi) == "/domain/devices"


def test_a_driver_path_does_not_change_when_a_fix_adds_an_iothread() -> None:
    """Baseline keys of a disk's findings survive DSK003's iothread='N'."""
    from vmtune.xml.paths import stable_path
    from vmtune.xml.safe import parse_domain

    before = parse_domain(b"<domain><devices><disk><driver name='qemu'/><target dev='vda'/></disk></devices>"
                          b"</domain>", "x.xml")
    after = parse_domain(b"<domain><devices><disk><driver name='qemu' iothread='1'/><target dev='vda'/></disk>"
                         b"</devices></domain>", "x.xml")
    assert stable_path(before.find("devices/disk/driver")) == stable_path(after.find("devices/disk/driver"))


def test_edit_records_are_values_that_cross_processes() -> None:
    """Fix and the edit records were NamedTuples: equal and hashable by value, and a Fix travels
    to the parent process inside a recorded finding (pickle) with -j 2."""
    import pickle

    from vmtune.rules.base import Fix, FixSafety

    root = parse_domain(b"<domain><clock/></domain>", "t.xml")
    assert path("clock", step("timer", name="hpet")) == path("clock", step("timer", name="hpet"))
    assert step("timer", name="hpet") != step("timer", name="rtc")
    assert len({step("timer", name="hpet"), step("timer", name="hpet")}) == 1
    assert ensure(root, path("clock"), {"offset": "utc"}) == ensure(root, path("clock"), {"offset": "utc"})
    assert set_attrs(root, {"a": "1"}) != set_attrs(root, {"a": "2"})
    assert SetText(root, "x") != Remove(root)
    fix = Fix("remove it", (), FixSafety.UNSAFE)
    assert pickle.loads(pickle.dumps(fix)) == fix
    assert repr(fix) == "Fix(description='remove it', edits=(), safety=<FixSafety.UNSAFE: 'unsafe'>)"
