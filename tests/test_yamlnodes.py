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


# Every character a plain scalar's text is tried with: ASCII's printable ones, the tab, and a few
# beyond ASCII (Unicode digits among them, which `\d` would take and `[0-9]` does not).
_ALPHABET = "\t" + "".join(map(chr, range(32, 127))) + "é\u00a0\u0663\uff10\u212a"


def _matched(table: dict[Any, Any], text: str) -> list[str]:
    """The tags PyYAML's implicit resolvers give a plain scalar's text, chosen as PyYAML chooses
    them: by its first character, each resolver's expression matched from the start."""
    return [tag for tag, regexp in table.get(text[:1], ()) if regexp.match(text)]


def _near(words: set[str]) -> set[str]:
    """Every text one edit away from a word (a character inserted, replaced or removed), and every
    text of one or two characters."""
    near = {a + b for a in _ALPHABET for b in _ALPHABET} | set(_ALPHABET)
    for word in words:
        for i in range(len(word) + 1):
            near |= {word[:i] + c + word[i:] for c in _ALPHABET}
            if i < len(word):
                near |= {word[:i] + c + word[i + 1:] for c in _ALPHABET} | {word[:i] + word[i + 1:]}
    return near


# Numbers of every form PyYAML resolves (int, float, timestamp), with each character they may hold.
_NUMBERS = ["+0x1F", "+0xaBcDeF", "-0XAbC", "+1.5e-3", "-1.5E+3", "+12:30:15.5", "-0o17", "-12", "+0", "-0b101",
            "+0o17", "-.inf", "+.INF", "-.NaN", "+1:30", "-1_000.5e+3", "+.5", "-685.230_15E+03", "0xaBcDeF",
            ".Inf", ".NAN", ".nan", ".5E-3", "2001-12-14T21:59:43.10Z", "2001-12-14\t21:59:43.10 -5",
            "2001-12-14 21:59:43.10 +05:00", "1.5e-3", "190:20:30.15"]


def test_the_resolver_tables_are_pyyamls() -> None:
    """What yamldoc and the native reader know of PyYAML's implicit resolvers, checked against
    PyYAML's resolvers themselves: the first characters after which only fixed words resolve (and
    which words: the native reader's word lists), nothing one edit away from them; the number
    resolvers' order and expressions; and that a character outside PLAIN_NUMBER_CHARS makes any
    number a string, as the native reader assumes without asking. A PyYAML that changed them
    fails here."""
    import yaml

    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    assert None not in table  # no wildcard resolver: the first character decides
    # The words the native reader types or hands to resolve() (_yamlnodes.c's word lists)
    words = {"yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
             "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL", "<<", "=", "!", "&", "*"}
    assert {w[0] for w in words} == set(yamldoc.PLAIN_WORD_STARTS)
    resolved = {text for text in _near(words) | words
                if text and text[0] in yamldoc.PLAIN_WORD_STARTS and _matched(table, text)}
    assert resolved == words
    assert _matched(table, "") == ["tag:yaml.org,2002:null"]  # an empty plain scalar
    number_starts = "".join(yamldoc.PLAIN_NUMBER_CHARS)
    assert set(table) - {""} == set(yamldoc.PLAIN_WORD_STARTS) | set(number_starts)
    samples = _plain_samples(random.Random(7)) + _NUMBERS
    samples += [sign + text for sign in "+-" for text in samples if text[:1].isdigit()]  # the signed forms too
    numbers = [text for text in samples if text and text[0] in number_starts and _matched(table, text)]
    for starts, chars in yamldoc.PLAIN_NUMBER_CHARS.items():
        for start in starts:
            resolvers = table[start]
            assert [(t, r.pattern, r.flags) for t, r in resolvers] == \
                [(t, p, 96) for t, p in yamldoc.PLAIN_NUMBER_RESOLVERS[starts]], start
            mine = {text for text in numbers if text[0] == start}
            # The native reader calls a text holding a character outside PLAIN_NUMBER_CHARS a string
            # without asking: no number PyYAML resolves holds one...
            assert len(mine) >= 10 and set().union(*mine) <= set(chars) | {start}, start
            # ...and such a character anywhere after the first makes the text a string (tried on
            # the hand-written numbers and the 100 shortest others: every form, none of 4,400 digits).
            others = set(_ALPHABET) - set(chars)
            for text in {t for t in _NUMBERS if t[0] == start} | set(sorted(mine, key=lambda t: (len(t), t))[:100]):
                if len(text) > 40:
                    continue
                for i in range(1, len(text) + 1):
                    made = [t for c in others if _matched(table, t := text[:i] + c + text[i:])]
                    assert made == [], (start, text, made)


