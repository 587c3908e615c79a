#!/usr/bin/env python3
"""Live `vmtune check --all` on a libvirt test-driver host with N domains (default 1,000).

    python bench/live.py [--domains 1000]

Needs libvirt-python (pip install '.[live]').
"""

from __future__ import annotations

import argparse
import re

from _common import OUT, ROOT, VMTUNE, machine, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domains", type=int, default=1000)
    args = parser.parse_args()
    folder = OUT / f"testhost-{args.domains}"
    folder.mkdir(parents=True, exist_ok=True)
    sources = sorted((ROOT / "fixtures" / "domains").glob("*.xml"))
    sources = [p for p in sources if "xen" not in p.name]
    refs = []
    for i in range(args.domains):
        text = sources[i % len(sources)].read_text()
        text = re.sub(r"<name>[^<]*</name>", f"<name>live-{i:05d}</name>", text, count=1)
        text = re.sub(r"<uuid>[^<]*</uuid>", "", text, count=1)
        (folder / f"d{i:05d}.xml").write_text(text)
        refs.append(f'  <domain file="d{i:05d}.xml"/>')
    node = folder / "node.xml"
    node.write_text("<node>\n  <cpu><nodes>2</nodes><sockets>1</sockets><cores>8</cores><threads>2</threads>"
                    "</cpu>\n  <memory>268435456</memory>\n" + "\n".join(refs) + "\n</node>\n")
    print(f"machine: {machine()}")
    result = run([*VMTUNE, "check", "--isolated", "--all", "--connect", f"test://{node}", "--format", "json"])
    print(f"vmtune check --all, {args.domains} test-driver domains: {result.seconds:.2f} s "
          f"({result.seconds / args.domains * 1000:.2f} ms/domain incl. connection), peak RSS "
          f"{result.peak_rss_mb:.1f} MB, exit {result.returncode}")


if __name__ == "__main__":
    main()
