"""Loading stack sources (vmtune.stacks.yamldoc): lines for every node, and hostile YAML refused
with one line naming the file and line, in bounded time."""

from __future__ import annotations

import time

import pytest

from vmtune.errors import VmtuneError
from vmtune.stacks.yamldoc import NODE_BUDGET, load

MANIFEST = b"""\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win10   # a comment
spec:
  template:
    spec:
      domain:
        features:
          hyperv: {relaxed: {}, vapic: {}}
        devices:
          disks:
          - name: root
            disk: {bus: sata}
---
kind: ConfigMap
"""


def test_every_node_knows_its_line_and_its_keys_line() -> None:
    docs = load(MANIFEST, "vm.yaml")
    assert [d.index for d in docs] == [0, 1]
    root = docs[0].root
    assert root.at(("metadata", "name")).value == "win10"  # type: ignore[union-attr]
    assert root.at(("metadata", "name")).line == 4  # type: ignore[union-attr]
    hyperv = root.at(("spec", "template", "spec", "domain", "features", "hyperv"))
    assert hyperv is not None and hyperv.key_line == 10 and hyperv.value == {"relaxed": {}, "vapic": {}}
    disk = root.at(("spec", "template", "spec", "domain", "devices", "disks", 0, "disk", "bus"))
    assert disk is not None and disk.value == "sata" and disk.line == 14
    node, depth = root.deepest(("spec", "template", "spec", "domain", "devices", "networkInterfaceMultiqueue"))
    assert depth == 5 and node.key_line == 11  # where the missing field belongs
    assert docs[1].root.value == {"kind": "ConfigMap"}


def test_json_is_read_as_yaml_with_lines() -> None:
    docs = load(b'{\n  "name": "m1.large",\n  "vcpus": 16,\n  "properties": {"hw:cpu_policy": "dedicated"}\n}\n',
                "flavor.json")
    assert docs[0].root.at(("properties", "hw:cpu_policy")).line == 4  # type: ignore[union-attr]
    assert docs[0].root.value["vcpus"] == 16


def _bomb(levels: int) -> bytes:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("data, message", [
    (_bomb(9), f"bomb.yaml:6: more than {NODE_BUDGET:,} YAML nodes (aliases expanded): not read"),
    (b"a: 1\nb: 2\na: 3\n", "bomb.yaml:3: duplicate key (YAML forbids it; which one counts is undefined)"),
    (b"spec:\n\tdomain: {}\n", "bomb.yaml:2: not valid YAML: found character that cannot start any token "
                               "(YAML indents with spaces, never tabs)"),
    (b"name: {{ .Values.name }}\n", "bomb.yaml:1: templated YAML (Helm, Jinja) is not YAML: render it first "
                                    "(helm template …)"),
    (b"{% if x %}\nkind: VirtualMachine\n{% endif %}\n", "bomb.yaml:1: templated YAML (Helm, Jinja) is not YAML: "
                                                        "render it first (helm template …)"),
    (b"kind: VirtualMachine\nname: \xff\xfe\n", "bomb.yaml:2: not UTF-8: YAML and JSON files must be UTF-8"),
    (b"a: " + b"[" * 70 + b"]" * 70 + b"\n", "bomb.yaml:1: nested deeper than 64 levels: not a manifest vmtune reads"),
    (b"a: " + b"[" * 100000 + b"\n", "bomb.yaml:1: not valid YAML: exceeded maximum nesting depth"),
    (b"x: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
     "bomb.yaml:1: a YAML tag vmtune does not read (only YAML's standard types: no !!python/…, no custom tags)"),
    (b"x: !!python/name:os.system x\n",
     "bomb.yaml:1: a YAML tag vmtune does not read (only YAML's standard types: no !!python/…, no custom tags)"),
    (b"when: !!timestamp 2026-13-45\n", "bomb.yaml:1: not a valid YAML value of its type (a date, number or binary "
                                        "that does not parse)"),
    (b"kind: !Ref VirtualMachine\n", "bomb.yaml:1: a YAML tag vmtune does not read (only YAML's standard types: no "
                                     "!!python/…, no custom tags)"),
])
def test_hostile_yaml_is_one_line_with_file_and_line_in_bounded_time(data: bytes, message: str) -> None:
    started = time.process_time()
    with pytest.raises(VmtuneError) as caught:
        load(data, "bomb.yaml")
    assert str(caught.value) == message
    assert time.process_time() - started < 2.0


