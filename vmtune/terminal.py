"""Whether the text report is coloured: shared by the fast path and the typer CLI."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


def use_color(choice: str = "auto", output_format: str = "text", to_file: bool = False) -> bool:
    """--color always/never; auto colours a terminal, where NO_COLOR turns it off and FORCE_COLOR
    on (https://no-color.org, https://force-color.org). Machine formats and files never."""
    if output_format != "text" or to_file or choice == "never":
        return False
    if choice == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()


class QuietWhenClosed:
    """sys.stdout or sys.stderr of the vmtune executable. When the reader goes away (`vmtune check
    . | head -1`), the rest of that output goes to /dev/null and the command finishes its work
    (the other files, fixes, defines) and exits with its own code: no BrokenPipeError traceback,
    and no half-done `--fix` or `apply` because a pager was closed."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer...
        return getattr(self._stream, name)


def guard_std_streams() -> None:
    """Wrap stdout and stderr in QuietWhenClosed (the executable only: tests keep their own)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, QuietWhenClosed):
            setattr(sys, name, QuietWhenClosed(stream))
