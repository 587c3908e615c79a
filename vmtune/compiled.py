"""The modules a build compiles with mypyc, and the guard of a developer's in-place build.

mypyc compiles these modules' own source to C (the same code, not a second implementation of
it): 16.7 % fewer instructions over 1,000 KubeVirt manifests, 10.6-10.9 % over domain XML
(issue 45, docs/benchmarks.md). setup.py builds them where mypy and a C compiler are; a build
without either, or whose compiling fails, installs the Python source alone and runs it.

An in-place build (an editable install, `setup.py build_ext --inplace`) leaves each compiled
module beside its source, and Python imports the compiled one first: after an edit of the
source (or a checkout that changes it) the build would go on running the old code. So such a
build writes INPLACE_MARKER, naming the modules it compiled, and `import vmtune` (guard) runs
all of them from their source as soon as one source is newer than the marker: all, not
only the edited one, since compiled modules call each other inside their shared library and
would keep the old one. A wheel has no marker: the check is one failed stat."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:
    def mypyc_attr(*attrs: Any, **settings: Any) -> Any:
        """mypy_extensions.mypyc_attr, which mypyc reads in the source (a class it leaves
        interpreted, one interpreted classes may subclass) but also calls at run time on such a
        class: a no-op here, so that a compiled vmtune needs no mypy_extensions where it runs."""
        return lambda cls: cls

MODULES = (
    "vmtune.stacks.kubevirt.render",
    "vmtune.stacks.kubevirt.fields",
    "vmtune.stacks.kubevirt.frontend",
    "vmtune.stacks.kubevirt.instancetypes",
    "vmtune.facts.units",
    "vmtune.facts.domain",
    "vmtune.engine",
    "vmtune.stacks.frontend",
    "vmtune.facts.lazy",
    "vmtune.report.text",
)
# The shared library the modules are compiled into (mypyc's group: calls between them are C calls).
# Inside the package, so that every kind of editable install finds it; mypyc then derives a
# compiled module's __file__ as if the library were above the package (PACKAGE/vmtune/stacks/...):
# nothing reads these modules' __file__ (nor __spec__.origin, as wrong for a module first imported
# by another of the library's: vmtune.commands.check stamps source_path instead).
GROUP = "vmtune._native"
INPLACE_MARKER = "_compiled_inplace.txt"


def source_path(package_dir: str, module: str) -> str:
    """vmtune.a.b -> PACKAGE_DIR/a/b.py"""
    return os.path.join(package_dir, *module.split(".")[1:]) + ".py"


def stale(package_dir: str, modules: list[str], built_ns: int) -> bool:
    """Whether any module's source changed after the build (built_ns: the marker's mtime, written
    once the build read every source), or has no compiled module beside it."""
    import importlib.machinery

    for module in modules:
        source = source_path(package_dir, module)
        try:
            if os.stat(source).st_mtime_ns > built_ns:
                return True
        except OSError:
            return True
        stem = source[:-len(".py")]
        if not any(os.path.exists(stem + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES):
            return True
    return False


class _FromSource:
    """A meta path finder that imports the named modules from their .py source."""

    def __init__(self, package_dir: str, modules: list[str]) -> None:
        self.paths = {module: source_path(package_dir, module) for module in modules}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.paths:
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(name, self.paths[name])


def guard(package_dir: str) -> None:
    """In an in-place build: the compiled modules run from source when any is stale (see above)."""
    try:
        with open(os.path.join(package_dir, INPLACE_MARKER), encoding="utf-8") as marker:
            modules = marker.read().split()
            built_ns = os.fstat(marker.fileno()).st_mtime_ns
    except OSError:
        return
    if modules and stale(package_dir, modules, built_ns):
        sys.meta_path.insert(0, _FromSource(package_dir, modules))
