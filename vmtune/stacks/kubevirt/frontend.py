"""KubeVirt manifests in `vmtune check`: every object that carries a VMI spec is rendered to the
domain virt-launcher would write (vmtune.stacks.kubevirt.render), after its instancetype and
preference; findings are placed on the field of the manifest that cures them (knobs_rows), or
on the preference or instancetype the value came from.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError
from vmtune.facts.domain import os_family_from_libosinfo
from vmtune.facts.guestos import libosinfo_id_from_short
from vmtune.fileio import work_tree
from vmtune.stacks.frontend import Note, Placement, Rendered, SourceEdit, StackFile, read_file
from vmtune.stacks.kubevirt import FRONTEND, Settings, helm, kustomize
from vmtune.stacks.kubevirt import instancetypes as apply_mod
from vmtune.stacks.kubevirt import render as render_mod
from vmtune.stacks.kubevirt.fields import unknown
from vmtune.stacks.kubevirt.objects import Spec, TemplateTooLarge, find
from vmtune.stacks.kubevirt.yamltypes import differences, disagree

if TYPE_CHECKING:
    from collections.abc import Callable

    from lxml import etree

    from vmtune.facts.domain import Domain
    from vmtune.stacks.kubevirt.objects import VmiObject
    from vmtune.stacks.yamldoc import Doc, Node

STACK = FRONTEND.name  # as findings and knob tables name the stack
_LIST_ITEMS = {"interfaces": "interface", "disks": "disk", "inputs": "input"}


def release(version: str | None) -> str:
    if version:  # no behaviour of the rules' concern differs between the releases checked
        return f"KubeVirt {version} (rendered as {render_mod.RELEASE})"
    return render_mod.RELEASE


def refuse(stack_file: StackFile) -> None:
    """Raises for a file not to render at all (the others are): a KubeVirt object with a scalar
    kubectl reads otherwise than vmtune. Keeps what it found for render()."""
    found = stack_file.found["kubevirt"] = _find(stack_file)
    _refuse_kubectl_typing(stack_file, {o.doc for o in (*found.vmis, *found.instancetypes, *found.preferences)})


def ties(stack_file: StackFile, looked: dict[Any, Any] | None = None) -> tuple[frozenset[str] | None,
                                                                             frozenset[str] | None]:
    """How the file's renderings and the other files' of the run depend on each other
    (vmtune.stacks.frontend.render_apart): the names of the instancetypes and preferences it
    defines, which another file's VM may name, and the names its VMs give, which another file may
    define. None for either when those names are not all: a template, or a kustomization's or a
    chart's file, is judged as the tool builds it with its other files; VMs that name objects in a
    git work tree are rendered after a search of the work tree for the objects no file of the run
    defines, and what it reads and says depends on the run's files, and what it finds resolves
    the other files' VMs naming them. Asked after refuse(), which
    found the objects. `looked`: what was looked up for the run's other files, by directory (its
    work tree, kustomization and chart: 13 stats a file otherwise)."""
    found = stack_file.found.get("kubevirt")
    if found is None or stack_file.templated:
        return None, None
    defines = frozenset(spec.name for spec in (*found.instancetypes, *found.preferences))
    names = frozenset(ref.name for vmi in found.vmis for ref in (vmi.instancetype, vmi.preference) if ref is not None)
    if stack_file.stdin or not os.path.isfile(stack_file.name):
        return defines, names
    looked = {} if looked is None else looked
    # os.path.abspath of the file's directory as its name writes it (up to its last "/", kept:
    # "/" for "/vm.yaml"), once a directory: abspath's normpath is Python, and every file is asked.
    # The file's name is never "." or ".." (a file), so abspath(name) is that directory and the name.
    cut = stack_file.name.rfind("/") + 1
    folders = looked.setdefault("folders", {})
    folder = folders.get(stack_file.name[:cut])
    if folder is None:
        folder = folders[stack_file.name[:cut]] = os.path.abspath(stack_file.name[:cut])
    base = stack_file.name[cut:]
    # os.path.join(folder, base) written out (posixpath's is Python, ~5 k instructions): base is
    # a file's name without "/", folder absolute, ending in "/" only as the root
    path = folder + base if folder.endswith("/") else f"{folder}/{base}"
    directories = looked.setdefault("directories", {})
    top, charted = directories.get(folder) or directories.setdefault(folder, _directory(folder))
    if base in helm.CHART_FILES:
        charted = helm.chart_of(path, top or folder) is not None
    if charted:
        return None, None
    # member_of answers None at once for a directory whose kustomization it looked up and found
    # none (its key is the path's directory, `folder`): not asked then (its dirname is Python)
    kustomizations = looked.setdefault("kustomizations", {})
    if kustomizations.get(folder, "") is not None and kustomize.member_of(path, kustomizations) is not None:
        return None, None
    if top is not None and names:
        # Rendered after a search of its work tree for the names no file of the run defines, and
        # every object of the files the search finds joins the run's: any VM of the run naming
        # one, outside the tree too, resolves with it. It may define any name.
        return None, None
    return defines, names


def _directory(folder: str) -> tuple[str | None, bool]:
    """A directory's git work tree (None: in none), and whether its files are a chart's templates."""
    top = work_tree(folder)
    return top, helm.chart_of(os.path.join(folder, "-"), top or folder) is not None


def render(files: list[StackFile], settings: Settings | None = None) -> tuple[list[Rendered], set[str]]:
    context = settings or Settings()
    files, charts, charted = helm.take(files, context)
    files, builds, members = kustomize.take(files, context)
    made: dict[int, Any] = {**builds, **charts}  # id of a built stream's file -> what places its findings
    rendered, recognised = _render_files([*files, *[b.file for b in made.values()]], context, made,
                                         said=settings is not None)
    return rendered, recognised | members | charted


def takes_template(name: str) -> bool:
    """Whether a templated file is a Helm chart's template, which vmtune.stacks.kubevirt.helm renders."""
    path = os.path.abspath(name)
    return helm.chart_of(path, work_tree(os.path.dirname(path)) or os.path.dirname(path)) is not None


