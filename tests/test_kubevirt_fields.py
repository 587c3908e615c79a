"""vmtune.stacks.kubevirt.fields is KubeVirt's own DomainSpec: the field table agrees with the
swagger definitions of fixtures/stacks/kubevirt/schema/kubevirt-openapi.json (KubeVirt d923fdb),
and the walk says each unknown key's path, in document order, with its advice."""

from __future__ import annotations

import json
from typing import Any

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


def test_unknown_says_each_slip_with_where_it_belongs_or_its_closest_sibling() -> None:
    domain = {"cpu": {"cores": 2, "dedicatedCpuPlacemnt": True}, "devices": {"disks": [{"name": "a", 7: 1}]},
              "ioThreadPolicy": "auto", "hugepages": {}}
    assert unknown(domain) == [(("cpu", "dedicatedCpuPlacemnt"), "did you mean dedicatedCpuPlacement?"),
                               (("devices", "disks", 0, "7"), ""),
                               (("ioThreadPolicy",), "did you mean ioThreadsPolicy?"),
                               (("hugepages",), "it is a field of domain.memory.hugepages")]
