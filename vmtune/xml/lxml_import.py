"""lxml.etree imported without the standard library's inspect module.

lxml.etree takes one name from inspect as it is imported (`getfullargspec`, which it calls only
to read the start() of a parser target, XMLParser(target=...): vmtune gives none), and inspect
imports ast, dis, tokenize and linecache: 26.8 M of the 112 M instructions of `import
lxml.etree`, ~4.5 ms of every `vmtune check` (issue 45: a one-file check against `import
lxml.etree`, and the serial part of a run over many files, before its workers fork). While
lxml.etree is imported, `inspect` is a module whose names import the real one when first asked
for; after, the real one is imported as usual by whoever needs it."""

from __future__ import annotations

import sys
import types
from typing import Any


def _real() -> types.ModuleType:
    """The standard library's inspect, imported now if only the stand-in was."""
    import importlib

    if isinstance(sys.modules.get("inspect"), _StandIn):
        del sys.modules["inspect"]
    return importlib.import_module("inspect")


class _StandIn(types.ModuleType):
    """inspect as lxml.etree's import sees it: each name asked for is the real one's, except
    getfullargspec, which imports the real module when it is called."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real(), name)


def _getfullargspec(func: Any) -> Any:
    return _real().getfullargspec(func)


def import_lxml() -> None:
    """Import lxml.etree, with the stand-in for inspect unless inspect is already imported."""
    if "lxml.etree" in sys.modules or "inspect" in sys.modules:
        return
    stand_in = _StandIn("inspect")
    stand_in.getfullargspec = _getfullargspec  # type: ignore[attr-defined]
    sys.modules["inspect"] = stand_in
    try:
        import lxml.etree  # noqa: F401
    finally:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
