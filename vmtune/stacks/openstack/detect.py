"""Whether a file is the OpenStack front end's, by its bytes. Apart from the front end: every
stack source asks each front end, so a one-manifest KubeVirt check would otherwise load the
OpenStack renderer and its inputs only to hear no."""

from __future__ import annotations

# At the top, not in wants(): an import statement in a function costs ~8 k instructions each time
# it runs, and every file with a backslash (126 of 1,000 KubeVirt manifests) got there. Loaded
# already whenever wants() is asked (vmtune.stacks.frontend._wants asks it).
from vmtune.stacks.frontend import unescaped

MARKERS = (b"vcpus", b"VCPUs", b"disk_format", b"container_format", b"compute_flavor", b"os_nova_flavor",
           b"openstack.cloud.image", b"os_image")
# The markers without an underscore; every other one has one. A file without "_" (nearly every
# KubeVirt manifest: its keys are camelCase, and every one of a run is asked too) is settled by
# these three and one search for "_" at memchr's speed: 8 searches a file became 4 (~45 k -> ~20 k
# instructions a manifest).
_PLAIN_MARKERS = tuple(marker for marker in MARKERS if b"_" not in marker)
_UNDERSCORED = tuple(marker for marker in MARKERS if b"_" in marker)
_CAPITAL = next(marker for marker in _PLAIN_MARKERS if marker == b"VCPUs")  # the one with a capital U


def looks_like_nova_conf(data: bytes) -> bool:
    return b"[libvirt]" in data or b"[compute]" in data or b"[DEFAULT]" in data


def wants(data: bytes, name: str) -> bool:
    if name.lower().endswith(".conf"):
        return looks_like_nova_conf(data)
    if _marked(data):
        return True
    if data.find(b"\\") == -1:
        return False
    text = unescaped(data)  # a key spelled with escapes ("\x76cpus") is the key to Ansible and json
    return text is not data and _marked(text)  # the same bytes: searched already


def _marked(data: bytes) -> bool:
    # bytes.find, not `in`: `marker in data` first tries the marker as an integer (`65 in data`)
    # and makes and drops a TypeError with its message, ~1.8 k instructions a search, more than
    # searching a manifest; find() takes a bytes argument as it is (~1 k less a search, 5 a manifest)
    for marker in _PLAIN_MARKERS:  # loops, not any(): every KubeVirt manifest of a run is asked too
        # "VCPUs" only in a file with a capital U: memchr finds none in ~7 of 8 KubeVirt manifests
        # (~0.4 k instructions) where the search for the marker takes ~3.4 k
        if (marker is not _CAPITAL or data.find(b"U") != -1) and data.find(marker) != -1:
            return True
    if data.find(b"_") == -1:
        return False
    # 27 of 1,000 manifests (and the unescaped texts of 27) get here; find, not `in` (above)
    return any(data.find(marker) != -1 for marker in _UNDERSCORED)
