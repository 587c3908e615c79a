"""`--format html`: one self-contained page, rendered by Debian's headless Chromium
(helpers.console_messages, helpers.screenshot). The report never writes to the console, so any
console line is an error; the first tests show the detector reports a page with a deliberate JS
error and a report with a script that was not vmtune's.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from lxml import html as lxml_html

from vmtune.report.html import SCRIPT, render_document

from conftest import DOMAINS, TESTNODE_URI, domain_xml, run_vmtune
from helpers import console_messages, screenshot

pytestmark = pytest.mark.slow

HOSTILE = "<script>alert(1)</script>"


def test_the_console_check_catches_a_deliberate_js_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title></head>"
                    "<body><p>x</p><script>notDefinedAnywhere();</script></body></html>")
    messages, _ = console_messages(page, tmp_path)
    assert any("Uncaught ReferenceError: notDefinedAnywhere is not defined" in m for m in messages), messages


def test_the_report_refuses_scripts_it_did_not_ship(tmp_path: Path) -> None:
    """The page's Content-Security-Policy lets only vmtune's own inline script run: a script that
    reached the page some other way is refused, and the refusal is a console error."""
    page = tmp_path / "injected.html"
    text = render_document({"findings": [], "summary": {}})
    page.write_text(text.replace("</body>", "<script>document.title = 'pwned';</script></body>"))
    messages, dom = console_messages(page, tmp_path)
    assert any("Executing inline script violates the following Content Security Po" in m for m in messages), messages
    assert "<title>pwned</title>" not in dom


def _hostile_tree(tmp_path: Path) -> Path:
    folder = tmp_path / "domains"
    folder.mkdir()
    for name in ("win10-timer-storm.xml", "legacy-bigvm.xml", "linux-tuned.xml"):
        shutil.copy(DOMAINS / name, folder / name)
    # A domain name and a file name that are markup: they must show as text, never as elements.
    (folder / "<img src=x onerror=alert(2)>.xml").write_text(
        domain_xml(name="&lt;script&gt;alert(1)&lt;/script&gt;", devices="<input type='tablet' bus='usb'/>"))
    return folder


def test_files_report_loads_cleanly_groups_findings_and_shows_hostile_names_as_text(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = run_vmtune("check", "--isolated", "--format", "html", "-o", str(page), str(_hostile_tree(tmp_path)))
    assert done.returncode == 1, done.stderr  # findings
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # no network resource
    messages, dom = console_messages(page, tmp_path)
    assert messages == []
    tree = lxml_html.fromstring(dom)
    assert [s.text for s in tree.iter("script")] == [SCRIPT]  # vmtune's filter script and nothing else
    assert not tree.xpath("//img") and not tree.xpath("//@onerror")
    summaries = [s.text_content() for s in tree.xpath("//details[@class='domain']/summary")]
    assert any(s.startswith(HOSTILE) and "<img src=x onerror=alert(2)>.xml" in s for s in summaries), summaries
    assert any(s.startswith("win10 ") and "1 error" not in s for s in summaries)
    # by host (files), then domain, with per-rule counts; a chart row per rule
    host = tree.xpath("//details[@class='host']/summary")[0].text_content()
    assert host.startswith("files: 3 domain(s) with findings")  # linux-tuned has none
    assert not any(s.startswith("linux-tuned") for s in summaries)
    chart_rules = [t.text for t in tree.xpath("//*[local-name()='svg']/*[local-name()='text'][@x='0']")]
    rule_rows = {r.xpath("td")[0].text_content(): [c.text_content() for c in r.xpath("td")]
                 for r in tree.xpath("(//table)[1]/tbody/tr")}
    assert chart_rules and sorted(chart_rules) == sorted(rule_rows)
    # rule, name, error, warning, info, total, fixable, domains, hosts: the tablet in two domains, a warning in one
    assert rule_rows["USB002"] == ["USB002", "usb-tablet-without-graphics", "0", "1", "1", "2", "2", "2", "1"]
    width, height, size = screenshot(page, tmp_path)
    assert (width, height) == (1280, 1600) and size > 20_000  # a rendered page, not a blank one


def test_live_report_groups_by_host(tmp_path: Path, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    page = tmp_path / "live.html"
    done = run_vmtune("check", "--isolated", "-c", TESTNODE_URI, "--all", "--format", "html", "-o", str(page))
    assert done.returncode == 1, done.stderr
    messages, dom = console_messages(page, tmp_path)
    assert messages == []
    tree = lxml_html.fromstring(dom)
    host = tree.xpath("//details[@class='host']/summary")[0].text_content()
    label = json.loads(run_vmtune("check", "--isolated", "-c", TESTNODE_URI, "--all", "-f", "json").stdout)
    assert host.startswith(label["findings"][0]["host"] + ": 7 domain(s) with findings")  # the JSON's host label
    domains = [s.text_content().split(" ")[0] for s in tree.xpath("//details[@class='domain']/summary")]
    assert "win10" in domains and "linux-tuned" not in domains  # only domains with findings


def test_severity_filter_and_escaping_without_a_browser() -> None:
    doc = {"tool": {"version": "x"}, "summary": {"domains": 1},
           "findings": [{"host": 'h"><b>', "domain": HOSTILE, "source": "s", "rule": "R<1>", "name": "n",
                         "severity": "bogus\"><x>", "line": 3, "message": "m & <i>", "fixable": False}]}
    page = render_document(doc, title="<t>")
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'h"><b>' not in page and "R<1>" not in page and "m & <i>" not in page
    assert 'class="sev-info"' in page  # an unknown severity never becomes a class name


def test_an_input_that_failed_is_listed_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<domain><name>x</name>")
    done = run_vmtune("check", "--isolated", "-f", "html", str(bad), str(DOMAINS / "linux-tuned.xml"))
    assert done.returncode == 2
    tree = lxml_html.fromstring(done.stdout)
    assert tree.xpath("//h2[text()='Inputs that could not be checked']")
    assert [li.text_content() for li in tree.xpath("//ul/li")] == [
        f"{bad}:1 malformed XML: Premature end of data in tag domain line 1"]
    assert "No findings." in done.stdout  # linux-tuned is clean
