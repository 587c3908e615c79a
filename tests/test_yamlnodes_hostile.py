"""An independent hostile review of the YAML readers (vmtune/stacks/_yamlnodes.c and the full
loader it declines to, vmtune/stacks/yamldoc.py): what a stranger's manifest can do to them.

The long runs behind these (ASan/UBSan builds, 500,000 grammar texts, 100,000 calls per kind of
input) are bench/yaml_native_fuzz.py; these are the seconds-long versions that CI can afford."""

from __future__ import annotations

import gc
import os
import random
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from test_yamlnodes import _native, _outcome, _taken_natively
from yaml_grammar import Gen

from vmtune.stacks import yamldoc

from conftest import ROOT
from helpers import cpu_run

VMI = """apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: vm
spec:
  domain:
    cpu:
      cores: CORES
    devices: {}
"""
INVALID = "not a valid YAML value of its type (a date, number or binary that does not parse)"


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str, str, float]:
    """vmtune's exit code, output and the CPU seconds it used."""
    done, cpu = cpu_run(*args, cwd=cwd, timeout=timeout, env=env)
    return done.returncode, done.stdout, done.stderr, cpu


@pytest.mark.parametrize("native", ["1", "0"])
def test_a_tagged_scalar_that_does_not_construct_is_one_line_and_exit_2(tmp_path: Path, native: str) -> None:
    """PyYAML's scalar constructors assume the text their resolver matched; an explicit tag on
    other text broke them with a traceback (exit 1): `!!int ''` IndexError, `!!bool maybe`
    KeyError, `!!timestamp x` AttributeError. `!!map x` on a scalar gave a generator object as
    the value, which the rules then read. Now each is one line at the value's line, exit 2."""
    values = ["!!int ''", "!!bool maybe", "!!timestamp x", "!!float ''", "!!int", "!!map x", "!!seq x", "!!set x",
              "!!omap x"]
    for index, value in enumerate(values):
        (tmp_path / f"vm{index}.yaml").write_text(VMI.replace("CORES", value))
    code, out, err, _ = _run("check", "-q", *(f"vm{i}.yaml" for i in range(len(values))), cwd=tmp_path,
                             env={yamldoc.NATIVE_VARIABLE: native})
    assert (code, out) == (2, "")
    assert err == "".join(f"vmtune: vm{i}.yaml:8: {INVALID}\n" for i in range(len(values)))