def companions(settings: Settings | None) -> list[StackFile]:
    """The files kustomize builds read that no file given is: a fix may edit them (the value a
    finding points at is set there), so the shared layer loads them alongside the files given."""
    return list(settings.companions.values()) if settings is not None else []


def _render_files(files: list[StackFile], context: Settings, builds: dict[int, Any] | None = None,
                  said: bool = False) -> tuple[list[Rendered], set[str]]:
    """`said`: a file the renderer refuses (a VM it will not render) goes to context.problems and
    the other files are rendered; else the refusal is raised."""
    builds = builds or {}
    found = {f.name: f.found["kubevirt"] if "kubevirt" in f.found else _find(f) for f in files}
    instancetypes: dict[str, tuple[StackFile, Spec]] = {}
    preferences: dict[str, tuple[StackFile, Spec]] = {}
    checked = {id(f) for f in files}  # not `in files`: a list, quadratic over 1,000 manifests
    for stack_file in [*context.references, *files]:
        where = found.get(stack_file.name) if id(stack_file) in checked else _find(stack_file)
        if where is None:
            continue
        for spec in where.instancetypes:
            instancetypes.setdefault(spec.name, (stack_file, spec))
        for spec in where.preferences:
            preferences.setdefault(spec.name, (stack_file, spec))
    searches = _search_work_trees(files, found, instancetypes, preferences, context)
    _common_instancetypes(files, found, instancetypes, preferences, context.version)
    rendered: list[Rendered] = []
    recognised = {name for name, what in found.items() if what}
    sizes: dict[int, int] = {}  # id(Spec) -> the values of its spec
    for stack_file in files:
        try:
            rendered += _render_file(stack_file, found[stack_file.name].vmis, instancetypes, preferences, sizes,
                                     context, searches.get(id(stack_file)), checked, builds.get(id(stack_file)))
        except VmtuneError as exc:
            if not said:
                raise
            context.problems.append(exc)  # the file refused, as refuse() refuses one: the others go on
    return rendered, recognised


def _render_file(stack_file: StackFile, vmis: list[VmiObject], instancetypes: dict[str, tuple[StackFile, Spec]],
                 preferences: dict[str, tuple[StackFile, Spec]], sizes: dict[int, int], context: Settings,
                 search: Any, checked: set[int], built: Any) -> list[Rendered]:
    """A file's VMs rendered, or VmtuneError for the first the renderer refuses."""
    rendered = []
    left = REFERENCE_BUDGET
    for vmi in vmis:
        left -= _referenced_size(vmi, instancetypes, preferences, sizes)
        if left < 0:
            raise VmtuneError(f"{vmi.kind}/{vmi.name}: the instancetypes and preferences this file's VMs name "
                              f"add more than {REFERENCE_BUDGET:,} values to them: not rendered", stack_file.name,
                              _line(stack_file.docs[vmi.doc], vmi.obj_path) if vmi.obj_path else
                              stack_file.docs[vmi.doc].root.line)
        one = _render_one(stack_file, vmi, instancetypes, preferences, context, search, checked)
        rendered.append(one if built is None else built.placed(one, vmi))
    return rendered


def _missing(vmis: list[VmiObject], instancetypes: dict[str, Any], preferences: dict[str, Any]) -> set[str]:
    # loops, not a comprehension over (reference, table) pairs: asked twice a file, ~1.5 k instructions less
    names = set()
    for vmi in vmis:
        if vmi.instancetype is not None and vmi.instancetype.name not in instancetypes:
            names.add(vmi.instancetype.name)
        if vmi.preference is not None and vmi.preference.name not in preferences:
            names.add(vmi.preference.name)
    return names


def _search_work_trees(files: list[StackFile], found: dict[str, Any], instancetypes: dict[str, tuple[StackFile, Spec]],
                       preferences: dict[str, tuple[StackFile, Spec]], context: Settings) -> dict[int, Any]:
    """Looks up the instancetypes and preferences the VMs name that no file given holds in the
    other files of each VM file's git work tree (vmtune.stacks.kubevirt.lookup), adds what it
    finds to the tables, and returns, for each file (by id) in a work tree whose VMs name an object
    no file given holds, its search (what a note on a name still missing says was looked at). A
    file read from stdin or not on disk is in no work tree. The searches are kept in the context: the
    renderings --fix makes again find the same objects without walking again."""
    kept: dict[str, Any] = context.searched  # work tree -> (names looked for, Search, files)
    by_file: dict[int, Any] = {}
    loaded: set[str] | None = None  # the files read, made at the first search
    # directory -> its work tree: the files of a run share a few directories, and work_tree
    # stats every directory up to / (246 VMs of 1,000 manifests naming a cluster's objects: 3 ms)
    tops: dict[str, str | None] = {}
    for stack_file in files:
        missing = _missing(found[stack_file.name].vmis, instancetypes, preferences)
        if not missing:  # every name resolved: no search, and none a note names (a file's stats: 4 % of a run)
            continue
        # imported here, for a file with a name missing only: an import statement costs ~3-6 k
        # instructions each time it runs, and every manifest is rendered on its own
        from vmtune.stacks.kubevirt import lookup

        if stack_file.stdin or not os.path.isfile(stack_file.name):
            continue
        folder = os.path.dirname(os.path.abspath(stack_file.name))
        top = tops[folder] if folder in tops else tops.setdefault(folder, work_tree(folder))
        if top is None:
            continue
        previous = kept.get(top)
        if previous is None or not missing <= previous[0]:
            names = missing | (previous[0] if previous else set())
            if loaded is None:
                loaded = {os.path.abspath(f.name) for f in [*files, *context.references] if not f.stdin}
                loaded.update(os.path.abspath(name) for name in context.elsewhere)
            result = lookup.search(top, names, loaded, context.isolated)
            parsed = []
            for name, data in result.found:
                try:
                    parsed.append((read_file(name, data, explicit=False), None))
                except VmtuneError:
                    continue  # not a file this run checks: its errors are its own check's to say
            kept[top] = previous = (names, result, [f for f, _x in parsed])
        for other in previous[2]:
            where = _find_quietly(other)
            for spec in where.instancetypes if where else ():
                instancetypes.setdefault(spec.name, (other, spec))
            for spec in where.preferences if where else ():
                preferences.setdefault(spec.name, (other, spec))
        by_file[id(stack_file)] = previous[1]
    return by_file


