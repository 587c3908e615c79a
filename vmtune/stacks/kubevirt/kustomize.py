"""KubeVirt manifests that belong to a kustomization: judged as `kustomize build` makes them.

An overlay's patch is not a VM (its NIC model may patch a base whose NIC is e1000): a checked
file that a kustomization lists (resources, patches, components...), or a kustomization file
itself, is not rendered alone. The *leaves* above it are built instead: the kustomizations of
its work tree that no other kustomization references, reached from the file's own kustomization
through the kustomizations that reference it (an overlay's `resources: [../../base]`). A base no
overlay references is a leaf itself. Each VirtualMachine a leaf builds is rendered and checked;
its findings are placed on the file that writes the value (ownership: the last writer wins —
a patch that sets the path, else the resource), and a field no file sets goes into the leaf's
own patch of that VM when there is one, else into the resource (docs/stacks.md).

The tree is untrusted (pre-commit on strangers' pull requests): the build runs on a copy of the
files the kustomizations name, each checked to be a regular file inside the work tree (a path
through a symlink that leaves it is refused), in a temporary directory, with the real tool
(`kustomize build`, else `kubectl kustomize`) and never a plugin, exec, Helm or remote flag, with
a scrubbed environment (HOME and XDG in the temporary directory, an empty PATH, proxies pointing
nowhere), stdin closed, a time limit and an output cap. A kustomization that asks for a program
(generators, transformers, validators, helmCharts), a remote base or a file outside the tree is
refused: one line at its line, nothing run.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.programs import find_program
from vmtune.stacks.kubevirt.lookup import MAX_FILE, MAX_READ, Walk, shown_name

NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
TIMEOUT = 10.0  # seconds one build may take
OUTPUT_CAP = 16 * 1024 * 1024  # bytes of built YAML read
MAX_RUNS = 100  # builds and chart renderings one vmtune run makes (each may take TIMEOUT)
RUNS_SECONDS = 120.0  # and the time they may take together: a tree of 10,000 overlays of a base is not hours
MAX_KUSTOMIZATIONS = 2000  # kustomizations read for one build, counting each time one is included
# fields that run programs or need flags vmtune never passes (plugins, KRM functions, Helm)
_PROGRAMS = ("generators", "transformers", "validators", "helmCharts", "helmGlobals", "helmChartInflationGenerator")
# The expressions of this module are compiled by re at their first use (re.search(REMOTE, ...)), not
# at import: a manifest check that builds no kustomization never uses them (~2.6 M instructions).
REMOTE = (r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|git::|git@|[^/\s]*github\.com[/:]|[^/\s]*gitlab\.com/|"
          r"[^/\s]*bitbucket\.org/)|\?(?:ref|version|timeout|submodules)=")
Path = tuple[str | int, ...]
# The kustomization's fields vmtune reads, at the top and in the entries of a list of them. kustomize
# decodes a kustomization with Go's encoding/json, which matches a key to a field regardless of
# case (and folds 'ſ' to 's', the Kelvin sign to 'k'): `Resources:` or `reſources:` is its
# `resources`, and a key spelled so would be built unseen by the pre-scan.
_FIELDS = ("resources", "bases", "components", "patchesStrategicMerge", "patches", "patchesJson6902",
           "namePrefix", "nameSuffix", "openapi", "crds", "configurations", "replacements", "configMapGenerator",
           "secretGenerator", *_PROGRAMS)
_ENTRY_FIELDS = ("path", "patch", "target", "files", "envs", "env", "kind", "name", "labelSelector",
                 "annotationSelector", "group", "version")
_FOLDED = {name.casefold(): name for name in _FIELDS}
_ENTRY_FOLDED = {name.casefold(): name for name in _ENTRY_FIELDS}


def is_kustomization(name: str) -> bool:
    return os.path.basename(name) in NAMES


def kustomization_in(directory: str) -> str | None:
    """The kustomization file of a directory (kustomize's own order of names), never a symlink."""
    for name in NAMES:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and not os.path.islink(path):
            return path
    return None


def _fail(message: str, source: str, line: int | None) -> VmtuneError:
    return VmtuneError(f"kustomize: {message}", shown_name(source), line)


def _read(path: str, top: str) -> bytes:
    """A file of the tree: a regular file whose real path is inside `top`, at most MAX_FILE bytes."""
    return _read_identified(path, top)[0]


def _read_identified(path: str, top: str) -> tuple[bytes, Any]:
    """_read's bytes and the file's identity (vmtune.fileio): a fix written into it later goes only
    into the directory and file that were read, never where a symlink swapped in meanwhile leads."""
    from vmtune.fileio import read_nofollow

    real = os.path.realpath(path)
    if not _inside(real, top):
        raise OSError("it resolves outside the work tree")
    try:
        data, identity = read_nofollow(real, MAX_FILE)
    except ValueError:
        raise OSError("not a regular file") from None
    if len(data) > MAX_FILE:
        raise OSError(f"larger than {MAX_FILE // 1024} KiB")
    return data, identity


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


class Writer:
    """A document that writes an object of the build: its resource, a strategic-merge patch, or a
    JSON 6902 patch (`ops`: each operation's path and line), in the file `name` (shown name)."""

    __slots__ = ("doc", "kind", "level", "line", "name", "node", "ops", "path")

    def __init__(self, kind: str, path: str, doc: int, node: Any, level: str, line: int = 1,
                 ops: list[tuple[Path, int]] | None = None) -> None:
        self.kind = kind  # "resource", "smp", "json6902", "inline" (a patch written in the kustomization)
        self.path = path  # absolute
        self.name = shown_name(path)
        self.doc = doc
        self.node = node  # the document's root (vmtune.stacks.yamldoc.Node)
        self.level = level  # the kustomization file whose list names it
        self.line = line
        self.ops = ops or []


class Obj:
    """One object through the kustomizations: its kind, names, and its writers in build order."""

    __slots__ = ("kind", "name", "names", "uncertain", "writers")

    def __init__(self, kind: str, name: str, writer: Writer) -> None:
        self.kind = kind
        self.name = name
        self.names = {name}
        self.writers = [writer]
        self.uncertain: str | None = None  # why its ownership cannot be told (fixes withheld)


class Build:
    """One leaf kustomization: its file, every file its build reads (absolute path -> bytes), the
    objects through it, and (once built) the YAML the tool wrote."""

    def __init__(self, leaf: str, top: str) -> None:
        self.leaf = leaf  # the kustomization file
        self.top = top
        self.files: dict[str, bytes] = {}
        self.identities: dict[str, Any] = {}  # absolute path -> its identity when read (fileio.FileIdentity)
        self.objects: list[Obj] = []
        self.output = b""
        self.included = 0  # kustomizations read so far, a shared component once per inclusion


# -- reading a kustomization and the files it names --------------------------------------------------

def _entries(node: Any, key: str) -> list[Any]:
    child = node.get(key) if node is not None else None
    if child is None or child.value is None:
        return []
    if not isinstance(child.children, list):
        return [child]
    return list(child.children)


def _local(node: Any, base: str, top: str, kust: str, what: str) -> str:
    """The absolute path a kustomization's string names, refused unless a file or directory of the
    work tree (never remote, never outside, never through a symlink that leaves it)."""
    text = node.value
    if not isinstance(text, str) or not text.strip():
        raise _fail(f"{what} is not a path", kust, node.line)
    if "=" in text and what == "generator file":  # `key=path`
        text = text.split("=", 1)[1]
    if re.search(REMOTE, text):
        raise _fail(f"{what} {text[:200]!r} is remote: vmtune builds only what the work tree holds (no fetch)",
                    kust, node.line)
    if os.path.isabs(text):
        raise _fail(f"{what} {text[:200]!r} is an absolute path: outside the work tree", kust, node.line)
    path = os.path.normpath(os.path.join(base, text))
    if not _inside(path, top) or not _inside(os.path.realpath(path), os.path.realpath(top)):
        raise _fail(f"{what} {text[:200]!r} resolves outside the work tree", kust, node.line)
    if not os.path.exists(path):
        raise _fail(f"{what} {text[:200]!r} is not in the work tree (kustomize would try it as a remote URL)",
                    kust, node.line)
    return path


# (path, size, hash of the bytes) -> its documents: a component included from many places (up to
# MAX_KUSTOMIZATIONS times a build) and a base every overlay builds were parsed at each inclusion;
# 50 inclusions of a 1 MiB component took 25 s of the pre-scan, 2,000 would take 17 minutes
_PARSED: dict[tuple[str, int, int], list[Any]] = {}
_PARSED_KEPT = 4096


def _docs(data: bytes, path: str) -> list[Any]:
    from vmtune.stacks.yamldoc import load

    key = (path, len(data), hash(data))
    docs = _PARSED.get(key)
    if docs is None:
        docs = load(data, shown_name(path))
        if len(_PARSED) >= _PARSED_KEPT:
            _PARSED.clear()
        _PARSED[key] = docs
    return docs


def _collect(build: Build, directory: str, objects: list[Obj], data_of: dict[str, bytes],
             above: frozenset[str] = frozenset()) -> list[Obj]:
    """The objects of the kustomization in `directory` laid over `objects` (a component's patches
    apply to what its parent has), reading and checking every file it names into build.files.
    `above`: the kustomizations that include this one (a cycle); the same component included from
    two places is no cycle (common-instancetypes' layout does it throughout)."""
    kust = kustomization_in(directory)
    top = build.top
    if kust is None:
        raise _fail("names a directory that holds no kustomization file", directory, None)
    if kust in above:
        raise _fail("kustomizations include each other in a cycle", kust, None)
    build.included += 1
    if build.included > MAX_KUSTOMIZATIONS:
        raise _fail(f"more than {MAX_KUSTOMIZATIONS:,} kustomizations are included in one build", kust, None)
    above = above | {kust}
    root = _load_one(build, kust, data_of)
    for field in _PROGRAMS:
        node = root.get(field)
        if node is not None and node.value not in (None, [], {}):
            raise _fail(f"{field} runs plugins, KRM functions or Helm: vmtune never builds it (no program a checked "
                        "tree names is run)", kust, node.key_line)
    for field in ("openapi", "crds", "configurations", "replacements", "configMapGenerator", "secretGenerator"):
        _check_paths(build, root, field, directory, kust, data_of)
    objs = list(objects)
    for field in ("resources", "bases"):
        for entry in _entries(root, field):
            path = _local(entry, directory, top, kust, "resource")
            if os.path.isdir(path):
                objs += _collect(build, path, [], data_of, above)
            else:
                objs += _resources(build, path, data_of, kust)
    for entry in _entries(root, "components"):
        path = _local(entry, directory, top, kust, "component")
        if not os.path.isdir(path):
            raise _fail("a component must be a directory", kust, entry.line)
        objs = _collect(build, path, objs, data_of, above)
    for entry in _entries(root, "patchesStrategicMerge"):
        if isinstance(entry.value, str) and "\n" not in entry.value and ":" not in entry.value:
            _patch_file(build, _local(entry, directory, top, kust, "patch"), objs, None, kust, data_of)
        else:
            _inline(entry, objs, None, kust)
    for entry in _entries(root, "patches"):
        target = entry.get("target")
        if entry.get("path") is not None:
            _patch_file(build, _local(entry.get("path"), directory, top, kust, "patch"), objs, target, kust, data_of)
        elif entry.get("patch") is not None:
            _inline(entry.get("patch"), objs, target, kust)
    for entry in _entries(root, "patchesJson6902"):
        if entry.get("path") is not None:
            _patch_file(build, _local(entry.get("path"), directory, top, kust, "patch"), objs, entry.get("target"),
                        kust, data_of)
        elif entry.get("patch") is not None:
            _inline(entry.get("patch"), objs, entry.get("target"), kust)
    prefix, suffix = (_text(root.get(k)) for k in ("namePrefix", "nameSuffix"))
    if prefix or suffix:
        for obj in objs[len(objects):] if objects else objs:
            obj.name = f"{prefix}{obj.name}{suffix}"
            obj.names.add(obj.name)
    return objs


def _text(node: Any) -> str:
    return node.value if node is not None and isinstance(node.value, str) else ""


def _load_one(build: Build, path: str, data_of: dict[str, bytes]) -> Any:
    data = data_of.get(path)
    try:
        if data is None:
            data, build.identities[path] = _read_identified(path, os.path.realpath(build.top))
    except OSError as exc:
        raise _fail(f"cannot read it ({exc.strerror or exc})", path, None) from None
    build.files[path] = data
    docs = _docs(data, path)
    root = docs[0].root if docs else None
    if root is None or not isinstance(root.children, dict):
        raise _fail("not a kustomization (no mapping)", path, 1)
    _spelled(root, _FOLDED, path)
    for field in ("patches", "patchesJson6902", "replacements", "configMapGenerator", "secretGenerator"):
        for entry in _entries(root, field):
            _spelled(entry, _ENTRY_FOLDED, path)
            target = entry.get("target") if isinstance(entry.children, dict) else None
            if target is not None:
                _spelled(target, _ENTRY_FOLDED, path)
    return root


def _spelled(node: Any, folded: dict[str, str], path: str) -> None:
    """Refuses a key kustomize would take for a field vmtune reads but spelled otherwise (another
    case): the pre-scan would not see what the build does."""
    if not isinstance(node.children, dict):
        return
    for key, child in node.children.items():
        name = folded.get(key.casefold()) if isinstance(key, str) else None
        if name is not None and name != key:
            raise _fail(f"{key[:100]!r} is {name!r} to kustomize (it ignores case): spell it {name!r}", path,
                        child.key_line)


def _check_paths(build: Build, root: Any, field: str, directory: str, kust: str, data_of: dict[str, bytes]) -> None:
    """The files a kustomization's other fields name, each checked and copied (openapi's path,
    crds, configurations, replacements, the generators' files and envs)."""
    node = root.get(field)
    if node is None or node.value is None:
        return
    found: list[tuple[Any, str]] = []
    if field == "openapi":
        if node.get("path") is not None:
            found.append((node.get("path"), "openapi file"))
    elif field in ("crds", "configurations"):
        found += [(e, f"{field} file") for e in _entries(root, field)]
    elif field == "replacements":
        found += [(e.get("path"), "replacements file") for e in _entries(root, field) if e.get("path") is not None]
    else:
        for generator in _entries(root, field):
            for key in ("files", "envs"):
                found += [(e, "generator file") for e in _entries(generator, key)]
            if generator.get("env") is not None:
                found.append((generator.get("env"), "generator file"))
    for entry, what in found:
        path = _local(entry, directory, build.top, kust, what)
        if os.path.isdir(path):
            raise _fail(f"{what} is a directory", kust, entry.line)
        _load_bytes(build, path, data_of, kust, entry.line)


def _load_bytes(build: Build, path: str, data_of: dict[str, bytes], kust: str, line: int) -> bytes:
    data = data_of.get(path)
    if data is None:
        try:
            data, build.identities[path] = _read_identified(path, os.path.realpath(build.top))
        except OSError as exc:
            raise _fail(f"cannot read {shown_name(path)} ({exc.strerror or exc})", kust, line) from None
    build.files[path] = data
    if sum(len(d) for d in build.files.values()) > MAX_READ:
        raise _fail(f"its build reads more than {MAX_READ // (1024 * 1024)} MiB", kust, line)
    return data


def _resources(build: Build, path: str, data_of: dict[str, bytes], kust: str) -> list[Obj]:
    data = _load_bytes(build, path, data_of, kust, 1)
    objs = []
    for doc in _docs(data, path):
        kind, name = _identity(doc.root)
        if kind:
            objs.append(Obj(kind, name, Writer("resource", path, doc.index, doc.root, kust, doc.root.line)))
    return objs


def _identity(node: Any) -> tuple[str, str]:
    if node is None or not isinstance(node.children, dict):
        return "", ""
    return _text(node.get("kind")), _text(node.at(("metadata", "name")))


def _targets(objs: list[Obj], kind: str, name: str, target: Any) -> list[Obj]:
    """The objects a patch applies to: its target's kind and name, else the patch's own."""
    uncertain = None
    if target is not None:
        kind = _text(target.get("kind")) or ""
        name = _text(target.get("name")) or ""
        if any(target.get(k) is not None for k in ("labelSelector", "annotationSelector", "group", "version")):
            uncertain = "a patch of it selects its targets by labels, annotations or API version"
    hits = []
    for obj in objs:
        if kind and obj.kind != kind:
            continue
        why = uncertain
        if name and name not in obj.names:
            matched = _matches(name, obj.names) if target is not None else False
            if matched is False:
                continue
            if matched is None:
                why = why or "a patch of it selects its targets by a regular expression vmtune does not evaluate"
        if not kind and not name and target is None:
            continue
        hits.append(obj)
        if why:
            obj.uncertain = why
    return hits


# what makes a backtracking regular expression (Python's) slow: quantifiers and alternation. Go's
# (kustomize's) is linear; Python's took hours on `(a+)+b` against a name of 40 a's
_BACKTRACKS = r"[*+?{|]"


def _matches(pattern: str, names: set[str]) -> bool | None:
    """A target's name is a regular expression to kustomize (anchored). None when vmtune cannot
    tell in bounded time: a pattern with a quantifier or alternation (beyond a leading or trailing
    `.*`) is not run (its fixes are withheld, the object's ownership uncertain)."""
    core = pattern.removeprefix(".*").removesuffix(".*")
    if re.search(_BACKTRACKS, core):
        return None
    try:
        compiled = re.compile(f"^(?:{pattern[:200]})$")
    except re.error:
        return False
    return any(compiled.match(n) for n in names)


def _patch_file(build: Build, path: str, objs: list[Obj], target: Any, kust: str, data_of: dict[str, bytes]) -> None:
    if os.path.isdir(path):
        raise _fail("a patch is a directory", kust, None)
    data = _load_bytes(build, path, data_of, kust, 1)
    for doc in _docs(data, path):
        root = doc.root
        if isinstance(root.children, list):  # JSON 6902: a list of operations
            writer = Writer("json6902", path, doc.index, root, kust, root.line, _ops(root))
            for obj in _targets(objs, "", "", target) if target is not None else ():
                obj.writers.append(writer)
            continue
        kind, name = _identity(root)
        for obj in _targets(objs, kind, name, target):
            obj.writers.append(Writer("smp", path, doc.index, root, kust, root.line))


def _inline(node: Any, objs: list[Obj], target: Any, kust: str) -> None:
    """A patch written in the kustomization: it owns what it sets, at its line; never edited.
    Read as every file is (vmtune.stacks.yamldoc: bounded; an alias bomb is refused, not expanded)."""
    text = node.value if isinstance(node.value, str) else ""
    try:
        docs = _docs(text.encode("utf-8", "surrogateescape")[:MAX_FILE], kust)
    except VmtuneError:
        docs = []  # the tool says what is wrong with it, in the build's one line
    for doc in docs:
        root = doc.root
        if isinstance(root.children, list):
            ops = [(op, node.line) for op, _line in _ops(root)]
            for obj in _targets(objs, "", "", target) if target is not None else ():
                obj.writers.append(Writer("json6902", kust, 0, None, kust, node.line, ops))
        elif isinstance(root.children, dict):
            kind, name = _identity(root)
            for obj in _targets(objs, kind, name, target):
                obj.writers.append(Writer("inline", kust, 0, root, kust, node.line))


def _ops(root: Any) -> list[tuple[Path, int]]:
    ops = []
    for op in root.children or ():
        path = op.get("path") if isinstance(op.children, dict) else None
        ops.append((_pointer(path.value if path is not None else None), op.line))
    return ops


def _pointer(text: Any) -> Path:
    """A JSON pointer as a path ("/spec/template/0" -> ("spec", "template", 0))."""
    if not isinstance(text, str):
        return ()
    keys: list[str | int] = []
    for part in text.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        keys.append(int(part) if part.isdigit() else part)
    return tuple(keys)


# -- the leaves above a file -------------------------------------------------------------------------

def tree_kustomizations(top: str) -> dict[str, set[str]]:
    """Every kustomization directory of a work tree -> the directories its resources, bases and
    components name (lookup.Walk: bounded, no symlink, no hidden directory, no nested work tree)."""
    from vmtune.stacks.yamldoc import load

    graph: dict[str, set[str]] = {}
    # what a walk stopped early saw: a leaf not found is not built (said by the caller's note)
    for entry in Walk(top):
        folder = os.path.dirname(entry.path)
        if entry.name not in NAMES or kustomization_in(folder) != entry.path:
            continue
        try:
            docs = load(_read(entry.path, os.path.realpath(top)), entry.path)
        except (OSError, VmtuneError):
            graph.setdefault(folder, set())
            continue
        named: set[str] = set()
        root = docs[0].root if docs else None
        for field in ("resources", "bases", "components"):
            for item in _entries(root, field) if root is not None and isinstance(root.children, dict) else ():
                if isinstance(item.value, str) and not re.search(REMOTE, item.value):
                    named.add(os.path.normpath(os.path.join(folder, item.value)))
        graph[folder] = named
    return graph


def leaves(directory: str, graph: dict[str, set[str]]) -> list[str]:
    """The kustomization directories no other references, reached from `directory` through those
    that reference it."""
    referrers: dict[str, set[str]] = {}
    for folder, named in graph.items():
        for target in named:
            referrers.setdefault(target, set()).add(folder)
    found: list[str] = []
    seen = {directory}
    pending = [directory]
    while pending:
        folder = pending.pop()
        above = referrers.get(folder, set()) - {folder}
        if not above:
            found.append(folder)
        for parent in sorted(above - seen):
            seen.add(parent)
            pending.append(parent)
    return sorted(found)


def member_of(path: str, kustomizations: dict[str, str | None] | None = None) -> str | None:
    """The kustomization directory a file belongs to: its own directory's, when that lists the
    file (resources, patches, generators' files) or the file is the kustomization.
    `kustomizations`: directory -> its kustomization file, looked up once a run per directory."""
    folder = os.path.dirname(path)
    if kustomizations is None:
        kustomizations = {}
    if folder not in kustomizations:
        kustomizations[folder] = kustomization_in(folder)
    kust = kustomizations[folder]
    if kust is None:
        return None
    if os.path.abspath(kust) == path:
        return folder
    named = _named(kust, folder)
    if named is None:
        return folder  # a broken kustomization beside it: its build says why
    return folder if path in named or os.path.basename(path) in named else None


# kustomization file (and its inode, size, mtime) -> what it names; each file of a directory asked
# whether the kustomization lists it parsed the kustomization again: 1,000 files beside a 1 MiB
# kustomization took 10 minutes (0.6 s each)
_NAMED: dict[tuple[str, int, int, int], frozenset[str] | None] = {}


def _named(kust: str, folder: str) -> frozenset[str] | None:
    """The paths and strings a kustomization names (every string of it, as a path from its
    directory and as written), None when it cannot be read."""
    try:
        info = os.stat(kust)
    except OSError:
        return None
    key = (kust, info.st_ino, info.st_size, info.st_mtime_ns)
    if key in _NAMED:
        return _NAMED[key]
    found: frozenset[str] | None
    try:
        from vmtune.stacks.yamldoc import load

        docs = load(_read(kust, os.path.realpath(folder)), kust)
        root = docs[0].root if docs else None
        values = _strings(root) if root is not None and isinstance(root.children, dict) else []
        found = frozenset(values) | {os.path.normpath(os.path.join(folder, v.split("=", 1)[-1])) for v in values}
    except (OSError, VmtuneError):
        found = None
    _NAMED[key] = found
    return found


def _strings(node: Any) -> list[str]:
    values: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current.children, dict):
            stack.extend(current.children.values())
        elif isinstance(current.children, list):
            stack.extend(current.children)
        elif isinstance(current.value, str) and len(current.value) < 4096:
            values.append(current.value)
    return values


