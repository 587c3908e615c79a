"""A plain `vmtune check one.xml` (the pre-commit path) must not import what it does not need.

(difflib is not on the list: click imports it for option suggestions.)
"""

from __future__ import annotations

import subprocess
import sys

from conftest import DOMAINS

PROBE = """
import sys
sys.argv = ["vmtune", "check", {path!r}]
from vmtune.cli import main
try:
    main()
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {{'jsonschema', 'libvirt', 'rich', 'pyexpat'}})
print("HEAVY", heavy)
"""


def test_plain_check_does_not_import_heavy_modules() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE.format(path=str(DOMAINS / "linux-tuned.xml"))],
                         capture_output=True, text=True, timeout=60).stdout
    line = next(line for line in out.splitlines() if line.startswith("HEAVY"))
    assert line == "HEAVY []"
