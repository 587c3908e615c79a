"""The `vmtune` executable: a fast path for the pre-commit invocation, typer for everything else.

A pre-commit hook runs `vmtune check [--fix] --skip-non-domain FILE...` on every commit.
Importing typer (and the click it carries) costs about 60 ms, half of vmtune's start-up
budget, so plain invocations made only of file names and the boolean flags below go
straight to `run_check`. Anything else (other options, `--help`, no files, a name starting
with '-') goes through the typer app in `vmtune.cli`, which stays the one definition of
the command line; a test checks that both paths give the same result.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmtune.commands.check import CheckRequest

# Flags of `check` and `fix` that the fast path understands, and the request field each sets.
FAST_FLAGS = {
    "--fix": "fix",
    "--diff": "diff",
    "--unsafe-fixes": "unsafe_fixes",
    "--show-fixes": "show_fixes",
    "--isolated": "isolated",
    "--skip-non-domain": "skip_non_domain",
}


def fast_request(argv: list[str]) -> CheckRequest | None:
    """The CheckRequest for a plain `check`/`fix` command line, or None when typer must parse it."""
    if len(argv) < 2 or argv[0] not in ("check", "fix"):
        return None
    flags: set[str] = set()
    paths: list[str] = []
    for arg in argv[1:]:
        if arg in FAST_FLAGS:
            flags.add(FAST_FLAGS[arg])
        elif arg.startswith("-"):  # any other option, '--', '-' (stdin) or a file named like one
            return None
        else:
            paths.append(arg)
    if not paths or (argv[0] == "fix" and "fix" in flags):
        return None
    if argv[0] == "fix":  # `fix` is `check --fix`, or `check --diff` with --diff
        flags.add("diff" if "diff" in flags else "fix")
    from vmtune.commands.check import CheckRequest  # here, so `vmtune --help` does not load the checker
    from vmtune.terminal import use_color

    request = CheckRequest(paths=paths, color=use_color())
    for name in flags:
        setattr(request, name, True)
    return request


def main() -> None:
    try:
        request = fast_request(sys.argv[1:])
        if request is not None:
            from vmtune.commands.check import run_check

            sys.exit(run_check(request))
        from vmtune.cli import app

        app()
    except KeyboardInterrupt:
        sys.exit(130)
