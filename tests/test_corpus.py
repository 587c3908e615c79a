"""Robustness over 200 real domain XMLs from virt-manager's test data (when ../shared exists), over
what Debian's virt-install writes (fixtures/virt-install, made by scripts/make-virt-install-fixtures)
and over what the management stacks write (fixtures/stacks, see its README)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from lxml import etree

from vmtune.fixer import allowed
from vmtune.rules.base import Severity
from vmtune.xml.locate import locate
from vmtune.xml.safe import parse_domain

from conftest import CORPUS, FIXTURES, run_vmtune
from helpers import findings, fix, host, options, schema_valid

pytestmark = pytest.mark.corpus


def _finding_rows(found: list) -> list[tuple[str, int | None, str, str, str]]:
    return sorted((f.rule.code, f.line, f.xpath, str(f.severity), f.message) for f in found)


def test_the_cli_reports_what_the_engine_finds_in_every_corpus_domain(corpus_domains: list[Path]) -> None:
    """`vmtune check -f json` over the whole folder: every domain read, none refused, and per file
    the findings the engine gives in process (code, line, XPath, severity, message)."""
    result = run_vmtune("check", "--format", "json", str(CORPUS / "domains"))
    assert result.returncode == 1, result.stderr  # warnings and errors among them: the default --fail-on
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert report["summary"]["domains"] == len(corpus_domains) == 200 and report["errors"] == []
    reported: dict[str, list[tuple[str, int | None, str, str, str]]] = {}
    for f in report["findings"]:
        reported.setdefault(Path(f["file"]).name, []).append((f["rule"], f["line"], f["xpath"], f["severity"],
                                                              f["message"]))
    opts = options()
    engine = {path.name: rows for path in corpus_domains if (rows := _finding_rows(findings(path.read_bytes(), opts)))}
    assert {name: sorted(rows) for name, rows in reported.items()} == engine


@pytest.mark.parametrize("policy", ["default", "latency"])
def test_every_corpus_finding_points_at_its_element(corpus_domains: list[Path], policy: str) -> None:
    """Each finding's XPath finds exactly one element of the file as written, on the finding's
    line; two checks of the same file give the same findings."""
    opts = options((policy,))
    total = 0
    for path in corpus_domains:
        data = path.read_bytes()
        found = findings(data, opts)
        assert _finding_rows(findings(data, opts)) == _finding_rows(found), path.name
        tree = parse_domain(data, path.name).getroottree()
        for f in found:
            if f.element is None:  # about the domain as a whole: no line to point at
                assert (f.xpath, f.line) == ("/domain", None), (path.name, f.rule.code)
                continue
            [element] = tree.xpath(f.xpath)
            assert (element.tag, element.sourceline) == (f.element.tag, f.line), (path.name, f.rule.code, f.xpath)
        total += len(found)
    assert total > len(corpus_domains)  # the corpus is no tuned fleet: a silent engine fails here


# Corpus members whose findings were read against their XML by hand: each pins what a rule family
# finds or must not find in XML it was not written for (code, line).
KNOWN = {
    # Windows 10 as virt-install writes it: Hyper-V and clock tuned (no HV, CLK or CPU finding); its
    # SATA disk (target, line 50), qcow2 without discard (driver, 48) and e1000e NIC (model, 67) are.
    "virt-install-kvm-win10-1.xml": {("DSK004", 50), ("DSK005", 48), ("DSK008", 48), ("NET004", 67)},
    # Windows 11 with vpindex off and no synic/stimer: the missing enlightenments (hyperv, 18), HPET
    # off without synthetic timers (34), four sockets where Windows 11 uses two (vcpu, 11).
    "virt-install-hyperv_disable_vpindex.xml": {("CLK002", 34), ("CPU016", 11), ("HV001", 18), ("NET004", 62)},
    # Windows 11 on aarch64: no x86 timer or Hyper-V rule applies; only its disk's.
    "virt-install-aarch64-win11.xml": {("DSK005", 23), ("DSK008", 23)},
    # An i686 guest with no <cpu> (the domain, line 1) and an RTC without tickpolicy (clock, 16).
    "virt-clone-clone-nvram-path.xml": {("CLK004", 16), ("CPU001", 1)},
    # A balloon holding 2 of 8 GiB (currentMemory, 5).
    "virt-clone-auto-managed.xml": {("MEM003", 5)},
    # Xen guests: no rule of the default policy is about them.
    "virt-install-xen-hvm.xml": set(),
    "virt-install-xen-default.xml": set(),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_known_corpus_members_give_their_findings(corpus_domains: list[Path], name: str) -> None:
    found = findings((CORPUS / "domains" / name).read_bytes())
    assert {(f.rule.code, f.line) for f in found} == KNOWN[name]


def test_the_schema_check_is_virt_xml_validates(corpus_domains: list[Path]) -> None:
    """schema_valid() (libvirt's RelaxNG through lxml, in process) says what `virt-xml-validate
    FILE domain` says, on valid and invalid corpus members alike."""
    if shutil.which("virt-xml-validate") is None:
        pytest.skip("virt-xml-validate (libvirt-clients) is not installed")
    verdicts = {path.name: schema_valid(path.read_bytes()) for path in corpus_domains}
    assert sum(verdicts.values()) == 152  # the corpus README's count with libvirt 9.0's schema
    valid = [p for p in corpus_domains if verdicts[p.name]]
    for path in valid[:8] + [p for p in corpus_domains if not verdicts[p.name]][:8]:
        done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True)
        assert (done.returncode == 0) == verdicts[path.name], path.name


def _unchanged_outside_edits(before: bytes, after: bytes) -> bool:
    """Every original line survives in order, except lines inside edited elements."""
    import difflib

    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            for line in old[i1:i2]:
                # a line may only go if it was a start tag whose attributes changed or an element we removed
                if not line.strip().startswith(b"<"):
                    return False
    return True


VIRT_INSTALL = sorted((FIXTURES / "virt-install").glob("*.xml"))
STACKS = sorted((FIXTURES / "stacks").glob("*/*.xml"))  # what nova, KubeVirt, oVirt... write


def _domain_sets(which: str) -> list[Path]:
    if which == "virt-install":
        return VIRT_INSTALL
    if which == "stacks":
        return STACKS
    folder = CORPUS / "domains"
    if not folder.is_dir():
        pytest.skip("../shared/corpus/domains is not present")
    return sorted(folder.glob("*.xml"))


def _failing(found: list, threshold: Severity) -> Counter[str]:
    return Counter(f.rule.code for f in found if f.severity >= threshold)


# (fix level, policy, capabilities, domain capabilities): a bare --fix; every fix of every rule
# (--fail-on info --unsafe-fixes); on hosts that do and do not list the Hyper-V synthetic timers;
# and the latency policy on a two-node host (pinning, NUMA, hugepages, balloon).
FIX_SETUPS = [
    ("bare", "default", None, None),
    ("all", "default", None, None),
    ("all", "default", "intel-2node.xml", "domcaps-full.xml"),
    ("all", "default", "intel-2node.xml", "domcaps-no-stimer.xml"),
    ("all", "latency", "intel-2node.xml", None),
]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["corpus", "virt-install", "stacks"])
@pytest.mark.parametrize("level, policy, caps, domcaps", FIX_SETUPS,
                         ids=["bare", "all", "all-hyperv-host", "all-no-stimer-host", "all-latency-host"])
def test_fixing_keeps_files_valid_and_raises_no_finding(which: str, level: str, policy: str,
                                                        caps: str | None, domcaps: str | None) -> None:
    """Every fix: idempotent, minimal, schema-valid whenever the original was, and never the cause
    of a finding at or above the fix threshold that the original did not have."""
    paths = _domain_sets(which)
    unsafe = level == "all"
    opts = options((policy,), host(caps, domcaps) if caps or domcaps else None, fix_all=unsafe)
    failures: list[str] = []
    for path in paths:
        original = path.read_bytes()
        outcome = fix(original, opts, unsafe=unsafe)
        root = parse_domain(outcome.fixed, path.name)  # the fixed text parses
        locate(outcome.fixed, root, path.name)  # and the splicer can read it again
        again = fix(outcome.fixed, opts, unsafe=unsafe)
        if again.fixed != outcome.fixed:
            failures.append(f"{path.name}: not idempotent")
        left = [f.rule.code for f in outcome.findings if allowed(f, unsafe, opts)]
        if left:
            failures.append(f"{path.name}: fixes left after fixing: {left}")
        new = _failing(outcome.findings, opts.fix_severity) - _failing(findings(original, opts), opts.fix_severity)
        if new:
            failures.append(f"{path.name}: fixing raised {sorted(new)}")
        if not _unchanged_outside_edits(original, outcome.fixed):
            failures.append(f"{path.name}: lines outside edited elements changed")
        if outcome.changed and schema_valid(original) and not schema_valid(outcome.fixed):
            failures.append(f"{path.name}: valid before, invalid after fixing "
                            f"({', '.join(a.code for a in outcome.applied)})")
    assert failures == []


def test_stable_paths_resolve_to_their_element(corpus_domains: list[Path]) -> None:
    from vmtune.xml.paths import stable_path

    for path in corpus_domains:
        root = parse_domain(path.read_bytes(), path.name)
        tree = root.getroottree()
        for element in root.iter():
            if isinstance(element.tag, str):
                found = tree.xpath(stable_path(element), namespaces={})
                assert found == [element], (path.name, stable_path(element))


def test_paths_shared_by_a_domains_findings_are_the_paths_made_alone(corpus_domains: list[Path]) -> None:
    """record() shares one dict of paths among a domain's findings: a path read or extended from
    it (elements, comments, in any order, namespaced metadata) is the one made from nothing."""
    from vmtune.xml.paths import stable_path

    for path in corpus_domains:
        root = parse_domain(path.read_bytes(), path.name)
        nodes = list(root.iter())
        known: dict[etree._Element, str] = {}
        for node in [*reversed(nodes), *nodes]:  # leaves first: their ancestors are filled in on the way
            assert stable_path(node, known) == stable_path(node), (path.name, stable_path(node))