def _common_instancetypes(files: list[StackFile], found: dict[str, Any],
                          instancetypes: dict[str, tuple[StackFile, Spec]],
                          preferences: dict[str, tuple[StackFile, Spec]], kubevirt_version: str | None) -> None:
    """The references still missing that name kubevirt/common-instancetypes' objects, taken as the
    bundle of the KubeVirt release (--kubevirt-version, the newest by default) defines them
    (vmtune.stacks.kubevirt.common): virt-operator deploys them cluster-wide, and VMs name them
    without carrying them (a `windows.2k22.virtio` VM was judged without its Hyper-V set). Said on
    each VM as assumed (STK002); a file given or found wins."""
    missing = {name for f in files for name in _missing(found[f.name].vmis, instancetypes, preferences)}
    if not missing:
        return
    # imported below the test: most files miss no name, and an import statement costs ~3-6 k
    # instructions each time it runs
    from vmtune.stacks.kubevirt import common

    bundle = common.bundle_of(kubevirt_version)
    holder = common.holder(bundle)
    for what, table, kind in (("instancetype", instancetypes, "VirtualMachineClusterInstancetype"),
                              ("preference", preferences, "VirtualMachineClusterPreference")):
        for name in sorted(missing):
            defined = common.spec(what, name, bundle)
            if defined is not None and name not in table:
                table[name] = (holder, Spec(kind, name, 0, (), defined))


def _find_quietly(stack_file: StackFile) -> Any:
    try:
        return _find(stack_file)
    except VmtuneError:
        return None


# Values the instancetypes and preferences named by one file's VMs may add to them, in all. A
# reference copies the whole spec into each VM, as an alias does: a 645 KB file of a preference
# with 40,000 CPU features named by 300 VMs took 54 s and 3 GB. The largest common-instancetypes
# instancetype and preference have about 55 values each: this allows some 2,300 VMs naming both.
REFERENCE_BUDGET = 250_000


def _referenced_size(vmi: VmiObject, instancetypes: dict[str, tuple[StackFile, Spec]],
                     preferences: dict[str, tuple[StackFile, Spec]], sizes: dict[int, int]) -> int:
    total = 0
    for ref, table in ((vmi.instancetype, instancetypes), (vmi.preference, preferences)):
        found = table.get(ref.name) if ref is not None else None
        if found is not None:
            spec = found[1]
            size = sizes.get(id(spec))
            if size is None:
                size = sizes[id(spec)] = _builtin_values(spec.spec) if _builtin(found[0]) else _values(spec.spec)
            total += size
    return total


# The values of common-instancetypes' specs, counted once a run rather than once a file (each
# manifest is rendered on its own; ~300 of 1,000 name one): id -> (the spec, kept so that its id
# is not another's, its values). The specs are vmtune's tables', which live as long as the process.
_BUILTIN_VALUES: dict[int, tuple[Any, int]] = {}


def _builtin_values(spec: Any) -> int:
    kept = _BUILTIN_VALUES.get(id(spec))
    if kept is None or kept[0] is not spec:
        kept = _BUILTIN_VALUES[id(spec)] = (spec, _values(spec))
    return kept[1]


def _values(value: Any) -> int:
    """How many values (scalars, mappings, lists) a plain value holds."""
    count = 0
    stack = [value]
    while stack:
        current = stack.pop()
        count += 1
        if isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return count


def _find(stack_file: StackFile) -> Any:
    if not stack_file.docs and "kubevirt" in stack_file.found:  # a kustomize layout built (reflayout)
        return stack_file.found["kubevirt"]
    try:
        found = find([d.root.value for d in stack_file.docs])
    except TemplateTooLarge as exc:
        raise VmtuneError(f"Template: {exc}", stack_file.name, _line(stack_file.docs[exc.doc], exc.path)) from None
    return found


def _refuse_kubectl_typing(stack_file: StackFile, docs: set[int]) -> None:
    """One line, at its line, for a scalar of a KubeVirt object that kubectl types otherwise than
    vmtune read it (`running: y`, `cores: 08`): judging either reading could pass what the
    cluster runs (vmtune.stacks.kubevirt.yamltypes)."""
    if not docs:
        return
    # differences and disagree are imported with the module, not here: an import statement in a
    # function costs ~8 k instructions each time, and every file is asked
    plain = stack_file.docs[0].plain if stack_file.docs else None
    if plain is not None and not disagree(plain):  # every plain value that may differ, listed when read: none does
        return
    found_any = differences(stack_file.data.decode("utf-8-sig", errors="replace"))
    if not found_any:
        return
    from bisect import bisect_right

    starts = [d.root.line for d in stack_file.docs]  # a document runs to the next one's first line
    for found in found_any:
        if bisect_right(starts, found[0]) - 1 in docs:
            line, written, ours, theirs = found
            raise VmtuneError(f"{written!r} is {_typed(theirs)} to kubectl (sigs.k8s.io/yaml) but {_typed(ours)} "
                              "to YAML 1.1 readers such as vmtune's: quote it, or write the value you mean",
                              stack_file.name, line)


def _typed(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float):
        return f"the number {value:g}"
    return f"the number {value}" if isinstance(value, int) else f"the string {value!r}"[:80]


def _line(doc: Doc, path: tuple[str | int, ...]) -> int:
    node, _depth = doc.root.deepest(path)
    return node.key_line if node is not doc.root else node.line


