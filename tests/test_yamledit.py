"""yamledit: a fix written into a manifest changes the bytes of what it sets and nothing else."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

import pytest
import yaml

from vmtune.errors import VmtuneError
from vmtune.stacks.yamledit import MAX_BYTES, YamlEditError, set_paths


def edit(src: bytes, *edits: tuple[int, tuple[str | int, ...], object]) -> bytes:
    out = set_paths(src, list(edits))
    assert set_paths(out, list(edits)) == out  # idempotent: the second run changes nothing
    return out


# --- adding keys to block mappings -----------------------------------------------------------------

def test_a_new_key_goes_after_the_last_entry_at_the_siblings_column() -> None:
    src = b"spec:\n  running: true\n  template:\n    metadata: {}\n"
    assert edit(src, (0, ("spec", "runStrategy"), "Always")) == (
        b"spec:\n  running: true\n  template:\n    metadata: {}\n  runStrategy: Always\n")


def test_a_new_key_goes_after_the_nested_content_of_the_last_entry() -> None:
    src = b"a:\n  b:\n    c:\n      d: 1\n    e:\n    - 1\n    - 2\nf: 0\n"
    assert edit(src, (0, ("a", "g"), True)) == (
        b"a:\n  b:\n    c:\n      d: 1\n    e:\n    - 1\n    - 2\n  g: true\nf: 0\n")


def test_comments_between_entries_stay_and_a_trailing_comment_block_stays_with_the_next_key() -> None:
    src = (b"devices:\n  # the boot disk\n  disks: []  # none yet\n  # blockMultiQueue: true\n"
           b"# resources of the VM\nresources: {}\n")
    assert edit(src, (0, ("devices", "networkInterfaceMultiqueue"), True)) == (
        b"devices:\n  # the boot disk\n  disks: []  # none yet\n  networkInterfaceMultiqueue: true\n"
        b"  # blockMultiQueue: true\n# resources of the VM\nresources: {}\n")


def test_intermediate_mappings_are_created_with_the_files_indentation_step() -> None:
    src = b"spec:\n    domain:\n        cpu:\n            cores: 4\n"
    assert edit(src, (0, ("spec", "domain", "features", "hyperv", "relaxed"), {})) == (
        b"spec:\n    domain:\n        cpu:\n            cores: 4\n        features:\n            hyperv:\n"
        b"                relaxed: {}\n")


def test_a_new_mapping_value_is_written_in_block_style() -> None:
    src = b"domain:\n  cpu: {cores: 2}\n"
    value = {"relaxed": {}, "spinlocks": {"spinlocks": 8191}, "vendorid": {"vendorid": "1234"}}
    assert edit(src, (0, ("domain", "features", "hyperv"), value)) == (
        b"domain:\n  cpu: {cores: 2}\n  features:\n    hyperv:\n      relaxed: {}\n      spinlocks:\n"
        b"        spinlocks: 8191\n      vendorid:\n        vendorid: '1234'\n")


@pytest.mark.parametrize(("value", "written"), [
    ("1024", b"'1024'"), ("true", b"'true'"), ("null", b"'null'"), ("", b"''"), ("0x1f", b"'0x1f'"),
    ("dedicated", b"dedicated"), ("a: b", b"'a: b'"), ("# x", b"'# x'"), ("two\nlines", b'"two\\nlines"'),
    ("caf\xe9", "caf\xe9".encode()), (1024, b"1024"), (True, b"true"), (False, b"false"), (None, b"null"),
    (1.5, b"1.5"), ([], b"[]"), ({}, b"{}"),
])
def test_new_scalars_are_quoted_only_when_plain_would_read_back_as_something_else(
        value: object, written: bytes) -> None:
    assert edit(b"a: 1\n", (0, ("b",), value)) == b"a: 1\nb: " + written + b"\n"


def test_keys_with_colons_and_slashes_stay_plain_where_yaml_reads_them_as_strings() -> None:
    src = b"extra_specs:\n  hw:cpu_policy: dedicated\n"
    assert edit(src, (0, ("extra_specs", "hw:vif_multiqueue_enabled"), "true"),
                (0, ("extra_specs", "kubevirt.io/size"), "small")) == (
        b"extra_specs:\n  hw:cpu_policy: dedicated\n  hw:vif_multiqueue_enabled: 'true'\n  kubevirt.io/size: small\n")


def test_a_new_key_and_string_follow_the_quoting_of_the_last_sibling() -> None:
    src = b'extra_specs:\n  "hw:cpu_policy": "dedicated"\n'
    assert edit(src, (0, ("extra_specs", "hw:vif_multiqueue_enabled"), "true")) == (
        b'extra_specs:\n  "hw:cpu_policy": "dedicated"\n  "hw:vif_multiqueue_enabled": "true"\n')


# --- existing scalars ---------------------------------------------------------------------------

@pytest.mark.parametrize(("before", "value", "after"), [
    (b"cache: none  # c\n", "writeback", b"cache: writeback  # c\n"),
    (b"cache: 'none'\n", "it's", b"cache: 'it''s'\n"),
    (b'cache: "none"\n', 'a"b', b'cache: "a\\"b"\n'),
    (b'cache: "none"\n', "true", b'cache: "true"\n'),
    (b"cache: none\n", "true", b"cache: 'true'\n"),
    (b"cache: 'none'\n", "two\nlines", b'cache: "two\\nlines"\n'),
    (b"cache: none\n", 3, b"cache: 3\n"),
    (b"cache: 'none'\n", False, b"cache: false\n"),
    (b"cache: |\n  none\n\nnext: 1\n", "x", b"cache: x\n\nnext: 1\n"),
    (b"cache:   none   # c\n", "x", b"cache:   x   # c\n"),
])
def test_an_existing_scalar_is_replaced_in_its_own_quoting_style(before: bytes, value: object, after: bytes) -> None:
    assert edit(before, (0, ("cache",), value)) == after


def test_a_value_the_file_already_holds_keeps_its_spelling() -> None:
    src = b"a: yes\nb: 0x400\nc: {x: 1}\nd: ~\n"
    assert set_paths(src, [(0, ("a",), True), (0, ("b",), 1024), (0, ("c",), {"x": 1}), (0, ("d",), None)]) == src


def test_a_block_mapping_replaced_by_a_scalar() -> None:
    assert edit(b"a:\n  b: 1\nc: 2\n", (0, ("a",), 5)) == b"a: 5\nc: 2\n"


# --- merging mappings -------------------------------------------------------------------------------

def test_a_mapping_merges_into_an_existing_mapping_key_by_key() -> None:
    src = b"hyperv:\n  relaxed: {}\n  spinlocks:\n    spinlocks: 4096\n"
    value = {"relaxed": {}, "spinlocks": {"spinlocks": 8191}, "synic": {}, "vapic": {}}
    assert edit(src, (0, ("hyperv",), value)) == (
        b"hyperv:\n  relaxed: {}\n  spinlocks:\n    spinlocks: 8191\n  synic: {}\n  vapic: {}\n")


def test_a_null_value_becomes_a_block_mapping_below_its_key() -> None:
    assert edit(b"features:\nclock: {}\n", (0, ("features", "hyperv", "relaxed"), {})) == (
        b"features:\n  hyperv:\n    relaxed: {}\nclock: {}\n")
    assert edit(b"features: ~  # later\nclock: {}\n", (0, ("features", "acpi"), {})) == (
        b"features:  # later\n  acpi: {}\nclock: {}\n")


def test_an_empty_flow_mapping_takes_the_keys_in_flow_style() -> None:
    assert edit(b"features: {}\n", (0, ("features", "hyperv", "relaxed"), {})) == (
        b"features: {hyperv: {relaxed: {}}}\n")


# --- flow mappings and JSON ---------------------------------------------------------------------

def test_a_flow_mapping_gets_the_key_before_its_closing_brace() -> None:
    assert edit(b"hyperv: {relaxed: {}}\n", (0, ("hyperv", "synic"), {})) == b"hyperv: {relaxed: {}, synic: {}}\n"
    assert edit(b"hyperv: { relaxed: {} }\n", (0, ("hyperv", "vapic", "enabled"), True)) == (
        b"hyperv: { relaxed: {}, vapic: {enabled: true} }\n")
    assert edit(b"s: {hw:cpu_policy: x}\n", (0, ("s", "hw:mem"), "large")) == (
        b"s: {hw:cpu_policy: x, 'hw:mem': large}\n")


def test_single_line_json_keeps_its_spacing() -> None:
    assert edit(b'{"a":1,"b":{}}', (0, ("c",), "1024"), (0, ("b", "d"), True)) == (
        b'{"a":1,"b":{"d": true},"c":"1024"}')
    assert edit(b'{"a": 1, "b": [1, 2]}\n', (0, ("c",), {"x": None})) == b'{"a": 1, "b": [1, 2], "c": {"x": null}}\n'


FLAVOR = b"""{
  "OS-FLV-DISABLED:disabled": false,
  "disk": 40,
  "id": "6",
  "name": "m1.xlarge",
  "properties": {
    "hw:cpu_policy": "dedicated"
  },
  "vcpus": 8
}
"""


def test_pretty_json_gets_a_line_at_the_siblings_indentation() -> None:
    assert edit(FLAVOR, (0, ("properties", "hw:vif_multiqueue_enabled"), "true")) == FLAVOR.replace(
        b'"dedicated"\n', b'"dedicated",\n    "hw:vif_multiqueue_enabled": "true"\n')
    assert edit(FLAVOR, (0, ("extra",), {"a": [1]})) == FLAVOR.replace(
        b'"vcpus": 8\n', b'"vcpus": 8,\n  "extra": {\n    "a": [\n      1\n    ]\n  }\n')


def test_json_scalars_are_replaced_with_json() -> None:
    assert edit(FLAVOR, (0, ("name",), "m1.x\u00e9"), (0, ("disk",), 80)) == FLAVOR.replace(
        b'"m1.xlarge"', '"m1.x\u00e9"'.encode()).replace(b"40", b"80")


@pytest.mark.parametrize(("src", "path", "value", "out"), [
    (b'{"a", "z": true}\n', ("a", "z"), [1], b'{"a": {"z": [1]}, "z": true}\n'),
    (b"{\nname\n}\n", ("name", "z"), None, b"{\nname: {z: null}\n}\n"),
    (b"{a: , b: 1}", ("a",), 3, b"{a: 3, b: 1}"),
    (b"[a, {b}]", (1, "b"), "x", b"[a, {b: x}]"),
])
def test_flow_entries_without_a_value_get_one(src: bytes, path: tuple[str | int, ...], value: object,
                                              out: bytes) -> None:
    assert edit(src, (0, path, value)) == out


def test_multiline_yaml_flow_mappings_keep_comments_on_the_last_line() -> None:
    src = b"x: {a: 1,  # c\n  b: 2   # d\n}\n"
    assert edit(src, (0, ("x", "c"), 3)) == b"x: {a: 1,  # c\n  b: 2,   # d\n  c: 3\n}\n"
    assert edit(b"{a: 1,\n b: 2,\n}\n", (0, ("c",), 3)) == b"{a: 1,\n b: 2,\n c: 3,\n}\n"
    assert edit(b"{a: 1, b: 2,}\n", (0, ("c",), 3)) == b"{a: 1, b: 2, c: 3,}\n"


# --- line endings, BOM, final newline, documents -------------------------------------------------

def test_crlf_files_get_crlf_lines() -> None:
    src = b"a: 1\r\nb:\r\n  c: 2\r\n"
    assert edit(src, (0, ("b", "d"), "x"), (0, ("e",), {"f": [1, {"g": 2}]})) == (
        b"a: 1\r\nb:\r\n  c: 2\r\n  d: x\r\ne:\r\n  f:\r\n    - 1\r\n    - g: 2\r\n")


def test_a_missing_final_newline_stays_missing_and_a_bom_stays() -> None:
    assert edit(b"a: 1\nb:\n  c: 2", (0, ("b", "d"), "x")) == b"a: 1\nb:\n  c: 2\n  d: x"
    assert edit(b"\xef\xbb\xbfa: 1\r\nb: 2", (0, ("c",), 3)) == b"\xef\xbb\xbfa: 1\r\nb: 2\r\nc: 3"


def test_the_second_of_three_documents() -> None:
    src = b"# first\na: 1\n---\nb: 2\n# trailing\n---\nc: 3\n...\n"
    assert edit(src, (1, ("b2",), {"x": 1})) == b"# first\na: 1\n---\nb: 2\nb2:\n  x: 1\n# trailing\n---\nc: 3\n...\n"
    assert edit(src, (2, ("d",), 4)) == b"# first\na: 1\n---\nb: 2\n# trailing\n---\nc: 3\nd: 4\n...\n"


# --- lists --------------------------------------------------------------------------------------

VM = b"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
spec:
  template:
    spec:
      domain:
        devices:
          disks:
          - name: root
            disk: {bus: virtio}
          - name: data
            disk:
              bus: sata
"""


