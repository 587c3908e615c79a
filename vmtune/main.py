"""The `vmtune` executable: a fast path for `check`/`fix` command lines, typer for everything else.

A pre-commit hook runs `vmtune check [--fix] --skip-non-domain -- FILE...` on every commit, and
CI runs `vmtune check -f sarif -o report.sarif --host caps.xml ...`. Importing typer (and the
click it carries) costs about 50 ms, more than everything else vmtune does for one file, so
command lines of `check`/`fix` made of file names and the options below go straight to
`run_check`. In both paths the options end at the first operand or at `--`. Anything else
(`--help`, an unknown option or value, a value that looks like an option, other commands) goes
through the typer app in `vmtune.cli`, which stays the one definition of the command line: it
reports the errors, and a test checks, option by option, that both paths build the same request
and print the same thing.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmtune.request import CheckRequest

# Flags of `check` and `fix` that the fast path understands, and the request field each sets.
FAST_FLAGS = {
    "--fix": "fix",
    "--diff": "diff",
    "--unsafe-fixes": "unsafe_fixes",
    "--show-fixes": "show_fixes",
    "--isolated": "isolated",
    "--skip-non-domain": "skip_non_domain",
    "--all": "all_domains",
    "--exit-zero": "exit_zero",
    "--exit-non-zero-on-fix": "exit_non_zero_on_fix",
    "--statistics": "statistics",
    "--quiet": "quiet",
    "-q": "quiet",
    "--allow-command-uri": "allow_command_uri",
}
# Options taking a value: name -> (request field, kind). Kinds: "path" (a pathlib.Path), "name" (a
# file name as a str, normalised as a Path would be), "str", "list" (repeatable),
# "split" (repeatable, comma-separated), "jobs" (an integer >= 1), or the choices of an enum
# option (a value outside them goes to typer, which names the valid ones).
FORMATS = ("text", "json", "sarif", "github", "junit", "openmetrics")
FAST_OPTIONS: dict[str, tuple[str, str | tuple[str, ...]]] = {
    "--format": ("output_format", FORMATS), "--output-format": ("output_format", FORMATS),
    "-f": ("output_format", FORMATS),
    "--output-file": ("output_file", "name"), "-o": ("output_file", "name"),
    "--select": ("select", "split"), "--ignore": ("ignore", "split"),
    "--fail-on": ("fail_on", ("error", "warning", "info")),
    "--policy": ("policies", "list"), "-p": ("policies", "list"),
    "--host": ("host", "name"), "--domcaps": ("domcaps", "name"),
    "--os": ("os_family", ("windows", "linux")),
    "--connect": ("connect", "list"), "-c": ("connect", "list"),
    "--domain": ("domains", "list"), "-d": ("domains", "list"),
    "--config": ("config", "name"), "--baseline": ("baseline", "path"),
    "--write-baseline": ("write_baseline", "path"),
    "--jobs": ("jobs", "jobs"), "-j": ("jobs", "jobs"),
    "--color": ("color", ("auto", "always", "never")),
    "--stdin-filename": ("stdin_filename", "str"),
    "--kubevirt-version": ("kubevirt_version", "str"), "--pair": ("pairs", "list"),
    "--instancetypes": ("instancetypes", "list"),
    "--tf-var-file": ("tf_var_files", "list"), "--tf-var": ("tf_vars", "list"),
}
# `fix` has fewer options than `check` (cli.fix_command); the others are typer's error to report.
FIX_FIELDS = frozenset({"diff", "unsafe_fixes", "show_fixes", "output_format", "select", "ignore", "fail_on",
                        "policies", "host", "domcaps", "os_family", "config", "isolated", "skip_non_domain",
                        "kubevirt_version", "pairs", "instancetypes", "tf_var_files", "tf_vars"})


def _parse(argv: list[str]) -> tuple[list[str], dict[str, object]] | None:
    """Paths and option values of a `check`/`fix` command line, or None for anything unusual.

    Options come first: the first operand (a file, a directory, '-' for stdin) or `--` ends them,
    and every later argument is an operand even when it starts with '-', as POSIX utilities and
    the typer path (allow_interspersed_args=False) read it. pre-commit and `xargs` append file
    names a pull request chooses; a file named `--output-file=/etc/x.xml` must stay a file name:
    an argument naming an existing path is the first operand wherever it stands (vmtune.argv)."""
    from vmtune.argv import exists

    paths: list[str] = []
    values: dict[str, object] = {}
    args = iter(argv)
    for arg in args:
        if arg == "--":  # the end of the options, said explicitly (the hooks' entry ends with it)
            paths += args
            break
        if arg.startswith("-") and arg != "-" and exists(arg):  # an existing path is that path
            paths.append(arg)
            paths += args
            break
        if arg in FAST_FLAGS:
            values[FAST_FLAGS[arg]] = True
            continue
        if not arg.startswith("-") or arg == "-":  # a file, or '-' for stdin: the options end here
            paths.append(arg)
            paths += args
            break
        if arg[1] != "-" and len(arg) > 2:  # -j2, -fjson: click reads the rest of a short option as its value
            name, value = arg[:2], arg[2:]
            if name not in FAST_OPTIONS:
                return None  # -qj2 (flags clustered), an option of another command...
        else:
            name, equals, value = arg.partition("=")
            if name not in FAST_OPTIONS or (equals and not name.startswith("--")):
                return None  # --help, an option of another command...
            if not equals:
                value = next(args, "")
        if not value or value.startswith("-"):  # missing, or click's reading of '-o -x' is its own
            return None
        field, kind = FAST_OPTIONS[name]
        if isinstance(kind, tuple):
            if value not in kind:
                return None
            values[field] = value
        elif kind == "jobs":
            if not (value.isascii() and value.isdigit() and int(value) >= 1):
                return None
            values[field] = int(value)
        elif kind == "name":  # a file name as str(Path(value)) spells it, without importing pathlib
            from vmtune.fileio import normal_name

            values[field] = normal_name(value)
        elif kind == "path":
            from pathlib import Path

            values[field] = Path(value)
        elif kind == "str":
            values[field] = value
        else:
            parts = [v.strip() for v in value.split(",") if v.strip()] if kind == "split" else [value]
            values.setdefault(field, [])
            values[field] += parts  # type: ignore[operator]
    return paths, values


def fast_request(argv: list[str]) -> CheckRequest | None:
    """The CheckRequest typer would build for a `check`/`fix` command line, or None when typer must
    parse it (help, errors, rare options, other commands)."""
    if len(argv) < 2 or argv[0] not in ("check", "fix"):
        return None
    parsed = _parse(argv[1:])
    if parsed is None:
        return None
    paths, values = parsed
    if not paths and not (values.get("domains") or values.get("all_domains") or values.get("connect")):
        return None  # typer's path for its messages about nothing to check
    if argv[0] == "fix":
        if not FIX_FIELDS.issuperset(values):
            return None
        values["fix"] = not values.get("diff", False)  # `fix` is `check --fix`, or `check --diff` with --diff
    from vmtune.request import CheckRequest  # here, so `vmtune --help` does not load the checker
    from vmtune.terminal import use_color

    color = str(values.pop("color", "auto"))
    request = CheckRequest(paths=paths, **values)  # type: ignore[arg-type]
    request.color = use_color(color, request.output_format, request.output_file is not None)
    return request


def _collector_on() -> None:
    """The cyclic GC back on for the run, without the start-up's objects: modules, classes and
    functions live as long as the process, so they are frozen (never scanned again)."""
    gc.freeze()
    gc.enable()


def _exit_now(code: int) -> None:
    """End the process at once, skipping the interpreter's teardown (freeing every module, class
    and object one by one: ~2 ms of a ~45 ms one-file check), when nothing is left for it to do:
    no atexit callbacks (a worker pool, coverage), no other thread, no profiler or tracer, and
    stdout/stderr flushed. Every file vmtune writes is closed before run_check returns. Returns
    (and the caller exits normally) when any of this does not hold."""
    import atexit

    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's; without it, the normal exit
    threading = sys.modules.get("threading")
    if (callbacks is None or callbacks() or (threading is not None and threading.active_count() > 1)
            or sys.getprofile() is not None or sys.gettrace() is not None or not 0 <= code <= 255):
        return
    try:
        code = delivered(code)
    except (OSError, ValueError):  # a stream run() did not wrap: the normal exit reports it as Python does
        return
    os._exit(code)


def delivered(code: int) -> int:
    """The exit code once stdout and stderr are flushed: 2, with one line saying why, when output
    was lost (a full disk, a closed descriptor: terminal.QuietWhenClosed), so a report that was not
    written never ends with 0 or 1. A reader that closed the pipe early is not a loss."""
    from vmtune.terminal import QuietWhenClosed

    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    if QuietWhenClosed.lost is None:
        return code
    print(f"vmtune: {QuietWhenClosed.lost}", file=sys.stderr)
    if sys.stderr is not None:
        sys.stderr.flush()
    return 2 if code in (0, 1) else code


def run() -> None:
    """The `vmtune` executable (console script, `python -m vmtune`): main(), and a check or fix
    taken by the fast path ends without the interpreter's teardown (_exit_now). Callers that go on
    after the command (tests, wrappers) call main(), which always raises SystemExit. A reader
    that closes the pipe early silences the output, not the command (terminal.QuietWhenClosed);
    a closed pipe met elsewhere (the fixed document of `--fix -` written to stdout) ends it with
    the status a shell shows for a tool ended by SIGPIPE, 141, without a traceback."""
    from vmtune.terminal import guard_std_streams

    guard_std_streams()
    try:
        main(exit_now=True)
    except SystemExit as done:  # typer's commands, and a check _exit_now left to the normal exit
        if done.code is None or isinstance(done.code, int):
            raise SystemExit(delivered(done.code or 0)) from None
        raise
    except BrokenPipeError:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
        sys.exit(141)


def main(exit_now: bool = False) -> None:
    # Importing vmtune allocates tens of thousands of objects that live until exit; the cyclic
    # GC would walk them several times while they are created (~5 ms of a 55 ms one-file check).
    # It is off until the command starts, then on (a batch's memory stays bounded).
    gc.disable()
    try:
        if sys.argv[1:] == ["--version"]:
            from vmtune.commit import version_line

            print(version_line())
            sys.exit(0)
        if sys.argv[1:2] in (["check"], ["fix"]):
            from vmtune.xml.lxml_import import import_lxml

            import_lxml()  # before vmtune's modules import it
        request = fast_request(sys.argv[1:])
        if request is not None:
            from vmtune.commands.check import run_check

            _collector_on()
            code = run_check(request)
            if exit_now:
                _exit_now(code)
            sys.exit(code)
        from vmtune.cli import run_app

        _collector_on()
        run_app()
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM during a `-j` run (vmtune.workers.Terminated)
        sys.exit(128 + getattr(stop, "signum", 2))  # as a shell reports a command the signal ended
    finally:
        gc.enable()  # whatever ended the command (main() also runs inside tests)