def _render_one(stack_file: StackFile, vmi: VmiObject, instancetypes: dict[str, tuple[StackFile, Spec]],
                preferences: dict[str, tuple[StackFile, Spec]], context: Settings, search: Any = None,
                checked: set[int] | None = None) -> Rendered:
    doc = stack_file.docs[vmi.doc]
    notes: list[Note] = [Note(code, stack_file.name, _line(doc, path), message) for code, path, message in vmi.notes]
    notes += _unknown_fields(stack_file, vmi)
    it = pref = None
    unseen: list[str] = []
    if vmi.instancetype is not None:
        it = instancetypes.get(vmi.instancetype.name)
        if it is not None and _builtin(it[0]):
            notes.append(Note("STK002", stack_file.name, _line(doc, vmi.instancetype.line_path),
                              _common_note("instancetype", vmi.instancetype.name, context.version)))
        if it is None:
            unseen.append(f"instancetype {vmi.instancetype.name}")
            notes.append(Note("STK001", stack_file.name, _line(doc, vmi.instancetype.line_path),
                              f"instancetype {vmi.instancetype.name} not found in the files given: its CPU and memory "
                              f"are not checked; {_where_looked('instancetype', vmi.instancetype.name, search)}"))
    if vmi.preference is not None:
        pref = preferences.get(vmi.preference.name)
        if pref is not None and _builtin(pref[0]):
            notes.append(Note("STK002", stack_file.name, _line(doc, vmi.preference.line_path),
                              _common_note("preference", vmi.preference.name, context.version)))
        if pref is None:
            unseen.append(f"preference {vmi.preference.name}")
            family = apply_mod.os_family_of(vmi.preference.name)
            told = f"; its name tells a {family} guest" if family else ""
            notes.append(Note("STK001", stack_file.name, _line(doc, vmi.preference.line_path),
                              f"preference {vmi.preference.name} not found in the files given{told}; "
                              f"{_where_looked('preference', vmi.preference.name, search)}"))
    spec, origin, conflicts = apply_mod.apply(vmi.spec, it[1].spec if it else None, pref[1].spec if pref else None)
    for code, path, message in conflicts:
        notes.append(Note(code, stack_file.name, _line(doc, (*vmi.spec_path, *path)), message))
    namespace = vmi.namespace
    name = vmi.name
    hz = render_mod.NODE_TSC_HZ  # read at call time: the one switch between the two kinds of node
    needs = render_mod.tsc_requirement(spec)  # asked once: render() asks it only of a VM given a frequency
    try:
        xml = render_mod.render(spec, name, namespace, context.version, tsc_frequency=hz if needs else None)
    except render_mod.RenderRefused as exc:
        raise VmtuneError(f"{vmi.kind}/{name}: {exc.message}", stack_file.name,
                          _line(doc, (*vmi.spec_path, *exc.path))) from None
    if needs is not None and hz:
        notes.append(Note("STK002", stack_file.name, _line(doc, (*vmi.spec_path, *_TSC_FIELD[needs])),
                          _tsc_note(needs, hz)))
    if context.version and context.version.lstrip("v") not in render_mod.RELEASE:
        # Said, not modelled: what differs between releases is not rendered (docs/stacks.md).
        notes.append(Note("STK002", stack_file.name, _line(doc, vmi.obj_path) if vmi.obj_path else doc.root.line,
                          f"rendered as {render_mod.RELEASE} writes it: differences of KubeVirt "
                          f"{context.version} other than its common-instancetypes are not modelled"))
    family = apply_mod.os_family_of(vmi.preference.name) if vmi.preference is not None else None
    os_id = stated_os_id(vmi.os_hint)
    if family is None and vmi.os_hint is not None:
        family = os_family_from_libosinfo(os_id) if os_id else apply_mod.os_family_of(vmi.os_hint)
    placer = _Placer(stack_file, vmi, spec, origin, it, pref, " and ".join(unseen) or None, checked)
    return Rendered(f"{vmi.kind}/{name}", xml, stack_file.name, _line(doc, vmi.obj_path) if vmi.obj_path else
                    doc.root.line, STACK, release(context.version), placer.entry(), tuple(notes), family, os_id)


def _builtin(holder: StackFile) -> bool:
    """Whether a reference came from vmtune's common-instancetypes tables (no file, no objects found)."""
    return not holder.docs and "kubevirt" not in holder.found


def _common_note(what: str, name: str, kubevirt_version: str | None) -> str:
    """The STK002 note of a reference taken from common-instancetypes: the same text for every VM
    naming the object (300 of 1,000 manifests name one, ~4 µs each to write), made once a run."""
    key = (what, name, kubevirt_version)
    said = _COMMON_NOTES.get(key)
    if said is None:
        if len(_COMMON_NOTES) >= _REMEMBERED:  # names come from the manifests
            _COMMON_NOTES.clear()
        said = _COMMON_NOTES[key] = _write_common_note(what, name, kubevirt_version)
    return said


_COMMON_NOTES: dict[tuple[str, str, str | None], str] = {}


def _write_common_note(what: str, name: str, kubevirt_version: str | None) -> str:
    from vmtune.stacks.kubevirt import common

    bundle = common.bundle_of(kubevirt_version)
    told = (f"--kubevirt-version {kubevirt_version}" if kubevirt_version else
            "the newest release vmtune knows; --kubevirt-version X.Y names the cluster's")
    return (f"assumed: {what} {name} as {common.version(bundle)} defines it (virt-operator of KubeVirt "
            f"{', '.join(common.releases_of(bundle))} deploys it cluster-wide: {told}; no file given or in the work "
            "tree defines it); the cluster may run others: --instancetypes PATH names the definitions it runs")


def _where_looked(what: str, name: str, search: Any) -> str:
    """Where vmtune looked for a reference it did not find, and what that means (an STK001 note's
    end). Not a common-instancetypes name (those are taken from vmtune's table): the cluster's own,
    which vmtune cannot see. KubeVirt does not start a VM whose instancetype or preference it
    cannot find, but vmtune cannot tell that the cluster lacks it: said, never an error, and no
    fix is written for the VM (a VM-level field could shadow what it sets)."""
    told = f"the cluster must have it: KubeVirt does not start a VM whose {what} it cannot find"
    if search is None:
        looked = "the file is in no git work tree, whose other files would have been searched"
    elif search.stopped:
        looked = f"the search of its work tree {search.stopped}: not all of it was seen"
    else:
        looked = "no other file of its git work tree defines it"
    return (f"{told}; {looked}; --instancetypes PATH names where it is. No fix is written for this VM: a VM-level "
            "field could shadow what it sets")


