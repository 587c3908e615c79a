"""The native YAML reader (vmtune/stacks/_yamlnodes.c) against yamldoc's full loader.

The native reader makes Nodes straight from libyaml's events for the common shape of a
manifest and declines (None) everything else, which the full loader then reads. These tests
hold `yamldoc.load` with it to `yamldoc.load` without it, Node for Node (values and their
types, lines, key lines) or error for error, on every YAML and JSON file of the repository
and on seeded mutations of them; and they make sure it is there to be tested."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from stack_mutate import mutate_stack

from vmtune.errors import VmtuneError
from vmtune.stacks import yamldoc

from conftest import ROOT


def _repository_yaml() -> list[Path]:
    found = [p for pattern in ("*.yaml", "*.yml", "*.json") for p in ROOT.glob(f"**/{pattern}")
             if not {".venv", "node_modules", "build", ".git"} & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in found if p.stat().st_size <= yamldoc.COUNT_EVENTS_ABOVE)


def _native() -> Any:
    reader = yamldoc._native_reader()
    if reader is False:
        pytest.skip("the native YAML reader is not built (no compiler or libyaml headers at install)")
    return reader


def _dump(node: yamldoc.Node) -> Any:
    """Everything a Node holds, with each value's exact type (True is no 1, 1.0 no 1)."""
    children = node.children
    if children is None:
        return ("scalar", type(node.value).__name__, repr(node.value), node.line, node.key_line)
    if isinstance(children, dict):
        assert node.value == {k: c.value for k, c in children.items()}
        assert list(node.value) == list(children)
        return ("map", node.line, node.key_line, [(k, _dump(c)) for k, c in children.items()])
    assert node.value == [c.value for c in children]
    return ("seq", node.line, node.key_line, [_dump(c) for c in children])


def _outcome(data: bytes, native: bool) -> Any:
    """What load() gives with or without the native reader: every document's Nodes, or the error."""
    saved = yamldoc._NATIVE
    yamldoc._NATIVE = saved if native else False
    try:
        docs = yamldoc.load(data, "f.yaml")
    except VmtuneError as exc:
        return ("error", exc.message, exc.line)
    except RecursionError:  # what load() would let through is a failure of either reader
        return ("recursion",)
    finally:
        yamldoc._NATIVE = saved
    return [(d.index, _dump(d.root)) for d in docs]


def _taken_natively(data: bytes) -> bool:
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return yamldoc._read_natively(data) is not None


def test_the_native_reader_is_built_where_it_can_be() -> None:
    """Built with the package wherever libyaml's headers and a C compiler are (scripts/test
    installs both): a build that failed silently would leave it untested here."""
    if not Path("/usr/include/yaml.h").exists() or shutil.which("gcc") is None:
        pytest.skip("no libyaml headers or gcc: the package is built without the native reader")
    assert yamldoc._native_reader() is not False


