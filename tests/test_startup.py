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

from vmtune.main import FAST_FLAGS, FAST_OPTIONS, FORMATS, fast_request

from conftest import DOMAINS, ROOT, run_vmtune

TYPER = "import sys; from vmtune.cli import app; sys.argv[0] = 'vmtune'; app()"  # always the typer path
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


def test_a_manifest_check_imports_no_cli_framework_schema_validator_or_urllib() -> None:
    """A one-manifest pre-commit run: YAML is its input, but not typer, jsonschema, libvirt, nor
    xml.sax.saxutils (which imports urllib, http.client, ssl and email: ~38 ms at every start;
    the OpenStack renderer imported it, and every stack source asks each front end), difflib
    (STK003's spelling hints, ~2 ms), uuid (the OpenStack renderer's, ~2.5 ms) or inspect (~4.5 ms,
    vmtune.xml.lxml_import)."""
    probe = PROBE.replace("'re2'}", "'re2', 'urllib', 'xml', 'http', 'email', 'ssl', 'difflib', 'uuid', 'inspect'}")
    one = str(ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle" / "var-16cores.yaml")
    out = subprocess.run([sys.executable, "-c", probe.format(args=["check", "--isolated", one])],
                         capture_output=True, text=True, timeout=120, cwd=ROOT).stdout
    # Nor PyYAML (~12 ms) where the native reader is built: it types this manifest's scalars itself.
    from vmtune.stacks import yamldoc

    yaml = "[]" if yamldoc._native_reader() is not False else "['yaml']"
    assert next(line for line in out.splitlines() if line.startswith("IMPORTED")) == f"IMPORTED {yaml} EXIT 1"
    # Nor the OpenStack front end, which it asks only whether the file is its (openstack/detect.py).
    probe = PROBE.replace('print("IMPORTED"', 'print("OPENSTACK", sorted(m for m in sys.modules if m.startswith('
                          '"vmtune.stacks.openstack")))\nprint("IMPORTED"')
    out = subprocess.run([sys.executable, "-c", probe.format(args=["check", "--isolated", one])],
                         capture_output=True, text=True, timeout=120, cwd=ROOT).stdout
    assert next(line for line in out.splitlines() if line.startswith("OPENSTACK")) == \
        "OPENSTACK ['vmtune.stacks.openstack', 'vmtune.stacks.openstack.detect']"


def test_sarif_uris_are_percent_encoded_as_urllib_would() -> None:
    import random
    from urllib.parse import quote

    from vmtune.report.sarif import percent_encoded

    rng = random.Random(25)
    for _ in range(5_000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 12))) + b"/a b/\xc3\xa9~%.xml"
        assert percent_encoded(raw) == quote(raw, safe="/"), raw


def test_names_are_normalised_as_pathlib_would() -> None:
    """Names are printed as str(Path(name)) printed them before pathlib left the check path."""
    import random
    from pathlib import PurePosixPath

    from vmtune.sources import normal_name

    pieces = ["/", "//", "///", ".", "..", "a", "b.xml", "./", "../", ".x", "é", " ", "\\"]
    rng = random.Random(25)
    for _ in range(20_000):
        name = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        assert normal_name(name) == str(PurePosixPath(name)), name


def test_options_outside_the_fast_path_go_through_typer() -> None:
    line = imported("check", "--help")
    assert "'typer'" in line and line.endswith("EXIT 0")
    line = imported("check", "--format", "yaml", str(DOMAINS / "linux-tuned.xml"))  # typer names the choices
    assert "'typer'" in line and line.endswith("EXIT 2")


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
    [], ["check"], ["check", "--fix"], ["check", "--help"], ["check", "--"], ["fix", "--fix", "a.xml"],
    ["rules"], ["rule", "CLK001"], ["plan", "a.xml"], ["--version"], ["check", "--format", "yaml", "a.xml"],
    ["check", "-j", "0", "a.xml"], ["check", "-j", "two", "a.xml"], ["check", "-j0", "a.xml"],
    ["check", "-j=2", "a.xml"], ["check", "-f=json", "a.xml"], ["check", "-fyaml", "a.xml"], ["check", "-o-x", "a.xml"],
    ["check", "-qj2", "a.xml"], ["check", "-x1", "a.xml"],
    ["check", "-o"], ["check", "-o", "-x", "a.xml"], ["check", "--fail-on=fatal", "a.xml"],
    ["fix", "-j", "2", "a.xml"], ["fix", "-o", "r.txt", "a.xml"], ["check", "--no-fix", "a.xml"],
])
def test_fast_path_leaves_everything_else_to_typer(argv: list[str]) -> None:
    assert fast_request(argv) is None


