"""YAML read as kubectl reads it, or refused (#49). kubectl decodes manifests with
sigs.k8s.io/yaml (go-yaml v2's typing of plain scalars, merges applied in order); vmtune reads
YAML 1.1 as PyYAML does. Where the two part, a KubeVirt object is refused at the line, never
judged as a VM the cluster would not run. The oracle is kubectl's own library:
fixtures/stacks/kubevirt/kubectl-yaml (oracle/main.go, sigs.k8s.io/yaml v1.6.0; generate.py
writes 1,200 cases, fixed and fuzzed, and what YAMLToJSON made of each)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vmtune.errors import VmtuneError
from vmtune.stacks import yamldoc
from vmtune.stacks.kubevirt.yamltypes import differences, disagree, kubectl_value, suspect
from vmtune.stacks.yamldoc import load

from conftest import ROOT

ORACLE = ROOT / "fixtures" / "stacks" / "kubevirt" / "kubectl-yaml"
CASES: list[str] = json.loads((ORACLE / "cases.json").read_text())
KUBECTL = [json.loads(line) for line in (ORACLE / "kubectl.jsonl").read_text().splitlines()]


def test_the_oracle_has_an_answer_for_every_case() -> None:
    assert len(CASES) == len(KUBECTL) > 1000


def _equal(ours: Any, theirs: Any) -> bool:
    """As JSON compares them: one kind of number."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return ours.keys() == theirs.keys() and all(_equal(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, bool) or isinstance(theirs, bool) or ours is None or theirs is None:
        return ours is theirs
    if isinstance(ours, int | float) and isinstance(theirs, int | float):
        if isinstance(ours, int) != isinstance(theirs, int):  # Go writes a float64 2**64 as 18446744073709552000
            return float(ours) == float(theirs)
        return ours == theirs
    return type(ours) is type(theirs) and ours == theirs


def _scalar_cases() -> list[tuple[str, dict[str, Any]]]:
    return [(c, k) for c, k in zip(CASES, KUBECTL, strict=True) if c.startswith("v: ")]


@pytest.mark.parametrize("case, kubectl", _scalar_cases(), ids=lambda v: repr(v)[:24] if isinstance(v, str) else "")
def test_a_scalar_is_read_as_kubectl_reads_it_or_refused(case: str, kubectl: dict[str, Any]) -> None:
    text = case[3:-1]
    try:
        ours = load(case.encode(), "c.yaml")[0].root.value
    except VmtuneError:
        return  # not read at all: refused, as kubectl may refuse it too
    if "error" in kubectl:
        pytest.skip("kubectl refuses it; vmtune reads it")  # not a value kubectl applies
    theirs = kubectl["json"]["v"]
    if isinstance(ours["v"], (str, int, float, bool)) or ours["v"] is None:
        refused = next(iter(differences(case)), None)  # the case is one line: `v: TEXT`
        if refused is None:
            assert _equal(ours["v"], theirs), (text, ours["v"], theirs)
        else:
            assert refused[:2] == (1, text)  # refused at its line, naming it
    # vmtune's model of kubectl's typing (the words of its message) is exact
    if not (isinstance(theirs, str) and text[:1].isdigit() and "-" in text):  # a timestamp: not judged
        assert _equal(kubectl_value(text), theirs), (text, kubectl_value(text), theirs)


@pytest.mark.parametrize("case, kubectl", [(c, k) for c, k in zip(CASES, KUBECTL, strict=True) if "<<" in c])
def test_a_merge_is_applied_as_kubectl_applies_it_or_refused(case: str, kubectl: dict[str, Any]) -> None:
    try:
        ours = load(case.encode(), "c.yaml")[0].root.value
    except VmtuneError as exc:
        assert "is written before a merge" in str(exc)
        assert "bus: sata\n  <<: *b" in case  # the only case where written and merged values part
        return
    assert _equal(ours, kubectl["json"]), (case, ours, kubectl)


VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: {cores}
        devices:
          disks:
          - name: root
            disk:
{disk}
        resources:
          requests:
            memory: 1Gi
      volumes:
      - name: root
        containerDisk:
          image: quay.io/containerdisks/fedora:40
