"""The import graph of the vmtune package: no circle, and every layer imports only the layers
below it. Read from the source with `ast` (every import statement: at the top, in a function,
under TYPE_CHECKING), so that a circle hidden in a function or a type annotation is one too: it
still ties two modules so that neither can be read, tested or moved without the other."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import vmtune

PACKAGE = Path(vmtune.__file__).parent

# Lowest first. A module may import its own layer and those below, never one above; the longest
# matching name decides a module's layer (`stacks.knob_table`, the table of stack settings the advice
# on generated XML reads, sits below the stack front ends).
LAYERS: tuple[tuple[str, ...], ...] = (
    # what knows no domain: files, errors, escaping, XML and YAML reading, byte edits
    ("vmtune", "vmtune.__init__", "vmtune.escape", "vmtune.errors", "vmtune.fileio", "vmtune.inputs",
     "vmtune.record", "vmtune.cache", "vmtune.sources", "vmtune.terminal", "vmtune.shell_completion",
     "vmtune.yamldepth", "vmtune.xml", "vmtune.patch"),
    ("vmtune.facts",),  # the domain model
    ("vmtune.host",),  # host facts, inventory, planner
    ("vmtune.rules", "vmtune.schema_knobs", "vmtune.suppress", "vmtune.tool_advice"),  # the rules and what they read
    ("vmtune.stacks.knob_table", "vmtune.stacks.registry"),  # the front ends as declared; each stack's knob for a rule
    ("vmtune.manager_advice", "vmtune.policy"),  # advice per manager, policies
    ("vmtune.engine",),  # running the rules
    ("vmtune.config", "vmtune.fixer"),  # configurations; the fix loop
    ("vmtune.request", "vmtune.report", "vmtune.baseline"),  # settings per source; reports and baselines
    ("vmtune.live", "vmtune.stacks"),  # live domains; stack front ends
    ("vmtune.commands",),
    ("vmtune.cli", "vmtune.main", "vmtune.__main__", "vmtune.docs", "vmtune.completion", "vmtune.manpage"),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours an imported name is, or is in (`vmtune.rules.base.Rule` -> vmtune.rules.base)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports(modules: dict[str, Path] | None = None) -> dict[str, dict[str, int]]:
    """module -> {module of ours it imports: the line of the first such import}."""
    modules = modules if modules is not None else _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                # `from vmtune.rules import clock` imports the module vmtune.rules.clock
                wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                          for alias in node.names]
            for imported in wanted:
                target = _target(imported, modules)
                if target is not None and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def shortest_circle(component: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """The fewest modules that import each other round, within a component: [a, b, ..., a]."""
    members = set(component)
    best: list[str] = []
    for start in component:
        paths = {start: [start]}
        queue = [start]
        while queue:
            node = queue.pop(0)
            for nxt in sorted(graph[node]):
                if nxt == start and (not best or len(paths[node]) + 1 < len(best)):
                    best = [*paths[node], start]
                if nxt in members and nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    queue.append(nxt)
    return best


def _said(component: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    """A circle as the imports that make it: `vmtune/a.py:12 imports vmtune.b`, ..."""
    circle = shortest_circle(component, graph)
    lines = [f"  {modules[a].relative_to(PACKAGE.parent)}:{graph[a][b]} imports {b}"
             for a, b in itertools.pairwise(circle)]
    named = ", ".join(component[:4]) + (", ..." if len(component) > 4 else "")
    return f"circle among {len(component)} modules ({named}):\n" + "\n".join(lines)


def layer(name: str) -> int:
    best, rank = "", -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, number
    assert rank >= 0, f"{name} is in no layer: add it to LAYERS in {__file__}"
    return rank


def test_the_package_has_no_import_circle() -> None:
    modules = _modules()
    graph = imports(modules)
    assert len(graph) > 100 and "vmtune.stacks.frontend" in graph["vmtune.commands.check"]  # the graph is read
    found = cycles(graph)
    assert not found, "\n".join(_said(c, graph, modules) for c in found)


def test_each_layer_imports_only_the_layers_below() -> None:
    """Reports never import the live layer, the domain model never a stack or a command, the
    settings and the stack front ends never a command: the order of LAYERS."""
    modules = _modules()
    graph = imports(modules)
    upward = [f"{modules[a].relative_to(PACKAGE.parent)}:{line} imports {b} "
              f"(layer {layer(a)} imports layer {layer(b)})"
              for a in sorted(graph) for b, line in sorted(graph[a].items()) if layer(b) > layer(a)]
    assert not upward, "\n".join(upward)


def test_the_checks_find_a_circle_and_an_upward_import() -> None:
    """The two tests above can fail: a circle through a function-level import and an import of a
    layer above, written as the source would write them, are found."""
    graph = {"vmtune.facts.domain": {"vmtune.facts.guestos": 15},
             "vmtune.facts.guestos": {"vmtune.facts.creator": 3},
             "vmtune.facts.creator": {"vmtune.facts.domain": 40},
             "vmtune.report.text": {"vmtune.live.report": 58}}
    assert cycles(graph) == [["vmtune.facts.creator", "vmtune.facts.domain", "vmtune.facts.guestos"]]
    assert shortest_circle(cycles(graph)[0], graph) == [
        "vmtune.facts.creator", "vmtune.facts.domain", "vmtune.facts.guestos", "vmtune.facts.creator"]
    assert layer("vmtune.live.report") > layer("vmtune.report.text")
    assert layer("vmtune.stacks.frontend") > layer("vmtune.stacks.knob_table")