# -- building ----------------------------------------------------------------------------------------

def prepare(leaf_dir: str, top: str, data_of: dict[str, bytes]) -> Build:
    """A leaf's closure read and checked (refusals raise), not yet built."""
    kust = kustomization_in(leaf_dir)
    assert kust is not None
    build = Build(kust, top)
    build.objects = _collect(build, leaf_dir, [], data_of)
    return build


def tool(top: str) -> list[str] | None:
    """The command that builds a kustomization: kustomize's own, else kubectl's (never one the
    work tree `top` holds: vmtune.programs)."""
    found = find_program("kustomize", (top,))
    if found:
        return [found, "build"]
    found = find_program("kubectl", (top,))
    return [found, "kustomize"] if found else None


def run(build: Build) -> None:
    """Builds a prepared leaf in a temporary copy of its files: build.output, or one line why not."""
    import tempfile

    command = tool(build.top)
    if command is None:
        raise _fail("neither kustomize nor kubectl is on PATH: the kustomization is not built and its files are "
                    "not judged", build.leaf, None)
    top = build.top
    with tempfile.TemporaryDirectory(prefix="vmtune-kustomize-") as scratch:
        tree = os.path.join(scratch, "tree")
        for path, data in build.files.items():
            copy = os.path.join(tree, os.path.relpath(path, top))
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            with open(copy, "xb") as handle:
                handle.write(data)
        env = scrubbed(scratch)
        target = os.path.join(tree, os.path.relpath(os.path.dirname(build.leaf), top))
        # the default load restrictor (LoadRestrictionsRootOnly); never --enable-helm,
        # --enable-alpha-plugins or --enable-exec
        output, error, code = bounded([*command, target], env, scratch)
    if code != 0:
        first = first_error(error.decode("utf-8", "replace")).replace(tree + os.sep, "").replace(tree, ".")
        raise _fail(f"the build failed: {first[:300]!r}" if first else f"the build failed (exit {code})",
                    build.leaf, None)
    build.output = output


