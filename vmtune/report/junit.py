"""JUnit XML: a test case per checked domain; each finding at or above fail-on is a failure."""

from __future__ import annotations

from lxml import etree

from vmtune.report.model import Report


def render(report: Report) -> str:
    suites = etree.Element("testsuites", name="vmtune")
    suite = etree.SubElement(suites, "testsuite", name="vmtune")
    tests = failures = 0
    for result in report.results:
        if not result.findings:
            tests += 1
            etree.SubElement(suite, "testcase", classname=result.source, name=f"{result.domain_name}: no findings")
        for f in result.findings:
            tests += 1
            name = f"{result.domain_name}: {f.rule.code} {f.rule.name} line {f.line}"
            case = etree.SubElement(suite, "testcase", classname=result.source, name=name)
            if f.severity >= result.fail_on:
                failures += 1
                failure = etree.SubElement(case, "failure", message=f.message, type=str(f.severity))
                failure.text = f"{result.source}:{f.line or 0}: {f.rule.code} {f.severity} {f.message}"
            else:
                etree.SubElement(case, "system-out").text = f"{f.severity}: {f.message}"
    for error in report.errors:
        tests += 1
        failures += 1
        case = etree.SubElement(suite, "testcase", classname="vmtune", name="input error")
        etree.SubElement(case, "error", message=str(error))
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suites.set("tests", str(tests))
    suites.set("failures", str(failures))
    return etree.tostring(suites, pretty_print=True, xml_declaration=True, encoding="UTF-8").decode()
