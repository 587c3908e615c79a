"""The KubeVirt objects in parsed YAML documents: what carries a VMI spec, and the instancetypes
and preferences such a spec may name.

A VMI spec sits at a different depth in each kind (a VirtualMachine's `spec.template.spec`, a
pool's `spec.virtualMachineTemplate.spec.template.spec`, …) and inside containers (`kind: List`
items, an OpenShift Template's `objects`). Each object found keeps the path of its VMI spec from
its document's root, so a finding can be placed on the source line and a fix written there.
Other kinds are not KubeVirt's business and are skipped without a word.

Pure: plain values in (yaml.safe_load or yamldoc's `Node.value`), plain values out.
"""

from __future__ import annotations

import re
from typing import Any

Path = tuple[str | int, ...]

# kind -> keys from the object to its VMI spec
VMI_PATHS: dict[str, tuple[str, ...]] = {
    "VirtualMachine": ("spec", "template", "spec"),
    "VirtualMachineInstance": ("spec",),
    "VirtualMachinePool": ("spec", "virtualMachineTemplate", "spec", "template", "spec"),
    "VirtualMachineInstanceReplicaSet": ("spec", "template", "spec"),
    "VirtualMachineTemplateVersion": ("spec", "vm", "spec", "template", "spec"),  # Harvester
    # cluster-api-provider-kubevirt (infrastructure.cluster.x-k8s.io): the VM each machine runs,
    # `virtualMachineTemplate` holding a VirtualMachine's metadata and spec (api/v1alpha1)
    "KubevirtMachineTemplate": ("spec", "template", "spec", "virtualMachineTemplate", "spec", "template", "spec"),
    "KubevirtMachine": ("spec", "virtualMachineTemplate", "spec", "template", "spec"),
}
# kind -> where the object names its instancetype and preference (a VM's spec; a pool's VM template)
REF_PATHS: dict[str, tuple[str, ...]] = {
    "VirtualMachine": ("spec",),
    "VirtualMachinePool": ("spec", "virtualMachineTemplate", "spec"),
    "VirtualMachineTemplateVersion": ("spec", "vm", "spec"),
    "KubevirtMachineTemplate": ("spec", "template", "spec", "virtualMachineTemplate", "spec"),
    "KubevirtMachine": ("spec", "virtualMachineTemplate", "spec"),
}
INSTANCETYPE_KINDS = frozenset({"VirtualMachineInstancetype", "VirtualMachineClusterInstancetype"})
PREFERENCE_KINDS = frozenset({"VirtualMachinePreference", "VirtualMachineClusterPreference"})
KUBEVIRT_GROUPS = ("kubevirt.io/", "pool.kubevirt.io/", "instancetype.kubevirt.io/", "harvesterhci.io/")
CAPI_GROUP = "infrastructure.cluster.x-k8s.io/"  # only its KubeVirt machine kinds (VMI_PATHS) are read


class Ref:
    """An instancetype or preference a VM names (`spec.instancetype: {kind, name}`)."""

    __slots__ = ("cluster", "line_path", "name")

    def __init__(self, name: str, cluster: bool, line_path: Path) -> None:
        self.name = name
        self.cluster = cluster  # a VirtualMachineCluster*: looked up among cluster-wide objects first
        self.line_path = line_path  # from the document root, for the line of the reference

    def __repr__(self) -> str:
        return f"Ref({self.name!r}, cluster={self.cluster})"


class VmiObject:
    """One object that carries a VMI spec."""

    __slots__ = ("doc", "instancetype", "kind", "name", "namespace", "notes", "obj_path", "os_hint", "preference",
                 "spec", "spec_path")

    def __init__(self, kind: str, name: str, namespace: str | None, doc: int, obj_path: Path, spec_path: Path,
                 spec: dict[str, Any], instancetype: Ref | None, preference: Ref | None,
                 notes: tuple[tuple[str, Path, str], ...] = (), os_hint: str | None = None) -> None:
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.doc = doc  # document index in its file
        self.obj_path = obj_path  # the object within its document: () or ("items", 3) or ("objects", 0)
        self.spec_path = spec_path  # the VMI spec from the document's root
        self.spec = spec
        self.instancetype = instancetype
        self.preference = preference
        self.notes = notes  # (STK code, path from the document root, message)
        self.os_hint = os_hint  # the OS its labels, annotations or template name state (a libosinfo short id)

    def __repr__(self) -> str:
        return f"VmiObject({self.kind}/{self.name}, doc={self.doc}, spec_path={self.spec_path})"