def test_a_huge_scalar_is_read_once() -> None:
    data = b"userData: " + b"x" * 3_000_000 + b"\n"
    started = time.process_time()
    assert len(load(data, "big.yaml")[0].root.value["userData"]) == 3_000_000
    assert time.process_time() - started < 2.0


def test_aliases_within_the_budget_are_shared_values() -> None:
    docs = load(b"base: &b {cores: 4}\nvm:\n  <<: *b\n  memory: 2Gi\nother: *b\n", "a.yaml")
    assert docs[0].root.value == {"base": {"cores": 4}, "vm": {"cores": 4, "memory": "2Gi"},
                                  "other": {"cores": 4}}
    assert docs[0].root.at(("other",)).key_line == 5  # type: ignore[union-attr]


def test_values_are_typed_as_pyyamls_safe_loader_types_them_however_often_a_text_repeats() -> None:
    """The plain scalars' tags are remembered by text (the loader's resolve): a quoted text, a
    tag written out, or the same text in another file must still come out as PyYAML says."""
    import yaml

    text = (b"a: true\nb: 'true'\nc: 010\nd: \"010\"\ne: !!str true\nf: null\ng: ~\nh: ''\ni: 1.5\nj: yes\n"
            b"k: 2001-12-14\nl: [true, 'true', 010]\n")
    expected = yaml.safe_load(text)
    for _ in range(3):  # the second and third loads answer from what the first remembered
        assert load(text, "x.yaml")[0].root.value == expected
    assert load(b"m: 'on'\nn: on\n", "y.yaml")[0].root.value == {"m": "on", "n": True}


def test_aliases_and_merges_read_the_same_with_or_without_anchors_elsewhere() -> None:
    """Nodes are remembered for aliases only when the text has an anchor ('&'): an alias still
    shares its node, takes the key line of its use, and counts towards NODE_BUDGET."""
    doc = load(b"base: &b {cores: 4}\nvm:\n  <<: *b\n  name: x\nother: *b\n", "a.yaml")[0].root
    assert doc.value == {"base": {"cores": 4}, "vm": {"cores": 4, "name": "x"}, "other": {"cores": 4}}
    assert doc.get("other").key_line == 5 and doc.get("other").line == 1
    plain = load(b"vm:\n  name: x & y\n", "b.yaml")[0].root  # an '&' in a value, no anchor: read as before
    assert plain.at(("vm", "name")).value == "x & y" and plain.at(("vm", "name")).key_line == 2


def test_a_scalar_one_level_too_deep_is_refused_at_its_line() -> None:
    """Scalar values of a mapping are converted inline (not through _convert): the depth bound
    still holds for them, at the same level and line as for any node."""
    from vmtune.stacks.yamldoc import MAX_DEPTH

    def nested(levels: int) -> bytes:
        return ("".join("  " * i + f"k{i}:\n" for i in range(levels)) + "  " * levels + "x: 1\n").encode()

    assert load(nested(MAX_DEPTH - 1), "f.yaml")[0].root.at(tuple(f"k{i}" for i in range(MAX_DEPTH - 1))).value == \
        {"x": 1}
    with pytest.raises(VmtuneError) as caught:
        load(nested(MAX_DEPTH), "f.yaml")
    assert str(caught.value) == \
        f"f.yaml:{MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} levels: not a manifest vmtune reads"