def test_list_items_are_addressed_by_index() -> None:
    path = ("spec", "template", "spec", "domain", "devices", "disks")
    assert edit(VM, (0, (*path, 1, "cache"), "none"), (0, (*path, 0, "disk", "bus"), "scsi")) == VM.replace(
        b"{bus: virtio}", b"{bus: scsi}") + b"            cache: none\n"


def test_new_lists_follow_the_files_sequence_style() -> None:
    indented = b"a:\n  - 1\nb: {}\n"
    flush = b"a:\n- 1\nb: {}\n"
    value = [{"x": 1, "y": [3]}, [4, 5]]
    assert edit(indented, (0, ("c",), value)) == indented + b"c:\n  - x: 1\n    y:\n      - 3\n  - - 4\n    - 5\n"
    assert edit(flush, (0, ("c",), value)) == flush + b"c:\n- x: 1\n  y:\n  - 3\n- - 4\n  - 5\n"


def test_a_null_list_item_becomes_a_mapping_in_place() -> None:
    assert edit(b"a:\n- 1\n- null\n", (0, ("a", 1), {"x": 1, "y": 2})) == b"a:\n- 1\n- x: 1\n  y: 2\n"
    assert edit(b"a:\n  -  \n  - x\n", (0, ("a", 0), {"k": 1, "l": 2})) == b"a:\n  - k: 1\n    l: 2\n  - x\n"
    assert edit(b"a:\n  -\n  - x\n", (0, ("a", 0), "v")) == b"a:\n  - v\n  - x\n"


