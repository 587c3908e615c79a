"""The most one domain can cost: libvirt's size limit and vmtune's element limit (SECURITY.md,
"Domain XML"). A domain from a stranger's pull request must stay near a second and 200 MB in
every output format and under --fix, and no real definition may be refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmtune.xml.safe import MAX_ELEMENTS

from conftest import DOMAINS
from helpers import MEMORY_LIMIT_KB, TIME_LIMIT
from helpers import run_measured as measured

WIN10 = (DOMAINS / "win10-timer-storm.xml").read_text()
WIN10_ELEMENTS = 46  # what the fixture has itself, checked below


def _with_devices(units: str) -> str:
    return WIN10.replace("<devices>", "<devices>\n" + units, 1)


def _elements(xml: str) -> int:
    from lxml import etree

    return int(etree.fromstring(xml.encode()).xpath("count(//*)"))


def test_the_fixture_size_used_below() -> None:
    assert _elements(WIN10) == WIN10_ELEMENTS


def test_a_million_elements_are_refused_in_one_line(tmp_path: Path) -> None:
    """4 MiB of `<x/>`: a million elements. Before: checked, 1.3 s and 336 MB; under --fix 12 s
    and 730 MB."""
    (tmp_path / "vm.xml").write_text(_with_devices("<x/>" * 1_040_000))
    for args in (("check",), ("check", "--fix", "--unsafe-fixes")):
        run = measured(*args, "vm.xml", cwd=tmp_path)
        first_over = 38  # the fixture's <devices> is on line 37; every <x/> is on the line after it
        assert (run.code, run.stderr) == (
            2, f"vmtune: vm.xml:{first_over}: more than 50,000 elements, the most vmtune checks in one domain\n")
        assert run.cpu_seconds < TIME_LIMIT and run.max_rss_kb < MEMORY_LIMIT_KB, run
    assert len((tmp_path / "vm.xml").read_bytes()) < 4 * 1024 * 1024  # within the size cap: the element cap refused it


def test_the_element_limit_names_the_line_of_the_first_element_over_it(tmp_path: Path) -> None:
    """One <x/> a line after <devices> (line 37): the message points at element 50,001, an <x/>."""
    (tmp_path / "vm.xml").write_text(_with_devices("<x/>\n" * MAX_ELEMENTS))
    run = measured("check", "vm.xml", cwd=tmp_path)
    up_to_devices = _elements(WIN10.split("<devices>")[0] + "<devices/></domain>")  # in document order
    line = 37 + (MAX_ELEMENTS + 1 - up_to_devices)
    assert run.code == 2
    assert run.stderr == f"vmtune: vm.xml:{line}: more than 50,000 elements, the most vmtune checks in one domain\n"
    (tmp_path / "vm.xml").write_text(_with_devices("<x/>\n" * (MAX_ELEMENTS - WIN10_ELEMENTS)))  # at the limit
    assert measured("check", "vm.xml", cwd=tmp_path).code in (0, 1)


def _largest_real_shape() -> str:
    """A 4096-vCPU guest (QEMU's most) as a management stack could write it: every vCPU listed
    for hotplug, each pinned, 64 NUMA cells with full distance tables."""
    vcpus = "".join(f"<vcpu id='{i}' enabled='yes' hotpluggable='{'no' if i == 0 else 'yes'}'/>" for i in range(4096))
    pins = "".join(f"<vcpupin vcpu='{i}' cpuset='{i}'/>" for i in range(4096))
    cells = "".join(
        f"<cell id='{c}' cpus='{c * 64}-{c * 64 + 63}' memory='1048576' unit='KiB'><distances>"
        + "".join(f"<sibling id='{s}' value='{10 if s == c else 20}'/>" for s in range(64))
        + "</distances></cell>" for c in range(64))
    vcpu = "<vcpu placement='static'>2</vcpu>"
    return (WIN10.replace(vcpu, f"{vcpu.replace('2', '4096')}<vcpus>{vcpus}</vcpus><cputune>{pins}</cputune>", 1)
            .replace("migratable='on'/>", f"migratable='on'><numa>{cells}</numa></cpu>", 1))


def test_the_largest_real_definitions_are_well_inside_the_limit(tmp_path: Path) -> None:
    xml = _largest_real_shape()
    assert 12_000 < _elements(xml) < MAX_ELEMENTS / 4
    (tmp_path / "vm.xml").write_text(xml)
    run = measured("check", "vm.xml", cwd=tmp_path)
    assert run.code == 1 and "more than" not in run.stderr, run


ROOM = (MAX_ELEMENTS - WIN10_ELEMENTS) * 3 // 4  # elements to add, leaving room for what the fixes add
NICS = "<interface type='network'><source network='default'/><model type='e1000'/></interface>\n"
DISKS = "".join(f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/i/d{i}.qcow2'/>"
                f"<target dev='vd{i}' bus='virtio'/></disk>\n" for i in range(ROOM // 4))


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["nics", "disks"])
@pytest.mark.parametrize("args", [(), ("-f", "json"), ("-f", "sarif"), ("--fix", "--unsafe-fixes", "--select", "ALL")])
def test_a_domain_at_the_limit_stays_under_200_mb_in_every_format(tmp_path: Path, shape: str,
                                                                 args: tuple[str, ...]) -> None:
    """A finding on every one of 12,000 NICs or 9,000 disks. Before: SARIF of the disks took
    238 MB (and 3 s of CPU: each finding resolved its file's path and repository again)."""
    units = NICS * (ROOM // 3) if shape == "nics" else DISKS
    (tmp_path / "vm.xml").write_text(_with_devices(units))
    run = measured("check", *args, "vm.xml", cwd=tmp_path)
    assert run.code in (0, 1) and run.stderr == "", run.stderr
    assert run.max_rss_kb < MEMORY_LIMIT_KB, run.max_rss_kb
    assert run.cpu_seconds < 15, run.cpu_seconds  # a guard against a return to quadratic time, not a benchmark


def test_a_fix_that_would_pass_the_limit_writes_nothing(tmp_path: Path) -> None:
    """16,000 e1000 NICs, each fixed to virtio with a <driver> added: the fixed file would be
    past the limit, so vmtune would refuse it at the next check. Nothing is written."""
    target = tmp_path / "vm.xml"
    target.write_text(_with_devices(NICS * ((MAX_ELEMENTS - WIN10_ELEMENTS) // 3)))
    before = target.read_bytes()
    run = measured("check", "--fix", "--unsafe-fixes", "--select", "ALL", "vm.xml", cwd=tmp_path)
    assert run.code == 2
    assert run.stderr == ("vmtune: vm.xml: fixing would leave more than 50,000 elements, the most vmtune checks in "
                          "one domain; nothing written\n")
    assert target.read_bytes() == before