def test_a_base60_integer_of_4_mib_is_refused_in_a_second(tmp_path: Path) -> None:
    """YAML 1.1 reads `1:30:00` as an integer in base 60, and PyYAML sums its parts times ever
    larger powers of 60: quadratic, 26 s for a 1 MiB value, about 7 minutes for a 4 MiB file
    (the input limit) in a pull request. Python refuses a decimal of more than 4,300 digits;
    more than 2,400 base-60 parts (60**2400 is about 10**4267) are refused the same way now."""
    cores = "1" + ":59" * ((4 * 1024 * 1024 - 200) // 3)
    (tmp_path / "vm.yaml").write_text(VMI.replace("CORES", cores))
    assert (tmp_path / "vm.yaml").stat().st_size < 4 * 1024 * 1024
    code, out, err, cpu = _run("check", "-q", "vm.yaml", cwd=tmp_path, timeout=60)
    assert (code, out, err) == (2, "", f"vmtune: vm.yaml:8: {INVALID}\n")
    assert cpu < 10
    # Past the parts, the value's size: 128 bits (yamldoc._INT_BITS), said at its line.
    at_limit = yamldoc.load(f"a: 1{':59' * 20}\n".encode(), "f.yaml")[0].root.value["a"]
    assert at_limit == sum(59 * 60**i for i in range(20)) + 60**20
    with pytest.raises(yamldoc.VmtuneError) as refused:
        yamldoc.load(f"a: 1{':59' * 2400}\n".encode(), "f.yaml")
    assert (refused.value.message, refused.value.line) == (
        "an integer of 14,178 bits: no value vmtune reads is that large", 1)
    with pytest.raises(yamldoc.VmtuneError) as refused:
        yamldoc.load(f"a: 1{':59' * 2401}\n".encode(), "f.yaml")
    assert (refused.value.message, refused.value.line) == (INVALID, 1)


def _unbounded_libyaml_python() -> str | None:
    """A Python whose PyYAML runs a libyaml without a nesting limit (Debian 12's python3-yaml,
    libyaml 0.2.5), or None."""
    python = shutil.which("python3", path="/usr/bin")
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        return None
    probe = ("import yaml; L = yaml.CSafeLoader\n"
             "try:\n    list(yaml.parse('[' * 1001 + ']' * 1001, Loader=L))\n"
             "except yaml.YAMLError:\n    print('bounded')\nelse:\n    print('unbounded')")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    return python if done.stdout == "unbounded\n" else None


def test_deep_nesting_does_not_crash_a_pyyaml_on_libyaml_0_2_5() -> None:
    """The native reader declines past 64 levels, and the full loader composed the document with
    PyYAML's C composer, which recurses once a level: on a PyYAML built against libyaml 0.2.5
    (Debian 12's python3-yaml; PyYAML>=6.0 is all vmtune asks) 100,000 `[`, `- `, `? ` or `{a: `
    killed the process with SIGSEGV. PyYAML's wheels bundle a libyaml that stops at 1,000
    levels; where the libyaml does not, yamldoc counts the tokens first."""
    python = _unbounded_libyaml_python()
    if python is None:
        pytest.skip("no system Python whose PyYAML runs a libyaml without a nesting limit (Debian's python3-yaml)")
    script = ("import sys\nfrom vmtune.errors import VmtuneError\nfrom vmtune.stacks import yamldoc\n"
              "for data in (b'[' * 100000 + b']' * 100000, b'- ' * 100000, b'? ' * 100000, b'{a: ' * 60000,\n"
              "             b'a: 1\\nb:\\n' + b'  [' * 2000):\n"
              "    try:\n        yamldoc.load(data, 'f.yaml')\n    except VmtuneError as exc:\n"
              "        print(exc.message, exc.line)\n"
              "print('ok')\n")
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stderr) == (0, "")
    deep = "nested deeper than 64 levels: not a manifest vmtune reads"
    assert done.stdout == f"{deep} 1\n" * 4 + f"{deep} 3\nok\n"


def test_grammar_generated_yaml_reads_the_same_natively() -> None:
    """3,000 texts from a grammar (tests/yaml_grammar.py): flow mappings with implicit keys,
    `? ` keys, empty values, document markers, %YAML and %TAG, multi-line plain and block
    scalars, YAML 1.1's typed scalars and near misses, 64/65-character scalars, LS/NEL/CR/BOM,
    and now and then anchors, tags and keys that are not strings. The native reader gives the
    full loader's Nodes (values, types, lines, key lines) or leaves it the same error, and
    neither raises anything but a VmtuneError."""
    _native()
    gen = Gen(random.Random(20261127))
    taken = 0
    for _ in range(3000):
        data = gen.document().encode("utf-8", "surrogatepass")
        assert _outcome(data, True) == _outcome(data, False), data
        taken += _taken_natively(data)
    assert taken > 600, taken


def test_the_native_reader_holds_the_same_nodes_across_the_remembered_table_being_emptied() -> None:
    """The remembered tags of plain scalars (yamldoc._RESOLVED) are emptied at 8,192 entries,
    possibly in the middle of a file the native reader is typing: 9,000 distinct numbers, each
    read natively, and each the full loader's value."""
    _native()
    yamldoc._RESOLVED.clear()
    texts = [f"{i}.5" if i % 3 else f"0x{i:x}" for i in range(9000)] + ["1:30", "yes", "2002-12-14"]
    data = ("- " + "\n- ".join(texts) + "\n").encode()
    assert _taken_natively(data)
    assert len(yamldoc._RESOLVED) < yamldoc._RESOLVED_MAX
    assert _outcome(data, True) == _outcome(data, False)