def test_a_json_list_of_flavors() -> None:
    src = b'[{"name": "m1", "properties": {}}, {"name": "m2", "properties": {"a": "b"}}]\n'
    assert edit(src, (0, (0, "properties", "hw:x"), "true"), (0, (1, "properties", "hw:x"), "true")) == (
        b'[{"name": "m1", "properties": {"hw:x": "true"}}, {"name": "m2", "properties": {"a": "b", "hw:x": "true"}}]\n')


def test_keys_after_a_kept_block_scalar_do_not_change_it() -> None:
    assert edit(b"b: 1\na: |+\n  keep\n\n", (0, ("c",), 3)) == b"b: 1\na: |+\n  keep\n\nc: 3\n"
    assert edit(b"a: |+\n  keep\n\nb: 1\n", (0, ("c",), 3)) == b"a: |+\n  keep\n\nb: 1\nc: 3\n"


# --- refusals -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("src", "path", "message"), [
    (b"a: &x {b: 1}\nc: *x\n", ("a", "b"), "a is anchored (&) and used again by an alias: an edit would change both "
                                          "places"),
    (b"a: &x {b: 1}\nc: *x\n", ("c", "b"), "c is an alias (*): edit the anchored node itself"),
    (b"a: &x {b: 1}\nc: [*x]\n", ("c", 0, "b"), "c[0] is an alias (*): edit the anchored node itself"),
    (b"base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n", ("d", "x"), "d.x: the mapping takes keys from a merge key (<<): "
                                                          "not edited"),
    (b"disks:\n- a\n", ("disks", 1, "cache"), "disks[1]: no such list item (1 in the list; lists are not extended)"),
    (b"disks: [a]\n", ("disks", 5), "disks[5]: no such list item (1 in the list; lists are not extended)"),
    (b"a: foo\n", ("a", "b"), "a is a value, not a mapping: not replaced"),
    (b"a: foo\n", ("a",), "a is a value, not a mapping: not replaced"),  # the value: {"x": 2}
    (b"a: [1]\n", ("a", "b"), "a is a list, not a mapping"),
    (b"a: {}\n", ("a", "b", 0), "a.b[0]: list item 0 does not exist (lists are not extended)"),
    (b"80: x\n", ("80", "y"), "80: the key in the file is a number, not a string"),
    (b"yes: x\n", ("yes",), "yes: the key in the file is true or false, not a string"),
    (b"a: 1\n", ("k" * 1025,), "a key longer than 1024 characters"),
    (b'{"a": 1}', ("b",), "JSON has no NaN or infinity: not written"),
    (b"a: 1\n", ("a",), "no document 3 (the file has 1)"),
    (b"- 1\n", (), "replacing a whole document: not supported"),
    (b"just text\n", ("a",), "the document is not a mapping or a list: not edited"),
    (b"a: [1\n", ("a",), "not valid YAML: did not find expected ',' or ']'"),
    (b"a: *secret\n", ("a",), "not valid YAML: found undefined alias"),
    (b"a: \xff\n", ("a",), "not UTF-8: not edited"),
])
def test_refusals_are_one_clear_line(src: bytes, path: tuple[str | int, ...], message: str) -> None:
    doc = 3 if message.startswith("no document") else 0
    with pytest.raises(YamlEditError) as caught:
        set_paths(src, [(doc, path, {"x": 2} if path == ("a",) else float("nan") if b'"' in src else 2)])
    assert caught.value.message.startswith(message)
    assert isinstance(caught.value, VmtuneError)  # the CLI reports it as a one-line error, exit 2



