"""A directory of instancetypes and preferences in kustomize's layout, read as `kustomize build`
would make it, for `--instancetypes DIR` (kubevirt/common-instancetypes' checkout is one): its
objects get their names from `nameSuffix`/`namePrefix` and JSON patches of `/metadata/name`, and
their specs from the strategic-merge patches of components (`preferences/components/hyperv`), so
reading its YAML files one by one finds instancetypes without their patches and no preference.

Pure data reading, no kustomize run: `resources`, `components`, `patches` (a file or inline; a
strategic merge, `$patch: delete`, or JSON 6902 `add`/`replace`/`remove`) selected by `target`
kind and name, `patchesStrategicMerge`, `namePrefix`, `nameSuffix`, and the label, annotation and
namespace fields that change neither a name nor a spec. Anything else that could (generators,
replacements, transformers, remote resources) is an error naming the file and line: the user can
give `kubectl kustomize DIR` output instead. Bounded in files, bytes, depth and time; every path
stays inside DIR (no `..` or symlink leaves it). A strategic merge of these CRDs is kustomize's
without a schema: mappings merge, a list replaces the list, null removes the key.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.stacks.kubevirt.instancetypes import copy_plain
from vmtune.stacks.kubevirt.kustomize import REMOTE, kustomization_in
from vmtune.stacks.yamldoc import load

MAX_FILES = 10000  # file reads (a component is read again by each user): common-instancetypes 7c1e305 makes 2,323
MAX_BYTES = 32 << 20
MAX_FILE = 1 << 20
MAX_DEPTH = 40  # nested kustomizations and components: the layout nests 5 deep
MAX_SECONDS = 10.0
MAX_OBJECTS = 20000
# Fields that change no name and no spec of an instancetype or preference (vmtune keys them by name).
_HARMLESS = frozenset({"apiVersion", "kind", "metadata", "labels", "commonLabels", "commonAnnotations", "namespace",
                       "buildMetadata", "sortOptions"})
_READ = frozenset({"resources", "components", "patches", "patchesStrategicMerge", "nameSuffix", "namePrefix"})


def build(directory: str) -> list[dict[str, Any]]:
    """The objects `kustomize build DIRECTORY` makes, as far as vmtune reads kustomize."""
    builder = _Builder(directory)
    # from its real path: a relative DIRECTORY was joined to itself (`types/types/...`, a traceback)
    return builder.kustomization(builder.root, 0, ())


def _merge(base: Any, patch: Any) -> Any:
    """A strategic merge without a schema (custom resources): mappings merge key by key, null
    deletes the key, anything else (lists too) replaces."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy_plain(patch)
    out = dict(base)
    for key, value in patch.items():
        if key == "$patch":
            continue
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(base.get(key), value)
    return out