def stated_os_id(hint: str | None) -> str | None:
    """The libosinfo id of the OS a VM's labels, annotations or template name state: a libosinfo
    short id (`win2k22`, `rhel9.0`), or the common templates' `windows10`/`rhel9` spellings."""
    if not hint:
        return None
    short = hint.strip().lower()
    if short.startswith("windows"):
        short = "win" + short[len("windows"):]
    return libosinfo_id_from_short(short) or libosinfo_id_from_short(short + ".0")


def _unknown_fields(stack_file: StackFile, vmi: VmiObject) -> list[Note]:
    """STK003 for each key under the VMI spec's domain that KubeVirt's API does not define there: a
    misplaced or misspelt knob looks set to a reviewer and does nothing (vmtune.stacks.kubevirt.fields)."""
    doc = stack_file.docs[vmi.doc]
    notes = []
    for path, advice in unknown(vmi.spec.get("domain")):
        full = (*vmi.spec_path, "domain", *path)
        notes.append(Note("STK003", stack_file.name, _line(doc, full),
                          f"{_dotted(full)} is not a field of the KubeVirt API ({render_mod.API_RELEASE}): the API "
                          "server refuses or drops it, so it has no effect" + (f"; {advice}" if advice else "")))
    return notes


# where the field that asks for a TSC frequency sits below the VMI spec (the line of the note)
_TSC_FIELD = {"invtsc": ("domain", "cpu", "features"), "reenlightenment": ("domain", "features", "hyperv",
                                                                             "reenlightenment")}


def _tsc_note(needs: str, hz: int) -> str:
    """The TSC assumption said on a VM that needs a TSC frequency (render.NODE_TSC_HZ)."""
    rule = "HV005 (reenlightenment blocks live migration)" if needs == "reenlightenment" else \
        "CLK008 (invariant TSC without a fixed TSC frequency)"
    return (f"assumed: the nodes report their TSC frequency (virt-handler labels a node whose CPU has an "
            f"invariant TSC with it, and KubeVirt gives this {needs} VM the cluster's lowest: rendered as "
            f"{hz} Hz); on nodes that do not, KubeVirt writes none: {rule}")

_ROWS: tuple[dict[str, tuple[Any, ...]], dict[str, str]] | None = None


def _rows() -> tuple[dict[str, tuple[Any, ...]], dict[str, str]]:
    """KubeVirt's knob rows, looked up once a run rather than once a finding (~3 a domain)."""
    global _ROWS
    if _ROWS is None:
        from vmtune.stacks.knob_table import rows

        _ROWS = rows(STACK)
    return _ROWS


def _dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


# Texts placing makes again and again (a knob's field below the same kinds of spec path, its
# advice): remembered, in tables emptied when full, since list indices come from the manifests.
_DOTTED: dict[tuple[str | int, ...], str] = {}
_ADVICE: dict[tuple[str, str], str] = {}
_REMEMBERED = 4096


def _dotted_cached(path: tuple[str | int, ...]) -> str:
    text = _DOTTED.get(path)
    if text is None:
        if len(_DOTTED) >= _REMEMBERED:
            _DOTTED.clear()
        text = _DOTTED[path] = _dotted(path)
    return text


def _advice(text: str, spec_dotted: str) -> str:
    """A knob's advice with its `spec.` prefix written as the object's own spec path."""
    said = _ADVICE.get((text, spec_dotted))
    if said is None:
        if len(_ADVICE) >= _REMEMBERED:
            _ADVICE.clear()
        said = _ADVICE[(text, spec_dotted)] = text.replace("spec.", f"{spec_dotted}.", 1) \
            if text.startswith("spec.") else text
    return said