_KINDS = {
    "taken": b"a: 1\nb: [true, ~, 2Gi, 1.5, 2002-12-14]\nc: {d: \"e\", f: 0x1F}\n",
    "anchor": b"a: [1, 2]\nb: &x 1\nc: *x\n",
    "tag": b"a: [1, {b: !!str 2}]\n",
    "merge": b"a: {b: 1}\n<<: {c: 2}\n",
    "duplicate": b"a: [1, 2]\nb: {c: 1}\na: 2\n",
    "int key": b"a: [x]\n1: a\n",
    "not constructed": b"a: [x, y]\nb: 2001-13-45\n",
    "5,000 digits": b"a: [x, y]\nb: " + b"9" * 5000 + b"\n",
    "too deep": b"a: [x]\nb: " + b"[" * 70 + b"]" * 70 + b"\n",
    "libyaml error": b"a: [x, y]\nb: {c: d\n",
    "typed key": b"a: [x]\nyes: 1\n",
    "value tag": b"a: [x]\nb: =\n",
}


def test_the_native_reader_leaks_nothing_taken_or_declined() -> None:
    """Every path out of the native reader (taken, and each reason to decline) frees what it
    built: 3,000 calls of each leave the traced memory and the reference counts of what every
    call shares (the Node class, True, False, the decline marker, the remembered tags) as they
    were. bench/yaml_native_fuzz.py leaks runs 100,000 of each."""
    _native()
    calls = 3000
    for kind, data in _KINDS.items():
        for _ in range(100):
            yamldoc._read_natively(data)
        gc.collect()
        drift, grown = leak_figures(data, calls)
        assert all(abs(d) < calls // 10 for d in drift.values()), (kind, drift)
        assert grown < 64 * 1024, (kind, grown)


def leak_figures(data: bytes, calls: int, also: dict[str, object] | None = None) -> tuple[dict[str, int], int]:
    """(how far the reference count of each object every native read shares moved, the traced
    bytes grown) over `calls` native reads of `data`, after the caller's warm-up: a reference
    taken or dropped at every call drifts by `calls`. The shared objects are the Node class,
    True, False, the decline marker, the remembered tags, and `also`. This test and
    bench/yaml_native_fuzz.py leaks both measure with it."""
    shared = {"Node": yamldoc.Node, "True": True, "False": False, "_DECLINE": yamldoc._DECLINE,
              **{f"tag {tag}": tag for tag in set(yamldoc._RESOLVED.values())}, **(also or {})}
    refs = {name: sys.getrefcount(value) for name, value in shared.items()}
    tracemalloc.start()
    snapshot = tracemalloc.take_snapshot()
    for _ in range(calls):
        yamldoc._read_natively(data)
    gc.collect()
    grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(snapshot, "filename"))
    tracemalloc.stop()
    return {name: sys.getrefcount(value) - refs[name] for name, value in shared.items()}, grown


def test_the_variable_turns_the_native_reader_off() -> None:
    """VMTUNE_YAML_NATIVE=0: the full loader reads every file, with the same Nodes."""
    _native()
    probe = ("from vmtune.stacks import yamldoc\nprint(yamldoc._native_reader() is False, "
             "yamldoc._read_natively(b'a: 1\\n'), yamldoc.load(b'a: [1, yes]\\n', 'f')[0].root.value)")
    for value, expected in (("0", "True None {'a': [1, True]}\n"), ("1", "False [Node(line=1, value={'a': 1})] "
                                                                        "{'a': [1, True]}\n")):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT,
                              env={**os.environ, yamldoc.NATIVE_VARIABLE: value})
        assert (done.stdout, done.stderr) == (expected, "")


def test_native_nodes_fill_every_slot_of_node() -> None:
    """The native reader writes Node's slots by offset and never calls Node.__init__: a slot
    added to Node and not to _yamlnodes.c would be empty (AttributeError where it is read)."""
    _native()
    [root] = yamldoc._read_natively(b"a: [1, {b: c}]\n") or []
    nodes = [root, root.children["a"], *root.children["a"].children, root.at(("a", 1, "b"))]
    assert set(yamldoc.Node.__slots__) == {"children", "key_line", "line", "value"}
    assert all(hasattr(node, slot) for node in nodes for slot in yamldoc.Node.__slots__)