# kubectl's log prefix (klog: `E1202 15:24:12.586172    9853 run.go:72] "command failed" err=`)
_KLOG = r'^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] (?:"command failed" )?(?:err=)?'


def first_error(text: str) -> str:
    """What a tool's stderr says first, on one line: kubectl's log prefix off, and a message klog
    writes on the lines below (`err=<` ... ` >`, e.g. the helmCharts refusal) joined, not `err=<`."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    first = re.sub(_KLOG, "", lines[0])
    if first.rstrip() == "<":
        body = []
        for line in lines[1:]:
            if line.strip() == ">":
                break
            body.append(line.strip())
        first = " ".join(body)
    return first


def scrubbed(scratch: str) -> dict[str, str]:
    """An environment of a tool's own: HOME and XDG (and Helm's homes) below `scratch`, an empty
    PATH, no KUBECONFIG and no plugin home, and proxies that lead nowhere (a fetch the tool
    would try fails at once; none should be asked)."""
    home = os.path.join(scratch, "home")
    empty = os.path.join(scratch, "bin")
    os.makedirs(home, exist_ok=True)
    os.makedirs(empty, exist_ok=True)
    nowhere = "http://127.0.0.1:9"
    env = {"HOME": home, "PATH": empty, "LANG": "C", "TMPDIR": scratch, "GIT_TERMINAL_PROMPT": "0",
           "HTTP_PROXY": nowhere, "HTTPS_PROXY": nowhere, "http_proxy": nowhere, "https_proxy": nowhere,
           "ALL_PROXY": nowhere, "NO_PROXY": "", "no_proxy": ""}
    for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "HELM_CACHE_HOME", "HELM_CONFIG_HOME",
                 "HELM_DATA_HOME"):
        env[name] = os.path.join(home, name.lower())
    return env


def bounded(command: list[str], env: dict[str, str], cwd: str) -> tuple[bytes, bytes, int]:
    """Runs a command with stdin closed, TIMEOUT seconds and OUTPUT_CAP bytes of output at most."""
    import selectors
    import signal
    import subprocess
    import time

    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, cwd=cwd, start_new_session=True)
    chunks: dict[int, list[bytes]] = {1: [], 2: []}
    size = 0
    deadline = time.monotonic() + TIMEOUT
    why = None
    assert process.stdout is not None and process.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, 1)
        selector.register(process.stderr, selectors.EVENT_READ, 2)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                why = f"it ran past {TIMEOUT:g} s"
                break
            for key, _events in selector.select(left):
                data = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                size += len(data)
                chunks[key.data].append(data)
            if size > OUTPUT_CAP:
                why = f"it wrote more than {OUTPUT_CAP // (1024 * 1024)} MiB"
                break
    if why is not None:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return b"", f"the build was stopped: {why}".encode(), -1
    try:
        code = process.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # its output closed, still running
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return b"", f"the build was stopped: it ran past {TIMEOUT:g} s".encode(), -1
    return b"".join(chunks[1]), b"".join(chunks[2]), code


# -- who writes a value of a built object ------------------------------------------------------------

def _sets(node: Any, path: Path, replaces_lists: bool) -> bool:
    """Whether a document sets the value at `path`: every key is there, or (a patch) a list or a
    scalar on the way replaces what was below it."""
    for key in path:
        children = node.children
        if replaces_lists and (isinstance(children, list) or children is None):
            return True  # a patch's list replaces the whole list (kustomize on a CRD), a scalar what was there
        child = node.get(key)
        if child is None:
            return False
        node = child
    return True


def _touches(op: Path, path: Path) -> bool:
    """Whether a JSON 6902 operation at `op` changes the value at `path` or the list holding it."""
    if not op:
        return True
    return path[:len(op)] == op or op[:len(path)] == path or (path[:len(op) - 1] == op[:-1] and
                                                              (isinstance(op[-1], int) or op[-1] == "-"))


def owner(obj: Obj, path: Path) -> Writer | None:
    """The last writer of the value at `path` (from the object's root), None when none sets it."""
    for writer in reversed(obj.writers):
        if writer.kind == "json6902":
            if any(_touches(op, path) for op, _line in writer.ops):
                return writer
            continue
        if _sets(writer.node, path, writer.kind != "resource"):
            return writer
    return None


def op_line(writer: Writer, path: Path) -> int:
    return next((line for op, line in writer.ops if _touches(op, path)), writer.line)


def home(obj: Obj, path: Path, leaf: str) -> Writer | None:
    """Where a value no file sets is written: inside the list item holding it, the writer of that
    item; else the leaf's own strategic-merge patch of the object (other overlays sharing the
    base are not changed), else its resource."""
    last = max((i for i, key in enumerate(path) if isinstance(key, int)), default=-1)
    if last >= 0:
        holder = owner(obj, path[:last + 1])
        return holder if holder is not None and holder.kind in ("smp", "resource") else None
    patch = next((w for w in reversed(obj.writers) if w.kind == "smp" and w.level == leaf), None)
    if patch is not None:
        return patch
    return obj.writers[0] if obj.writers[0].kind == "resource" else None


def line_of(writer: Writer, path: Path) -> int:
    if writer.kind == "json6902":
        return op_line(writer, path)
    if writer.kind == "inline":
        return writer.line
    node, depth = writer.node.deepest(path)
    return node.key_line if depth else node.line


def paths_by_line(root: Any) -> dict[int, Path]:
    """Line -> the path of the first node written on it, in a built document."""
    found: dict[int, Path] = {}
    stack: list[tuple[Any, Path]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        found.setdefault(node.key_line if path else node.line, path)
        children = node.children
        if isinstance(children, dict):
            stack.extend((child, (*path, key)) for key, child in reversed(list(children.items())))
        elif isinstance(children, list):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(children))))
    return found


