"""XPath cost of suppressions and custom checks on a large nested domain (issue #32).

Writes, in a temporary directory, a domain within the limits (4 MiB, 50,000 elements, depth
under 256: 195 chains of 250 nested elements, 19.5 KB of text at the bottom of each) and
times `vmtune check` of it with (a) a policy of 40 checks comparing `.` and (b) 16
suppressions comparing `*`, as a stranger could write them. Best of three wall-clock runs and
the peak RSS. Run it from a checkout: `python bench/xpath_budget.py [PYTHONPATH]`; a
PYTHONPATH argument times another tree (git archive of main, say) with the same interpreter.
"""

from __future__ import annotations

import os
import resource
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHAINS, DEPTH, TEXT = 195, 250, 19_500
HEAD = ("<domain type='kvm'><name>nested</name><memory unit='KiB'>1048576</memory><vcpu>2</vcpu>"
        "<os><type arch='x86_64' machine='q35'>hvm</type></os>")


def nested_domain(metadata: str = "") -> str:
    chain = "<a>" * DEPTH + "a" * TEXT + "</a>" * DEPTH
    return f"{HEAD}{metadata}<devices>{chain * CHAINS}</devices></domain>\n"


def policy(checks: int = 40) -> str:
    return "checks:\n" + "".join(
        f"  - code: XB{i:03d}\n    name: bounded-{i}\n    severity: warning\n    message: m\n"
        f"    select: \"//*[contains(., 'aaz{i}')]\"\n    assert: {{present: false}}\n" for i in range(checks))


def suppressions(count: int = 16) -> str:
    ignores = "".join(f"<vmtune:ignore rules='CPU001' reason='x' xpath=\"//*[contains(*, 'aaz{i}') or "
                      f"starts-with(*, 'aaz{i}')]\"/>" for i in range(count))
    return f"<metadata><vmtune:vmtune xmlns:vmtune='https://vmtune.dev/xmlns/domain/1'>{ignores}</vmtune:vmtune></metadata>"


def timed(args: list[str], cwd: Path, pythonpath: str | None) -> tuple[float, int, int, str]:
    env = {**os.environ, "VMTUNE_NO_CACHE": "1"}
    command = [sys.executable, "-m", "vmtune", *args]
    if pythonpath:  # without site: an editable install's import hook would load this checkout's vmtune
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, *site.getsitepackages()])
        command.insert(1, "-S")
    best = float("inf")
    for _ in range(3):
        start = time.monotonic()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True,
                              text=True, check=False, timeout=600)
        best = min(best, time.monotonic() - start)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return best, rss, done.returncode, (done.stderr.strip().splitlines() or [""])[-1][:160]


def main() -> None:
    pythonpath = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory() as folder:
        here = Path(folder)
        (here / "policy.yaml").write_text(policy())
        (here / "checks.xml").write_text(nested_domain())
        (here / "suppressed.xml").write_text(nested_domain(suppressions()))
        for name in ("checks.xml", "suppressed.xml"):
            assert len((here / name).read_bytes()) < 4 * 1024 * 1024
        for label, args in (("40 checks of contains(., ...)", ["check", "--isolated", "-p", "policy.yaml",
                                                                  "checks.xml"]),
                            ("16 suppressions of contains(*, ...)", ["check", "--isolated", "suppressed.xml"])):
            seconds, rss, code, last = timed(args, here, pythonpath)
            print(f"{label}: {seconds:.2f} s, exit {code}, peak RSS {rss} MB; {last}")


if __name__ == "__main__":
    main()
