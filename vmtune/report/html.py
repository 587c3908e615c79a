"""A self-contained HTML report: one file someone opens from a CI artifact or a fleet run.

Findings are grouped by host (files read without `--host`: by folder), then domain, worst first
(errors, then warnings, then info; inside a domain by severity, then line), with counts per rule
and severity and an inline chart by rule and severity. It is meant to hold a fleet and to be read
on a phone: past OPEN_LIMIT domains only the worst domains with errors start expanded, a search
box hides the domains that do not match, and nothing is wider than a 390 px screen (tables turn
into stacked rows, chart bars are percentages of their row). Nothing is loaded from the network:
the CSS, the small filter script and the chart are inline, and the page's Content-Security-Policy allows exactly those
two inline blocks (by hash) and nothing else, so even a value that escaped escaping could
neither run nor fetch anything. Every value taken from the input (domain names, paths,
messages, host names) goes through `html.escape`, in text and attributes alike, after
`vmtune.escape.printable`: a control character, a bidirectional override, an invisible character
(a zero-width space, a Hangul filler) or a file name's undecodable byte shows as `\\x1b`,
`\\u202e`, `\\u200b`, `\\u3164`, `\\xe9` as in text output (a byte that is not UTF-8
used to make writing the page fail with a traceback; an RLO in a domain name reversed the file
name shown after it). Class names come only from the fixed severity list.

The renderer reads the fields of the JSON document (`vmtune.report.jsonout.document`, the
stable contract of docs/output.md), so the Ansible collection's fleet report renders the
findings its modules return with the same code.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from typing import Any

from vmtune.escape import printable
from vmtune.report.model import Report

SEVERITIES = ("error", "warning", "info")
COLORS = {"error": "#c62828", "warning": "#e67e00", "info": "#1e6bb8"}
# Past this many domains a page is a fleet: only the first OPEN_LIMIT domains with errors start
# expanded (264 expanded domains were thousands of rows to scroll past to reach the last host).
OPEN_LIMIT = 20

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1em 2em; color: #1d1d1f; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.meta { color: #666; }
.cards { display: flex; gap: 1em; flex-wrap: wrap; margin: 1em 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: .5em 1em; min-width: 7em; }
.card b { display: block; font-size: 1.6em; }
.card.error b { color: #c62828; } .card.warning b { color: #e67e00; } .card.info b { color: #1e6bb8; }
table { border-collapse: collapse; width: 100%; margin: .5em 0 1em; }
th, td { text-align: left; padding: .25em .5em; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f6f6f6; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td, summary, li, .meta { overflow-wrap: anywhere; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .95em; }
.sev { font-weight: 600; }
tr.sev-error .sev { color: #c62828; } tr.sev-warning .sev { color: #e67e00; } tr.sev-info .sev { color: #1e6bb8; }
details { margin: .4em 0; }
details.host, details.folder { border: 1px solid #ddd; border-radius: 6px; padding: .3em .8em; }
details.domain { margin-left: 1em; }
summary { cursor: pointer; }
.badge { display: inline-block; border-radius: 3px; padding: 0 .4em; margin-left: .3em; color: #fff;
         font-size: .85em; }
.badge.error, .swatch.error { background: #c62828; } .badge.warning, .swatch.warning { background: #e67e00; }
.badge.info, .swatch.info { background: #1e6bb8; }
.rules { color: #555; margin: .2em 0 .4em 1em; }
.note { color: #555; }
.filters label { margin-right: 1em; white-space: nowrap; }
.filters input[type=search] { font: inherit; width: 22em; max-width: 100%; box-sizing: border-box; }
.filters button { font: inherit; }
.hide-error tr.sev-error, .hide-warning tr.sev-warning, .hide-info tr.sev-info { display: none; }
.chart { max-width: 760px; margin: .5em 0 1em; }
.bar { display: grid; grid-template-columns: 5.5em minmax(0, 1fr) 3.5em; gap: .5em; align-items: center; }
.bar svg { display: block; width: 100%; height: 16px; }
.bar .n { font-variant-numeric: tabular-nums; }
.legend span { margin-right: 1em; white-space: nowrap; }
.swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em; }
@media (max-width: 640px) {
  body { padding: .5em .75em; }
  details.domain { margin-left: .2em; }
  details.host, details.folder { padding: .2em .4em; }
  .rules { margin-left: .2em; }
  table.stack thead { display: none; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; width: auto; }
  table.stack tr { border-bottom: 1px solid #ddd; padding: .3em 0; }
  table.stack td { border: 0; padding: .05em .3em; text-align: left; }
  table.stack td.n { display: inline-block; }
  table.stack td[data-label]::before { content: attr(data-label) " "; color: #666; }
}
"""

