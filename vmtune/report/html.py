"""A self-contained HTML report: one file someone opens from a CI artifact or a fleet run.

Findings are grouped by host, then domain, with counts per rule and severity and an inline SVG
chart by rule and severity. Nothing is loaded from the network: the CSS, the small filter
script and the chart are inline, and the page's Content-Security-Policy allows exactly those
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
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from typing import Any

from vmtune.escape import printable
from vmtune.report.model import Report

SEVERITIES = ("error", "warning", "info")
COLORS = {"error": "#c62828", "warning": "#e67e00", "info": "#1e6bb8"}
FILES_HOST = "files"  # the group of findings read from files rather than a libvirt host

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
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .95em; }
.sev { font-weight: 600; }
tr.sev-error .sev { color: #c62828; } tr.sev-warning .sev { color: #e67e00; } tr.sev-info .sev { color: #1e6bb8; }
details { margin: .4em 0; }
details.host { border: 1px solid #ddd; border-radius: 6px; padding: .3em .8em; }
details.domain { margin-left: 1em; }
summary { cursor: pointer; }
.badge { display: inline-block; border-radius: 3px; padding: 0 .4em; margin-left: .3em; color: #fff;
         font-size: .85em; }
.badge.error { background: #c62828; } .badge.warning { background: #e67e00; } .badge.info { background: #1e6bb8; }
.rules { color: #555; margin: .2em 0 .4em 1em; }
.note { color: #555; }
.filters label { margin-right: 1em; }
.hide-error tr.sev-error, .hide-warning tr.sev-warning, .hide-info tr.sev-info { display: none; }
svg text { font: 12px system-ui, sans-serif; }
"""

