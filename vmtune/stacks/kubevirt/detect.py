"""Whether a file is the KubeVirt front end's, by its bytes. Apart from the front end: every
stack source asks each front end, so an OpenStack check would otherwise load KubeVirt's renderer
only to hear no."""

from __future__ import annotations

# cluster-api-provider-kubevirt's machine kinds name no kubevirt.io group
_MARKERS = (b"kubevirt.io", b"harvesterhci.io", b"KubevirtMachine",
            b"/spec/template/spec/domain/")  # a JSON 6902 patch of a VM: its build is judged


# a kustomization file: a changed one (pre-commit passes only those) builds the overlays above it
# and a Helm chart's values.yaml and Chart.yaml: a changed one renders its chart again
_KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization", "values.yaml", "Chart.yaml")


def wants(data: bytes, name: str) -> bool:
    if name.replace("\\", "/").rsplit("/", 1)[-1] in _KUSTOMIZATIONS:
        return True
    # bytes.find, not `in` (as openstack's detect: `in` costs a TypeError made and dropped a search)
    for marker in _MARKERS:  # a loop, not any(): a generator made and closed for every file of a run
        if data.find(marker) != -1:
            return True
    if data.find(b"\\") == -1:
        return False
    from vmtune.stacks.frontend import unescaped

    text = unescaped(data)  # "kubevirt\x2eio/v1" is kubevirt.io/v1 to kubectl
    return any(marker in text for marker in _MARKERS)
