"""`--jobs`: worker processes must give byte-for-byte what one process gives.

Workers filter, tally and render their chunk themselves; the parent only merges. These
tests run a directory large enough to be split (PARALLEL_MIN_FILES) both ways.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vmtune.commands.check import PARALLEL_MIN_FILES

from conftest import DOMAINS, domain_xml, run_vmtune

VARIANTS = [
    domain_xml(name="tablet-{i}",
               devices="<controller type='usb' model='piix3-uhci'/>\n    <input type='tablet' bus='usb'/>"),
    domain_xml(name="clean-{i}"),
    domain_xml(name="win-{i}", os="windows", hyperv="<hyperv><relaxed state='on'/></hyperv>"),
    domain_xml(name="nic-{i}", devices="<interface type='network'><source network='default'/>"
               "<model type='e1000'/></interface>"),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many")
    fixtures = sorted(DOMAINS.glob("*.xml"))
    for i in range(PARALLEL_MIN_FILES + 20):
        folder = root / f"group{i % 3}"
        folder.mkdir(exist_ok=True)
        if i % 5 == 0:
            text = fixtures[i % len(fixtures)].read_text()
        else:
            text = VARIANTS[i % len(VARIANTS)].replace("{i}", str(i))
        (folder / f"vm{i:03d}.xml").write_text(text)
    (root / "group1" / "pom.xml").write_text("<project/>")  # skipped with a note
    return root


@pytest.mark.parametrize("args", [[], ["--diff", "--show-fixes"], ["-f", "json"], ["-f", "sarif"]])
def test_workers_print_exactly_what_one_process_prints(tree: Path, args: list[str]) -> None:
    one = run_vmtune("check", "--isolated", "-j", "1", *args, str(tree))
    two = run_vmtune("check", "--isolated", "-j", "2", *args, str(tree))
    assert one.returncode == 1
    assert one.stdout and one.stdout == two.stdout
    assert (one.returncode, one.stderr) == (two.returncode, two.stderr)


def test_workers_write_and_honour_the_same_baseline(tree: Path, tmp_path: Path) -> None:
    for jobs in ("1", "2"):
        result = run_vmtune("check", "--isolated", "-j", jobs, "--write-baseline", str(tmp_path / f"b{jobs}.json"),
                            str(tree))
        assert result.returncode == 0  # recorded findings are accepted
    assert (tmp_path / "b1.json").read_text() == (tmp_path / "b2.json").read_text()
    (tree / "group0" / "zz-new.xml").write_text(VARIANTS[0].replace("{i}", "new"))
    try:
        one = run_vmtune("check", "--isolated", "-j", "1", "--baseline", str(tmp_path / "b1.json"), str(tree))
        two = run_vmtune("check", "--isolated", "-j", "2", "--baseline", str(tmp_path / "b1.json"), str(tree))
    finally:
        (tree / "group0" / "zz-new.xml").unlink()
    assert one.stdout.count("== ") == 1 and "zz-new.xml" in one.stdout  # only the new domain's findings
    assert (one.returncode, one.stdout, one.stderr) == (two.returncode, two.stdout, two.stderr)


def test_a_broken_file_among_many_is_one_error_line_either_way(tree: Path) -> None:
    broken = tree / "group2" / "broken.xml"
    broken.write_text("<domain type='kvm'>\n  <name>x</name>\n")
    try:
        one = run_vmtune("check", "--isolated", "-j", "1", str(tree))
        two = run_vmtune("check", "--isolated", "-j", "2", str(tree))
    finally:
        broken.unlink()
    assert one.returncode == two.returncode == 2
    assert one.stderr == two.stderr
    assert [line for line in one.stderr.splitlines() if "broken.xml" in line] == \
        [line for line in one.stderr.splitlines() if line.startswith("vmtune: ") and "broken.xml" in line]
    assert one.stdout == two.stdout