@pytest.mark.parametrize("src", [b"a: &secret {b: 1}\nc: *secret\n", b"a: *secret\n", b'a: "\\q secret"\n'])
def test_errors_never_echo_the_file(src: bytes) -> None:
    for path in [("a", "b"), ("c", "b")]:
        with pytest.raises(YamlEditError) as caught:
            set_paths(src, [(0, path, 2)])
        assert "secret" not in str(caught.value) and "\\q" not in str(caught.value)


def test_refused_errors_name_the_file_and_line() -> None:
    with pytest.raises(YamlEditError) as caught:
        set_paths(b"a: 1\nb: &x {c: 1}\nd: *x\n", [(0, ("d", "c"), 2)], name="vms/web.yaml")
    assert caught.value.line == 3
    assert str(caught.value) == "vms/web.yaml:3: d is an alias (*): edit the anchored node itself"


def test_input_larger_than_the_bound_is_refused() -> None:
    with pytest.raises(YamlEditError, match="larger than 4 MiB"):
        set_paths(b"a: 1\n" + b"#" * MAX_BYTES, [(0, ("b",), 1)])


def test_values_without_one_spelling_are_refused() -> None:
    with pytest.raises(YamlEditError, match="cannot write a value of type set"):
        set_paths(b"a: 1\n", [(0, ("b",), {1, 2})])


