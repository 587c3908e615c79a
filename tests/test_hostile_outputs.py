"""Hostile input on the less-travelled outputs and inputs: the HTML report, custom checks'
codes, names and fix values, baselines. Each test runs vmtune as a user does (a subprocess)
and checks the result with a real consumer (Chromium, lxml); each failed before the fix it
guards (see SECURITY.md for the numbers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import html as lxml_html

from vmtune.report.html import SCRIPT

from conftest import ROOT, domain_xml
from helpers import console_messages

TABLET = "<controller type='usb' model='qemu-xhci'/><input type='tablet' bus='usb'/>"  # USB002, info
NIC = "<interface type='network'><source network='default'/></interface>"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def run(*args: str | bytes | Path, cwd: Path = ROOT) -> tuple[int, str, str]:
    """vmtune's exit code and output, decoded as strict UTF-8 (an invalid byte fails the test)."""
    done = subprocess.run([sys.executable, "-m", "vmtune", *(a if isinstance(a, bytes) else str(a) for a in args)],
                          capture_output=True, timeout=120, cwd=cwd)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    return done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")


# --- the HTML report ------------------------------------------------------------------------

@pytest.mark.slow
def test_html_report_shows_odd_names_as_visible_escapes(tmp_path: Path) -> None:
    """Before: a file name that is not UTF-8 made `-f html -o` die with a UnicodeEncodeError
    traceback (no report), and ESC and RLO from names reached the page raw (an RLO in a domain
    name reversed the file name shown after it)."""
    folder = tmp_path / "domains"
    folder.mkdir()
    (folder / "esc\x1b[31mred\n.xml").write_text(domain_xml(name="rlo\u202eevil", cpu=""))
    with open(os.fsencode(folder) + b"/latin\xe9\x80.xml", "wb") as handle:
        handle.write(domain_xml(name="c1\u009b31m", cpu="", devices=TABLET).encode())
    (folder / "markup.xml").write_text(domain_xml(
        name="&lt;/b&gt;&lt;/summary&gt;&lt;script&gt;alert(1)&lt;/script&gt;\"' onmouseover='x", cpu=""))
    page = tmp_path / "report.html"
    code, out, err = run("check", "--isolated", "-f", "html", "-o", page, folder)
    assert (code, out, err) == (1, "", "")
    text = page.read_bytes().decode("utf-8")  # strict: the page is valid UTF-8
    assert not CONTROL.search(text)
    messages, dom = console_messages(page, tmp_path)
    assert messages == []
    tree = lxml_html.fromstring(dom)
    assert [s.text for s in tree.iter("script")] == [SCRIPT]  # vmtune's filter script and nothing else
    assert not tree.xpath("//@onmouseover")
    summaries = sorted(s.text_content() for s in tree.xpath("//details[@class='domain']/summary"))
    assert summaries == [
        "</b></summary><script>alert(1)</script>\"' onmouseover='x " + f"{folder}/markup.xml1 warning",
        f"c1\\x9b31m {folder}/latin\\xe9\\x80.xml1 warning1 info",
        f"rlo\\u202eevil {folder}/esc\\x1b[31mred\\n.xml1 warning",
    ]
