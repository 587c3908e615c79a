#!/usr/bin/env python3
"""Generate N varied domain XMLs (deterministic) from ../shared/corpus/domains and fixtures/.

    python bench/make_corpus.py --count 10000 --out bench/out/corpus

Each file is a source domain with its name, UUID, vCPU count and memory changed and a
rotating set of variations (NIC model, queues, clock timers, balloon) so rule work varies.
"""

from __future__ import annotations

import argparse
import random
import re
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT.parent / "shared" / "corpus" / "domains", ROOT / "fixtures" / "domains"]

VARIATIONS = [
    (rb"<model type=(['\"])e1000\1/>", rb"<model type=\1virtio\1/>"),
    (rb"<model type=(['\"])virtio\1/>", rb"<model type=\1e1000\1/>"),
    (rb"<timer name=(['\"])hpet\1 present=\1no\1/>", rb"<timer name=\1hpet\1 present=\1yes\1/>"),
    (rb"<memballoon model=(['\"])virtio\1", rb"<memballoon model=\1none\1"),
    (rb"bus=(['\"])sata\1", rb"bus=\1virtio\1"),
]


def sources() -> list[bytes]:
    found = []
    for folder in SOURCES:
        if folder.is_dir():
            found += [p.read_bytes() for p in sorted(folder.glob("*.xml"))]
    # Only domains (the fixtures folder has nothing else, the corpus neither; be safe).
    return [d for d in found if re.search(rb"<domain[\s>]", d)]


def vary(data: bytes, index: int, rng: random.Random) -> bytes:
    data = re.sub(rb"<name>[^<]*</name>", b"<name>bench-%05d</name>" % index, data, count=1)
    new_uuid = str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode()
    data = re.sub(rb"<uuid>[^<]*</uuid>", b"<uuid>" + new_uuid + b"</uuid>", data, count=1)
    data = re.sub(rb"<vcpu([^>]*)>\d+</vcpu>", b"<vcpu\\1>%d</vcpu>" % rng.choice([1, 2, 4, 8, 16]), data, count=1)
    pattern, replacement = VARIATIONS[index % len(VARIATIONS)]
    return re.sub(pattern, replacement, data, count=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "corpus")
    args = parser.parse_args()
    base = sources()
    rng = random.Random(20261122)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.xml"):
        old.unlink()
    for i in range(args.count):
        (args.out / f"{i:05d}.xml").write_bytes(vary(base[i % len(base)], i, rng))
    print(f"{args.count} domains from {len(base)} sources in {args.out}")


if __name__ == "__main__":
    main()