# --- property: random documents, random edits ---------------------------------------------------

KEYS = ["name", "spec", "hw:cpu_policy", "kubevirt.io/size", "a b", "true", "1024", "x", "y", "z", "k-1", "caf\u00e9"]
STRINGS = ["virtio", "1024", "true", "no", "null", "", "a: b", "# not a comment", "it's", 'say "hi"', "two\nlines",
           "caf\u00e9", "- item", "[x]", "~", "0x10", "1e3", "*alias", "&anchor", "%tag", " padded "]


def _scalar(rng: random.Random) -> object:
    return rng.choice([rng.randint(-5, 5000), rng.random() < 0.5, None, rng.choice(STRINGS), 2.5])


def _data(rng: random.Random, depth: int) -> object:
    roll = rng.random()
    if depth >= 4 or roll < 0.3:
        return _scalar(rng)
    if roll < 0.75:
        return {key: _data(rng, depth + 1) for key in rng.sample(KEYS, rng.randint(1, 4))}
    return [_data(rng, depth + 1) for _ in range(rng.randint(1, 3))]


def _scalar_text(value: object, rng: random.Random) -> str:
    if isinstance(value, str) and "\n" not in value and rng.random() < 0.3:
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, str) and rng.random() < 0.3:
        return json.dumps(value, ensure_ascii=False)
    return yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=10**6).strip()[1:-1]


