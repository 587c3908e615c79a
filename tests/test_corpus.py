"""Robustness over 200 real domain XMLs from virt-manager's test data (when ../shared exists), over
what Debian's virt-install writes (fixtures/virt-install, made by scripts/make-virt-install-fixtures)
and over what the management stacks write (fixtures/stacks, see its README)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from vmtune.fixer import allowed
from vmtune.rules.base import Severity
from vmtune.xml.locate import locate
from vmtune.xml.safe import parse_domain

from conftest import CORPUS, FIXTURES, run_vmtune
from helpers import findings, fix, host, options

pytestmark = pytest.mark.corpus


def test_every_corpus_domain_checks_without_crash(corpus_domains: list[Path]) -> None:
    result = run_vmtune("check", "--format", "json", str(CORPUS / "domains"))
    assert result.returncode in (0, 1), result.stderr
    assert result.stderr == ""
    assert '"domains": 200' in result.stdout


@pytest.mark.parametrize("policy", ["default", "latency"])
def test_every_corpus_domain_checks_in_process(corpus_domains: list[Path], policy: str) -> None:
    opts = options((policy,))
    for path in corpus_domains:
        findings(path.read_bytes(), opts)


def _validates(path: Path) -> bool:
    return subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True).returncode == 0


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
def test_fixing_keeps_files_valid_and_raises_no_finding(tmp_path: Path, which: str, level: str, policy: str,
                                                        caps: str | None, domcaps: str | None) -> None:
    """Every fix: idempotent, minimal, schema-valid whenever the original was, and never the cause
    of a finding at or above the fix threshold that the original did not have."""
    paths = _domain_sets(which)
    has_validator = shutil.which("virt-xml-validate") is not None
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
        if has_validator and outcome.changed and _validates(path):
            fixed_path = tmp_path / path.name
            fixed_path.write_bytes(outcome.fixed)
            if not _validates(fixed_path):
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