@pytest.mark.parametrize("args", [
    ["check", "--isolated"], ["check", "--isolated", "--show-fixes", "--diff"], ["fix", "--diff", "--isolated"],
])
def test_fast_path_prints_and_exits_exactly_as_typer_does(args: list[str]) -> None:
    files = [str(DOMAINS / "win10-timer-storm.xml"), str(DOMAINS / "linux-tuned.xml")]
    quick = run_vmtune(*args, *files)
    slow = subprocess.run([sys.executable, "-c", TYPER, *args, *files], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert quick.stdout and quick.stdout == slow.stdout
    assert (quick.returncode, quick.stderr) == (slow.returncode, slow.stderr)


def test_fast_path_errors_like_typer_for_a_missing_file(tmp_path: Path) -> None:
    result = run_vmtune("check", str(tmp_path / "gone.xml"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("vmtune: ") and "gone.xml" in result.stderr


LAZY = ("vmtune.completion", "vmtune.shell_completion", "vmtune.report.html", "vmtune.manpage")


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


# Every option the fast path parses, with a value typer accepts. `FAST_OPTIONS`/`FAST_FLAGS` are
# checked to be covered, so an option added to the fast path without a case here fails.
OPTION_CASES: list[list[str]] = [
    ["--format", "json"], ["--output-format", "sarif"], ["-f", "github"], ["--format=junit"], ["-f", "openmetrics"],
    ["--output-file", "r.txt"], ["-o", "out/r.json"], ["--select", "CLK,HV001", "--select", "NET"],
    ["--ignore", " VAL001 , CPU"], ["--fail-on", "error"], ["--fail-on=info"], ["--policy", "latency"],
    ["-p", "default", "-p", "p.yaml"], ["--host", "caps.xml"], ["--domcaps", "dc.xml"], ["--os", "windows"],
    ["--connect", "test:///default"], ["-c", "qemu:///system", "-c", "test:///default"], ["--domain", "vm1"],
    ["-d", "vm1", "-d", "vm2", "--all"], ["--config", "c.yaml"], ["--baseline", "b.json"],
    ["--write-baseline", "b.json"], ["--jobs", "3"], ["-j", "1"], ["--color", "never"], ["--color=always"],
    ["--stdin-filename", "vm.xml", "-"], ["--fix", "--unsafe-fixes", "--show-fixes"], ["--diff", "--isolated"],
    ["--skip-non-domain", "--exit-zero", "--exit-non-zero-on-fix"], ["--statistics", "--quiet"], ["-q"],
    ["-f", "json", "--color", "always", "-o", "r.json"], ["--allow-command-uri", "-c", "qemu+ext:///s?command=t"],
    ["--kubevirt-version", "v1.6.0", "--instancetypes", "types/", "--pair", "m1.large:win2k22", "--pair=a:b"],
    ["--tf-var-file", "prod.tfvars", "--tf-var", "vcpus=8", "--tf-var=cpu={ mode = 1 }", "--tf-var-file=b.json"],
    ["--"], ["--fix", "--"], ["-", "--"],
    # a short option's value attached (click's reading): `-j1` cost a typer start, ~75 ms more a run
    ["-j1"], ["-j12"], ["-fjson"], ["-fsarif", "-or.txt"], ["-o=r.txt"], ["-pdefault", "-pp.yaml"],
    ["-cqemu:///system"], ["-dvm1", "-d", "vm2"], ["-q", "-j2"],
]
FIX_CASES: list[list[str]] = [
    ["--diff"], ["--unsafe-fixes", "--show-fixes"], ["-f", "json"], ["--select", "CLK"], ["--ignore", "CLK001"],
    ["--fail-on", "info"], ["-p", "latency"], ["--host", "caps.xml", "--domcaps", "dc.xml"], ["--os", "linux"],
    ["--config", "c.yaml"], ["--isolated", "--skip-non-domain"], ["--tf-var", "a=1", "--tf-var-file", "v.tfvars"],
]


def typer_request(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> object:
    """The CheckRequest the typer app builds for a command line (run_check intercepted)."""
    from typer.testing import CliRunner

    import vmtune.commands.check as check_module
    from vmtune.cli import app

    seen: list[object] = []
    monkeypatch.setattr(check_module, "run_check", lambda request: seen.append(request) or 0)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return seen[0]


def test_every_fast_option_has_a_case() -> None:
    used = {arg.partition("=")[0] for case in OPTION_CASES for arg in case if arg[:2] == "--" or len(arg) == 2}
    assert set(FAST_OPTIONS) | set(FAST_FLAGS) <= used
    assert {case[1].partition("=")[0] for case in OPTION_CASES if case[0] in ("-f", "--format")} | {"sarif", "junit"} \
        >= set(FORMATS) - {"text"}


@pytest.mark.parametrize("options", OPTION_CASES, ids=" ".join)
def test_fast_path_builds_the_request_typer_builds(options: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["check", *options, "a.xml"]
    fast = fast_request(argv)
    assert fast is not None, "this command line should take the fast path"
    assert fast == typer_request(argv, monkeypatch)


@pytest.mark.parametrize("options", FIX_CASES, ids=" ".join)
def test_fast_path_builds_the_fix_request_typer_builds(options: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["fix", *options, "a.xml"]
    fast = fast_request(argv)
    assert fast is not None
    slow = typer_request(argv, monkeypatch)
    slow.color = fast.color  # type: ignore[attr-defined]  # `fix` never colours under typer; auto is off here
    assert fast == slow


# Options end at the first operand or at `--` (POSIX): every later argument is a file, even one
# that looks like an option. pre-commit and xargs append names a pull request chooses (#32).
OPERAND_CASES: list[tuple[list[str], list[str]]] = [  # the command line, and the files it names
    (["a.xml", "-o", "r.txt"], ["a.xml", "-o", "r.txt"]),
    (["a.xml", "--output-file=/etc/x.xml"], ["a.xml", "--output-file=/etc/x.xml"]),
    (["a.xml", "--connect=qemu+ext:/s?command=./e"], ["a.xml", "--connect=qemu+ext:/s?command=./e"]),
    (["a.xml", "--domain=x.xml", "--all"], ["a.xml", "--domain=x.xml", "--all"]),
    (["a.xml", "--fix"], ["a.xml", "--fix"]), (["a.xml", "--help"], ["a.xml", "--help"]),
    (["a.xml", "-"], ["a.xml", "-"]), (["a.xml", "--"], ["a.xml", "--"]),
    (["a.xml", "--", "-o", "r.txt"], ["a.xml", "--", "-o", "r.txt"]), (["--", "-o", "r.txt"], ["-o", "r.txt"]),
    (["--", "--fix", "--", "-"], ["--fix", "--", "-"]), (["--isolated", "--", "--"], ["--"]),
    (["-f", "json", "--", "-f", "a.xml"], ["-f", "a.xml"]), (["-", "-o", "r.txt"], ["-", "-o", "r.txt"]),
    (["--isolated", "a.xml", "-j", "0"], ["a.xml", "-j", "0"]), (["a.xml", "--no-such"], ["a.xml", "--no-such"]),
    (["a.xml", "-fjson"], ["a.xml", "-fjson"]),
    (["--isolated", "-", "--stdin-filename=x"], ["-", "--stdin-filename=x"]),
]


@pytest.mark.parametrize("command", ["check", "fix"])
@pytest.mark.parametrize("operands, paths", OPERAND_CASES, ids=[" ".join(case) for case, _paths in OPERAND_CASES])
def test_options_end_at_the_first_operand_in_both_paths(operands: list[str], paths: list[str], command: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [command, *operands]
    fast = fast_request(argv)
    assert fast is not None, "this command line should take the fast path"
    slow = typer_request(argv, monkeypatch)
    slow.color = fast.color  # type: ignore[attr-defined]  # `fix` never colours under typer
    assert fast == slow
    assert fast.paths == paths


@pytest.mark.parametrize("command", [["plan", "--host", str(ROOT / "fixtures" / "hosts" / "intel-2node.xml")],
                                     ["show-settings"]], ids=lambda c: c[0])
def test_other_commands_with_operands_take_no_option_after_them(command: list[str]) -> None:
    from typer.testing import CliRunner

    from vmtune.cli import app

    result = CliRunner().invoke(app, [*command, str(DOMAINS / "linux-tuned.xml"), "--isolated"])
    assert result.exit_code == 2
    if command[0] == "plan":  # plan reads both as files
        assert result.output.splitlines()[-1].startswith("vmtune: --isolated: no such file or directory")
    else:  # show-settings takes one path
        assert "Got unexpected extra argument(s) (--isolated)" in result.output


def test_fast_enum_choices_are_typers() -> None:
    from vmtune.cli import ColorChoice, FailOn, Format, OsChoice

    choices = {name: kind for name, (_field, kind) in FAST_OPTIONS.items() if isinstance(kind, tuple)}
    assert set(choices["--format"]) <= {f.value for f in Format}
    assert choices["--fail-on"] == tuple(f.value for f in FailOn)
    assert choices["--os"] == tuple(o.value for o in OsChoice)
    assert choices["--color"] == tuple(c.value for c in ColorChoice)



@pytest.mark.parametrize("options", [
    ["-f", "json"], ["-f", "sarif"], ["--select", "CLK,HV"], ["--ignore", "VAL001"], ["--fail-on", "error"],
    ["-p", "latency"], ["--os", "windows"], ["--host", str(ROOT / "fixtures" / "hosts" / "intel-2node.xml")],
    ["--domcaps", str(ROOT / "fixtures" / "hosts" / "domcaps-full.xml")], ["-j", "2"], ["--statistics"],
    ["-q", "--exit-zero"], ["--color", "always"], ["--select", "NOPE999"], ["--host", "/nonexistent/caps.xml"],
], ids=" ".join)
def test_fast_options_print_and_exit_exactly_as_typer_does(options: list[str]) -> None:
    files = [str(DOMAINS / "win10-timer-storm.xml"), str(DOMAINS / "linux-tuned.xml")]
    quick = run_vmtune("check", "--isolated", *options, *files)
    slow = subprocess.run([sys.executable, "-c", TYPER, "check", "--isolated", *options, *files], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert (quick.returncode, quick.stdout, quick.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert quick.stdout or quick.stderr


def test_fast_path_writes_the_report_file_typer_writes(tmp_path: Path) -> None:
    one = str(DOMAINS / "win10-timer-storm.xml")
    quick = run_vmtune("check", "--isolated", "-f", "json", "-o", str(tmp_path / "fast.json"), one)
    slow = subprocess.run([sys.executable, "-c", TYPER, "check", "--isolated", "-f", "json", "-o",
                           str(tmp_path / "typer.json"), one], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert quick.returncode == slow.returncode == 1
    assert (tmp_path / "fast.json").read_text() == (tmp_path / "typer.json").read_text()


def test_common_options_import_no_cli_framework() -> None:
    one = str(DOMAINS / "linux-tuned.xml")
    host = str(ROOT / "fixtures" / "hosts" / "intel-2node.xml")
    imported("check", "-p", "latency", one)  # fill the policy cache
    line = imported("check", "--isolated", "-j", "1", "--host", host, "-f", "json", "--select", "CLK,CPU",
                    "--fail-on", "error", "-p", "latency", one)
    assert line.startswith("IMPORTED []"), line


def test_version_without_typer() -> None:
    assert imported("--version") == "IMPORTED [] EXIT 0"
    fast = run_vmtune("--version")
    slow = subprocess.run([sys.executable, "-c", TYPER, "--version"], capture_output=True, text=True, timeout=60)
    assert fast.stdout == slow.stdout and fast.stdout.startswith("vmtune ")


STDLIB_PROBE = """
import sys
sys.argv = ["vmtune", *{args!r}]
from vmtune.main import main
try:
    main()
except SystemExit:
    pass
print("LOADED", sorted(set(sys.modules) & {watched!r}))
"""


def test_plain_check_defers_what_only_some_runs_need(tmp_path: Path) -> None:
    """git (subprocess), JSON, threads, host facts and pathlib (with urllib.parse and ipaddress,
    ~3 ms) cost start-up time a one-file check does not need; a plain check of a folder, its
    configuration looked for, needs no pathlib either."""
    watched = {"subprocess", "shutil", "json", "threading", "vmtune.facts.host", "hashlib", "multiprocessing",
               "pathlib", "inspect"}
    # A folder in a work tree asks git which files it ignores (subprocess): pathlib is still not needed.
    one = str(DOMAINS / "win10-timer-storm.xml")
    hosts = ROOT / "fixtures" / "hosts"
    # Nor inspect (with ast, dis, tokenize: ~4.5 ms), which lxml.etree imports (vmtune.xml.lxml_import)
    # and SARIF's rule documentation used (vmtune.rules.base.cleandoc).
    cases = [(["check", "--isolated", one], ROOT, watched), (["check", "."], DOMAINS, {"pathlib", "inspect"})]
    # Nor do the common options with a file name (the target: each within 1.15x a plain check).
    for options in (["--host", str(hosts / "intel-2node.xml")], ["--domcaps", str(hosts / "domcaps-full.xml")],
                    ["-o", str(tmp_path / "report.txt")], ["-f", "sarif"], ["-f", "json"]):
        cases.append((["check", "--isolated", *options, one], ROOT, {"pathlib", "inspect"}))
    # Nor does a one-file --diff or --fix (the pre-commit hook's) import dataclasses, and with it
    # inspect: the fixer's values are plain classes (~45 M instructions of a one-file fix).
    copy = tmp_path / "fixed.xml"
    copy.write_bytes((DOMAINS / "win10-timer-storm.xml").read_bytes())
    for options in (["--diff"], ["--fix"], ["--fix", "--unsafe-fixes"]):
        cases.append((["check", "--isolated", *options, str(copy)], ROOT, {"pathlib", "inspect", "dataclasses"}))
    for args, cwd, names in cases:
        out = subprocess.run([sys.executable, "-c", STDLIB_PROBE.format(args=args, watched=names)],
                             capture_output=True, text=True, timeout=120, cwd=cwd).stdout
        assert out.strip().splitlines()[-1] == "LOADED []", args
    assert copy.read_bytes() != (DOMAINS / "win10-timer-storm.xml").read_bytes()  # --fix fixed it


LXML_PROBE = """
import sys
from vmtune.xml.lxml_import import import_lxml
import_lxml()
print("INSPECT", "inspect" in sys.modules)
from lxml import etree
def hello(context, name):
    return "hello " + name
root = etree.fromstring("<a><b>x</b></a>")
find = etree.XPath("t:hello(string(b))", namespaces={"t": "urn:t"}, extensions={("urn:t", "hello"): hello})
print("XPATH", find(root))
style = etree.XSLT(etree.fromstring(
    '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
    '<xsl:template match="/"><c><xsl:value-of select="a/b"/></c></xsl:template></xsl:stylesheet>'))
print("XSLT", etree.tostring(style(root)).decode())
class Target:  # lxml reads a parser target's start() signature with the getfullargspec it took
    def __init__(self):
        self.tags = []
    def start(self, tag, attrib):
        self.tags.append(tag)
    def close(self):
        return self.tags
print("TARGET", etree.fromstring("<a><b/></a>", etree.XMLParser(target=Target())))
import inspect
print("REAL", inspect.signature(hello))
"""


def test_lxml_imported_without_inspect_works_and_leaves_the_real_inspect_importable() -> None:
    """vmtune's check imports lxml.etree with a stand-in for inspect (vmtune.xml.lxml_import): lxml
    works as usual (XPath with an extension function, XSLT, a parser target, whose signature lxml
    reads with the function it took from the stand-in), and whatever imports inspect after gets
    the standard library's."""
    out = subprocess.run([sys.executable, "-c", LXML_PROBE], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.stdout.splitlines() == ["INSPECT False", "XPATH hello x", "XSLT <c>x</c>", "TARGET ['a', 'b']",
                                       "REAL (context, name)"], out.stderr


def test_a_parallel_run_forks_its_workers_without_the_standard_pools(tmp_path: Path) -> None:
    """-j forks and feeds its workers itself (vmtune.workers): concurrent.futures and
    multiprocessing pull in 54 modules (~70 M instructions) before the first fork, on the run's
    serial path. The run's output is the one-process run's."""
    from vmtune.workers import PARALLEL_MIN_FILES

    source = (DOMAINS / "win10-timer-storm.xml").read_text()
    for index in range(PARALLEL_MIN_FILES):
        (tmp_path / f"vm{index:03d}.xml").write_text(source.replace("<name>win10<", f"<name>vm{index}<"))
    watched = {"multiprocessing", "concurrent.futures", "logging", "socket", "tempfile"}
    args = ["check", "--isolated", "-j", "2", str(tmp_path)]
    out = subprocess.run([sys.executable, "-c", STDLIB_PROBE.format(args=args, watched=watched)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path).stdout
    assert out.strip().splitlines()[-1] == "LOADED []"
    one = run_vmtune("check", "--isolated", "-j", "1", str(tmp_path))
    assert out.rsplit("LOADED", 1)[0] == one.stdout and f"{PARALLEL_MIN_FILES} domain(s) checked" in one.stdout


def test_main_leaves_the_garbage_collector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() turns the cyclic GC off while vmtune imports (start-up speed); whatever the command
    does, a caller (a test, a wrapper script) gets it back on, and the check itself ran with it on."""
    import gc

    import vmtune.commands.check as check_module
    from vmtune.main import main

    seen: list[bool] = []
    real = check_module.run_check
    monkeypatch.setattr(check_module, "run_check", lambda request: seen.append(gc.isenabled()) or real(request))
    for argv in (["check", str(DOMAINS / "linux-tuned.xml")], ["check", "--no-such-option", "x.xml"]):
        monkeypatch.setattr(sys, "argv", ["vmtune", *argv])
        with pytest.raises(SystemExit):
            main()
        assert gc.isenabled(), argv
    assert seen == [True]


EXIT_PROBE = """
import atexit, os, sys
real_exit = os._exit
def exit_now(code):
    os.write(2, b"os._exit\\n")
    real_exit(code)
os._exit = exit_now
if {register!r}:
    atexit.register(print, "atexit ran")
sys.argv = ["vmtune", *{args!r}]
from vmtune.main import run
run()
"""


@pytest.mark.parametrize("register", [False, True])
def test_the_executable_ends_a_check_without_teardown_unless_exit_work_is_registered(register: bool) -> None:
    """`vmtune check` (the console script, `python -m vmtune`) skips the interpreter's teardown
    (~2 ms) after printing everything, with the exit code of a normal exit (main(), as tests and
    wrappers call it); with an atexit callback (a worker pool, coverage) it exits normally and the
    callback runs."""
    one = str(DOMAINS / "win10-timer-storm.xml")
    args = ["check", "--isolated", "--show-fixes", one, one]
    normal = f"import sys; sys.argv = ['vmtune', *{args!r}]\nfrom vmtune.main import main\nmain()"
    expected = subprocess.run([sys.executable, "-c", normal], capture_output=True, text=True, timeout=120, cwd=ROOT)
    done = subprocess.run([sys.executable, "-c", EXIT_PROBE.format(args=args, register=register)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == expected.returncode == 1
    atexit, skipped = ("atexit ran\n", "") if register else ("", "os._exit\n")
    assert (done.stdout, done.stderr) == (expected.stdout + atexit, expected.stderr + skipped)
    assert expected.stdout.count("CLK002") == 2 and expected.stdout.endswith("--fix --unsafe-fixes --select CODE\n")


def test_the_executable_exits_normally_under_a_profiler() -> None:
    code = ("import cProfile, sys; sys.argv = ['vmtune', 'check', '--isolated', sys.argv[1]]\n"
            "from vmtune.main import run\ncProfile.run('run()', sort='tottime')")
    done = subprocess.run([sys.executable, "-c", code, str(DOMAINS / "linux-tuned.xml")], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and "function calls" in done.stdout  # the profile was printed