class _Writer:
    """Block YAML with comments everywhere a comment may be, both sequence styles, some flow."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seq_offset = rng.choice([0, 2])
        self.step = rng.choice([2, 2, 4])
        self.count = 0

    def comment(self) -> str:
        self.count += 1
        return f"# c{self.count}"

    def lines(self, value: object, col: int) -> list[str]:
        rng, pad = self.rng, " " * col
        out: list[str] = []
        if isinstance(value, dict):
            for key, item in value.items():
                if rng.random() < 0.2:
                    out.append(pad + self.comment())
                out.extend(self.entry(pad + _scalar_text(key, rng) + ":", item, col,
                                      col + (self.step if isinstance(item, dict) else self.seq_offset)))
        else:
            assert isinstance(value, list)
            for item in value:
                if rng.random() < 0.2:
                    out.append(pad + self.comment())
                out.extend(self.entry(pad + "-", item, col, col + 2, item_of_list=True))
        return out

    def entry(self, head: str, item: object, col: int, child_col: int, item_of_list: bool = False) -> list[str]:
        rng = self.rng
        trailer = "  " + self.comment() if rng.random() < 0.2 else ""
        if isinstance(item, dict | list) and item and rng.random() < 0.2:
            return [f"{head} {json.dumps(item, ensure_ascii=False)}{trailer}"]
        if isinstance(item, dict | list) and item:
            nested = self.lines(item, child_col)
            if item_of_list and rng.random() < 0.5 and not nested[0].lstrip().startswith("#"):
                return [head + " " + nested[0].lstrip() + (trailer if "#" not in nested[0] else ""), *nested[1:]]
            return [head + trailer, *nested]
        if isinstance(item, dict | list):
            return [f"{head} {json.dumps(item)}{trailer}"]
        if item is None and rng.random() < 0.5:
            return [head + trailer]
        return [f"{head} {_scalar_text(item, rng)}{trailer}"]


def _document(rng: random.Random) -> tuple[str, list[Any]]:
    docs = [{key: _data(rng, 1) for key in rng.sample(KEYS, rng.randint(1, 5))} for _ in range(rng.randint(1, 3))]
    if len(docs) == 1 and rng.random() < 0.15:
        return json.dumps(docs[0], indent=rng.choice([None, 2, 4]), ensure_ascii=False) + "\n", docs
    writer = _Writer(rng)
    parts = ["\n".join(writer.lines(doc, 0)) for doc in docs]
    text = "\n---\n".join(parts) + "\n"
    if rng.random() < 0.3:
        text = text.replace("\n", "\r\n")
    if rng.random() < 0.2:
        text = text.rstrip("\r\n")
    return text, docs


def _paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], object]]:
    found = [(path, value)]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


def _set(current: object, path: tuple[str | int, ...], value: object) -> object:
    """The semantics, written again independently: create mappings, merge mappings, replace the rest."""
    if not path:
        if isinstance(value, dict) and isinstance(current, dict):
            merged = dict(current)
            for key, item in value.items():
                merged[key] = _set(current.get(key), (), item)
            return merged
        return value
    key = path[0]
    if isinstance(key, int):
        assert isinstance(current, list)
        return [_set(item, path[1:], value) if i == key else item for i, item in enumerate(current)]
    mapping = dict(current) if isinstance(current, dict) else {}
    mapping[key] = _set(mapping.get(key), path[1:], value)
    return mapping


def _an_edit(rng: random.Random, docs: list[Any]) -> tuple[int, tuple[str | int, ...], object]:
    """A path to a mapping (a new or an existing key below it), a null or a scalar; a value that
    merges into a mapping or replaces a scalar (what replaces a list or mapping drops the comments
    in it, and a mapping never replaces a non-null scalar: see the refusal tests)."""
    while True:
        doc = rng.randrange(len(docs))
        path, here = rng.choice([(p, v) for p, v in _paths(docs[doc]) if p and not isinstance(v, list)] or [
            ((), docs[doc])])
        if isinstance(here, dict):
            extra = tuple(rng.sample(KEYS, rng.randint(1, 3)))
            path = (*path, extra[0]) if extra[0] in here else (*path, *extra)
            here = _at(docs[doc], path)
        if isinstance(here, list):
            continue
        value: object = _scalar(rng) if rng.random() < 0.6 else _data(rng, 2)
        if isinstance(value, list) and here is not None:
            continue
        if here is not None and not isinstance(here, dict) and isinstance(value, dict):
            value = _scalar(rng)
        if isinstance(here, dict) and not isinstance(value, dict):
            value = {rng.choice(KEYS): value}
        if _fits(here, value):
            return doc, path, value


def _fits(current: object, value: object) -> bool:
    if isinstance(value, dict):
        return current is None or (isinstance(current, dict) and all(_fits(current.get(k), v)
                                                                      for k, v in value.items()))
    return not isinstance(current, dict | list)


def _at(value: object, path: tuple[str | int, ...]) -> object:
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and key < len(value):
            value = value[key]
        else:
            return None
    return value


def _comments(text: str) -> Counter[str]:
    return Counter(re.findall(r"# c\d+\b", text))


def test_random_documents_and_edits_read_back_as_the_edited_data() -> None:
    """200 generated files (nested mappings and lists, comments between and after entries, both
    sequence styles, indentation 2 or 4, some flow, some JSON, CRLF or LF, with or without a final
    newline, 1-3 documents), 1-4 random edits each: the result reads back as the original data with
    the edits set, keeps every comment and line ending, and applying the edits again changes nothing."""
    rng = random.Random(20261127)
    edited = 0
    for _ in range(200):
        text, docs = _document(rng)
        assert list(yaml.safe_load_all(text)) == docs
        edits: list[tuple[int, tuple[str | int, ...], object]] = []
        for _ in range(rng.randint(1, 4)):
            doc, path, value = _an_edit(rng, docs)
            if any(d == doc and (p[:len(path)] == path or path[:len(p)] == p) for d, p, _ in edits):
                continue  # edits of one place in one run: the last one wins, the run is not idempotent
            edits.append((doc, path, value))
            docs = [_set(d, path, value) if i == doc else d for i, d in enumerate(docs)]
        out = set_paths(text.encode(), edits).decode()
        assert list(yaml.safe_load_all(out)) == docs, (text, edits, out)
        assert _comments(out) == _comments(text), (text, edits, out)
        if "\r\n" in text:
            assert out.count("\r\n") == out.count("\n"), (text, edits, out)
        else:
            assert "\r" not in out, (text, edits, out)
        assert out.endswith("\n") == text.endswith("\n"), (text, edits, out)
        assert set_paths(out.encode(), edits).decode() == out
        one_by_one = text.encode()
        for one in edits:  # edits planned together on one parse give what each after the other gives
            one_by_one = set_paths(one_by_one, [one])
        assert one_by_one.decode() == out, (text, edits, out)
        edited += out != text
    assert edited > 150


# --- real shapes, and the cost of many edits ---------------------------------------------------

ANSIBLE = b"""- name: Flavors for Windows guests
  hosts: localhost
  tasks:
    - name: m1.win   # owned by the Windows team
      openstack.cloud.compute_flavor:
        name: m1.win
        vcpus: 8
        extra_specs:
          "hw:cpu_policy": "dedicated"
          # "hw:mem_page_size": "large"
    - name: m1.linux
      openstack.cloud.compute_flavor: {name: m1.linux, vcpus: 2}
