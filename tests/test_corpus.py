"""Robustness over 200 real domain XMLs from virt-manager's test data (when ../shared exists)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vmtune.patch.fixer import allowed
from vmtune.xml.locate import locate
from vmtune.xml.safe import parse_domain

from conftest import CORPUS, run_vmtune
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


@pytest.mark.slow
@pytest.mark.parametrize("unsafe, policy, caps", [(False, "default", None), (True, "default", None),
                                                  (True, "latency", "intel-2node.xml")],
                         ids=["safe", "unsafe", "latency-on-a-host"])
def test_fixing_the_corpus(corpus_domains: list[Path], tmp_path: Path, unsafe: bool, policy: str,
                           caps: str | None) -> None:
    has_validator = shutil.which("virt-xml-validate") is not None
    opts = options((policy,), host(caps) if caps else None)
    failures: list[str] = []
    for path in corpus_domains:
        original = path.read_bytes()
        outcome = fix(original, opts, unsafe=unsafe)
        root = parse_domain(outcome.fixed, path.name)  # the fixed text parses
        locate(outcome.fixed, root, path.name)  # and the splicer can read it again
        again = fix(outcome.fixed, opts, unsafe=unsafe)
        if again.fixed != outcome.fixed:
            failures.append(f"{path.name}: not idempotent")
        left = [f.rule.code for f in outcome.findings if allowed(f, unsafe=False)]
        if left:
            failures.append(f"{path.name}: safe fixes left after fixing: {left}")
        if not _unchanged_outside_edits(original, outcome.fixed):
            failures.append(f"{path.name}: lines outside edited elements changed")
        if has_validator and outcome.changed and _validates(path):
            fixed_path = tmp_path / path.name
            fixed_path.write_bytes(outcome.fixed)
            if not _validates(fixed_path):
                failures.append(f"{path.name}: valid before, invalid after fixing")
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
