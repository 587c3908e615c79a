"""JUnit XML: a test case per checked domain; each finding at or above fail-on is a failure."""

from __future__ import annotations

from lxml import etree

from vmtune.escape import xml_clean, xml_uncommanded
from vmtune.report.model import Report


def _add(parent: etree._Element, tag: str, text: str | None = None, **attributes: str) -> etree._Element:
    """The one way elements are made here: every value through xml_clean, so a file name with a
    control character or undecodable bytes is shown escaped instead of failing the report."""
    element = etree.SubElement(parent, tag, {key: xml_clean(value) for key, value in attributes.items()})
    if text is not None:
        element.text = xml_clean(text)
    return element


def render(report: Report) -> str:
    suites = etree.Element("testsuites", name="vmtune")
    suite = _add(suites, "testsuite", name="vmtune")
    tests = failures = 0
    for result in report.results:
        if not result.findings:
            tests += 1
            _add(suite, "testcase", classname=result.source, name=f"{result.domain_name}: no findings")
        for f in result.findings:
            tests += 1
            name = f"{result.domain_name}: {f.rule.code} {f.rule.name} line {f.line}"
            case = _add(suite, "testcase", classname=result.source, name=name)
            if f.severity >= result.fail_on:
                failures += 1
                _add(case, "failure", f"{result.source}:{f.line or 0}: {f.rule.code} {f.severity} {f.message}",
                     message=f.message, type=str(f.severity))
            else:
                _add(case, "system-out", f"{f.severity}: {f.message}")
    for error in report.errors:
        tests += 1
        failures += 1
        case = _add(suite, "testcase", classname="vmtune", name="input error")
        _add(case, "error", message=str(error))
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suites.set("tests", str(tests))
    suites.set("failures", str(failures))
    # printed to a CI log, a name's `##[` would be a command: written as a character reference
    return xml_uncommanded(etree.tostring(suites, pretty_print=True, xml_declaration=True, encoding="UTF-8").decode())