class _Builder:
    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self.files = 0
        self.bytes = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    # -- reading, bounded and inside the root --------------------------------------------------------

    def _inside(self, base: str, entry: Any, where: str) -> str:
        if not isinstance(entry, str) or not entry:
            raise VmtuneError(f"{entry!r}: not a path", where)
        if re.search(REMOTE, entry):
            raise VmtuneError(f"{entry}: a remote resource, which vmtune does not fetch; give `kubectl kustomize` "
                              "output to --instancetypes instead", where)
        path = os.path.realpath(os.path.join(base, entry))
        if path != self.root and not path.startswith(self.root + os.sep):
            raise VmtuneError(f"{entry}: outside {self.root}, the directory given to --instancetypes", where)
        return path

    def _read(self, path: str) -> list[Any]:
        if time.monotonic() > self.deadline:
            raise VmtuneError(f"reading its kustomize layout took more than {MAX_SECONDS:g} s", self.root)
        self.files += 1
        size = os.path.getsize(path)
        self.bytes += size
        if self.files > MAX_FILES or self.bytes > MAX_BYTES or size > MAX_FILE:
            raise VmtuneError(f"its kustomize layout is larger than vmtune reads ({MAX_FILES} files, "
                              f"{MAX_BYTES >> 20} MiB, {MAX_FILE >> 20} MiB a file)", path)
        from vmtune.fileio import read_nofollow

        try:  # never blocks (a FIFO would wait for a writer for ever), never a device or a swapped-in link
            data, _identity = read_nofollow(path, MAX_FILE)
        except (OSError, ValueError) as exc:
            raise VmtuneError(f"cannot read it ({getattr(exc, 'strerror', None) or exc})", path) from None
        if len(data) > MAX_FILE:
            raise VmtuneError(f"larger than vmtune reads ({MAX_FILE >> 20} MiB a file)", path)
        return [doc.root.value for doc in load(data, path)]

    def _kustomization(self, directory: str, where: str) -> tuple[str, dict[str, Any]]:
        path = kustomization_in(directory)
        if path is None:
            raise VmtuneError(f"{directory}: no kustomization.yaml there", where)
        docs = self._read(self._inside(self.root, path, where))
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise VmtuneError("not one kustomization mapping", path)
        return path, docs[0]

    # -- kustomize's build ------------------------------------------------------------------------------

    def kustomization(self, directory: str, depth: int, stack: tuple[str, ...], where: str = "") -> list[Any]:
        path, spec = self._kustomization(directory, where or self.root)
        return self._accumulate(directory, path, spec, [], depth, stack)

    def _accumulate(self, directory: str, path: str, spec: dict[str, Any], objects: list[Any], depth: int,
                    stack: tuple[str, ...]) -> list[Any]:
        if depth > MAX_DEPTH or path in stack:
            raise VmtuneError("kustomizations nest too deep or include themselves", path)
        stack = (*stack, path)
        for key in spec:
            if key not in _HARMLESS and key not in _READ:
                raise VmtuneError(f"{key}: a kustomize field vmtune does not read (it could change a name or a "
                                  "spec); give `kubectl kustomize` output to --instancetypes instead", path)
        objects = list(objects)
        for entry in _list(spec, "resources", path):
            target = self._inside(directory, entry, path)
            if os.path.isdir(target):
                objects += self.kustomization(target, depth + 1, stack, path)
            else:
                objects += [copy_plain(d) for d in self._read(target) if isinstance(d, dict)]
            if len(objects) > MAX_OBJECTS:
                raise VmtuneError(f"more than {MAX_OBJECTS} objects", path)
        for entry in _list(spec, "components", path):
            target = self._inside(directory, entry, path)
            component_path, component = self._kustomization(target, path)
            objects = self._accumulate(target, component_path, component, objects, depth + 1, stack)
        for entry in _list(spec, "patchesStrategicMerge", path):
            docs = self._read(self._inside(directory, entry, path)) if isinstance(entry, str) and "\n" not in entry \
                else [d.root.value for d in load(str(entry).encode(), path)]
            for doc in docs:
                objects = _strategic(objects, doc, None)
        for entry in _list(spec, "patches", path):
            objects = self._patch(directory, path, entry, objects)
        prefix, suffix = spec.get("namePrefix") or "", spec.get("nameSuffix") or ""
        if prefix or suffix:
            for obj in objects:
                meta = obj.get("metadata")
                if isinstance(meta, dict) and isinstance(meta.get("name"), str):
                    meta["name"] = f"{prefix}{meta['name']}{suffix}"
        return objects

    def _patch(self, directory: str, path: str, entry: Any, objects: list[Any]) -> list[Any]:
        if not isinstance(entry, dict):
            raise VmtuneError("a patch that is not a mapping", path)
        if isinstance(entry.get("path"), str):
            docs = self._read(self._inside(directory, entry["path"], path))
        elif isinstance(entry.get("patch"), str):
            docs = [d.root.value for d in load(entry["patch"].encode(), path)]
        else:
            raise VmtuneError("a patch with neither path nor patch", path)
        target = entry.get("target") if isinstance(entry.get("target"), dict) else None
        if len(docs) == 1 and isinstance(docs[0], list):  # JSON 6902
            if target is None:
                raise VmtuneError("a JSON patch without a target", path)
            for obj in objects:
                if _selected(obj, target):
                    for op in docs[0]:
                        _json_op(obj, op, path)
            return objects
        for doc in docs:
            if isinstance(doc, dict):
                objects = _strategic(objects, doc, target)
        return objects


def _list(spec: dict[str, Any], key: str, path: str) -> list[Any]:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise VmtuneError(f"{key}: not a list", path)
    return value


def _selected(obj: Any, target: dict[str, Any]) -> bool:
    """kustomize's target selector for what this layout uses: kind, name (exact), group/version."""
    if not isinstance(obj, dict):
        return False
    meta = _meta(obj)
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    checks = (("kind", obj.get("kind")), ("name", meta.get("name")), ("group", group), ("version", version))
    return all(target.get(key) in (None, value) for key, value in checks)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _strategic(objects: list[Any], patch: dict[str, Any], target: dict[str, Any] | None) -> list[Any]:
    """A strategic-merge patch on the objects the target selects (without one: the object of the
    patch's kind and name). The object keeps its kind and name, as kustomize's ApplySmPatch does."""
    if target is None:
        target = {"kind": patch.get("kind"), "name": _meta(patch).get("name")}
    if patch.get("$patch") == "delete":
        return [obj for obj in objects if not _selected(obj, target)]
    out = []
    for obj in objects:
        if _selected(obj, target):
            kind, name = obj.get("kind"), _meta(obj).get("name")
            obj = _merge(obj, patch)
            obj["kind"] = kind
            if name is not None and isinstance(obj.get("metadata"), dict):
                obj["metadata"]["name"] = name
        out.append(obj)
    return out


def _json_op(obj: dict[str, Any], op: Any, path: str) -> None:
    """One JSON 6902 operation: add, replace or remove at a JSON pointer."""
    if not isinstance(op, dict) or op.get("op") not in ("add", "replace", "remove") or \
            not isinstance(op.get("path"), str) or not op["path"].startswith("/"):
        raise VmtuneError(f"a JSON patch operation vmtune does not apply: {op!r}", path)
    keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"][1:].split("/")]
    holder: Any = obj
    for key in keys[:-1]:
        holder = holder[int(key)] if isinstance(holder, list) and key.isdigit() else \
            holder.get(key) if isinstance(holder, dict) else None
        if holder is None:
            raise VmtuneError(f"JSON patch path {op['path']} not found", path)
    last = keys[-1]
    if isinstance(holder, dict):
        if op["op"] == "remove":
            holder.pop(last, None)
        else:
            holder[last] = copy_plain(op.get("value"))
    elif isinstance(holder, list) and (last.isdigit() or last == "-"):
        index = len(holder) if last == "-" else int(last)
        if op["op"] == "remove":
            del holder[index]
        elif op["op"] == "add":
            holder.insert(index, copy_plain(op.get("value")))
        else:
            holder[index] = copy_plain(op.get("value"))
    else:
        raise VmtuneError(f"JSON patch path {op['path']} not found", path)
