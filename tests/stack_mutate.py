"""Seeded mutations of stack sources (KubeVirt manifests, nova flavors/images/tasks, nova.conf)
for the hostile-input fuzz: tests/test_stack_fuzz.py and bench/stack_fuzz.py."""

from __future__ import annotations

import json
import random
from typing import Any

import yaml

# Values a stranger's manifest can hold where vmtune expects something else.
HOSTILE: tuple[Any, ...] = (
    None, [], {}, "", "x", 123, -1, 0, 1e308, -1e308, float("nan"), float("inf"), True, False,
    10**9, 10**30, -(10**9), "99999999Ti", "1Zi", "-5Gi", "0x10", "1e308", "${X}", "${" * 3,
    "a\"b'c<d>&e]]>", "\x1b[31mred", "::error::x", "##[error]x", "--help", "-x", "a; rm -rf /",
    "line\nbreak", "\u202eevil", "é" * 300, "x" * 5000, ["a", 1, None], {"a": None}, [[[]]],
    {"cores": "x"}, [{"name": None}], "u1.medium", "virtio", "e1000", "dedicated", "{{ x }}",
)


def _walk(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            paths.extend(_walk(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths.extend(_walk(child, (*path, index)))
    return paths


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return root


def _structural(docs: list[Any], rng: random.Random) -> list[Any]:
    for _ in range(rng.randint(1, 3)):
        index = rng.randrange(len(docs))
        paths = _walk(docs[index])
        path = rng.choice(paths)
        choice = rng.random()
        if choice < 0.7:
            docs[index] = _set(docs[index], path, rng.choice(HOSTILE))
        elif choice < 0.85 and path:
            parent = docs[index]
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
        else:  # a copy of a subtree somewhere else
            other = rng.choice(paths)
            node = docs[index]
            for step in other:
                node = node[step]
            docs[index] = _set(docs[index], path, json.loads(json.dumps(node, default=str)))
    return docs


def _bytes(data: bytes, rng: random.Random) -> bytes:
    choice = rng.random()
    pos = rng.randrange(len(data) + 1)
    if choice < 0.2:
        return data[:pos] + rng.choice([b"\x00", b"\xff\xfe", b"\t", b"\r", b"&a", b"*a", b"!!python/object:os.system ",
                                        b"{", b"[", b"'", b'"', b"---\n", b"...\n", b"\xef\xbb\xbf", b"#", b": ",
                                        b"<<: *x\n", b"|\n", b">-\n", b"? "]) + data[pos:]
    if choice < 0.35:
        end = min(len(data), pos + rng.randint(1, 40))
        return data[:pos] + data[end:]
    if choice < 0.5:
        line_start = data.rfind(b"\n", 0, pos) + 1
        line_end = data.find(b"\n", pos)
        line_end = len(data) if line_end < 0 else line_end + 1
        return data[:line_end] + data[line_start:line_end] * rng.randint(1, 3) + data[line_end:]
    return data[:pos] + data[pos:][::-1][:0] + data[pos:]


def _ini(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(lines) + 1)
        lines.insert(pos, rng.choice([b"[libvirt]", b"[DEFAULT]", b"cpu_mode = \x00", b"=x", b"[", b"]",
                                      b"rx_queue_size = -1", b"rx_queue_size = 99999999999999999999",
                                      b"\xff\xfe", b"  continued", b"; comment", b"cpu_models = " + b"x," * 2000,
                                      b"hw_machine_type = x86_64=q35,\x1b[31m", b"[libvirt]\n[libvirt]",
                                      b"virt_type = kvm", b"images_type = rbd", b"cpu_mode=custom"]))
    return b"\n".join(lines)


def mutate_stack(data: bytes, name: str, rng: random.Random) -> bytes:
    """One mutation of a stack source: a hostile value in a random field (most of the time), a
    structural change, or broken bytes."""
    if name.endswith(".conf"):
        return _ini(data, rng)
    if rng.random() < 0.75:
        try:
            docs = [doc for doc in yaml.safe_load_all(data) if doc is not None]
        except yaml.YAMLError:
            docs = []
        if docs:
            docs = _structural(docs, rng)
            if name.endswith(".json") and len(docs) == 1:
                return json.dumps(docs[0], indent=2, default=str).encode()
            return yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=rng.random() < 0.5).encode()
    return _bytes(data, rng)