"""


def _check(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", *args, *files], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


EMULATED_IN_A_MERGE = "              bus: virtio\n              <<: &emulated {bus: sata}"


@pytest.mark.parametrize("native", ["1", "0"], ids=["native-reader", "pyyaml"])
@pytest.mark.parametrize("cores, disk, line, message", [
    ("08", "              bus: virtio", 11, "'08' is the number 8 to kubectl (sigs.k8s.io/yaml) but the string '08' "
     "to YAML 1.1 readers such as vmtune's: quote it, or write the value you mean"),
    ("0o4", "              bus: virtio", 11, "'0o4' is the number 4 to kubectl (sigs.k8s.io/yaml) but the string "
     "'0o4' to YAML 1.1 readers such as vmtune's: quote it, or write the value you mean"),
    ("4", EMULATED_IN_A_MERGE, 16, "'bus' is written before a merge (<<, line 17) that sets it too: kubectl takes "
     "the merged value, YAML 1.1 loaders the written one; write it after the merge"),
])
def test_a_manifest_kubectl_reads_otherwise_is_one_line_at_its_line_and_the_others_are_judged(
        tmp_path: Path, native: str, cores: str, disk: str, line: int, message: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMTUNE_YAML_NATIVE", native)
    done = _check(tmp_path, {"hostile.yaml": VM.format(cores=cores, disk=disk),
                             "other.yaml": VM.format(cores=4, disk="              bus: sata")}, "-f", "json")
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert [(e["source"], e["line"], e["message"]) for e in report["errors"]] == [("hostile.yaml", line, message)]
    assert {f["rule"] for f in report["findings"] if f["file"] == "other.yaml"} >= {"DSK004"}  # sata, still judged


def test_a_key_written_after_a_merge_overrides_it_and_is_no_duplicate(tmp_path: Path) -> None:
    """`<<: *defaults` then `bus: virtio`: valid YAML, the written value (before: "duplicate key")."""
    disk = "              <<: &emulated {bus: sata}\n              bus: virtio"
    done = _check(tmp_path, {"vm.yaml": VM.format(cores=4, disk=disk)}, "-f", "json")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "DSK004" not in {f["rule"] for f in json.loads(done.stdout)["findings"]}
    merged = _check(tmp_path, {"vm.yaml": VM.format(cores=4, disk="              <<: *e\n".join(
        ["", ""]).replace("              <<: *e\n", "              <<: &e {bus: sata}"))}, "-f", "json")
    assert "DSK004" in {f["rule"] for f in json.loads(merged.stdout)["findings"]}, merged.stdout + merged.stderr


def test_openstack_yaml_keeps_yaml_1_1(tmp_path: Path) -> None:
    """Ansible and openstacksdk read YAML 1.1 as PyYAML does: `y` is the string y there, no refusal."""
    flavor = ("- name: web\n  vcpus: 16\n  ram: 16384\n  disk: 20\n  extra_specs:\n    hw:cpu_policy: dedicated\n"
              "    note: y\n")
    done = _check(tmp_path, {"flavors.yaml": flavor})
    assert done.returncode in (0, 1) and "kubectl" not in done.stderr, done.stdout + done.stderr


# The pre-scan's shapes written whole, as the comment above yamltypes._SUSPECT_PATTERN lists them: the
# pattern there takes a shape's first character before the rest (re then skips the characters
# no shape starts with), and must find exactly where these do.
_WHOLE = re.compile(
    r"(?=[yYnN0-9._+-])(?<![^\s\[{,])(?:"
    r"[yYnN]"
    r"|[-+]?[0-9._][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+"
    r"|[-+]?0[oObBxX][0-9a-fA-F_]*"
    r"|[-+]?0[0-9_]*[89][0-9_.]*"
    r"|[-+]?[0-9][0-9_]*(?::[0-9_]+)+(?:\.[0-9_]*)?"
    r"|[-+]\.[0-9]"
    r"|\.[0-9][0-9_]*_"
    r"|[-+]?[0-9][0-9_]{18}[0-9_]*"
    r")(?=$|[\s,\]}#])", re.M)


def _found_at(pattern: re.Pattern[str], text: str) -> list[int]:
    """Where a search from each position of `text` finds a shape (the whole shape's start)."""
    starts = []
    for position in range(len(text) + 1):
        match = pattern.search(text, position)
        starts.append(-1 if match is None else match.start())
    return starts


def test_the_prescan_finds_what_the_whole_shapes_find() -> None:
    texts = [*CASES, *(f.read_text(errors="replace") for f in sorted((ROOT / "fixtures" / "stacks" / "kubevirt")
                                                                       .rglob("*.yaml"))[:60])]
    alphabet = "yYnN0189._+-eExXoObBf:_ \n\t,[]{}#a/\"'"
    chance = random.Random(45)
    texts += ["".join(chance.choice(alphabet) for _ in range(chance.randint(1, 16))) for _ in range(20_000)]
    for text in texts:
        assert bool(suspect().search(text)) == bool(_WHOLE.search(text)), text
        if len(text) < 400:
            assert _found_at(suspect(), text) == _found_at(_WHOLE, text), text


def test_the_plain_values_listed_when_read_hold_every_difference() -> None:
    # refuse() skips differences() when none of the plain values the native reader listed
    # (Doc.plain) is typed otherwise by kubectl: that must never hide one differences() finds.
    if yamldoc._native_reader() is False:
        pytest.skip("the native YAML reader is not built")
    texts = [*CASES, *(f.read_text(errors="replace") for f in sorted((ROOT / "fixtures" / "stacks" / "kubevirt")
                                                                       .rglob("*.yaml"))[:60])]
    alphabet = "yYnN0189._+-eExXoObBf:_ \n\t,[]{}#a/\"'"
    chance = random.Random(46)
    texts += ["v: " + "".join(chance.choice(alphabet) for _ in range(chance.randint(1, 16))) for _ in range(20_000)]
    listed = 0
    for text in texts:
        try:
            docs = load(text.encode(), "c.yaml")
        except VmtuneError:
            continue
        plain = docs[0].plain if docs else None
        if plain is None:
            continue  # the full loader read it: the text is searched
        listed += 1
        if differences(text):
            assert disagree(plain), text
    assert listed > 5000


def test_fix_beside_a_refused_manifest_fixes_the_other_and_says_the_refusal_once(tmp_path: Path) -> None:
    # The fix's second rendering refused the untouched hostile file again, which read as the fix's
    # doing: "a fix made the file unreadable, nothing written", and the other file's fixes were lost.
    hostile = VM.format(cores="08", disk="              bus: virtio")
    other = VM.format(cores=4, disk="              bus: virtio")
    done = _check(tmp_path, {"hostile.yaml": hostile, "other.yaml": other}, "--fix", "--select", "NET001")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("vmtune: hostile.yaml:11: '08' is the number 8 to kubectl (sigs.k8s.io/yaml) but the string "
                           "'08' to YAML 1.1 readers such as vmtune's: quote it, or write the value you mean\n")
    assert (tmp_path / "hostile.yaml").read_text() == hostile
    assert "          networkInterfaceMultiqueue: true\n" in (tmp_path / "other.yaml").read_text()
    assert done.stdout.splitlines()[-1] == \
        "1 domain(s) checked: 0 finding(s) (0 error, 0 warning, 0 info); 1 fix(es) applied"
