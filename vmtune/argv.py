"""Command lines as vmtune reads them before any parser sees them: an existing path is an operand.

pre-commit runs `entry args FILE...`, CI steps run `vmtune check $(git ls-files '*.xml')` and
`xargs` appends the names it reads; in a pull request's tree a file or directory may be named
`--output-file=/etc/x.xml` or `--connect=qemu+ext:...`. Whatever the command line, an argument
that names an existing path (file, directory or dangling link) is that path: `--` is put before
the first such argument met where an option could be, so every parser after this one (the fast
path in vmtune.main, click under typer) reads it and everything after it as operands. `--`
itself stays accepted, so that the hooks' users can still write it.

Pure functions of the argument list and the option table; the only side effect is lstat().
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

# Options whose value is optional (GNU style: `--measure` or `--measure=SECONDS`), which typer
# cannot declare. A bare one gets its default; `--measure 20` takes 20 when the next argument is
# a number that names no existing path (an existing `20` is a file to check).
OPTIONAL_VALUE = {"--measure": "5"}


def _number(arg: str) -> bool:
    """Seconds as a user writes them: `20`, `2.5` (not `inf`, `1e3` or `-1`)."""
    return arg.isascii() and arg.replace(".", "", 1).isdigit()


def exists(arg: str) -> bool:
    """Whether an argument names a file, directory or dangling link (both parsers ask this)."""
    try:
        return os.path.lexists(arg)
    except (ValueError, OSError):  # a NUL byte cannot reach here from a shell, but from a wrapper it can
        return False


def _short_cluster_takes_next(arg: str, takes_value: Callable[[str], bool]) -> bool:
    """`-qo` (flags then a value option): the next argument is o's value; `-ofile` carries it."""
    for i, letter in enumerate(arg[1:], start=1):
        if takes_value("-" + letter):
            return i == len(arg) - 1
    return False


def operands_marked(args: list[str], takes_value: Callable[[str], bool]) -> list[str]:
    """`args` (the arguments after the command name) with `--` put before the first argument
    that starts with '-' and names an existing path, scanning only where an option could be:
    up to `--` or the first operand (options come before operands: allow_interspersed_args is off
    in every command that takes files). A bare optional-value option is given its value.
    `takes_value(name)` tells whether the option `name` (`--output-file`, `-o`) takes a value."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return out + args[i:]
        if arg.startswith("-") and arg != "-" and exists(arg):
            return [*out, "--", *args[i:]]
        if not arg.startswith("-") or arg == "-":  # the first operand: the options end here
            return out + args[i:]
        name, equals, _value = arg.partition("=")
        if name in OPTIONAL_VALUE and not equals and takes_value(name):
            following = args[i + 1] if i + 1 < len(args) else None
            if following is not None and _number(following) and not exists(following):
                out.append(f"{name}={following}")
                i += 2
            else:
                out.append(f"{name}={OPTIONAL_VALUE[name]}")
                i += 1
            continue
        out.append(arg)
        long_option = arg.startswith("--")
        skip = (not equals and takes_value(name)) if long_option else _short_cluster_takes_next(arg, takes_value)
        if skip and i + 1 < len(args):  # the option's value, whatever it looks like, as click takes it
            out.append(args[i + 1])
            i += 1
        i += 1
    return out


def value_options(names_and_flags: Iterable[tuple[Iterable[str], bool]]) -> Callable[[str], bool]:
    """takes_value for operands_marked, from (option names, takes a value) pairs."""
    valued = {name for names, takes in names_and_flags if takes for name in names}
    return valued.__contains__
