"""Errors that end a command with exit code 2 and one clear line, and warnings said once a run."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from vmtune.escape import printable


class VmtuneError(Exception):
    """A user-facing error: bad input, bad policy, unreachable host."""

    def __init__(self, message: str, source: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line

    def __str__(self) -> str:
        """One line for a terminal or log: file names and values from input are escaped here, the
        one place every error message passes (a newline in a name cannot start a line of its own)."""
        where = self.source or ""
        if where and self.line:
            where = f"{where}:{self.line}"
        return printable(f"{where}: {self.message}" if where else self.message)


class InputError:
    """An input that could not be checked, as reports carry it (every format lists them). A
    value (a plain class: a NamedTuple costs ~0.15 ms to create at every start)."""

    __slots__ = ("line", "message", "source")

    def __init__(self, source: str | None, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InputError) and (self.source, self.line, self.message) == (
            other.source, other.line, other.message)

    def __hash__(self) -> int:
        return hash((self.source, self.line, self.message))

    def __repr__(self) -> str:
        return f"InputError({self.source!r}, {self.line!r}, {self.message!r})"

    @classmethod
    def of(cls, error: VmtuneError | str, source: str | None = None) -> InputError:
        if isinstance(error, str):  # already "source: reason"
            return cls(None, None, error)
        return cls(error.source or source, error.line, error.message)

    def __str__(self) -> str:
        return str(VmtuneError(self.message, self.source, self.line))


class NotADomainError(VmtuneError):
    """Well-formed XML whose root is not <domain> (pom.xml, network XML...)."""


class TooManyElementsError(VmtuneError):
    """A domain past the element limit (vmtune.xml.safe.MAX_ELEMENTS): well-formed, but more than vmtune checks."""


class ManagedDomainError(VmtuneError):
    """A live domain nova, KubeVirt, oVirt or CloudStack owns: vmtune does not redefine it without --force."""

    def __init__(self, manager: str, source: str | None = None) -> None:
        self.reason = f"managed by {manager}, which rewrites the definition"
        super().__init__(f"{self.reason}; change it there (`vmtune check --domain` prints how) or use --force",
                         source)


# Warnings already said (configurations reported as ignored, printed output --fix cannot edit):
# once a run, in worker processes too (they are forked after the parent has resolved every
# directory's settings, see vmtune.commands.check.check_files).
_warned: set[str] = set()


_held: list[str] | None = None  # held_warnings: where the warnings go instead of stderr


def warn(message: str) -> None:
    """One line on stderr, once a run: `vmtune: warning: ...`, escaped like every error line."""
    if message not in _warned:
        _warned.add(message)
        if _held is not None:
            _held.append(message)
        else:
            say_warning(message)


def say_warning(message: str) -> None:
    print(f"vmtune: warning: {printable(message)}", file=sys.stderr)


@contextlib.contextmanager
def held_warnings() -> Iterator[list[str]]:
    """Within it, each warning (still once a run) goes into the list it gives, not to stderr, for
    the caller to say (say_warning) where one process would say it, or to unsay."""
    global _held
    held: list[str] = []
    _held = held
    try:
        yield held
    finally:
        _held = None


def unsay_warnings(held: list[str]) -> None:
    """Warnings held and not said: said when warned again."""
    _warned.difference_update(held)


def forget_warnings() -> None:
    """A new run starts: its warnings are said again (a process may run several: tests, fleets)."""
    _warned.clear()