"""


def test_ansible_tasks_get_extra_specs_in_their_own_quoting() -> None:
    task = (0, "tasks", 0, "openstack.cloud.compute_flavor", "extra_specs")
    linux = (0, "tasks", 1, "openstack.cloud.compute_flavor")
    assert edit(ANSIBLE, (0, (*task, "hw:vif_multiqueue_enabled"), "true"),
                (0, (*linux, "extra_specs", "hw:cpu_policy"), "dedicated")) == ANSIBLE.replace(
        b'"dedicated"\n', b'"dedicated"\n          "hw:vif_multiqueue_enabled": "true"\n').replace(
        b"vcpus: 2}", b"vcpus: 2, extra_specs: {'hw:cpu_policy': dedicated}}")


WINDOWS_VM = b"""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win2k22
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        clock:
          utc: {}
        # hyperv enlightenments: see the runbook
        features:
          acpi: {}
          hyperv:
            relaxed: {}
        devices:
          disks:
            - name: root
              disk: {bus: sata}
"""


def test_a_kubevirt_vm_gets_its_hyperv_enlightenments_merged_and_its_timer_added() -> None:
    domain = ("spec", "template", "spec", "domain")
    hyperv = {"relaxed": {}, "vapic": {}, "spinlocks": {"spinlocks": 8191}, "synic": {}}
    assert edit(WINDOWS_VM, (0, (*domain, "features", "hyperv"), hyperv),
                (0, (*domain, "clock", "timer", "hyperv"), {}),
                (0, (*domain, "devices", "disks", 0, "disk", "bus"), "virtio")) == WINDOWS_VM.replace(
        b"          utc: {}\n", b"          utc: {}\n          timer:\n            hyperv: {}\n").replace(
        b"            relaxed: {}\n", b"            relaxed: {}\n            vapic: {}\n            spinlocks:\n"
                                    b"              spinlocks: 8191\n            synic: {}\n").replace(
        b"{bus: sata}", b"{bus: virtio}")


def test_fixes_for_every_vm_of_a_list_cost_one_parse_to_make_and_one_to_verify(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubectl List of 300 VMs, three fixes each (two new keys in one mapping, a changed
    scalar): 2 parses of the file, not one per fix (900 parses of 150 KB before batching)."""
    import vmtune.stacks.yamledit as yamledit

    vm = ("- kind: VirtualMachine\n  metadata: {name: vm%d}\n  spec:\n    template:\n      spec:\n        domain:\n"
          "          devices:\n            disks:\n            - name: root  # boot\n              disk: {bus: sata}\n")
    src = ("apiVersion: v1\nkind: List\nitems:\n" + "".join(vm % i for i in range(300))).encode()
    devices = ("spec", "template", "spec", "domain", "devices")
    edits: list[tuple[int, tuple[str | int, ...], object]] = []
    for i in range(300):
        edits += [(0, ("items", i, *devices, "networkInterfaceMultiqueue"), True),
                  (0, ("items", i, *devices, "blockMultiQueue"), True),
                  (0, ("items", i, *devices, "disks", 0, "disk", "bus"), "virtio")]
    parses: list[int] = []
    real = yamledit._load_all

    def counted(text: str) -> list[object]:
        parses.append(len(text))
        return real(text)

    monkeypatch.setattr(yamledit, "_load_all", counted)
    out = set_paths(src, edits)
    assert len(parses) == 2
    assert out == src.replace(b"{bus: sata}\n", b"{bus: virtio}\n"
                                                b"            networkInterfaceMultiqueue: true\n"
                                                b"            blockMultiQueue: true\n")