# Severity filters: hide or show the rows of one severity. No data from the report is in here.
SCRIPT = """
document.querySelectorAll("input[data-severity]").forEach(function (box) {
  box.addEventListener("change", function () {
    document.body.classList.toggle("hide-" + box.dataset.severity, !box.checked);
  });
});
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


def chart(per_rule: Mapping[str, Counter[str]], names: Mapping[str, str]) -> str:
    """Horizontal stacked bars: one row per rule, one segment per severity, most findings first."""
    rows = sorted(per_rule.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    if not rows:
        return ""
    label_w, bar_w, row_h = 90, 560, 22
    top = max(sum(c.values()) for _, c in rows)
    height = row_h * len(rows) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{label_w + bar_w + 60}" '
             f'height="{height}" aria-label="findings by rule and severity">']
    for i, (code, counts) in enumerate(rows):
        y = i * row_h
        parts.append(f'<text x="0" y="{y + 15}">{_e(code)}<title>{_e(code)} {_e(names.get(code, ""))}</title></text>')
        x = float(label_w)
        for severity in SEVERITIES:
            if not counts.get(severity):
                continue
            width = bar_w * counts[severity] / top
            parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{row_h - 6}" '
                         f'fill="{COLORS[severity]}"><title>{_e(code)} {severity}: {counts[severity]}</title></rect>')
            x += width
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 15}">{sum(counts.values())}</text>')
    legend_y = row_h * len(rows) + 18
    for j, severity in enumerate(SEVERITIES):
        x = label_w + j * 110
        parts.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" fill="{COLORS[severity]}"/>'
                     f'<text x="{x + 16}" y="{legend_y}">{severity}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _rule_table(findings: list[Mapping[str, Any]], per_rule: Mapping[str, Counter[str]],
                names: Mapping[str, str]) -> str:
    fixable: Counter[str] = Counter(str(f.get("rule")) for f in findings if f.get("fixable"))
    domains: dict[str, set[tuple[str, str]]] = {}
    hosts: dict[str, set[str]] = {}
    for f in findings:
        domains.setdefault(str(f.get("rule")), set()).add((_host(f), str(f.get("source"))))
        hosts.setdefault(str(f.get("rule")), set()).add(_host(f))
    rows = ["<table><thead><tr><th>rule</th><th>name</th>"
            + "".join(f"<th>{s}</th>" for s in SEVERITIES)
            + "<th>total</th><th>fixable</th><th>domains</th><th>hosts</th></tr></thead><tbody>"]
    for code, counts in sorted(per_rule.items(), key=lambda item: (-sum(item[1].values()), item[0])):
        rows.append(f"<tr><td><code>{_e(code)}</code></td><td>{_e(names.get(code, ''))}</td>"
                    + "".join(f'<td class="n">{counts.get(s, 0)}</td>' for s in SEVERITIES)
                    + f'<td class="n">{sum(counts.values())}</td><td class="n">{fixable[code]}</td>'
                    f'<td class="n">{len(domains[code])}</td><td class="n">{len(hosts[code])}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def _host(finding: Mapping[str, Any]) -> str:
    return str(finding.get("host") or FILES_HOST)


def _finding_rows(findings: Iterable[Mapping[str, Any]]) -> str:
    rows = []
    for f in sorted(findings, key=lambda f: (str(f.get("rule")), f.get("line") or 0)):
        severity = _severity(f.get("severity"))
        where = f.get("line") if f.get("line") else f.get("xpath")
        fix = f"{f.get('fix')} [{f.get('fix_safety')}]" if f.get("fixable") else ""
        note = f'<div class="note">{_e(f.get("note"))}</div>' if f.get("note") else ""
        rows.append(f'<tr class="sev-{severity}"><td><code>{_e(f.get("rule"))}</code> {_e(f.get("name"))}</td>'
                    f'<td class="sev">{severity}</td><td class="n">{_e(where)}</td>'
                    f"<td>{_e(f.get('message'))}{note}</td><td>{_e(fix)}</td></tr>")
    return ("<table><thead><tr><th>rule</th><th>severity</th><th>line</th><th>finding</th><th>fix</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>")


def _rule_counts(findings: Iterable[Mapping[str, Any]]) -> str:
    counts = Counter(str(f.get("rule")) for f in findings)
    return ('<div class="rules">' + ", ".join(f"<code>{_e(code)}</code> &times;{n}"
                                               for code, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
            + "</div>")


def _hosts_section(findings: list[Mapping[str, Any]]) -> str:
    grouped: dict[str, dict[tuple[str, str], list[Mapping[str, Any]]]] = {}
    for f in findings:  # insertion order: hosts and domains as the report lists them
        grouped.setdefault(_host(f), {}).setdefault((str(f.get("domain")), str(f.get("source"))), []).append(f)
    parts = []
    for host, domains in grouped.items():
        host_findings = [f for items in domains.values() for f in items]
        counts = Counter(_severity(f.get("severity")) for f in host_findings)
        parts.append(f'<details class="host" open><summary><b>{_e(host)}</b>: {len(domains)} domain(s) with '
                     f"findings{_badges(counts)}</summary>{_rule_counts(host_findings)}")
        for (domain, source), items in domains.items():
            counts = Counter(_severity(f.get("severity")) for f in items)
            parts.append(f'<details class="domain" open><summary><b>{_e(domain)}</b> <code>{_e(source)}</code>'
                         f"{_badges(counts)}</summary>{_rule_counts(items)}{_finding_rows(items)}</details>")
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
    hosts = {_host(f) for f in findings}
    when = (generated or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    version = doc.get("tool", {}).get("version", "")
    cards = [("domains", "", summary.get("domains", 0)), ("findings", "", len(findings)),
             *((s, s, totals[s]) for s in SEVERITIES), ("fixable", "", summary.get("fixable", 0)),
             ("input errors", "", len(doc.get("errors", [])))]
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{"vmtune " + _e(version) + ", " if version else ""}{when}; '
        f"{len(hosts)} host(s) with findings</p>",
        '<div class="cards">' + "".join(f'<div class="card {cls}"><b>{_e(n)}</b>{_e(label)}</div>'
                                        for label, cls, n in cards) + "</div>",
    ]
    if findings:
        body += [
            "<h2>Findings by rule and severity</h2>", chart(per_rule, names), _rule_table(findings, per_rule, names),
            '<h2>By host and domain</h2><p class="filters">'
            + "".join(f'<label><input type="checkbox" data-severity="{s}" checked> {s}</label>' for s in SEVERITIES)
            + "</p>", _hosts_section(findings),
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
