"""Start-up: the pre-commit path imports only what it needs, and its shortcuts change nothing.

A plain `vmtune check FILE...` skips typer (vmtune.main's fast path) and, once the parsed
policy is cached, PyYAML and jsonschema. These tests pin both the imports and that the
shortcuts give exactly what the full path gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmtune.main import fast_request

from conftest import DOMAINS, ROOT, run_vmtune

PROBE = """
import sys
sys.argv = ["vmtune", *{args!r}]
from vmtune.main import main
try:
    main()
except SystemExit as exc:
    code = exc.code
watched = {{'jsonschema', 'libvirt', 'rich', 'pyexpat', 'typer', 'click', 'yaml', 're2'}}
print("IMPORTED", sorted({{m.split('.')[0] for m in sys.modules}} & watched), "EXIT", code)
"""


def imported(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    """The watched heavy modules a `vmtune ARGS` run imported, and its exit code."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=list(args))], capture_output=True, text=True,
                         timeout=120, cwd=cwd, env={**os.environ, **(env or {})}).stdout
    return next(line for line in out.splitlines() if line.startswith("IMPORTED"))


def test_plain_check_imports_no_cli_framework_yaml_or_schema_validator() -> None:
    one = str(DOMAINS / "linux-tuned.xml")
    imported("check", one)  # the first run may fill the cache with the parsed built-in policy
    assert imported("check", one) == "IMPORTED [] EXIT 0"
    assert imported("check", "--skip-non-domain", "--isolated", one) == "IMPORTED [] EXIT 0"


def test_options_outside_the_fast_path_go_through_typer() -> None:
    line = imported("check", "--format", "text", str(DOMAINS / "linux-tuned.xml"))
    assert "'typer'" in line and line.endswith("EXIT 0")


@pytest.mark.parametrize("argv, expected", [
    (["check", "a.xml"], {"paths": ["a.xml"]}),
    (["check", "--fix", "--skip-non-domain", "a.xml", "b.xml"],
     {"paths": ["a.xml", "b.xml"], "fix": True, "skip_non_domain": True}),
    (["check", "--diff", "--unsafe-fixes", "--show-fixes", "--isolated", "a.xml"],
     {"paths": ["a.xml"], "diff": True, "unsafe_fixes": True, "show_fixes": True, "isolated": True}),
    (["fix", "a.xml"], {"paths": ["a.xml"], "fix": True}),
    (["fix", "--diff", "a.xml"], {"paths": ["a.xml"], "diff": True}),
])
def test_fast_path_maps_plain_command_lines(argv: list[str], expected: dict[str, object]) -> None:
    request = fast_request(argv)
    assert request is not None
    defaults = {"paths": [], "fix": False, "diff": False, "unsafe_fixes": False, "show_fixes": False,
                "isolated": False, "skip_non_domain": False}
    assert {key: getattr(request, key) for key in defaults} == {**defaults, **expected}
    assert (request.output_format, request.select, request.policies) == ("text", [], [])


@pytest.mark.parametrize("argv", [
    [], ["check"], ["check", "--fix"], ["check", "--help"], ["check", "-"], ["check", "--", "a.xml"],
    ["check", "--format", "json", "a.xml"], ["check", "-j", "2", "a.xml"], ["fix", "--fix", "a.xml"],
    ["rules"], ["rule", "CLK001"], ["plan", "a.xml"], ["--version"],
])
def test_fast_path_leaves_everything_else_to_typer(argv: list[str]) -> None:
    assert fast_request(argv) is None


@pytest.mark.parametrize("fast, full", [
    (["check", "--isolated"], ["check", "--isolated", "--format", "text"]),
    (["check", "--isolated", "--show-fixes", "--diff"],
     ["check", "--isolated", "--show-fixes", "--diff", "-f", "text"]),
    (["fix", "--diff", "--isolated"], ["fix", "--diff", "--isolated", "--format", "text"]),
])
def test_fast_path_prints_and_exits_exactly_as_typer_does(fast: list[str], full: list[str]) -> None:
    files = [str(DOMAINS / "win10-timer-storm.xml"), str(DOMAINS / "linux-tuned.xml")]
    quick, slow = run_vmtune(*fast, *files), run_vmtune(*full, *files)
    assert quick.stdout and quick.stdout == slow.stdout
    assert (quick.returncode, quick.stderr) == (slow.returncode, slow.stderr)


def test_fast_path_errors_like_typer_for_a_missing_file(tmp_path: Path) -> None:
    result = run_vmtune("check", str(tmp_path / "gone.xml"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("vmtune: ") and "gone.xml" in result.stderr


LAZY = ("vmtune.completion", "vmtune.report.html", "vmtune.manpage")


def test_neither_the_fast_path_nor_the_cli_loads_completion_html_or_manpage_code() -> None:
    """Shell completion values, the HTML renderer and the man page writer load only when asked for:
    not on the pre-commit fast path, not for `vmtune --help` or any command that imports vmtune.cli."""
    fast = ("import sys; sys.argv = ['vmtune', 'check', {one!r}]\nfrom vmtune.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m in {lazy!r}))")
    cli = "import sys, vmtune.cli; print(sorted(m for m in sys.modules if m in {lazy!r}))"
    for probe in (fast, cli):
        code = probe.format(one=str(DOMAINS / "linux-tuned.xml"), lazy=LAZY)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
