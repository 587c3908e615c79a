"""Finding the domain XML to check: files, directories, stdin."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vmtune.errors import VmtuneError


@dataclass(frozen=True)
class Source:
    name: str  # path as given, or "-" / "<stdin>"
    path: Path | None  # None for stdin
    explicit: bool  # named on the command line (errors) vs found in a directory (skips)

    def read(self) -> bytes:
        if self.path is None:
            return sys.stdin.buffer.read()
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None


def iter_sources(paths: list[str]) -> Iterator[Source]:
    for given in paths:
        if given == "-":
            yield Source("<stdin>", None, True)
            continue
        path = Path(given)
        if path.is_dir():
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [Path(root) / f for f in files if f.endswith(".xml")]
            for file in sorted(found, key=lambda p: p.parts):  # Path's own order, without its slow __lt__
                yield Source(str(file), file, False)
        elif path.exists():
            yield Source(given, path, True)
        else:
            raise VmtuneError("no such file or directory", given)
