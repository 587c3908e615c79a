"""KubeVirt VMs in a Helm chart's templates: judged as `helm template` renders them.

A chart's template is a Go template, not YAML (StackFile.templated). When `helm` is on PATH, the
chart (the nearest directory above the template, inside the work tree, that holds Chart.yaml) is
rendered with its own values.yaml only, and each VirtualMachine rendered from a template is judged.
A finding is placed on the template's line that writes the judged value literally (the rendered
line, written the same in the template, once), else on the template's first line; no fix is
written into a chart (a value may come from values.yaml, a helper or a loop: the edit would be a
guess), the finding says so. A changed values.yaml or Chart.yaml renders its chart again.

As kustomize's builds (vmtune.stacks.kubevirt.kustomize): the chart is copied (regular files
inside the work tree only) to a temporary directory and rendered there, never with
--post-renderer or --dependency-update, with a scrubbed environment (Helm's homes in the temporary
directory), stdin closed, a time limit and an output cap. A chart whose Chart.yaml names a
dependency in a repository that charts/ does not vendor, or a file:// dependency outside the
work tree, is refused. Without helm, a VM template is skipped with one line saying helm is needed.
"""

from __future__ import annotations

import os
import re
from typing import Any

from vmtune.errors import VmtuneError, warn
from vmtune.programs import find_program
from vmtune.stacks.kubevirt.kustomize import bounded, scrubbed, spend
from vmtune.stacks.kubevirt.lookup import MAX_ENTRIES, MAX_FILE, MAX_READ, shown_name

CHART_FILES = ("values.yaml", "Chart.yaml")
RELEASE = "release"  # the release name the chart is rendered as (`{{ .Release.Name }}`)
_SOURCE = r"^# Source: (.+)$"  # compiled by re at its first use: most runs render no chart


def _fail(message: str, source: str, line: int | None = None) -> VmtuneError:
    return VmtuneError(f"helm: {message}", shown_name(source), line)