class _Placer:
    """Places a finding of the rendered domain on the manifest: the knob's field on the VM (or
    on the preference / instancetype that set the value), its line, and the edits."""

    def __init__(self, stack_file: StackFile, vmi: VmiObject, spec: dict[str, Any], origin: dict[Any, str],
                 instancetype: tuple[StackFile, Spec] | None, preference: tuple[StackFile, Spec] | None,
                 unseen: str | None = None, checked: set[int] | None = None) -> None:
        self.file = stack_file
        # the files being checked (ids), which --fix may write; None: every file read
        self.checked = checked
        self.unseen = unseen  # "preference windows.2k22": named by the VM, held by no file vmtune read
        self.vmi = vmi
        self.spec = spec
        self.origin = origin
        self._below: dict[Path, str] | None = None  # _below(origin), made at the first finding that asks
        self.instancetype = instancetype
        self.preference = preference
        self.spec_dotted = _dotted_cached(vmi.spec_path)  # every placed advice names it
        self._spec_node: Node | None = None  # the VMI spec's node, found at the first finding
        self._spec_looked = False
        # whether the VM sets features.hypervPassthrough (_beside_passthrough), asked once a VM
        domain = vmi.spec.get("domain")
        features = domain.get("features") if isinstance(domain, dict) else None
        self._passthrough = isinstance(features, dict) and features.get("hypervPassthrough") is not None

    def entry(self) -> Callable[[str, etree._Element | None, Domain], Placement]:
        """What places this VM's findings: _place itself when __call__ would return its Placement
        as it is (no unseen reference, no preference's or instancetype's value, no
        hypervPassthrough: ~70 % of 1,000 manifests' findings), a call less a finding."""
        if self.unseen is None and not self.origin and not self._passthrough:
            return self._place
        return self

    def __call__(self, code: str, element: etree._Element | None, domain: Domain) -> Placement:
        placement = self._place(code, element, domain)
        if self.unseen is not None:
            return self._partial(code, element, placement)
        if placement.edits and self._passthrough and self._beside_passthrough(placement.edits):
            return Placement(placement.source, placement.line, placement.field,
                             f"{placement.advice} (not fixed: the VM sets features.hypervPassthrough, and virt-api "
                             "refuses a VMI with it and features.hyperv both: remove it first)", None,
                             placement.command, placement.knob)
        if self.origin and placement.edits:
            placement.edits = self._carry(placement.edits)
        return placement

    def _beside_passthrough(self, edits: tuple[SourceEdit, ...]) -> bool:
        """Whether an edit writes features.hyperv on a VM that sets features.hypervPassthrough
        (enabled or not): KubeVirt would refuse the fixed VM (webhooks/hyperv.go)."""
        features = self.vmi.spec.get("domain", {}).get("features") if isinstance(self.vmi.spec.get("domain"),
                                                                                   dict) else None
        if not isinstance(features, dict) or features.get("hypervPassthrough") is None:
            return False
        hyperv = (*self.vmi.spec_path, "domain", "features", "hyperv")
        return any(e.path[:len(hyperv)] == hyperv for e in edits)

    def _carry(self, edits: tuple[SourceEdit, ...]) -> tuple[SourceEdit, ...]:
        """The edits with every value of the preference they would shadow carried along.

        virt-controller copies a preference's value only where the VM leaves the field unset, and
        then whole (pkg/instancetype/preference/apply: a VM-level `clock.timer` replaces the
        preference's whole timer set, a VM-level `features.hyperv.spinlocks: {}` its 8191 retries,
        which SetDefaults_FeatureSpinlocks then makes 4096). An edit below a field the preference
        filled makes the VM set that field: the preference's value there is written too, and the
        edit's own leaves over it, so the VM keeps what the preference gave it."""
        cut = len(self.vmi.spec_path)
        name, index = self.file.name, self.vmi.doc
        written = {e.path: e.value for e in edits}
        carried: list[SourceEdit] = []
        for edit in edits:
            if edit.source != name or edit.doc != index or edit.path[:cut] != self.vmi.spec_path:
                continue
            below = edit.path[cut:]
            filled = next((below[:depth] for depth in range(1, len(below) + 1)
                           if self.origin.get(below[:depth]) == "preference"), None)
            if filled is None:
                continue
            value = _at(self.spec, filled)
            for path, leaf in _split((*self.vmi.spec_path, *filled), value):
                # not where an edit writes (at it, below it, or above it a value other than a
                # mapping, which yamledit merges into what is there): the fix's value wins there
                if not any(w[:len(path)] == path or (path[:len(w)] == w and not isinstance(v, dict))
                           for w, v in written.items()):
                    written[path] = leaf
                    carried.append(SourceEdit(name, index, path, leaf))
        return (*carried, *edits) if carried else edits

    def _partial(self, code: str, element: etree._Element | None, placement: Placement) -> Placement:
        """A finding on a VM whose instancetype or preference vmtune did not see: no fix (a VM-level
        field would shadow what that object sets: KubeVirt fills only what the VM leaves unset, and
        a VM-level Hyper-V or timer set replaces the preference's values), and info unless the VM
        itself writes the value judged (then no preference changes it)."""
        knobs = _rows()[0].get(code, ())
        paths = self._paths(knobs[0].path, element) if knobs else []
        written = any(_written(self.vmi.spec, path) for path in paths)
        if not written:  # said by the report: depends on it, info, not fixed
            return Placement(placement.source, placement.line, placement.field, placement.advice, None,
                             placement.command, placement.knob, self.unseen)
        advice = f"{placement.advice} (not fixed: vmtune did not see {self.unseen}, which a VM-level field could " \
                 "shadow)"
        return Placement(placement.source, placement.line, placement.field, advice, None, placement.command,
                         placement.knob)

    def _place(self, code: str, element: etree._Element | None, domain: Domain) -> Placement:
        # ~3 findings a domain are placed: the common case (the knob's own value on the VM's own
        # spec, no preference or instancetype) takes no walk from the document's root and makes no
        # text it made before.
        # _rows(), _paths() and _value() are inlined for the common case (a knob without a list
        # item, of a rule whose value does not depend on the spec): a call costs about as much
        # as what each does there
        table, no_knob = _ROWS or _rows()
        knobs = table.get(code, ())
        if not knobs:
            why = no_knob.get(code, "no KubeVirt field changes what virt-launcher writes here")
            return Placement(self.file.name, self._line_below(()), "", why, knob=False)
        knob = knobs[0]
        paths = (knob.path,) if "[]" not in knob.path else tuple(self._paths(knob.path, element))
        if not self.origin:
            if paths and knob.value is not None:
                # all but the line is what it was for the last VM with the same spec path and list
                # items, and the same variant of the value (a clock's, with or without utc):
                # _placed_knob's table read here, the call made only to fill it
                value = knob.value if code not in _VALUE_BY_SPEC else self._value(code, knob.value, paths[0])
                spec_path = self.vmi.spec_path
                placed = _PLACED.get((code, value is knob.value, spec_path, paths))
                if placed is None:
                    placed = _placed_knob(code, knob, value, value is knob.value, spec_path, self.spec_dotted, paths)
                advice, field, leaves = placed
                name, index = self.file.name, self.vmi.doc
                if len(leaves) == 1:  # most knobs: no generator made for one edit
                    edits: tuple[SourceEdit, ...] | None = (SourceEdit(name, index, leaves[0][0], leaves[0][1]),)
                else:  # a list made first: a generator resumed for each of a Hyper-V set's ~8 edits costs more
                    edits = tuple([SourceEdit(name, index, path, value) for path, value in leaves])
                return Placement(name, self._line_below(paths[0]), field, advice, edits)
            if not paths:  # an item KubeVirt added: the same text for every VM with the same spec path
                prefix, advice, field = _added_item(code, knob, self.vmi.spec_path, self.spec_dotted)
                return Placement(self.file.name, self._line_below(prefix), field, advice)
        advice = _advice(knob.text, self.spec_dotted)
        doc = self.file.docs[self.vmi.doc]
        if not paths:  # a list item KubeVirt added by default (a volume's disk, the pod interface)
            prefix = knob.path[:knob.path.index("[]")]
            full = (*self.vmi.spec_path, *prefix)
            field = _dotted_cached(full)
            advice = f"{advice}: write the item in {field} (KubeVirt added it with its defaults)"
            came = self._origin((*prefix, 0, *knob.path[knob.path.index("[]") + 1:]))
            if came == "preference" and self.preference is not None:
                alt = next((k for k in knobs if k.on == came), None)
                elsewhere = self._elsewhere(self.preference)
                advice += f"; its value comes from preference {self.preference[1].name}" + \
                    (f", defined in {elsewhere}" if elsewhere else "") + \
                    (f": or change {alt.text} for every VM using it" if alt else "")
            return Placement(self.file.name, _line(doc, full), field, advice)
        full_paths = [(*self.vmi.spec_path, *p) for p in paths]
        line = self._line_below(paths[0])
        field = _dotted_cached(full_paths[0])
        came = self._origin(paths[0]) if self.origin else None
        if came is not None:
            holder = self.preference if came == "preference" else self.instancetype
            alt = next((k for k in knobs if k.on == came), None)
            owner = f"{came} {holder[1].name}" if holder else came
            elsewhere = self._elsewhere(holder)
            if came == "instancetype":
                advice = f"set by {owner}: change {alt.text if alt else 'it there'} (KubeVirt refuses a VM that " \
                         "sets a field its instancetype sets)"
                edits = self._edits_on(holder, alt)
                if elsewhere is not None:
                    # found in the work tree or given with --instancetypes: not a file this run
                    # checks, and a change there changes every VM using it. Said at the VM's
                    # reference to it, in the file checked.
                    at = self.vmi.instancetype.line_path if self.vmi.instancetype is not None else None
                    return Placement(self.file.name, _line(self.file.docs[self.vmi.doc], at) if at else line, field,
                                     f"{advice}; not fixed: {elsewhere}")
                line_at = self._line_on(holder, alt)
                if holder is not None and edits and line_at is not None:
                    return Placement(holder[0].name, line_at, field, advice, edits)
                return Placement(self.file.name, line, field, advice, edits)
            where = f", defined in {elsewhere}" if elsewhere is not None else ""
            advice = f"{advice} (the value comes from {owner}{where}: change {alt.text if alt else 'it there'} for " \
                     "every VM using it; a VM-level field overrides the preference)"
        if knob.value is None:
            return Placement(self.file.name, line, field, advice, None)
        value = self._value(code, knob.value, paths[0])
        name, index = self.file.name, self.vmi.doc
        if isinstance(value, dict):
            edits = tuple(SourceEdit(name, index, path, item) for p in full_paths for path, item in _split(p, value))
        else:  # a scalar knob (most): one edit per path, as _split would give
            edits = tuple(SourceEdit(name, index, p, value) for p in full_paths)
        return Placement(name, line, field, advice, edits)

    def _line_below(self, path: tuple[str | int, ...]) -> int:
        """_line(doc, spec_path + path), walked from the VMI spec's node (found once a VM)."""
        if not self._spec_looked:
            self._spec_looked = True
            if self.vmi.spec_path:
                self._spec_node = self.file.docs[self.vmi.doc].root.at(self.vmi.spec_path)
        node = self._spec_node
        if node is None:
            return _line(self.file.docs[self.vmi.doc], (*self.vmi.spec_path, *path))
        # Node.deepest written out (each of a run's ~3,200 findings walks ~5 keys here; the call
        # and its pair cost about as much as the walk): the same steps, mappings first. A mapping's
        # children are keyed by texts (both readers), so an index finds None there as in deepest.
        for key in path:
            children = node.children
            if isinstance(children, dict):
                child = children.get(key)  # type: ignore[arg-type]
            elif isinstance(children, list) and isinstance(key, int) and 0 <= key < len(children):
                child = children[key]
            else:
                break
            if child is None:
                break
            node = child
        return node.key_line  # below a non-empty spec path: never the document's root

    def _value(self, code: str, value: object, path: tuple[str | int, ...]) -> object:
        if code in _VALUE_BY_SPEC and isinstance(value, dict):  # a clock has utc or a timezone
            domain = self.spec.get("domain")
            clock = domain.get("clock") if isinstance(domain, dict) else None
            if isinstance(clock, dict) and ("timezone" in clock or "utc" in clock):
                return {k: v for k, v in value.items() if k != "utc"}
        return value

    def _origin(self, path: tuple[str | int, ...]) -> str | None:
        origin = self.origin
        for depth in range(len(path), 0, -1):
            came = origin.get(path[:depth])
            if came is not None:
                return came
        # a mapping knob (hyperv) the preference filled below: the first such key's origin
        below = self._below
        if below is None:
            below = self._below = _below(origin)
        return below.get(path)

    def _paths(self, path: tuple[str, ...], element: etree._Element | None) -> list[tuple[str | int, ...]]:
        """The knob's path with "[]" made an index: the item the finding's element came from,
        else every item of the list."""
        if "[]" not in path:
            return [path]
        at = path.index("[]")
        container = path[:at]
        items: Any = self.vmi.spec  # as written: an item KubeVirt added has no line to edit
        for key in container:
            items = items.get(key) if isinstance(items, dict) else None
        if not isinstance(items, list):
            return []
        indices = list(range(len(items)))
        name = _alias(element, _LIST_ITEMS.get(container[-1], ""))
        if name is not None:
            indices = [i for i, item in enumerate(items) if isinstance(item, dict) and item.get("name") == name]
        return [(*container, i, *path[at + 1:]) for i in indices]

    def _elsewhere(self, holder: tuple[StackFile, Spec] | None) -> str | None:
        """What a note says of an instancetype or preference held by a file that is not checked
        (the work-tree search found it, or --instancetypes named it): --fix writes no file but
        those checked, and a change there applies to every VM using the object. None for a file
        checked, or the built-in table."""
        if holder is None or not holder[0].docs or self.checked is None or id(holder[0]) in self.checked:
            return None
        return (f"{holder[0].name}, a file not checked, which --fix leaves alone: a change there applies to every "
                "VM using it")

    def _edits_on(self, holder: tuple[StackFile, Spec] | None, knob: Any) -> tuple[SourceEdit, ...] | None:
        if holder is None or knob is None or knob.value is None or not holder[0].docs:  # the built-in table
            return None
        stack_file, spec = holder
        return (SourceEdit(stack_file.name, spec.doc, (*spec.obj_path, "spec", *knob.path), knob.value),)

    def _line_on(self, holder: tuple[StackFile, Spec] | None, knob: Any) -> int | None:
        if holder is None or knob is None or not holder[0].docs:  # the built-in table: no file, no line
            return None
        stack_file, spec = holder
        return _line(stack_file.docs[spec.doc], (*spec.obj_path, "spec", *knob.path))


