"""Whether a file is the KubeVirt front end's, by its bytes. Apart from the front end: every
stack source asks each front end, so an OpenStack check would otherwise load KubeVirt's renderer
only to hear no."""

from __future__ import annotations


def wants(data: bytes, name: str) -> bool:
    if b"kubevirt.io" in data or b"harvesterhci.io" in data:
        return True
    if b"\\" not in data:
        return False
    from vmtune.stacks.frontend import unescaped

    text = unescaped(data)  # "kubevirt\x2eio/v1" is kubevirt.io/v1 to kubectl
    return b"kubevirt.io" in text or b"harvesterhci.io" in text
