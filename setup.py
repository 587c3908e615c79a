"""The parts of the build pyproject.toml cannot declare for every setuptools this project
supports: an optional C module, with the Python it stands in for (see its header): the reader of
YAML manifests (vmtune/stacks/_yamlnodes.c). Without a compiler or libyaml's headers it is
skipped, and vmtune reads YAML with PyYAML alone.

The modules vmtune.compiled names, compiled with mypyc (their own source, to C) where mypy (a
build requirement in pyproject.toml) and a C compiler are: all of them or none, so a build where
mypy is missing, its type check fails or the C does not compile installs the Python source alone,
which runs the same. An in-place build (an editable install) also writes the marker with which
`import vmtune` runs them from their source once edited (vmtune.compiled.guard).

And the commit the package is built from, written beside it (vmtune/commit.py): releases are
commits on main, so `vmtune --version` names the commit where the build knew it."""

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _module(name):  # vmtune/NAME.py by its path: vmtune itself is not importable before it is built
    spec = importlib.util.spec_from_file_location(f"_vmtune_{name}", HERE / "vmtune" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILED = _module("compiled")  # the modules compiled with mypyc, the group, the in-place marker


class BuildPyWithCommit(build_py):
    """build_py, plus vmtune/_commit.txt in the build when the tree is a git checkout (an editable
    install reads its checkout's HEAD at run time instead)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        commit = _module("commit")
        sha = commit.head_commit(HERE)
        if sha:
            target = Path(self.build_lib) / "vmtune" / commit.COMMIT_FILE
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(sha + "\n")


class BuildExtCompiling(build_ext):
    """build_ext, plus the modules of vmtune.compiled compiled with mypyc: all or none.

    mypyc runs here, when extensions are built, and not when setup.py is read: reading it (pip's
    metadata step, sdist) needs no type check and no C. VMTUNE_PURE=1 builds none (a test that only
    looks at a wheel's other files)."""

    def finalize_options(self):
        self._native = _native_extensions() if not os.environ.get("VMTUNE_PURE") else []
        self.distribution.ext_modules = [*(self.distribution.ext_modules or []), *self._native]
        super().finalize_options()

    def build_extensions(self):
        every = self.extensions
        native = set(map(id, self._native))
        self.extensions = [ext for ext in every if id(ext) not in native]
        try:
            super().build_extensions()  # the optional C reader, as before
        finally:
            self.extensions = every  # run() copies each to the source tree after (--inplace)
        if not self._native:
            return
        try:
            for ext in self._native:
                self.build_extension(ext)
        except Exception as exc:  # a compiler error, a missing header: the Python source runs instead
            print(f"vmtune: compiling with mypyc failed ({exc}): installing the Python source alone",
                  file=sys.stderr)
            self.extensions = [ext for ext in every if id(ext) not in native]  # run() removes what was built
            self._native = []

    def run(self):
        super().run()  # setuptools builds with inplace off, then copies each module to the source tree
        inplace = self.inplace or getattr(self, "editable_mode", False)
        self._remove_others(Path(self.build_lib), HERE if inplace else None)
        if inplace:
            marker = HERE / "vmtune" / COMPILED.INPLACE_MARKER
            if self._native:
                marker.write_text("\n".join(COMPILED.MODULES) + "\n")
            else:
                marker.unlink(missing_ok=True)

    def _remove_others(self, build_lib, tree):
        """The compiled modules an earlier build left in build/ (which a wheel packs whole) or in
        the source tree, and this one did not make: a module no longer compiled, or every mypyc
        module once compiling failed. A compiled module whose shared library no longer holds it
        makes `import vmtune` fail."""
        suffix = self.get_ext_filename("x")[len("x"):]
        for root in (build_lib, tree):
            if root is None:
                continue
            made = {root / self.get_ext_filename(ext.name) for ext in self.extensions}
            for found in (root / "vmtune").rglob("*" + suffix):
                if found not in made:
                    found.unlink()


def _native_extensions():
    """mypyc's extensions for vmtune.compiled's modules, or none (said on stderr) where it cannot."""
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("vmtune: mypy (mypyc) is not installed: installing the Python source alone", file=sys.stderr)
        return []
    sources = [os.path.relpath(COMPILED.source_path(str(HERE / "vmtune"), name)) for name in COMPILED.MODULES]
    try:
        # -O1: half the C compiler's time of -O3 (13 s against 32 s here) for 0.3 % more
        # instructions over 1,000 manifests (2,255.2 M against 2,249.1 M; docs/benchmarks.md)
        return mypycify(sources, group_name=COMPILED.GROUP, debug_level="0", opt_level="1")
    except (Exception, SystemExit) as exc:  # mypy's type check failed: it exits
        print(f"vmtune: mypyc refused the modules ({exc}): installing the Python source alone", file=sys.stderr)
        return []


setup(ext_modules=[Extension("vmtune.stacks._yamlnodes", ["vmtune/stacks/_yamlnodes.c"], libraries=["yaml"],
                             optional=True)],
      cmdclass={"build_py": BuildPyWithCommit, "build_ext": BuildExtCompiling})