# Rules whose knob value depends on the VM's spec (_Placer._value): a clock keeps its utc or timezone.
_VALUE_BY_SPEC = frozenset({"CLK001", "CLK004"})
Path = tuple[str | int, ...]
# An origin table's items -> _below's table of it. VMs using the same preference and instancetype
# the same way have equal tables (~20 paths): ~410 of 1,000 manifests' findings asked for a key
# below their path, and the loop over the table for each (it never found one) cost more than
# this table made once. Emptied when full.
_BELOW: dict[tuple[tuple[Path, str], ...], dict[Path, str]] = {}


def _below(origin: dict[Any, str]) -> dict[Path, str]:
    """Each proper prefix of an origin table's paths (the empty one too) -> the origin of the
    first path (in the table's order) below it."""
    key = tuple(origin.items())
    table = _BELOW.get(key)
    if table is None:
        table = {}
        for path, came in key:
            for depth in range(len(path)):
                table.setdefault(path[:depth], came)
        if len(_BELOW) >= _REMEMBERED:
            _BELOW.clear()
        _BELOW[key] = table
    return table
# (rule, spec path, knob paths below it) -> (advice, field, the edits' paths and values): what
# placing a knob's own value on a VM's own spec says, the same for every VM with that spec path
# and those list items. Emptied when full.
_PLACED: dict[tuple[str, bool, Path, tuple[Path, ...]], tuple[str, str, tuple[tuple[Path, object], ...]]] = {}