def test_a_batch_that_does_not_verify_is_redone_one_edit_at_a_time_to_name_the_edit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import vmtune.stacks.yamledit as yamledit

    real = yamledit._scalar
    monkeypatch.setattr(yamledit, "_scalar", lambda value, flow, style=None: "yes" if value == "bad" else real(
        value, flow, style))  # a writer bug: the string "bad" written as a boolean
    with pytest.raises(YamlEditError) as caught:
        set_paths(b"a: 1\nb: 2\n", [(0, ("a",), 5), (0, ("b",), "bad")])
    assert caught.value.message == "setting b would change more than it: not edited"


def test_hostile_and_broken_yaml_is_a_yamledit_error_never_a_traceback() -> None:
    """400 generated files with random bytes inserted or cut (brackets, quotes, anchors, tabs,
    `---`, `? `, `<<`), three random edits each: each is made (and verified) or refused with
    YamlEditError; nothing else escapes."""
    rng = random.Random(7)
    chunks = ["{", "}", "[", "]", ":", ": ", "- ", "\n", "\r\n", "  ", "#", "&a ", "*a", "<<: *a\n", "'", '"', "|\n",
              ">-\n", "---\n", "...\n", "? ", "!!str ", "\t", ",", "\ufeff", "%YAML 1.1\n", "\x00", "\ud800"]
    made = refused = 0
    for _ in range(400):
        text, _docs = _document(rng)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(chunks) + text[at:] if rng.random() < 0.5 else text[:at] + text[
                at + rng.randint(1, 5):]
        data = text.encode("utf-8", "surrogatepass")
        try:
            docs = list(yaml.safe_load_all(text))
        except Exception:
            docs = [None]
        for _ in range(3):
            doc = rng.randrange(max(len(docs), 1))
            places = [p for p, _v in _paths(docs[doc])] if docs and doc < len(docs) else [()]
            steps: list[str | int] = [*KEYS, 0, 1]
            path = rng.choice(places) + tuple(rng.choice(steps) for _ in range(rng.randint(0, 2)))
            try:
                set_paths(data, [(doc, path, _data(rng, 2))])
                made += 1
            except YamlEditError:
                refused += 1
    assert made > 100 and refused > 200


def test_two_keys_below_one_new_mapping_are_batched_without_falling_back_to_one_parse_per_edit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: both edits wrote `clock:` in one round, the round failed its verification, and every
    edit of the file was redone one parse at a time (60 VMs' CLK004 fixes: 18 s of CPU)."""
    from vmtune.stacks import yamledit

    rounds: list[bool] = []
    real = yamledit._round

    def counting(text: str, docs: list[object], pending: list[object], batch: bool) -> object:
        rounds.append(batch)
        return real(text, docs, pending, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(yamledit, "_round", counting)
    out = yamledit.set_paths(b"spec:\n  domain:\n    cpu: {cores: 4}\n",
                             [(0, ("spec", "domain", "clock", "utc"), {}),
                              (0, ("spec", "domain", "clock", "timer"), {"rtc": {"tickPolicy": "catchup"}})])
    assert out == (b"spec:\n  domain:\n    cpu: {cores: 4}\n    clock:\n      utc: {}\n      timer:\n"
                   b"        rtc:\n          tickPolicy: catchup\n")
    assert rounds == [True, True]  # the second key waits one round; no one-by-one fallback