# -- the front end's side: which files are built, and findings placed back ---------------------------

class Built:
    """A leaf's build as the front end renders it: the built YAML as a file of its own (named after
    the leaf's kustomization), and how its objects' findings go back to the files that write them."""

    def __init__(self, build: Build, file: Any, names: dict[str, str]) -> None:
        self.build = build
        self.file = file  # a StackFile of the built YAML
        self.names = names  # absolute path -> the name the run knows the file by

    def placed(self, rendered: Any, vmi: Any) -> Any:
        """A Rendered of the built file, re-pointed at the files that write its values."""
        from vmtune.stacks.frontend import Note, Rendered

        doc = self.file.docs[vmi.doc]
        lines = paths_by_line(doc.root)
        matches = [o for o in self.build.objects if o.kind == vmi.kind and o.name == vmi.name]
        obj = matches[0] if len(matches) == 1 else None
        leaf = self.build.leaf
        synthetic = self.file.name

        def where(path: Path) -> tuple[str, int]:
            if obj is None:
                return self.file.name, 1
            writer = owner(obj, path) or home(obj, path, leaf) or obj.writers[0]
            return self.names.get(writer.path, writer.name), line_of(writer, path)

        notes = tuple(Note(n.code, *where(lines.get(n.line, ())), n.message) if n.source == synthetic else n
                      for n in rendered.notes)
        if obj is not None:
            first = home(obj, (), leaf) or obj.writers[0]
            source, line = self.names.get(first.path, first.name), line_of(first, ("metadata", "name"))
        else:
            source, line = self.names.get(leaf, shown_name(leaf)), 1
        inner = rendered.placer

        def place(code: str, element: Any, domain: Any) -> Any:
            return self._back(inner(code, element, domain), obj, lines)

        label = shown_name(os.path.dirname(leaf)) or "."
        return Rendered(f"{rendered.name} (kustomize {label})", rendered.xml, source, line, rendered.stack,
                        rendered.release, place, notes, rendered.os_family, rendered.os_id)

    def _back(self, placement: Any, obj: Obj | None, lines: dict[int, Path]) -> Any:
        from vmtune.stacks.frontend import Placement, SourceEdit

        synthetic = self.file.name
        if placement.source != synthetic:
            return placement  # on an instancetype's or preference's own file
        edits = placement.edits or ()
        path = next((e.path for e in edits if e.source == synthetic), None)
        if path is None:
            path = lines.get(placement.line, ())
        if obj is None:
            return Placement(self.names.get(self.build.leaf, shown_name(self.build.leaf)), 1, placement.field,
                             f"{placement.advice} (not fixed: vmtune cannot tell which file of the kustomization "
                             "writes this object)" if edits else placement.advice, None, placement.command,
                             placement.knob, placement.unseen)
        writer = owner(obj, path) or home(obj, path, self.build.leaf) or obj.writers[0]
        source, line = self.names.get(writer.path, writer.name), line_of(writer, path)
        moved: list[Any] = []
        why = obj.uncertain
        for edit in edits:
            if edit.source != synthetic:
                moved.append(edit)
                continue
            target = owner(obj, edit.path) or home(obj, edit.path, self.build.leaf)
            if target is None or target.kind not in ("smp", "resource"):
                why = why or _WITHHELD.get(target.kind if target is not None else "", _WITHHELD[""])
                break
            moved.append(SourceEdit(self.names.get(target.path, target.name), target.doc, edit.path, edit.value))
        advice = placement.advice
        fixed: tuple[Any, ...] | None = tuple(moved) if edits else placement.edits
        if edits and why:
            advice, fixed = f"{advice} (not fixed: {why})", None
        return Placement(source, line, placement.field, advice, fixed, placement.command, placement.knob,
                         placement.unseen)


