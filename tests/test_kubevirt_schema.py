"""tests/kubevirt_schema.py: KubeVirt's OpenAPI definitions accept the oracle's manifests and
refuse a misspelt or mistyped field, naming where it is."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubevirt_schema import ManifestError, validate

KUBEVIRT = Path(__file__).parent.parent / "fixtures" / "stacks" / "kubevirt"
MANIFESTS = sorted((KUBEVIRT / "oracle").glob("*.yaml")) + sorted((KUBEVIRT / "instancetypes").glob("*.yaml"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_oracle_inputs_and_instancetypes_fit_kubevirts_schema(path: Path) -> None:
    for doc in _docs(path):
        validate(doc)


def _windows_vm() -> dict[str, Any]:
    (vm,) = _docs(KUBEVIRT / "oracle" / "derived-vm-windows-clarge-windows-nomem.yaml")
    return vm


def test_a_misspelt_field_under_the_domain_is_refused_with_its_path() -> None:
    vm = _windows_vm()
    vm["spec"]["template"]["spec"]["domain"]["devices"]["networkInterfaceMultiQueue"] = True  # Queue, not queue
    with pytest.raises(ManifestError) as caught:
        validate(vm)
    assert caught.value.path == "spec.template.spec.domain.devices"
    assert "'networkInterfaceMultiQueue' was unexpected" in str(caught.value)


def test_swagger_itself_allows_unknown_fields_but_checks_types() -> None:
    # KubeVirt's swagger.json has no additionalProperties (virt-api's schema check lets unknown
    # fields through; the API server's strict field validation refuses them): strict=False is that.
    vm = _windows_vm()
    vm["spec"]["template"]["spec"]["domain"]["devices"]["networkInterfaceMultiQueue"] = True
    validate(vm, strict=False)
    typo = copy.deepcopy(_windows_vm())
    typo["spec"]["template"]["spec"]["domain"]["devices"]["networkInterfaceMultiqueue"] = "yes"
    with pytest.raises(ManifestError) as caught:
        validate(typo, strict=False)
    assert str(caught.value) == ("spec.template.spec.domain.devices.networkInterfaceMultiqueue: "
                                 "'yes' is not of type 'boolean'")


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ManifestError, match=r"^<root>: unknown apiVersion and kind 'v1 Pod'$"):
        validate({"apiVersion": "v1", "kind": "Pod"})


@pytest.mark.parametrize("path", sorted((KUBEVIRT / "manifests").glob("*.yaml")), ids=lambda p: p.name)
def test_the_virtual_machine_inside_each_template_fits_kubevirts_schema(path: Path) -> None:
    (doc,) = _docs(path)
    if doc["kind"] == "Template":  # OpenShift: ${PARAM}s are strings until `oc process`
        (vm,) = doc["objects"]
    else:  # Harvester VirtualMachineTemplateVersion: spec.vm is a VirtualMachine without its type
        assert doc["kind"] == "VirtualMachineTemplateVersion"
        vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", **doc["spec"]["vm"]}
    validate(vm)
