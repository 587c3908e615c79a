# Copyright: (c) 2026, vmtune authors
# MIT License (see LICENSE in the vmtune repository)
"""Filters the playbooks build their controller-side files with, in one pass over the hosts.

The fleet report used to be collected by a set_fact loop that re-templated the growing list
on every host (quadratic: 7 s for 32 hosts, 124 s for 128); here it is one Python loop.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleFilterError

SEVERITIES = ("error", "warning", "info")
INSTALL = ("the HTML report renders with vmtune on the controller (pip install /path/to/vmtune-*.whl in the "
           "Python that runs ansible-playbook), or leave html out: -e '{\"vmtune_report_formats\": [json, md]}'")


def _plain(value):
    """Ansible's lazy, tagged containers as plain dicts and lists (for json and the renderer)."""
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def fleet_report(hostvars, hosts, result_var="vmtune_result"):
    """The fleet report from each host's registered check result: every host (in inventory
    order), its findings, errors and summary; findings per rule; totals. Hosts without the
    result (not in the checked group) are left out."""
    entries = []
    per_rule = {}
    names = {}
    totals = dict(domains=0, findings=0, error=0, warning=0, info=0, fixable=0, errors=0)
    for host in hosts:
        result = hostvars[host].get(result_var)
        if result is None:
            continue
        result = _plain(result)
        findings = result.get("findings") or []
        summary = result.get("summary") or {}
        entry = dict(host=host, summary=summary, findings=findings, errors=result.get("errors") or [],
                     failed=bool(result.get("failed")), msg=result.get("msg") or "")
        entries.append(entry)
        for finding in findings:
            per_rule[finding.get("rule")] = per_rule.get(finding.get("rule"), 0) + 1
            names[finding.get("rule")] = finding.get("name")
        for key in ("domains", "findings", "fixable") + SEVERITIES:
            totals[key] += int(summary.get(key) or 0)
        totals["errors"] += len(entry["errors"])
    ranked = sorted(per_rule.items(), key=lambda item: (-item[1], str(item[0])))
    return dict(hosts=entries, counts_per_rule=dict(ranked), rule_names=names, summary=totals,
                failed_hosts=[e["host"] for e in entries if e["failed"]])


def fleet_document(report):
    """The report as one document of vmtune's JSON format, each finding's host the inventory name,
    and a host that could not be checked at all as an input error."""
    findings = []
    errors = []
    for entry in report.get("hosts", []):
        findings.extend(dict(f, host=entry["host"]) for f in entry.get("findings", []))
        for error in entry.get("errors", []):
            errors.append(dict(source="%s: %s" % (entry["host"], error.get("source")), line=error.get("line"),
                               message=error.get("message")))
        if entry.get("failed") and not entry.get("findings") and not entry.get("errors"):
            errors.append(dict(source=entry["host"], line=None, message=entry.get("msg") or "failed"))
    return dict(findings=findings, errors=errors, skipped=[], summary=report.get("summary", {}))


def fleet_html(report, title="vmtune fleet report"):
    """The fleet report as vmtune's self-contained HTML page (vmtune.report.html)."""
    try:
        from vmtune.report.html import render_document
    except ImportError:
        raise AnsibleFilterError(INSTALL)
    return render_document(fleet_document(_plain(report)), title=title)


# ASCII punctuation: CommonMark lets a backslash make any of it literal. `&`, `<` and `>` become
# entities instead (a backslash before `<` still lets a raw HTML tag through in some renderers).
_PUNCTUATION = frozenset("!\"#$%'()*+,-./:;=?@[\\]^_`{|}~")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown(value):
    """Text from a host (a domain's name, a file name, a message) as literal Markdown inline text:
    no HTML (`<img onerror=...>`), no link or image (`[x](javascript:...)`), no emphasis, code
    span, heading or list, and no table cell ended early by `|`. Every ASCII punctuation
    character is backslash-escaped, `&<>` become entities, and a line break (or any other control
    character) becomes a space, so the value stays on its line."""
    out = []
    for char in "" if value is None else str(value):
        if char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif char in _PUNCTUATION:
            out.append("\\" + char)
        elif char < " " or "\x7f" <= char <= "\x9f" or char in "\u2028\u2029":
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


def report_path(directory, name=None):
    """An absolute path on the controller: relative directories are taken from where
    ansible-playbook was started, never from the collection's own playbooks directory."""
    path = os.path.abspath(os.path.expanduser(str(directory)))
    return os.path.join(path, name) if name else path


def tune_record(previous, hostvars, hosts, result_var="vmtune_tune"):
    """The controller's record of tune runs (tune-run.json): per host, the URI and, per domain,
    the backup the latest run that changed it made. Domains this run did not change keep their
    earlier entry, so `-e vmtune_rollback=true` after an unchanged second run still undoes the
    first; a host whose URI changed starts afresh."""
    record = _plain(previous) if isinstance(previous, dict) else {}
    for host in hosts:
        result = hostvars[host].get(result_var)
        made = _plain((result or {}).get("record") or {})
        if not made.get("domains"):
            continue
        entry = record.get(host) if isinstance(record.get(host), dict) else {}
        domains = dict(entry.get("domains") or {}) if entry.get("uri") == made.get("uri") else {}
        domains.update(made["domains"])
        record[host] = dict(uri=made.get("uri"), domains=domains)
    return record


class FilterModule(object):
    def filters(self):
        return dict(fleet_report=fleet_report, fleet_document=fleet_document, fleet_html=fleet_html,
                    markdown=markdown, report_path=report_path, tune_record=tune_record)