# why a fix on a built object is not written, by the kind of the writer that owns the value
_WITHHELD = {
    "json6902": "a JSON 6902 patch sets it (its operations can move list items): change the operation's value",
    "inline": "a patch written inside the kustomization sets it: change it there",
    "": "no file of the kustomization can take the field without changing a list the patches replace",
}


def take(files: list[Any], context: Any) -> tuple[list[Any], dict[int, Built], set[str]]:
    """The files given that are rendered alone, the builds of the leaves above the others (by
    id of their built file), and the names of the files that belong to a kustomization."""
    from vmtune.fileio import work_tree
    from vmtune.stacks.frontend import read_file

    rest: list[Any] = []
    members: set[str] = set()
    roots: dict[str, tuple[str, bool]] = {}  # kustomization dir -> (top, whether a KubeVirt file names it)
    data_of: dict[str, bytes] = {}
    names: dict[str, str] = {}
    looked: dict[str, str | None] = {}  # a directory's kustomization file: three stats, once per directory
    # A directory, as the files' names give it, without a kustomization (most files of a run): its
    # files are rendered alone, known without a stat and an abspath a file (24 -> ~4 M instructions
    # for 1,000 manifests). dirname(abspath(name)), member_of's directory, is abspath(dirname(name)).
    alone: dict[str, bool] = {}
    for stack_file in files:
        given = os.path.dirname(stack_file.name)
        plain = alone.get(given)
        if plain is None and not stack_file.stdin:
            folder = os.path.abspath(given)
            if folder not in looked:
                looked[folder] = kustomization_in(folder)
            plain = alone[given] = looked[folder] is None
        if stack_file.stdin or (plain and not context.companions) or not os.path.isfile(stack_file.name):
            rest.append(stack_file)
            continue
        path = os.path.abspath(stack_file.name)
        if path in context.companions:  # read for a build, not a reason for one
            data_of[path] = stack_file.data
            names[path] = stack_file.name
            continue
        folder = member_of(path, looked)
        if folder is None:
            rest.append(stack_file)
            continue
        members.add(stack_file.name)
        data_of[path] = stack_file.data
        names[path] = stack_file.name
        top = work_tree(folder) or folder
        kubevirt = not is_kustomization(path)
        roots[folder] = (top, kubevirt or roots.get(folder, (top, False))[1])
    if not roots:
        return rest, {}, set()
    leaf_of: dict[str, tuple[str, bool]] = {}
    for folder, (top, kubevirt) in sorted(roots.items()):
        graph = context.graphs.get(top)
        if graph is None:
            graph = context.graphs[top] = tree_kustomizations(top)
        for leaf in leaves(folder, graph):
            if _inside(leaf, top):
                leaf_of[leaf] = (top, kubevirt or leaf_of.get(leaf, (top, False))[1])
    builds: dict[int, Built] = {}
    failed = False
    for leaf, (top, kubevirt) in sorted(leaf_of.items()):
        build = Build(kustomization_in(leaf) or os.path.join(leaf, NAMES[0]), top)
        try:
            build.objects = _collect(build, leaf, [], data_of)
        except VmtuneError as exc:
            if not kubevirt and not _holds_kubevirt(build):
                continue  # a kustomization of no KubeVirt object (another app's): not this front end's
            context.problems.append(exc)  # said; the other builds and files go on
            failed = True
            continue
        if not _holds_kubevirt(build):
            continue
        if not spend(context, build.leaf):
            failed = True
            continue
        try:
            run(build)
        except VmtuneError as exc:
            context.problems.append(exc)
            failed = True
            continue
        built = read_file(shown_name(build.leaf), build.output, explicit=False)
        for path, data in build.files.items():
            if path not in names and path not in context.companions:
                context.companions[path] = read_file(shown_name(path), data, explicit=False,
                                                     identity=build.identities.get(path))
            names.setdefault(path, context.companions[path].name if path in context.companions else shown_name(path))
        found = Built(build, built, names)
        builds[id(built)] = found
    read = {names.get(p) for b in builds.values() for p in b.build.files}
    # after a refused or failed build its files are said through the problem, not as holding nothing
    return rest, builds, members if failed else {m for m in members if m in read}


def spend(context: Any, source: str) -> bool:
    """Whether one more build or rendering may run this vmtune run (context.runs: those run, when
    the first began, those refused); the first refused is said once, one line, exit 2."""
    import time

    runs = context.runs
    now = time.monotonic()
    if runs[0] == 0:
        runs[1] = now
    if runs[0] < MAX_RUNS and now - runs[1] < RUNS_SECONDS:
        runs[0] += 1
        return True
    if runs[2] == 0:
        context.problems.append(_fail(f"not built: this run has built or rendered {int(runs[0])} kustomizations and "
                                      f"charts (at most {MAX_RUNS}, in {RUNS_SECONDS:g} s); the others are not judged",
                                      source, None))
    runs[2] += 1
    return False


def _holds_kubevirt(build: Build) -> bool:
    from vmtune.stacks.kubevirt.detect import wants

    return any(wants(data, "") for data in build.files.values())