def _placed_knob(code: str, knob: Any, value: object, own: bool, spec_path: Path, spec_dotted: str,
                 paths: tuple[Path, ...]) -> tuple[str, str, tuple[tuple[Path, object], ...]]:
    """`value`: the knob's (`own`), or the variant _Placer._value picks, the same for the same spec
    (CLK004's clock without its utc where the VM names a timezone): placed ~700 times in 1,000
    manifests, it cost twice the knob's own value before it was remembered too."""
    key = (code, own, spec_path, paths)
    placed = _PLACED.get(key)
    if placed is None:
        full_paths = [(*spec_path, *p) for p in paths]
        if len(_PLACED) >= _REMEMBERED:
            _PLACED.clear()
        if isinstance(value, dict):
            leaves = tuple(leaf for full in full_paths for leaf in _split(full, value))
        else:  # a scalar knob (most): one edit per path, as _split would give
            leaves = tuple((full, value) for full in full_paths)
        placed = _PLACED[key] = (_advice(knob.text, spec_dotted), _dotted(full_paths[0]), leaves)
    return placed


# (rule, spec path) -> (the list's path below the spec, advice, field) of a finding on a list item
# KubeVirt added by default (a volume's disk, the pod interface): ~320 of 1,000 manifests' findings
# (DSK004), each of which made the same texts again (10 µs a finding, now 3).
_ADDED: dict[tuple[str, Path], tuple[Path, str, str]] = {}


def _added_item(code: str, knob: Any, spec_path: Path, spec_dotted: str) -> tuple[Path, str, str]:
    added = _ADDED.get((code, spec_path))
    if added is None:
        prefix = knob.path[:knob.path.index("[]")]
        full = (*spec_path, *prefix)
        advice = f"{_advice(knob.text, spec_dotted)}: write the item in {_dotted(full)} (KubeVirt added it with " \
                 "its defaults)"
        if len(_ADDED) >= _REMEMBERED:
            _ADDED.clear()
        added = _ADDED[(code, spec_path)] = (prefix, advice, _dotted(full))
    return added


def _at(spec: Any, path: tuple[str | int, ...]) -> Any:
    """The value at `path` below a plain value, None where there is none."""
    for key in path:
        if isinstance(key, int):
            spec = spec[key] if isinstance(spec, list) and 0 <= key < len(spec) else None
        else:
            spec = spec.get(key) if isinstance(spec, dict) else None
    return spec


def _written(spec: Any, path: tuple[str | int, ...]) -> bool:
    """Whether the VMI spec as written sets the value at `path`."""
    for key in path:
        if isinstance(key, int):
            spec = spec[key] if isinstance(spec, list) and 0 <= key < len(spec) else None
        else:
            spec = spec.get(key) if isinstance(spec, dict) else None
        if spec is None:
            return False
    return True


def _split(path: tuple[str | int, ...], value: object) -> list[tuple[tuple[str | int, ...], object]]:
    """A mapping knob as one edit per leaf: two rules' mappings on the same field (CLK002's and
    HV001's Hyper-V sets) then both apply, the same key asked twice is one edit, and a mapping
    the manifest already has keeps its other keys (a clock's hpet timer when the fix adds hyperv)."""
    if isinstance(value, dict) and value:
        return [edit for key, item in value.items() for edit in _split((*path, key), item)]
    return [(path, value)]


def _alias(element: etree._Element | None, tag: str) -> str | None:
    """The VMI's name for the device a finding points at: its alias `ua-NAME`."""
    node = element
    while node is not None and tag and node.tag != tag:
        node = node.getparent()
    if node is None:
        return None
    # the first <alias> child: iterchildren's tag test runs in lxml, find() parses an ElementPath
    # (~6 k instructions more, each of ~600 findings on a disk or an interface)
    alias = next(node.iterchildren("alias"), None)
    name = alias.get("name") if alias is not None else None
    return name[3:] if name and name.startswith("ua-") else None
