"""Numbers of any base and size never crash (#49): a 5,000-digit hex integer in a flavor's `disk`
or a VM's `metadata.name` ended the whole run with a ValueError traceback (Python writes no
decimal of more than 4,300 digits), losing every other file's findings. Every front end's
fixture gets each extreme value in each of its numbers, all in one run with a file that has
findings: each bad file is at most one line naming it, never a traceback, and the good file's
findings are still reported."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT

FIXTURES = {
    "dom.xml": DOMAINS / "win10-timer-storm.xml",
    "flavor.json": ROOT / "fixtures/stacks/openstack/flavor-show.json",
    "flavor.yaml": ROOT / "fixtures/stacks/openstack/flavor-show.yaml",
    "image.json": ROOT / "fixtures/stacks/openstack/image-show.json",
    "tasks.yaml": ROOT / "fixtures/stacks/openstack/tasks.yaml",
    "nova.conf": ROOT / "fixtures/stacks/openstack/nova.conf",
    "vm.yaml": ROOT / "fixtures/stacks/kubevirt/oracle/example-vm-cirros.yaml",
    "windows.yaml": ROOT / "fixtures/stacks/kubevirt/manifests/"
                           "harvester-templateversion-windows-iso-large-optimized.yaml",
    "main.tf": ROOT / "fixtures/terraform/win2k22.tf",
}
EXTREMES = {
    "decimal-5000": "9" * 5000, "hex-5000": "0x" + "f" * 5000, "octal-3000": "0o" + "7" * 3000,
    "past-uint64": "18446744073709551617", "float-overflow": "1e999", "nan": ".nan", "minus-one": "-1",
}
NUMBER = re.compile(r"(?<=[\s:=\"'>-])(\d+)(?=[\s,\"'<}\]-])")  # a number written alone, in any of the formats
SPOTS = 40  # the first numbers of each file: sizes, counts, ids, versions


@pytest.mark.parametrize("value", EXTREMES.values(), ids=EXTREMES.keys())
def test_an_extreme_number_anywhere_is_one_line_and_the_other_files_are_still_reported(
        tmp_path: Path, value: str) -> None:
    files = []
    for name, fixture in FIXTURES.items():
        text = fixture.read_text()
        for index, match in enumerate(list(NUMBER.finditer(text))[:SPOTS]):
            path = tmp_path / f"{index:02d}-{name}"
            path.write_text(text[:match.start()] + value + text[match.end():])
            files.append(path.name)
    (tmp_path / "good.xml").write_bytes((DOMAINS / "win10-timer-storm.xml").read_bytes())
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", "--skip-non-domain", "good.xml",
                           *files], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert len(files) > 50
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (1, 2), done.stderr[-3000:]
    for line in done.stderr.splitlines():
        assert re.match(r"vmtune: \d\d-[a-z]+\.[a-z]+(:\d+)?: \S", line), line  # one line, naming the file
    assert "good.xml:31: CLK002 warning" in done.stdout
