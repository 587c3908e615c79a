"""A seeded fuzz run in CI time: hostile values and broken syntax end in findings or one-line errors.

The long run (10,000 definitions, with memory) is `python bench/fuzz.py`; docs/benchmarks.md has its figures.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from mutate import mutate, run_vmtune_in_process

from conftest import CORPUS, FIXTURES, HOSTS

SEED = 20261122
COUNT = 150  # mutated definitions; each is checked, then fixed with every fix on a two-node host
MAX_SECONDS = 5.0


def _originals() -> list[Path]:
    corpus = CORPUS / "domains"
    paths = sorted(corpus.glob("*.xml")) if corpus.is_dir() else []
    return paths + sorted((FIXTURES / "virt-install").glob("*.xml")) + sorted((FIXTURES / "domains").glob("*.xml"))


@pytest.mark.slow
def test_mutated_definitions_end_in_findings_or_one_line_errors(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    originals = _originals()
    problems: list[str] = []
    codes: set[int | None] = set()
    for index in range(COUNT):
        source = rng.choice(originals)
        target = tmp_path / f"{index:05d}-{source.name}"
        target.write_bytes(mutate(source.read_bytes(), rng))
        for mode in ("check", "fix-latency-host"):
            outcome = run_vmtune_in_process(target, mode, HOSTS / "intel-2node.xml")
            codes.add(outcome.exit_code)
            if outcome.problem:
                problems.append(f"{target.name} {mode}: {outcome.problem}")
            elif outcome.seconds > MAX_SECONDS:
                problems.append(f"{target.name} {mode}: {outcome.seconds:.1f} s")
    assert problems == []
    assert {1, 2} <= codes  # the mutations reached both findings and input errors


@pytest.mark.parametrize("value", ["\u00b2", "9" * 5001, str(2**70), "-1", "0-99999999999"])
def test_each_hostile_value_class_is_a_finding_not_a_crash(value: str, tmp_path: Path) -> None:
    from conftest import domain_xml

    xml = domain_xml(vcpus=f"<vcpu cpuset='{value}'>{value if '-' not in value else 4}</vcpu>",
                     memory=f"<memory unit='KiB'>{value}</memory>",
                     extra=f"<cputune><vcpupin vcpu='{value}' cpuset='{value}'/></cputune>",
                     devices=f"<interface type='bridge'><source bridge='br0'/><model type='virtio'/>"
                             f"<driver queues='{value}'/></interface>")
    path = tmp_path / "hostile.xml"
    path.write_text(xml)
    for mode in ("check", "fix-latency-host"):
        outcome = run_vmtune_in_process(path, mode, HOSTS / "intel-2node.xml")
        assert outcome.problem is None and outcome.exit_code == 1, outcome
        assert outcome.seconds < MAX_SECONDS
