#!/usr/bin/env python3
"""A fleet of N hosts, 50 domains each: the Ansible collection's check (forks) against vmtune's
own multi-URI `check --all -c URI -c URI ...`. Each "host" is an inventory entry (connection
local) pointing at a libvirt test-driver host file of its own.

    python bench/fleet.py [--hosts 8,32] [--domains 50] [--forks 8]

Needs libvirt-python and ansible-core (pip install -e '.[dev,live]').
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, VMTUNE, machine

PLAYBOOK = ROOT / "ansible" / "ansible_collections" / "vmtune" / "libvirt" / "playbooks" / "check.yml"


def make_host(folder: Path, index: int, domains: int) -> Path:
    sources = [p for p in sorted((ROOT / "fixtures" / "domains").glob("*.xml")) if "xen" not in p.name]
    refs = []
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(domains):
        text = re.sub(r"<name>[^<]*</name>", f"<name>h{index}-{i:03d}</name>", sources[i % len(sources)].read_text(),
                      count=1)
        (folder / f"d{i:03d}.xml").write_text(re.sub(r"<uuid>[^<]*</uuid>", "", text, count=1))
        refs.append(f'  <domain file="d{i:03d}.xml"/>')
    node = folder / "node.xml"
    node.write_text("<node>\n  <cpu><nodes>2</nodes><sockets>1</sockets><cores>8</cores><threads>2</threads>"
                    "</cpu>\n  <memory>268435456</memory>\n" + "\n".join(refs) + "\n</node>\n")
    return node


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env={**os.environ, **(env or {})})
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="8,32")
    parser.add_argument("--domains", type=int, default=50)
    parser.add_argument("--forks", type=int, default=8)
    args = parser.parse_args()
    ansible = Path(sys.executable).with_name("ansible-playbook")
    print(f"machine: {machine()}; {args.domains} domains per host, ansible forks {args.forks}")
    with tempfile.TemporaryDirectory() as tmp:
        for count in (int(n) for n in args.hosts.split(",")):
            nodes = [make_host(Path(tmp) / f"h{count}-{i}", i, args.domains) for i in range(count)]
            inventory = Path(tmp) / f"inventory-{count}.ini"
            inventory.write_text("".join(
                f"hv{i:03d} ansible_connection=local ansible_python_interpreter={sys.executable} "
                f"vmtune_uri=test://{node}\n" for i, node in enumerate(nodes)))
            loop, loop_rc = timed([*VMTUNE, "check", "--isolated", "--all", "-f", "json",
                                   *(a for node in nodes for a in ("-c", f"test://{node}"))])
            play, play_rc = timed([str(ansible), "-i", str(inventory), "-f", str(args.forks), str(PLAYBOOK),
                                   "-e", f"report_dir={tmp}"],
                                  {"ANSIBLE_COLLECTIONS_PATH": str(ROOT / "ansible")})
            print(f"{count:>4} hosts x {args.domains} domains: vmtune check --all (one process, "
                  f"{min(8, count)} hosts at a time) {loop:6.2f} s ({loop / count * 1000:5.0f} ms/host, "
                  f"exit {loop_rc}); ansible-playbook check.yml {play:6.2f} s ({play / count * 1000:5.0f} ms/host, "
                  f"exit {play_rc})")


if __name__ == "__main__":
    main()
