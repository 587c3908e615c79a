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

from vmtune.report.html import OPEN_LIMIT, SCRIPT, SEVERITIES, render_document

from conftest import DOMAINS, TESTNODE_URI, domain_xml, run_vmtune
from helpers import DevTools, console_messages, screenshot

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
    # by folder (files read without --host are on no host), then domain, with per-rule counts; a chart row per rule
    folder = tree.xpath("//details[@class='folder']/summary")[0].text_content()
    assert folder.startswith(f"files in {tmp_path}/domains: 3 domain(s) with findings")  # linux-tuned has none
    assert "0 host(s)" not in text and "1 folder(s) of files with findings" in text
    assert not any(s.startswith("linux-tuned") for s in summaries)
    chart_rules = [t.text for t in tree.xpath("//div[@class='chart']/div[@class='bar']/code")]
    rule_rows = {r.xpath("td")[0].text_content(): [c.text_content() for c in r.xpath("td")]
                 for r in tree.xpath("(//table)[1]/tbody/tr")}
    assert chart_rules and sorted(chart_rules) == sorted(rule_rows)
    # rule, name, error, warning, info, total, fixable, domains, hosts: the tablet in two domains, a warning in one
    assert rule_rows["USB002"] == ["USB002", "usb-tablet-without-graphics", "0", "1", "1", "2", "2", "2", "0"]
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


def _fleet(tmp_path: Path, count: int = 264) -> Path:
    """count domains in three folders, cycling through the bundled examples (one with an error,
    one clean), with unique names; one name is long enough to have to wrap on a phone."""
    templates = sorted(DOMAINS.glob("*.xml"))
    fleet = tmp_path / "fleet"
    for i in range(count):
        template = templates[i % len(templates)]
        name = f"vm{i:03d}-{template.stem}" + ("-with-a-very-long-name-from-a-naming-scheme" * 2 if i == 7 else "")
        text = re.sub(r"<name>[^<]*</name>", f"<name>{name}</name>", template.read_text(), count=1)
        text = re.sub(r"\s*<uuid>[^<]*</uuid>", "", text)
        folder = fleet / f"rack{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.xml").write_text(text)
    return fleet


# What a reader of the page sees, measured in the browser after layout.
LAYOUT = """(() => {
  const box = (e) => e.getBoundingClientRect();
  const wide = Array.from(document.querySelectorAll("body *"))
    .filter((e) => box(e).width > 0 && box(e).right > innerWidth + 0.5)
    .map((e) => e.tagName + "." + (typeof e.className === "string" ? e.className : ""));
  const bars = Array.from(document.querySelectorAll("svg")).flatMap((svg) =>
    Array.from(svg.querySelectorAll("rect")).map((r) => [box(r).left - box(svg).left, box(svg).right - box(r).right]));
  return {inner: innerWidth, scroll: document.documentElement.scrollWidth, wide: wide.slice(0, 5),
          bars: bars, chart: box(document.querySelector(".chart") || document.querySelector("svg")).right};
})()"""

DOMAINS_SHOWN = """Array.from(document.querySelectorAll("details.domain")).map((d) => ({
  text: d.querySelector("summary").textContent, open: d.open, hidden: d.hidden,
  group: d.parentElement.querySelector("summary").textContent,
  rows: Array.from(d.querySelectorAll("tbody tr")).map((tr) => [tr.className.slice(4),
        Number(tr.querySelector("td.n").textContent) || 0])}))"""


def test_a_fleet_report_fits_a_phone_puts_the_worst_first_and_can_be_searched(tmp_path: Path) -> None:
    """Before: at 390 px the 710 px chart and the ten-column rule table pushed the page sideways;
    264 domains were all expanded, in path order, errors below info rows, with no search, under
    one host called `files`."""
    page = tmp_path / "fleet.html"
    done = run_vmtune("check", "--isolated", "-f", "html", "-o", str(page), str(_fleet(tmp_path)))
    assert done.returncode == 1, done.stderr
    with DevTools(tmp_path) as browser:
        for width, height, mobile in ((390, 844, True), (1280, 900, False)):
            tab = browser.open(page, width, height, mobile)
            for expanded in (False, True):  # as the page opens, then with every domain's rows laid out
                if expanded:
                    browser.evaluate(tab, 'document.querySelector("button[data-open=all]").click()')
                layout = browser.evaluate(tab, LAYOUT)
                # a page wider than a phone makes Chromium widen the layout viewport (zoomed out): 738 px before
                assert isinstance(layout, dict) and layout["inner"] == width
                assert layout["scroll"] <= width and layout["wide"] == [], layout  # no sideways scrolling
                assert layout["chart"] <= width and layout["bars"]
                assert all(left >= -0.5 and right >= -0.5 for left, right in layout["bars"])  # bars inside their row
                if not expanded:
                    shot_w, shot_h, size = browser.screenshot(tab, tmp_path / f"fleet-{width}.png")
                    assert shot_w == width and shot_h > height and size > 50_000  # the whole page, rendered
        tab = browser.open(page, 390, 844, True)
        domains = browser.evaluate(tab, DOMAINS_SHOWN)
        assert isinstance(domains, list) and len(domains) == 198  # 264 less 66 copies of linux-tuned, win10-tuned
        # Folders, not one host called `files`.
        assert {d["group"].split(":")[0] for d in domains} == {f"files in {tmp_path}/fleet/rack{i}" for i in range(3)}
        # Worst first in each folder: errors, then warnings, then info.
        for group in {d["group"] for d in domains}:
            keys = [tuple(-sum(1 for sev, _ in d["rows"] if sev == s) for s in SEVERITIES)
                    for d in domains if d["group"] == group]
            assert keys == sorted(keys) and keys[0][0] < 0
        # Inside a domain: by severity, then line.
        for d in domains:
            order = [(SEVERITIES.index(sev), line) for sev, line in d["rows"]]
            assert order == sorted(order), d
        assert any(d["rows"][0][0] == "error" and len(d["rows"]) > 1 for d in domains)
        # Collapsed: only the first OPEN_LIMIT domains with errors are open.
        with_errors = [d for d in domains if any(sev == "error" for sev, _ in d["rows"])]
        assert len(with_errors) > OPEN_LIMIT
        assert [d["text"] for d in domains if d["open"]] == [d["text"] for d in with_errors[:OPEN_LIMIT]]
        # Search: typing narrows the page to the matching domains and says how many.
        browser.evaluate(tab, """(() => { const box = document.getElementById("search");
            box.value = "WIN-stimer  hv002"; box.dispatchEvent(new Event("input")); })()""")
        shown = [d for d in browser.evaluate(tab, DOMAINS_SHOWN) if not d["hidden"]]  # type: ignore[union-attr]
        assert len(shown) == 33 and all("win-stimer-broken" in d["text"] for d in shown)
        assert browser.evaluate(tab, 'document.getElementById("shown").textContent') == "33 of 198 domain(s) match"
        browser.evaluate(tab, """(() => { const box = document.getElementById("search");
            box.value = "no-such-domain"; box.dispatchEvent(new Event("input")); })()""")
        assert browser.evaluate(tab, 'document.querySelectorAll("details.folder:not([hidden])").length') == 0
        assert browser.problems == []  # no console message, exception or CSP refusal