def test_what_no_number_resolver_matches_is_a_string_without_them() -> None:
    """_resolve_plain calls a text that starts as a number may a string without matching the
    number resolvers when yamldoc.no_number says so: it holds a character they cannot match
    ("8Gi") or more than MOST_NUMBER_HYPHENS hyphens after its first character (a UUID, with four:
    a VM's firmware uuid): checked against PyYAML's resolvers. The constant is the most a number PyYAML resolves
    holds (a timestamp with a zone offset); hyphens or foreign characters added anywhere to numbers
    of every form, and UUIDs, make none that resolves, and plain_value reads each as its text."""
    import uuid

    import yaml

    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    most = yamldoc.MOST_NUMBER_HYPHENS
    rng = random.Random(11)
    numbers = [text for text in _plain_samples(rng) + _NUMBERS
               if text and text[0] in yamldoc._NUMBER_ALPHABETS and _matched(table, text)]
    assert max(text.count("-", 1) for text in numbers) == most  # "2001-12-14\t21:59:43.10 -5"
    # the numbers themselves too: none may be taken for a string
    texts = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(3000)] + ["8Gi", "1.5Gi", "+1x", ".5m", "0:1:2s"]
    texts += numbers
    for number in numbers:
        for _ in range(5):
            text = number
            while text.count("-", 1) <= most:
                at = rng.randrange(1, len(text) + 1)
                text = text[:at] + "-" + text[at:]
            texts.append(text)
            foreign = sorted(set(_ALPHABET) - yamldoc._NUMBER_ALPHABETS[number[0]])
            at = rng.randrange(1, len(number) + 1)
            texts.append(number[:at] + rng.choice(foreign) + number[at:])
    checked = 0
    for text in texts:
        if yamldoc.no_number(text):
            checked += 1
            assert _matched(table, text) == [], text
            assert yamldoc.plain_value(text) == text
    assert checked > 4500  # ~1,900 UUIDs that start with a digit, ~2,900 numbers with characters added


def _plain_samples(rng: random.Random) -> list[str]:
    """Plain scalars around every resolver: all one- and two-character texts over their
    characters and a few others, the fixed words and their near misses, and random texts."""
    import itertools

    number_chars = "".join(sorted(set("".join(yamldoc.PLAIN_NUMBER_CHARS.values())) - {"\t", " "}))
    alphabet = number_chars + "GMiKlnoprsuyzé/"
    samples = [a + b for a, b in itertools.product(alphabet, repeat=2)] + list(alphabet)
    words = ["yes", "No", "TRUE", "false", "on", "OFF", "null", "Null", "NULL", "~", "<<", "=", "y", "n", "features",
             "nodeSelector", "tolerations", "none", "Nil", "onn", "of", "Yes!", "true1", ".inf", "-.INF", ".NaN",
             "0x1F", "0b101", "017", "0777", "1_000", "1:30", "190:20:30.15", "2001-12-14t21:59:43.10-05:00",
             "2002-12-14", "2001-12-14 21:59:43.10 -5", "6.8523015e+5", "685.230_15e+03", "1e3", "1.5e+3", "+12",
             "-0", "00", "9" * 4400, "1" * 30, "10.0.0.1", "1.2.3", "5d307ca9-b3ef-428c-8861-06e72d69f223", "2Gi",
             "500m", "1e", "1.", ".5", "-", "+", "+.5", "0.", "._"]
    for word in words:
        samples += [word, word + "x", "x" + word, word.upper(), word.lower(), word.title(), word[:-1]]
    pool = number_chars + "eE.:_- Tt"
    samples += ["".join(rng.choice(pool) for _ in range(rng.randint(3, 24))) for _ in range(3000)]
    return [s for s in samples if s == s.strip()]


def test_plain_scalars_are_typed_as_pyyaml_types_them() -> None:
    """Each sample as a value, a key and a list item: the same value, type and line natively
    (most of them told by the native reader alone) as by the full loader."""
    _native()
    rng = random.Random(7)
    for sample in _plain_samples(rng):
        for text in (f"v: {sample}\n", f"{sample}: v\n", f"- {sample}\n", f"[{sample}, x]\n"):
            data = text.encode()
            assert _outcome(data, True) == _outcome(data, False), text


def test_a_manifest_is_read_without_pyyaml_when_its_scalars_need_no_constructor(tmp_path: Path) -> None:
    """The native reader types strings, bools, nulls and decimal integers itself and resolves
    numbers by PyYAML's own expressions, so that a one-manifest check does not import PyYAML
    (~12 ms); a float or a date still needs PyYAML's constructors."""
    import subprocess
    import sys

    _native()
    probe = ("import sys; from vmtune.stacks import yamldoc; docs = yamldoc.load(open(sys.argv[1], 'rb').read(), "
             "'f'); print('yaml' in sys.modules, docs[0].root.value['spec']['domain']['cpu'])")
    for text, imports, cpu in (("spec:\n  domain:\n    cpu: {cores: 4, dedicatedCpuPlacement: true}\n"
                                "    uuid: 5d307ca9-b3ef-428c-8861-06e72d69f223\n", False,
                                "{'cores': 4, 'dedicatedCpuPlacement': True}"),
                               ("spec:\n  domain:\n    cpu: {cores: 4.5}\n", True, "{'cores': 4.5}")):
        path = tmp_path / "probe.yaml"
        path.write_text(text)
        out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60,
                             cwd=ROOT)
        assert out.stdout.split(" ", 1) == [str(imports), cpu + "\n"], out.stderr