class Spec:
    """An instancetype or preference: its kind, name and spec."""

    __slots__ = ("doc", "kind", "name", "obj_path", "spec")

    def __init__(self, kind: str, name: str, doc: int, obj_path: Path, spec: dict[str, Any]) -> None:
        self.kind = kind
        self.name = name
        self.doc = doc
        self.obj_path = obj_path
        self.spec = spec

    @property
    def cluster(self) -> bool:
        return "Cluster" in self.kind


class Found:
    """What one file holds."""

    __slots__ = ("instancetypes", "preferences", "vmis")

    def __init__(self) -> None:
        self.vmis: list[VmiObject] = []
        self.instancetypes: list[Spec] = []
        self.preferences: list[Spec] = []

    def __bool__(self) -> bool:
        return bool(self.vmis or self.instancetypes or self.preferences)


def is_kubevirt(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    api = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return False
    return api.startswith(KUBEVIRT_GROUPS) or (api.startswith(CAPI_GROUP) and kind in VMI_PATHS)


def find(docs: list[Any]) -> Found:
    """Every KubeVirt object in a file's documents (each a plain value: a document's root)."""
    found = Found()
    budget = [MAX_EXPANSION]  # the file's, shared by its Templates (see MAX_EXPANSION)
    for index, root in enumerate(docs):
        _visit(root, index, (), found, {}, (), budget)
    return found


ParamNote = tuple[str, str, Path, str]  # (parameter, STK code, where, message)


# What OpenShift's common templates (kubevirt/common-templates) write about the guest OS: a label
# `os.template.kubevirt.io/<libosinfo short id>: "true"` on the template and its VM, the annotation
# `vm.kubevirt.io/os` on the VM template (`rhel9`, `windows10`, `win2k22`), the label
# `vm.kubevirt.io/template` naming the template (`rhel9-server-small`, `windows10-desktop-medium`).
_OS_LABEL = "os.template.kubevirt.io/"
_TEMPLATE_KINDS = ("-server-", "-desktop-", "-highperformance-", "-saphana-")
MAX_HINT = 64  # a label or name longer than this names no OS


def _os_hints(obj: Any) -> list[str]:
    """The OS short ids an object's metadata (and its VM template's) state, most specific first."""
    # Loops, not comprehensions, and nothing made for a metadata without labels or annotations:
    # every KubeVirt object of every file is asked (~22 -> ~10 k instructions a manifest)
    hints: list[str] = []
    if not isinstance(obj, dict):
        return hints
    # _get(obj, ("metadata",)) and _get(obj, ("spec", "template", "metadata")) written out
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    metas = [obj.get("metadata"), template.get("metadata") if isinstance(template, dict) else None]
    kind = obj.get("kind")
    vm_at = REF_PATHS.get(kind) if isinstance(kind, str) else None  # REF_PATHS names kinds: str(kind) finds no other
    if vm_at is not None and vm_at != ("spec",):  # a VM inside the object: its metadata and its VMI template's
        metas += [_get(obj, (*vm_at[:-1], "metadata")), _get(obj, (*vm_at, "template", "metadata"))]
    for meta in metas:
        if not isinstance(meta, dict):
            continue
        labels = meta.get("labels")
        annotations = meta.get("annotations")
        if not isinstance(labels, dict):
            labels = _NONE
        if not isinstance(annotations, dict):
            annotations = _NONE
        if not labels and not annotations:
            continue
        for k, v in labels.items():
            key = str(k)
            if key.startswith(_OS_LABEL) and str(v).lower() == "true":
                hints.append(key[len(_OS_LABEL):])
        for value in (annotations.get("vm.kubevirt.io/os"), labels.get("vm.kubevirt.io/os")):
            if isinstance(value, str):
                hints.append(value)
        template = labels.get("vm.kubevirt.io/template")
        if isinstance(template, str):
            hints.append(_template_os(template))
    if not hints:
        return hints
    return [h for h in hints if h and len(h) <= MAX_HINT]


_NO_PARAMS: frozenset[str] = frozenset()
_NONE: dict[Any, Any] = {}  # a metadata's labels or annotations where it has none (never written to)


def _template_os(name: str) -> str:
    """The OS part of a common template's name: `centos-stream9-server-small` -> `centos-stream9`."""
    for kind in _TEMPLATE_KINDS:
        if kind in name:
            return name.split(kind, 1)[0]
    return ""


def _visit(obj: Any, doc: int, path: Path, found: Found, params: dict[str, str],
           param_notes: tuple[ParamNote, ...], budget: list[int], inherited: tuple[str, ...] = ()) -> None:
    if not isinstance(obj, dict):
        return
    # the parameters its apiVersion and kind take (said as assumed, as others); a set only in a Template
    typed_by: set[str] | frozenset[str] = _NO_PARAMS
    if params and any(isinstance(obj.get(key), str) and "${" in obj[key] for key in ("apiVersion", "kind")):
        # A Template's object may take its apiVersion or kind from a parameter: `oc process` makes
        # it a VirtualMachine, which was skipped unread (a pull request's VM the hook never saw).
        typed_by = _used_params([obj.get("apiVersion"), obj.get("kind")])
        obj = {**obj, **{key: _resolve(obj[key], params) for key in ("apiVersion", "kind")
                         if isinstance(obj.get(key), str)}}
    kind = obj.get("kind")
    if kind == "List" and isinstance(obj.get("items"), list):
        for i, item in enumerate(obj["items"]):
            _visit(item, doc, (*path, "items", i), found, params, param_notes, budget)
        return
    if kind == "Template" and isinstance(obj.get("objects"), list) and str(obj.get("apiVersion", "")).startswith(
            ("template.openshift.io/", "v1")):
        values, notes = _template_params(obj, doc, path, budget)
        template_name = _get(obj, ("metadata", "name"))
        hints = (*_os_hints(obj), _template_os(template_name) if isinstance(template_name, str) else "")
        for i, item in enumerate(obj["objects"]):
            _visit(item, doc, (*path, "objects", i), found, values, notes, budget, tuple(h for h in hints if h))
        return
    if not is_kubevirt(obj):
        return
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "(unnamed)"
    name = name if isinstance(name, str) else str(name)  # `name: 123` is a YAML int (the API refuses it)
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    if kind in INSTANCETYPE_KINDS or kind in PREFERENCE_KINDS:
        it_spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
        resolved = _resolve(it_spec, params) if params else it_spec
        target = found.instancetypes if kind in INSTANCETYPE_KINDS else found.preferences
        target.append(Spec(kind, str(_resolve(name, params) if params else name), doc, path, resolved))
        return
    keys = VMI_PATHS.get(str(kind))
    if keys is None:
        return
    spec = _get(obj, keys)
    if not isinstance(spec, dict):
        return
    vmi_notes: list[tuple[str, Path, str]] = []
    if params:
        used = _used_params(spec) | _used_params(_get(obj, REF_PATHS.get(str(kind), ("spec",))) or {}) | \
            _used_params(name) | typed_by
        vmi_notes += [(code, where, message) for name, code, where, message in param_notes if name in used]
        spec = _resolve(spec, params)
        name = _resolve(name, params)
    refs_at = REF_PATHS.get(str(kind))
    instancetype = preference = None
    if refs_at is not None:
        holder = _get(obj, refs_at)
        if isinstance(holder, dict):
            # Only the two references: a VirtualMachine's holder is its whole spec, template included,
            # whose parameters were resolved (and spent from the budget) above already.
            named, preferred = holder.get("instancetype"), holder.get("preference")
            if params:  # in this order: each spends from the Template's budget
                named, preferred = _resolve(named, params), _resolve(preferred, params)
            # the paths made only for a reference written (most VMs name none)
            instancetype = _ref(named, (*path, *refs_at, "instancetype")) if isinstance(named, dict) else None
            preference = _ref(preferred, (*path, *refs_at, "preference")) if isinstance(preferred, dict) else None
    stated = _os_hints(obj)
    os_hint = next((h for h in (*stated, *inherited) if "${" not in h), None) if stated or inherited else None
    found.vmis.append(VmiObject(str(kind), str(name), namespace, doc, path, (*path, *keys), spec, instancetype,
                                preference, tuple(vmi_notes), os_hint))


def _get(obj: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _ref(value: Any, line_path: Path) -> Ref | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    kind = value.get("kind")
    cluster = not isinstance(kind, str) or "Cluster" in kind or kind.lower().startswith("virtualmachinecluster")
    return Ref(value["name"], cluster, line_path)


# -- OpenShift Template parameters -------------------------------------------------------------------

_PARAM = re.compile(r"\$\{\{?([A-Za-z0-9_]+)\}?\}")


# The most text `${P}` substitutions may add to one file's Templates together (as much as a file
# vmtune reads): a 200 KB default used 20,000 times in a 100 KB Template was 4 GB and minutes
# before it was refused. Per file, not per Template: 600 Templates of 6 KB, each expanding to
# 1.8 MB, made a 3.5 MB file take 1.1 GB.
MAX_EXPANSION = 4 * 1024 * 1024


class TemplateTooLarge(ValueError):
    """A Template whose parameters expand past MAX_EXPANSION; `path` is the Template's."""

    def __init__(self, doc: int, path: Path, others: bool = False) -> None:
        together = " with the file's other Templates" if others else ""
        super().__init__(f"its parameters expand to more than {MAX_EXPANSION // (1024 * 1024)} MiB of text{together}: "
                         "process it first (oc process)")
        self.doc = doc
        self.path = path


class _Params(dict[str, str]):
    """Parameter values with what is left of the Template's expansion budget."""

    def __init__(self, doc: int, path: Path, budget: list[int]) -> None:
        super().__init__()
        self.doc = doc
        self.path = path
        self.budget = budget  # what is left of the file's MAX_EXPANSION, shared by its Templates
        self.before = budget[0]  # left when this Template began: less than MAX_EXPANSION after others

    def spend(self, text: str) -> str:
        self.budget[0] -= len(text)
        if self.budget[0] < 0:
            raise TemplateTooLarge(self.doc, self.path, self.before < MAX_EXPANSION)
        return text


def _template_params(template: dict[str, Any], doc: int, path: Path, budget: list[int]
                     ) -> tuple[dict[str, str], tuple[ParamNote, ...]]:
    """The parameters' defaults, and a note for each: assumed (STK002) or unresolved (STK001)."""
    values = _Params(doc, path, budget)
    notes: list[ParamNote] = []
    params = template.get("parameters")
    for i, param in enumerate(params if isinstance(params, list) else []):
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            continue
        name = param["name"]
        where = (*path, "parameters", i)
        if "value" in param and param["value"] is not None:
            values[name] = str(param["value"])
            notes.append((name, "STK002", where, f"template parameter '{name}' taken as its default {values[name]!r}"))
        else:
            how = "generated" if param.get("generate") else "given when the template is processed"
            notes.append((name, "STK001", where, f"template parameter '{name}' has no default ({how}): unresolved "
                                            "parameter, its fields are checked as written"))
    return values, tuple(notes)


def _used_params(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_PARAM.findall(value))
    if isinstance(value, dict):
        return set().union(*(_used_params(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_used_params(v) for v in value)) if value else set()
    return set()


def _resolve(value: Any, params: dict[str, str]) -> Any:
    """`${P}` replaced by the default's text; `${{P}}` (and a whole-value `${P}`) by its YAML value,
    as `oc process` does, so `cores: ${{CPU}}` becomes a number."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        whole = _PARAM.fullmatch(value)
        if whole and whole.group(1) in params and value.startswith("${{"):
            text = params[whole.group(1)]
            return _typed(params.spend(text) if isinstance(params, _Params) else text)
        if isinstance(params, _Params):
            return _PARAM.sub(lambda m: params.spend(params.get(m.group(1), m.group(0))), value)
        return _PARAM.sub(lambda m: params.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _resolve(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, params) for v in value]
    return value


def _typed(text: str) -> Any:
    """A `${{P}}` value as YAML, read by the bounded loader the file itself went through: a
    parameter `&a [*b, *b, ...]` of nested aliases (a billion laughs) is refused there, not
    expanded by the copies and walks that follow; what it refuses stays text."""
    from vmtune.errors import VmtuneError
    from vmtune.stacks.yamldoc import load

    try:
        docs = load(text.encode(), "parameter")
    except VmtuneError:
        return text
    if len(docs) > 1:
        return text
    return docs[0].root.value if docs else None