# Severity filters, the search box and expand/collapse all. The script reads the page's own text
# (textContent) and writes only classes, `hidden`, `open` and a count (textContent): no data from
# the report is in here and nothing from the report is ever parsed as markup.
SCRIPT = """
(function () {
  var body = document.body;
  document.querySelectorAll("input[data-severity]").forEach(function (box) {
    box.addEventListener("change", function () {
      body.classList.toggle("hide-" + box.dataset.severity, !box.checked);
    });
  });
  var domains = Array.prototype.slice.call(document.querySelectorAll("details.domain"));
  var texts = domains.map(function (d) { return d.textContent.toLowerCase(); });
  var groups = document.querySelectorAll("details.host, details.folder");
  var search = document.getElementById("search");
  var shown = document.getElementById("shown");
  if (search) {
    search.addEventListener("input", function () {
      var words = search.value.toLowerCase().split(/\\s+/).filter(Boolean);
      var count = 0;
      domains.forEach(function (d, i) {
        d.hidden = !words.every(function (w) { return texts[i].indexOf(w) >= 0; });
        if (!d.hidden) { count += 1; }
      });
      groups.forEach(function (g) { g.hidden = !g.querySelector("details.domain:not([hidden])"); });
      shown.textContent = words.length ? count + " of " + domains.length + " domain(s) match" : "";
    });
  }
  document.querySelectorAll("button[data-open]").forEach(function (button) {
    button.addEventListener("click", function () {
      domains.forEach(function (d) { if (!d.hidden) { d.open = button.dataset.open === "all"; } });
    });
  });
})();
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


CSP = f"default-src 'none'; style-src {_hash(CSS)}; script-src {_hash(SCRIPT)}; img-src data:"


def _e(value: object) -> str:
    return escape(printable("" if value is None else str(value)), quote=True)


def _severity(value: object) -> str:
    """A severity as a class name: only the fixed names, whatever the input says."""
    return str(value) if value in SEVERITIES else "info"


def _badges(counts: Mapping[str, int]) -> str:
    return "".join(f'<span class="badge {s}">{counts[s]} {s}</span>' for s in SEVERITIES if counts.get(s))


def _worst_first(counts: Mapping[str, int]) -> tuple[int, ...]:
    """A sort key: more errors first, then more warnings, then more info."""
    return tuple(-counts.get(s, 0) for s in SEVERITIES)


def chart(per_rule: Mapping[str, Counter[str]], names: Mapping[str, str]) -> str:
    """Horizontal stacked bars: one row per rule, one segment per severity, most findings first.

    Each row is the rule's code, a bar and its total in a grid; the bar is an SVG whose segments
    are percentages of its width, so it shrinks with the screen and the labels keep their size
    (one 710 px SVG overflowed a phone's 390 px)."""
    rows = sorted(per_rule.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    if not rows:
        return ""
    top = max(sum(c.values()) for _, c in rows)
    parts = ['<div class="chart" aria-label="findings by rule and severity">']
    for code, counts in rows:
        bars, x = [], 0.0
        for severity in SEVERITIES:
            if not counts.get(severity):
                continue
            width = 100 * counts[severity] / top
            bars.append(f'<rect x="{x:.2f}%" y="1" width="{width:.2f}%" height="14" fill="{COLORS[severity]}">'
                        f"<title>{_e(code)} {severity}: {counts[severity]}</title></rect>")
            x += width
        parts.append(f'<div class="bar"><code title="{_e(code)} {_e(names.get(code, ""))}">{_e(code)}</code>'
                     f'<svg xmlns="http://www.w3.org/2000/svg">{"".join(bars)}</svg>'
                     f'<span class="n">{sum(counts.values())}</span></div>')
    parts.append('<div class="legend">' + "".join(f'<span><span class="swatch {s}"></span>{s}</span>'
                                                  for s in SEVERITIES) + "</div></div>")
    return "".join(parts)


def _rule_table(findings: list[Mapping[str, Any]], per_rule: Mapping[str, Counter[str]],
                names: Mapping[str, str]) -> str:
    fixable: Counter[str] = Counter(str(f.get("rule")) for f in findings if f.get("fixable"))
    domains: dict[str, set[tuple[str, str]]] = {}
    hosts: dict[str, set[str]] = {}
    for f in findings:
        domains.setdefault(str(f.get("rule")), set()).add((str(f.get("host") or ""), str(f.get("source"))))
        hosts.setdefault(str(f.get("rule")), set())
        if f.get("host"):  # files read without --host are on no host
            hosts[str(f.get("rule"))].add(str(f.get("host")))
    rows = ['<table class="stack"><thead><tr><th>rule</th><th>name</th>'
            + "".join(f"<th>{s}</th>" for s in SEVERITIES)
            + "<th>total</th><th>fixable</th><th>domains</th><th>hosts</th></tr></thead><tbody>"]
    for code, counts in sorted(per_rule.items(), key=lambda item: (-sum(item[1].values()), item[0])):
        rows.append(f"<tr><td><code>{_e(code)}</code></td><td>{_e(names.get(code, ''))}</td>"
                    + "".join(f'<td class="n" data-label="{s}">{counts.get(s, 0)}</td>' for s in SEVERITIES)
                    + f'<td class="n" data-label="total">{sum(counts.values())}</td>'
                    f'<td class="n" data-label="fixable">{fixable[code]}</td>'
                    f'<td class="n" data-label="domains">{len(domains[code])}</td>'
                    f'<td class="n" data-label="hosts">{len(hosts[code])}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def _group(finding: Mapping[str, Any]) -> tuple[str, str]:
    """("host", name) for a libvirt host's findings; ("folder", directory) for files read
    without --host, which used to share one made-up host called `files`."""
    if finding.get("host"):
        return "host", str(finding["host"])
    return "folder", posixpath.dirname(str(finding.get("source") or "").replace("\\", "/")) or "."


def _finding_order(finding: Mapping[str, Any]) -> tuple[int, int, str]:
    """Errors first, then warnings, then info; by line inside a severity (an error used to sit
    below the info rows of rules whose codes sort first)."""
    return SEVERITIES.index(_severity(finding.get("severity"))), finding.get("line") or 0, str(finding.get("rule"))


def _finding_rows(findings: Iterable[Mapping[str, Any]]) -> str:
    rows = []
    for f in sorted(findings, key=_finding_order):
        severity = _severity(f.get("severity"))
        where = f.get("line") if f.get("line") else f.get("xpath")
        fix = f"{f.get('fix')} [{f.get('fix_safety')}]" if f.get("fixable") else ""
        note = f'<div class="note">{_e(f.get("note"))}</div>' if f.get("note") else ""
        measured = f.get("measurement")
        if isinstance(measured, Mapping):  # --measure: the statistics' verdict, beside the finding
            label = "measured" if measured.get("status") == "measured" else "measure"
            text = str(measured.get("text", "")).removeprefix("measured: ")
            note += f'<div class="note measured">{label}: {_e(text)}</div>'
        rows.append(f'<tr class="sev-{severity}"><td><code>{_e(f.get("rule"))}</code> {_e(f.get("name"))}</td>'
                    f'<td class="sev">{severity}</td><td class="n" data-label="line">{_e(where)}</td>'
                    f"<td>{_e(f.get('message'))}{note}</td><td>{_e(fix)}</td></tr>")
    return ('<table class="stack"><thead><tr><th>rule</th><th>severity</th><th>line</th><th>finding</th>'
            "<th>fix</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _rule_counts(findings: Iterable[Mapping[str, Any]]) -> str:
    counts = Counter(str(f.get("rule")) for f in findings)
    return ('<div class="rules">' + ", ".join(f"<code>{_e(code)}</code> &times;{n}"
                                               for code, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
            + "</div>")


def _hosts_section(findings: list[Mapping[str, Any]]) -> str:
    """Hosts (or folders), then their domains, worst first. With OPEN_LIMIT domains or fewer every
    domain starts expanded; past it only the first OPEN_LIMIT domains with errors do."""
    grouped: dict[tuple[str, str], dict[tuple[str, str], list[Mapping[str, Any]]]] = {}
    for f in findings:
        grouped.setdefault(_group(f), {}).setdefault((str(f.get("domain")), str(f.get("source"))), []).append(f)
    counted = {group: {key: Counter(_severity(f.get("severity")) for f in items) for key, items in domains.items()}
               for group, domains in grouped.items()}
    totals = {group: sum(counts.values(), Counter()) for group, counts in counted.items()}
    fleet = sum(len(domains) for domains in grouped.values()) > OPEN_LIMIT
    opened = 0
    parts = []
    for group in sorted(grouped, key=lambda g: (*_worst_first(totals[g]), g)):
        kind, label = group
        domains = grouped[group]
        name = f"<b>{_e(label)}</b>" if kind == "host" else f"files in <b>{_e(label)}</b>"
        parts.append(f'<details class="{kind}" open><summary>{name}: {len(domains)} domain(s) with '
                     f"findings{_badges(totals[group])}</summary>"
                     f"{_rule_counts(f for items in domains.values() for f in items)}")
        for key in sorted(domains, key=lambda k: (*_worst_first(counted[group][k]), k)):
            domain, source = key
            counts = counted[group][key]
            is_open = not fleet or (counts["error"] > 0 and opened < OPEN_LIMIT)
            opened += is_open
            parts.append(f'<details class="domain"{" open" if is_open else ""}><summary><b>{_e(domain)}</b> '
                         f"<code>{_e(source)}</code>{_badges(counts)}</summary>{_rule_counts(domains[key])}"
                         f"{_finding_rows(domains[key])}</details>")
        parts.append("</details>")
    return "".join(parts)


def _problems(doc: Mapping[str, Any]) -> str:
    parts = []
    if doc.get("errors"):
        parts.append("<h2>Inputs that could not be checked</h2><ul>")
        for error in doc["errors"]:
            where = f"{error.get('source')}:{error.get('line')}" if error.get("line") else error.get("source")
            parts.append(f"<li><code>{_e(where or '')}</code> {_e(error.get('message'))}</li>")
        parts.append("</ul>")
    if doc.get("skipped"):
        parts.append("<h2>Skipped</h2><ul>")
        parts += [f"<li><code>{_e(s.get('source'))}</code> {_e(s.get('reason'))}</li>" for s in doc["skipped"]]
        parts.append("</ul>")
    return "".join(parts)


def _where(hosts: int, folders: int) -> str:
    said = [f"{hosts} host(s)"] if hosts or not folders else []
    return ", ".join(said + ([f"{folders} folder(s) of files"] if folders else []))


def render_document(doc: Mapping[str, Any], title: str = "vmtune report", generated: datetime | None = None) -> str:
    """The page for a JSON document's fields: findings (with host, domain, source, rule, name,
    severity, line, xpath, message, note, fixable, fix_safety, fix), errors, skipped, summary."""
    findings: list[Mapping[str, Any]] = list(doc.get("findings", []))
    summary: Mapping[str, Any] = doc.get("summary", {})
    per_rule: dict[str, Counter[str]] = {}
    names: dict[str, str] = {}
    for f in findings:
        per_rule.setdefault(str(f.get("rule")), Counter())[_severity(f.get("severity"))] += 1
        names[str(f.get("rule"))] = str(f.get("name") or "")
    totals = Counter(_severity(f.get("severity")) for f in findings)
    hosts = {str(f["host"]) for f in findings if f.get("host")}
    folders = {_group(f) for f in findings if not f.get("host")}
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    version = doc.get("tool", {}).get("version", "")
    cards = [("domains", "", summary.get("domains", 0)), ("findings", "", len(findings)),
             *((s, s, totals[s]) for s in SEVERITIES), ("fixable", "", summary.get("fixable", 0)),
             ("input errors", "", len(doc.get("errors", [])))]
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{"vmtune " + _e(version) + ", " if version else ""}{when}; '
        f"{_where(len(hosts), len(folders))} with findings</p>",
        '<div class="cards">' + "".join(f'<div class="card {cls}"><b>{_e(n)}</b>{_e(label)}</div>'
                                        for label, cls, n in cards) + "</div>",
    ]
    if findings:
        body += [
            "<h2>Findings by rule and severity</h2>", chart(per_rule, names), _rule_table(findings, per_rule, names),
            '<h2>By host and domain</h2><p class="filters">'
            '<input type="search" id="search" placeholder="search domains, files, rules, messages" '
            'aria-label="search domains"> <span id="shown"></span><br>'
            + "".join(f'<label><input type="checkbox" data-severity="{s}" checked> {s}</label>' for s in SEVERITIES)
            + '<button type="button" data-open="all">expand all</button> '
            '<button type="button" data-open="none">collapse all</button></p>', _hosts_section(findings),
        ]
    else:
        body.append("<p>No findings.</p>")
    body.append(_problems(doc))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n" + "\n".join(body)
            + f"\n<script>{SCRIPT}</script>\n</body></html>\n")


def render(report: Report) -> str:
    from vmtune.report.jsonout import document

    return render_document(document(report))
