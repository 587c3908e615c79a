#!/usr/bin/env python3
"""The Ansible collection's fleet report alone: how long `playbooks/report.yml` takes to build
fleet-report.json, .md and .html from N hosts' check results, without checking anything.

    python bench/ansible_report.py [--hosts 32,64,128] [--playbook PATH]

Each fake host carries, as its `vmtune_result`, what the check module returned for the bundled
test-driver host (8 domains, ~23 findings), so only the report's own cost grows with N.
`--playbook` times another report play on the same inventory (e.g. an older one, to compare).
Needs libvirt-python and ansible-core (pip install -e '.[dev,live]').
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine

COLLECTION = ROOT / "ansible" / "ansible_collections" / "vmtune" / "libvirt"
PLAYBOOK = COLLECTION / "playbooks" / "report.yml"
TESTNODE = f"test://{ROOT / 'fixtures' / 'hosts' / 'testnode' / 'node.xml'}"


def one_result() -> dict[str, object]:
    """The check module's return value for the test-driver host."""
    from vmtune.live import fleet

    document = fleet.check(TESTNODE, [], fleet.Selection())
    return {"changed": False, "failed": False, "findings": document["findings"], "summary": document["summary"],
            "errors": document["errors"], "skipped": document["skipped"]}


def inventory(folder: Path, hosts: int, result: dict[str, object]) -> Path:
    path = folder / f"inventory-{hosts}.json"
    data = {"all": {"hosts": {f"hv{i:03d}": {"vmtune_result": result} for i in range(hosts)},
                    "children": {"controller": {"hosts": {"localhost": {
                        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}}}
    path.write_text(json.dumps(data))
    return path


def time_report(playbook: Path, inventory_path: Path, report_dir: Path) -> float:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "ansible"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOME": str(report_dir / "home"), "ANSIBLE_LOCAL_TEMP": str(report_dir / "tmp")}
    start = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory_path),
                           str(playbook), "-e", f"report_dir={report_dir}", "-e", f"vmtune_report_dir={report_dir}"],
                          capture_output=True, text=True, env=env, cwd=report_dir)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(done.stdout[-3000:] + done.stderr[-3000:])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", default="32,64,128")
    parser.add_argument("--playbook", type=Path, default=PLAYBOOK)
    args = parser.parse_args()
    result = one_result()
    print(f"# {machine()}; {len(result['findings'])} findings per host; {args.playbook}")  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="vmtune-report-bench-") as tmp:
        for hosts in (int(h) for h in args.hosts.split(",")):
            folder = Path(tmp) / str(hosts)
            folder.mkdir()
            seconds = time_report(args.playbook, inventory(folder, hosts, result), folder)
            size = sum(p.stat().st_size for p in folder.glob("fleet-report.*"))
            print(f"{hosts:>4} hosts: {seconds:6.1f} s  (reports: {size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
