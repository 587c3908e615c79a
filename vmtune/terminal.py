"""Whether the text report is coloured: shared by the fast path and the typer CLI."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
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
    and no half-done `--fix` or `apply` because a pager was closed.

    Any other failure to write (a full disk, EIO, a closed descriptor) also lets the command
    finish, but the output is lost without the reader having asked for it: `lost` says why, and
    the executable ends with exit 2 and one line instead of 0 or 1 (main.delivered)."""

    lost: str | None = None  # the first write to stdout or stderr that failed, other than a closed pipe

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream = stream
        self._name = name
        # Whether each write reaches the descriptor at once: stderr (write-through, whatever it is
        # connected to) and a line-buffered stdout (a terminal). Not a block-buffered stdout,
        # which writes whatever its buffer holds.
        self._writes_at_once = bool(getattr(stream, "write_through", False) or getattr(stream, "line_buffering", False))

    def write(self, text: str) -> int:
        try:
            if len(text) <= _PIECE or not self._writes_at_once:
                return self._stream.write(text)
            for piece in whole_lines(text):  # one write(2) each
                self._stream.write(piece)
            return len(text)
        except BrokenPipeError:
            self._discard()
        except OSError as exc:
            self._lose(exc.strerror or str(exc))
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()
        except OSError as exc:
            self._lose(exc.strerror or str(exc))

    def _lose(self, reason: str) -> None:
        if QuietWhenClosed.lost is None:
            QuietWhenClosed.lost = f"cannot write to {self._name}: {reason}; output lost"
        self._discard()

    def _discard(self) -> None:
        discard(self._stream)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer...
        return getattr(self._stream, name)


# A pipe takes a write(2) of at most PIPE_BUF bytes (4,096 on Linux) whole or not at all; a longer
# one stops part-way when a signal lands while it waits for a slow reader (Ctrl-C, or SIGTERM, with
# the pipe full), and the rest is never written: half a line of report. A stream that writes at
# each write (stderr; stdout on a terminal) given a long text in whole lines of at most PIPE_BUF
# bytes leaves whole lines whatever stops the run. 1,024 characters are at most
# 4,096 bytes of UTF-8.
_PIECE = 1024


def whole_lines(text: str, size: int = _PIECE) -> Iterator[str]:
    """`text` in pieces of whole lines, each at most `size` characters (a longer line alone)."""
    start, end = 0, len(text)
    while end - start > size:
        cut = text.rfind("\n", start, start + size)
        if cut < 0:  # a line longer than a piece: whole, alone
            cut = text.find("\n", start + size)
            if cut < 0:
                break
        yield text[start:cut + 1]
        start = cut + 1
    if start < end:
        yield text[start:]


def discard(stream: TextIO) -> None:
    """The rest of stream's output, and what it still buffers, to /dev/null: no later flush (the
    interpreter's at exit) fails again."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)


def guard_std_streams() -> None:
    """Wrap stdout and stderr in QuietWhenClosed (the executable only: tests keep their own). A
    descriptor closed at start (`vmtune check x.xml >&-`: Python sets the stream to None) counts
    as one a write fails on: output there is lost, not silently dropped."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            # The descriptor gets /dev/null opened read-only: no file vmtune opens later takes it
            # (and the output), and a write fails as on a closed descriptor (EBADF).
            fd = 1 if name == "stdout" else 2
            null = os.open(os.devnull, os.O_RDONLY)
            if null != fd:  # the lowest free descriptor is fd itself, unless it is open after all
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, QuietWhenClosed(open(fd, "w", errors="backslashreplace", closefd=False), name))  # noqa: SIM115
        elif not isinstance(stream, QuietWhenClosed):
            setattr(sys, name, QuietWhenClosed(stream, name))
