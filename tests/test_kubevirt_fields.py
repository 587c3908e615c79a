"""vmtune.stacks.kubevirt.fields is KubeVirt's own DomainSpec: the field table agrees with the
swagger definitions of fixtures/stacks/kubevirt/schema/kubevirt-openapi.json (KubeVirt d923fdb);
its walk in C (_fields.c) finds what its walk in Python finds."""

from __future__ import annotations

import copy
import json
import random
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from vmtune.stacks.kubevirt import fields
from vmtune.stacks.kubevirt.fields import DOMAIN, unknown

from conftest import FIXTURES

SCHEMA = FIXTURES / "stacks" / "kubevirt" / "schema" / "kubevirt-openapi.json"


def _tree(definitions: dict[str, Any], ref: str, seen: tuple[str, ...] = ()) -> dict[str, Any] | None:
    definition = definitions[ref]
    if definition.get("type") != "object" or "properties" not in definition or ref in seen:
        return None
    out: dict[str, Any] = {}
    for key, prop in definition["properties"].items():
        target = prop.get("$ref") or (prop.get("items", {}).get("$ref") if prop.get("type") == "array" else None)
        out[key] = _tree(definitions, target.split("/")[-1], (*seen, ref)) if target else None
    return out


def test_the_domain_fields_are_kubevirts_swagger_domain_spec() -> None:
    definitions = json.loads(SCHEMA.read_text())["definitions"]
    assert _tree(definitions, "v1.DomainSpec") == DOMAIN


def test_known_fields_pass_and_a_list_item_is_checked_per_item() -> None:
    domain = {"cpu": {"cores": 2, "dedicatedCpuPlacement": True}, "ioThreadsPolicy": "auto",
              "devices": {"disks": [{"name": "a", "disk": {"bus": "virtio"}},
                                    {"name": "b", "cache": "none", "bogus": 1}],
                          "interfaces": [{"name": "default", "masquerade": {}}]},
              "resources": {"requests": {"memory": "1Gi", "anything/goes": 1}}}
    assert list(unknown(domain)) == [(("devices", "disks", 1, "bogus"), "")]
    assert list(unknown("not a mapping")) == []


# -- the walk in C (vmtune/stacks/kubevirt/_fields.c) against the walk in Python --------------------

def _native() -> Any:
    walk = fields._native_walk()
    if walk is None:
        pytest.skip("the C walk is not built (no compiler at install)")
    return walk


def _python_paths(value: Any) -> list[tuple[str | int, ...]]:
    found: list[tuple[tuple[str | int, ...], str]] = []
    fields._walk(value, DOMAIN, (), found)
    return [path for path, _advice in found]


def _mappings(value: Any) -> Iterator[Any]:
    """Every mapping of a document: each is walked as if it were a VMI's domain, so the walk meets
    real keys at every depth of the field table (and real unknown ones)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


_ODD_KEYS: tuple[Any, ...] = (1, 0, None, True, False, 1.5, "", "bogus", "cores", "devices", "disks", "é")
_ODD_VALUES: tuple[Any, ...] = (None, 1, "x", [], {}, [1, "a", None], [{"bogus": 1}], [[{"name": 1}]],
                                {"bogus": {"deeper": 1}}, {"disks": [{"name": "a", "x": 1}]})


def _mutated(value: Any, rng: random.Random) -> Any:
    value = copy.deepcopy(value)
    for _ in range(rng.randint(1, 4)):
        holders = list(_mappings(value)) or [value]
        holder = rng.choice(holders)
        if isinstance(holder, dict):
            holder[rng.choice(_ODD_KEYS)] = copy.deepcopy(rng.choice(_ODD_VALUES))
    return value


def test_the_c_walk_is_built_where_it_can_be() -> None:
    """Built with the package wherever a C compiler is (scripts/test has one): a build that
    failed silently would leave the Python walk the only one tested, and the C one unchecked."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc: the package is built without the C walk")
    assert fields._native_walk() is not None


def test_the_c_walk_finds_the_paths_the_python_walk_finds() -> None:
    """Every mapping of every YAML document of the fixtures, as written and mutated (keys that are
    not text, unknown keys at every depth, values of every shape): the same paths, in order."""
    native = _native()
    documents = []
    for path in sorted((FIXTURES / "stacks").rglob("*.y*ml")):
        try:
            documents += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError:
            continue  # the hostile fixtures
    candidates = [m for d in documents for m in _mappings(d)]
    assert len(candidates) > 5_000
    rng = random.Random(20261127)
    mutated = [_mutated(rng.choice(candidates), rng) for _ in range(3_000)]
    found = 0
    for value in [*candidates, *mutated, "text", 1, None, [], [{"bogus": 1}, "a", [{"cores": 1, "x": 2}]]]:
        expected = _python_paths(value)
        assert native(value, DOMAIN) == expected, value
        found += bool(expected)
    assert found > 2_000  # the mutations do reach unknown keys


def test_unknown_reads_the_c_walk_with_the_python_walks_advice() -> None:
    _native()
    domain = {"cpu": {"cores": 2, "dedicatedCpuPlacemnt": True}, "devices": {"disks": [{"name": "a", 7: 1}]},
              "ioThreadPolicy": "auto", "hugepages": {}}
    expected: list[tuple[tuple[str | int, ...], str]] = []
    fields._walk(domain, DOMAIN, (), expected)
    assert unknown(domain) == expected
    assert [path for path, _ in expected] == [("cpu", "dedicatedCpuPlacemnt"), ("devices", "disks", 0, "7"),
                                              ("ioThreadPolicy",), ("hugepages",)]
    assert expected[0][1] == "did you mean dedicatedCpuPlacement?"
    assert expected[3][1] == "it is a field of domain.memory.hugepages"


def test_the_c_walk_is_bounded_by_the_recursion_limit_as_the_python_walk_is() -> None:
    """YAML nests at most yamldoc.MAX_DEPTH deep, but the walk takes any value: nesting past the
    interpreter's recursion limit is a RecursionError from both, not a crashed process."""
    native = _native()
    deep: Any = {}
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        native(deep, DOMAIN)
    with pytest.raises(RecursionError):
        _python_paths(deep)
