"""The stack front ends, as the rule registry lists rules: each front end declares itself in its
package's `__init__.py` (`FRONTEND = FrontEnd(...)`), and PACKAGES names the packages. Nothing
else shared names a stack: adding one is a folder `vmtune/stacks/<name>/` and a line here.

A front end's package holds, besides its declaration:
    detect.py     wants(data: bytes, name: str) -> bool: could the file hold its objects? (cheap,
                  apart from the renderer, so that asking every front end loads none)
    frontend.py   render(files: list[StackFile], settings) -> (list[Rendered], set[str]): the
                  domains its stack would write, and the names of the files it recognised
and, when it declares them, its knob table (`knobs`: a module with ROWS and NO_KNOB, see
vmtune.stacks.knob_table) and the editor of the files it parses itself (`editor`: a module with
set_paths(data, plan, name) -> bytes).

Declarations are read when first asked for (a check of domain XML reads none), and a front end's
parts when it is used: the packages' `__init__.py` hold the declaration only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmtune.record import Record

# The front ends, in the order they claim files.
PACKAGES: list[str] = ["vmtune.stacks.kubevirt", "vmtune.stacks.openstack", "vmtune.stacks.terraform"]


class FrontEnd(Record):
    """What a front end takes and says: its files, its settings from the command line, its knobs.

    `name`: the stack, as its package, findings and knob tables name it ("kubevirt", "openstack");
    `title`: how messages name what its files define ("no KubeVirt or OpenStack definition
    in it"); `stack_title`: how they name the stack's knobs ("no nova knob"). `walked`: the suffixes
    a directory walk reads as its sources; `named`: those read when named on the command line;
    `own_format`: the suffixes of files it parses itself from their bytes (no YAML documents read).
    `settings(request)`: its settings from the command line (vmtune.request.CheckRequest), made once
    a run for every front end (a bad value is an error even when no file is the front end's);
    `printed`: for a finding placed on printed client output (Placement.command), what --fix
    says of such a file. `notes`: the front end's own findings (vmtune.stacks.frontend.Note: STK
    rules), rule code -> the functions that make them ("frontend._unknown_fields"): `vmtune rule
    CODE` points there, and tests/test_stack_registry.py holds each function to making that code.
    `templates`: it takes files that are templates of YAML (StackFile.templated: no documents read)
    that its frontend module's takes_template(name) accepts, and renders them with their own tool,
    or says why not."""

    __slots__ = ("editor", "knobs", "name", "named", "notes", "own_format", "package", "printed", "settings",
                 "stack_title", "templates", "title", "walked")

    def __init__(self, name: str, title: str, stack_title: str, walked: tuple[str, ...], named: tuple[str, ...],
                 own_format: tuple[str, ...] = (), editor: str | None = None, knobs: str | None = None,
                 settings: Callable[[Any], object] | None = None, printed: str | None = None,
                 notes: dict[str, tuple[str, ...]] | None = None, templates: bool = False) -> None:
        self.name = name
        self.title = title
        self.stack_title = stack_title
        self.walked = walked
        self.named = named
        self.own_format = own_format
        self.editor = editor
        self.knobs = knobs
        self.settings = settings
        self.printed = printed
        self.notes: dict[str, tuple[str, ...]] = notes or {}
        self.templates = templates
        self.package = ""  # set by frontends(): where its parts are

    def part(self, module: str) -> Any:
        """One of its modules (detect, frontend, its knob table, its editor), imported when first used."""
        import importlib

        return importlib.import_module(f"{self.package}.{module}")


_DECLARED: list[FrontEnd] = []


def frontends() -> list[FrontEnd]:
    """Every front end's declaration, in PACKAGES' order, read once."""
    if not _DECLARED:
        import importlib

        for package in PACKAGES:
            declared: FrontEnd = importlib.import_module(package).FRONTEND
            declared.package = package
            _DECLARED.append(declared)
    return _DECLARED


def by_name(name: str) -> FrontEnd | None:
    """The front end of a stack as findings name it ("kubevirt", "openstack")."""
    return next((f for f in frontends() if f.name == name), None)


def walked_suffixes() -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for f in frontends() for s in f.walked))


def named_suffixes() -> tuple[str, ...]:
    """Asked for every file of a run (twice): made once, as frontends() is read once."""
    global _NAMED
    if _NAMED is None:
        _NAMED = tuple(dict.fromkeys(s for f in frontends() for s in (*f.walked, *f.named)))
    return _NAMED


_NAMED: tuple[str, ...] | None = None


def owner_of_format(name: str) -> FrontEnd | None:
    """The front end that parses a file of this name itself (nova.conf, a .tf file), if one does."""
    lower = name.lower()
    return next((f for f in frontends() if f.own_format and lower.endswith(f.own_format)), None)
