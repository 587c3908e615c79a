"""Whether a file is the OpenStack front end's, by its bytes. Apart from the front end: every
stack source asks each front end, so a one-manifest KubeVirt check would otherwise load the
OpenStack renderer and its inputs only to hear no."""

from __future__ import annotations

MARKERS = (b"vcpus", b"VCPUs", b"disk_format", b"container_format", b"compute_flavor", b"os_nova_flavor",
           b"openstack.cloud.image", b"os_image")


def looks_like_nova_conf(data: bytes) -> bool:
    return b"[libvirt]" in data or b"[compute]" in data or b"[DEFAULT]" in data


def wants(data: bytes, name: str) -> bool:
    if name.lower().endswith(".conf"):
        return looks_like_nova_conf(data)
    for marker in MARKERS:  # a loop, not any(): every KubeVirt manifest of a run is asked too
        if marker in data:
            return True
    if b"\\" not in data:
        return False
    from vmtune.stacks.frontend import unescaped

    text = unescaped(data)  # a key spelled with escapes ("\x76cpus") is the key to Ansible and json
    return any(marker in text for marker in MARKERS)