def chart_of(path: str, top: str) -> str | None:
    """The chart a file belongs to: a template below its `templates/`, or its values.yaml or
    Chart.yaml; None otherwise."""
    folder = os.path.dirname(path)
    if os.path.basename(path) in CHART_FILES:
        return folder if _is_chart(folder) else None
    while folder.startswith(top.rstrip(os.sep) + os.sep) or folder == top:
        if os.path.basename(folder) == "templates" and _is_chart(os.path.dirname(folder)):
            return os.path.dirname(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _is_chart(folder: str) -> bool:
    chart = os.path.join(folder, "Chart.yaml")
    return os.path.isfile(chart) and not os.path.islink(chart)


def _copy(chart: str, top: str, data_of: dict[str, bytes]) -> dict[str, bytes]:
    """Every file of the chart (a bounded walk), read at its real path inside the work tree."""
    real_top = os.path.realpath(top)
    files: dict[str, bytes] = {}
    total = entries = 0
    pending = [chart]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                listed = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        for entry in listed:
            entries += 1
            if entries > MAX_ENTRIES:
                raise _fail(f"the chart holds more than {MAX_ENTRIES:,} entries", chart)
            real = os.path.realpath(entry.path)
            if real != real_top and not real.startswith(real_top + os.sep):
                raise _fail(f"{shown_name(entry.path)} resolves outside the work tree",
                            os.path.join(chart, "Chart.yaml"))
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
                continue
            if not os.path.isfile(real):
                continue  # a symlink to a directory, a device, a FIFO: not part of what is rendered
            data = data_of.get(os.path.abspath(entry.path))
            if data is None:
                fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
                with os.fdopen(fd, "rb") as handle:
                    data = handle.read(MAX_FILE + 1)
            if len(data) > MAX_FILE:
                raise _fail(f"{shown_name(entry.path)} is larger than {MAX_FILE // 1024} KiB", chart)
            total += len(data)
            if total > MAX_READ:
                raise _fail(f"the chart holds more than {MAX_READ // (1024 * 1024)} MiB", chart)
            files[os.path.relpath(entry.path, chart)] = data
    return files


def _check_dependencies(chart: str, data: bytes, top: str) -> None:
    """Refuses a dependency helm would fetch, or read outside the work tree."""
    from vmtune.stacks.yamldoc import load

    where = os.path.join(chart, "Chart.yaml")
    docs = load(data, shown_name(where))  # bounded, as every file vmtune reads; bad input is one line
    deps = docs[0].root.get("dependencies") if docs else None
    for dep in deps.children if deps is not None and isinstance(deps.children, list) else ():
        if not isinstance(dep.children, dict):
            continue
        name = _scalar(dep.get("name"))
        repository = _scalar(dep.get("repository"))
        vendored = os.path.isdir(os.path.join(chart, "charts", name)) or any(
            e.startswith(f"{name}-") and e.endswith(".tgz") for e in _listing(os.path.join(chart, "charts")))
        if repository.startswith("file://"):
            target = os.path.realpath(os.path.join(chart, repository[len("file://"):]))
            if not target.startswith(os.path.realpath(top) + os.sep):
                raise _fail(f"dependency {name[:100]!r} is outside the work tree", where)
        elif repository and not vendored:
            raise _fail(f"dependency {name[:100]!r} comes from {repository[:200]!r}, not vendored in charts/: vmtune "
                        "fetches nothing", where)


def _scalar(node: Any) -> str:
    return str(node.value) if node is not None and node.value is not None and node.children is None else ""


def _listing(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def render_chart(chart: str, top: str, data_of: dict[str, bytes], helm: str) -> bytes:
    import tempfile

    files = _copy(chart, top, data_of)
    _check_dependencies(chart, files.get("Chart.yaml", b""), top)
    with tempfile.TemporaryDirectory(prefix="vmtune-helm-") as scratch:
        copy = os.path.join(scratch, "chart")
        for relative, data in files.items():
            path = os.path.join(copy, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "xb") as handle:
                handle.write(data)
        # the chart's own values.yaml only; never --post-renderer, --dependency-update or --validate
        output, error, code = bounded([helm, "template", RELEASE, copy], scrubbed(scratch), scratch)
    if code != 0:
        first = next((line for line in error.decode("utf-8", "replace").splitlines() if line.strip()), "")
        first = first.replace(copy + os.sep, "").replace(copy, ".")
        raise _fail(f"helm template failed: {first[:300]!r}" if first else f"helm template failed (exit {code})",
                    os.path.join(chart, "Chart.yaml"))
    return output


class Rendered:
    """A chart's rendering as the front end reads it: the stream as a file of its own, and the
    template each of its documents came from."""

    def __init__(self, chart: str, file: Any, sources: dict[int, str], names: dict[str, str]) -> None:
        self.chart = chart
        self.file = file
        self.sources = sources  # document index -> the template's absolute path
        self.names = names  # absolute path -> the name the run knows the file by
        self._lines: dict[str, list[str]] = {}

    def _template(self, path: str) -> list[str]:
        if path not in self._lines:
            from vmtune.fileio import read_nofollow

            # `path` comes from a `# Source:` line of the rendered output, which a template can
            # write itself: it may name a FIFO (open() would wait for ever), a device or a link
            try:
                data, _identity = read_nofollow(path, MAX_FILE)
                self._lines[path] = data[:MAX_FILE].decode("utf-8", "replace").splitlines()
            except (OSError, ValueError):
                self._lines[path] = []
        return self._lines[path]

    def where(self, doc_index: int, line: int) -> tuple[str, int]:
        """The template and its line for a line of the rendered stream: the template's line written
        as the rendered one (once, no template action in it), else the template's first line."""
        template = self.sources.get(doc_index)
        if template is None:
            return shown_name(os.path.join(self.chart, "Chart.yaml")), 1
        rendered = self.file.data.decode("utf-8", "replace").splitlines()
        text = _bare(rendered[line - 1]) if 0 < line <= len(rendered) else ""
        hits = [i for i, written in enumerate(self._template(template), 1)
                if text and "{{" not in written and _bare(written) == text]
        return self.names.get(template, shown_name(template)), hits[0] if len(hits) == 1 else 1

    def placed(self, rendered: Any, vmi: Any) -> Any:
        from vmtune.stacks.frontend import Note, Placement
        from vmtune.stacks.frontend import Rendered as Made

        synthetic = self.file.name
        notes = tuple(Note(n.code, *self.where(vmi.doc, n.line), n.message) if n.source == synthetic else n
                      for n in rendered.notes)
        inner = rendered.placer

        def place(code: str, element: Any, domain: Any) -> Any:
            placement = inner(code, element, domain)
            if placement.source != synthetic:
                return placement
            source, line = self.where(vmi.doc, placement.line)
            advice = placement.advice
            if placement.edits:
                advice += " (not fixed: the value comes from a Helm chart's template: change the template or " \
                          "the chart's values)"
            return Placement(source, line, placement.field, advice, None, placement.command, placement.knob,
                             placement.unseen)

        source, line = self.where(vmi.doc, self.file.docs[vmi.doc].root.line)
        label = shown_name(self.chart)
        return Made(f"{rendered.name} (helm {label})", rendered.xml, source, line, rendered.stack,
                    rendered.release, place, notes, rendered.os_family, rendered.os_id)


def _bare(line: str) -> str:
    """A line as compared: no indent, no list dash, no trailing comment or space, quotes off."""
    text = line.strip()
    if text.startswith("- "):
        text = text[2:].lstrip()
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip()
    return text.replace('"', "").replace("'", "")


def take(files: list[Any], context: Any) -> tuple[list[Any], dict[int, Rendered], set[str]]:
    """The files that are not a chart's (templates, values.yaml, Chart.yaml), the charts' renderings
    (by id of their stream's file), and the names of the chart files the renderings stand for."""
    from vmtune.fileio import work_tree
    from vmtune.stacks.frontend import read_file

    rest: list[Any] = []
    charts: dict[str, tuple[str, list[str]]] = {}  # chart -> (top, the templates given)
    data_of: dict[str, bytes] = {}
    names: dict[str, str] = {}
    for stack_file in files:
        base = os.path.basename(stack_file.name)
        if stack_file.stdin or not (stack_file.templated or base in CHART_FILES) or \
                not os.path.isfile(stack_file.name):
            rest.append(stack_file)
            continue
        path = os.path.abspath(stack_file.name)
        top = work_tree(os.path.dirname(path)) or os.path.dirname(path)
        chart = chart_of(path, top)
        if chart is None:
            rest.append(stack_file)
            continue
        data_of[path] = stack_file.data
        names[path] = stack_file.name
        given = charts.setdefault(chart, (top, []))[1]
        if stack_file.templated:
            given.append(stack_file.name)
    renderings: dict[int, Rendered] = {}
    members: set[str] = set()
    for chart, (top, templates) in sorted(charts.items()):
        if not templates and not _vm_templates(chart):
            continue  # another application's chart: not this front end's
        helm = find_program("helm", (top,))  # never one the tree holds (vmtune.programs)
        if helm is None:
            for name in templates:
                warn(f"{name}: skipped: a Helm chart's template is judged rendered, and rendering it needs helm "
                     "on PATH (or: helm template CHART | vmtune check -)")
            continue
        if not spend(context, os.path.join(chart, "Chart.yaml")):
            members |= {names[p] for p in data_of if chart_of(p, top) == chart}
            continue
        try:
            output = render_chart(chart, top, data_of, helm)
        except VmtuneError as exc:  # said; the other charts and files go on
            context.problems.append(exc)
            members |= {names[p] for p in data_of if chart_of(p, top) == chart}
            continue
        stream = read_file(shown_name(os.path.join(chart, "Chart.yaml")) + " (helm template)", output,
                           explicit=False)
        sources = _sources(output, stream, chart)
        found = Rendered(chart, stream, sources, names)
        renderings[id(stream)] = found
        members |= {names[p] for p in data_of if chart_of(p, top) == chart}
    return rest, renderings, members


def _vm_templates(chart: str) -> bool:
    """Whether a template of the chart may hold a KubeVirt object (its bytes, as detect.py)."""
    from vmtune.stacks.kubevirt.detect import wants

    folder = os.path.join(chart, "templates")
    for name in _listing(folder)[:MAX_ENTRIES]:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            try:
                with open(path, "rb") as handle:
                    if wants(handle.read(MAX_FILE), ""):
                        return True
            except OSError:
                continue
    return False


def _sources(output: bytes, stream: Any, chart: str) -> dict[int, str]:
    """Each document's template, from the `# Source: CHART/templates/x.yaml` line helm writes
    before it (the path starts with the chart's name, which the copy's directory need not be)."""
    text = output.decode("utf-8", "replace")
    marks = [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in re.finditer(_SOURCE, text, re.M)]
    found: dict[int, str] = {}
    for doc in stream.docs:
        # the last mark before the document naming a regular file of the chart (a template can
        # write a `# Source:` line of its own, naming anything)
        for _line, source in reversed([m for m in marks if m[0] < doc.root.line]):
            relative = source.split("/", 1)[1] if "/" in source else source
            path = os.path.normpath(os.path.join(chart, relative))
            if path.startswith(chart + os.sep) and os.path.isfile(path) and not os.path.islink(path):
                found[doc.index] = path
                break
    return found