def test_every_yaml_file_of_the_repository_reads_the_same_natively() -> None:
    native = _native()
    files = _repository_yaml()
    assert len(files) > 300
    taken = 0
    for path in files:
        data = path.read_bytes()
        assert _outcome(data, True) == _outcome(data, False), path
        taken += _taken_natively(data)
    # The native reader must actually take the files it is for: every manifest of the oracle
    # that uses no anchor, tag or merge key, and most files overall.
    oracle = sorted((ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle").rglob("*.yaml"))
    plain = [p for p in oracle if not any(c in p.read_bytes() for c in (b"&", b"*", b"!", b"<<"))]
    assert len(plain) > 80 and all(native.read is not None and _taken_natively(p.read_bytes()) for p in plain)
    assert taken > 0.8 * len(files), (taken, len(files))


# Text mutations aimed at what the native reader must decline or type exactly: anchors and
# aliases, tags, merge keys, keys that are not strings, duplicate keys, YAML 1.1's typed plain
# scalars, depth, flow and block styles, characters libyaml refuses.
_VALUES = ("yes", "No", "on", "OFF", "y", "~", "null", "Null", "", "0x1F", "0o17", "017", "0b101", "1_000", "1:30",
           "190:20:30", "-0", "+12", "1e3", "1.5e+3", "6.8523015e+5", ".inf", "-.Inf", ".NaN", ".", "-", "+",
           "2001-12-14t21:59:43.10-05:00", "2002-12-14", "2001-12-14 21:59:43.10 -5", "2Gi", "500m", "=", "<<",
           "0.", "._", "1__", "9" * 40, "é", "\"quoted: yes\"", "'it''s'", "!!str 12", "!!int '7'", "!custom x",
           "&a 1", "*a", "[1, yes, ~]", "{a: 1, b: on}", "|\n  block\n", ">-\n  folded\n", "\"\\x41\\u00e9\"",
           "\"\\0\"", "\t", "x\ty", "True", "FALSE", "0", "00", "-1_0", "0b", "0x", "1:60", "1:5:9.5", "3.")
_KEYS = ("a", "1", "true", "~", "<<", "\"q\"", "'q'", "? [x]", "on", "1.5", "a b", "null", "-x", "é")


def _text_mutation(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        line = lines[i]
        indent = line[:len(line) - len(line.lstrip(" "))]
        choice = rng.random()
        if choice < 0.35 and ":" in line:  # a value replaced
            key = line.split(":", 1)[0]
            lines[i] = f"{key}: {rng.choice(_VALUES)}"
        elif choice < 0.5:  # a key added at the same indentation
            lines.insert(i, f"{indent}{rng.choice(_KEYS)}: {rng.choice(_VALUES)}")
        elif choice < 0.6 and ":" in line:  # the same key twice
            lines.insert(i, line)
        elif choice < 0.7:  # an anchor and an alias
            lines.insert(i, f"{indent}anchored: &x {rng.choice(_VALUES)}")
            lines.insert(i + 1, f"{indent}again: *x")
        elif choice < 0.78:  # deep flow nesting
            depth = rng.choice((30, 63, 64, 65, 66, 200))
            lines.insert(i, f"{indent}deep: " + "[" * depth + "1" + "]" * depth)
        elif choice < 0.84:  # a document separator, a directive, a comment
            lines.insert(i, rng.choice(("---", "...", "--- # c", "%YAML 1.1\n---", "# vmtune: x")))
        elif choice < 0.9:  # a character YAML refuses, or one it reads specially
            lines[i] = line + rng.choice(("\x00", "\x1b", "\ufeff", "\u0085", "\u2028", "\r", "\x7f", "\t"))
        else:  # a sequence of mixed items
            lines.insert(i, f"{indent}items: [" + ", ".join(rng.choice(_VALUES[:30]) for _ in range(4)) + "]")
    return "\n".join(lines)


def test_mutated_manifests_read_the_same_natively() -> None:
    _native()
    rng = random.Random(20261127)
    sources = [p for p in _repository_yaml() if "stacks" in p.parts and p.suffix in (".yaml", ".yml")]
    assert len(sources) > 100
    taken = declined = 0
    for round_ in range(2500):
        path = sources[round_ % len(sources)]
        data = path.read_bytes()
        if round_ % 2:
            data = mutate_stack(data, path.name, rng)
        else:
            data = _text_mutation(data.decode("utf-8", "replace"), rng).encode("utf-8", "surrogatepass")
        assert _outcome(data, True) == _outcome(data, False), (path, data[:2000])
        if _taken_natively(data):
            taken += 1
        else:
            declined += 1
    assert taken > 500 and declined > 500, (taken, declined)  # both paths were exercised


@pytest.mark.parametrize("text", [
    "a: 1\nb: true\nc: ~\nd: 2Gi\ne: '1'\nf: 1.5\ng: 0x10\nh: 2024-01-02\n",
    "- 1\n- [a, {b: c}]\n- {}\n- []\n",
    "a: &x 1\nb: *x\n",
    "<<: {a: 1}\nb: 2\n",
    "a: 1\na: 2\n",
    "!!map {a: 1}\n",
    "1: a\n",
    "a: b: c\n",
    "a: [" * 70 + "]" * 70 + "\n",
    "a:\n\t- b\n",
    "",
    "---\n---\na: 1\n...\n",
    "\ufeffa: 1\n",
    "a: 2001-13-45\n",
    "a: !!binary 'not base64!'\n",
])
def test_declined_and_taken_texts_read_the_same(text: str) -> None:
    _native()
    data = text.encode()
    assert _outcome(data, True) == _outcome(data, False)


def test_what_the_native_reader_declines() -> None:
    """Declined, so that the full loader reads it (or says what is wrong, and where)."""
    _native()
    for text in ("a: &x 1\nb: *x\n", "<<: {a: 1}\n", "a: 1\na: 2\n", "!!map {a: 1}\n", "1: a\n", "on: a\n",
                 "a: !custom x\n", "a: [" * 70 + "]" * 70 + "\n", "a: b: c\n", "a: 2001-13-45\n", "? [a]\n: 1\n"):
        assert yamldoc._read_natively(text.encode()) is None, text
    roots = yamldoc._read_natively(b"a: 1\nb: [true, ~, 2Gi]\n'c': \"d\"\n")
    assert roots is not None and roots[0].value == {"a": 1, "b": [True, None, "2Gi"], "c": "d"}
    assert [(k, n.line, n.key_line) for k, n in roots[0].items()] == [("a", 1, 1), ("b", 2, 2), ("c", 3, 3)]
