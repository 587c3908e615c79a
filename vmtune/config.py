"""`.vmtune.yaml`: a policy plus run settings, found by walking up from each checked file.

    extends: latency                 # built-in policy names or paths (other configs too)
    policies: [policies/db.yaml]     # more policies, relative to this file
    select: [HV, CLK]                # like --select
    ignore: [CLK006]                 # like --ignore
    fail-on: error
    unsafe-fixes: false
    host: hosts/hv01-caps.xml        # like --host / --domcaps
    domcaps: hosts/hv01-domcaps.xml
    exclude: ["vendor/**", "templates/*.xml"]
    per-file-ignores: {"legacy/*.xml": [USB001]}
    per-domain-ignores: {"win*": [CLK006]}
    rules: [...]                     # policy entries, as in a policy file
    checks: [...]                    # custom checks

Every path it names resolves inside the repository holding it (vmtune.policy.document).
Discovery stops at the work tree's top (else $HOME, else the file's own directory), and what it
finds is used only if another user could not have written it (Document.discovered).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError
from vmtune.fileio import normal_name, work_tree
from vmtune.policy.document import (
    BUILTIN_NAMES,
    CONFIG_NAME,
    Document,
    parse_document,
    read_text,
    yaml_line,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from os import PathLike

__all__ = ["CONFIG_NAME", "Settings", "discover", "load_settings"]
SETTINGS_KEYS = ("policies", "select", "ignore", "fail-on", "unsafe-fixes", "host", "domcaps", "exclude",
                 "per-file-ignores", "per-domain-ignores", "baseline")


class Settings:
    """Settings from a .vmtune.yaml. A plain class: a dataclass costs ~0.5 ms to create at every start."""

    __slots__ = ("baseline", "domcaps", "exclude", "fail_on", "host", "ignore", "path", "per_domain_ignores",
                 "per_file_ignores", "policies", "root", "select", "unsafe_fixes")

    def __init__(self, path: str | None = None, select: list[str] | None = None, ignore: list[str] | None = None,
                 fail_on: str | None = None, unsafe_fixes: bool | None = None, policies: list[str] | None = None,
                 root: str | None = None, host: str | None = None, domcaps: str | None = None,
                 exclude: list[tuple[str, str]] | None = None,
                 per_file_ignores: list[tuple[str, str, list[str]]] | None = None,
                 per_domain_ignores: dict[str, list[str]] | None = None, baseline: str | None = None) -> None:
        self.path = path  # the config file, resolved; None: no config
        self.select = select
        self.ignore: list[str] = [] if ignore is None else ignore
        self.fail_on = fail_on
        self.unsafe_fixes = unsafe_fixes
        # built-in names or resolved paths inside `root`
        self.policies: list[str] = [] if policies is None else policies
        self.root = root  # the tree the configuration's references are confined to
        self.host = host
        self.domcaps = domcaps
        self.exclude: list[tuple[str, str]] = [] if exclude is None else exclude  # (base dir, glob)
        self.per_file_ignores: list[tuple[str, str, list[str]]] = per_file_ignores or []
        self.per_domain_ignores: dict[str, list[str]] = {} if per_domain_ignores is None else per_domain_ignores
        self.baseline = baseline  # a baseline file, relative to the configuration

    def excluded(self, file: str | PathLike[str]) -> bool:
        if not self.exclude:  # asked per file of a batch; most settings exclude nothing
            return False
        return any(_glob_match(base, pattern, file) for base, pattern in self.exclude)

    def file_ignores(self, file: str | PathLike[str]) -> list[str]:
        if not self.per_file_ignores:  # asked per file of a batch, like excluded()
            return []
        return [sel for base, pattern, sels in self.per_file_ignores if _glob_match(base, pattern, file)
                for sel in sels]

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.path,
            "policies": self.policies or ["default"],
            "select": self.select,
            "ignore": self.ignore,
            "fail-on": self.fail_on or "warning",
            "unsafe-fixes": bool(self.unsafe_fixes),
            "host": self.host,
            "domcaps": self.domcaps,
            "exclude": [normal_name(os.path.join(base, pattern)) for base, pattern in self.exclude],
            "per-file-ignores": {normal_name(os.path.join(base, pattern)): sels
                                 for base, pattern, sels in self.per_file_ignores},
            "per-domain-ignores": self.per_domain_ignores,
            "baseline": self.baseline,
        }


def _glob_match(base: str, pattern: str, file: str | PathLike[str]) -> bool:
    """Whether file (a Path or a str: os.path, no pathlib needed) is base/pattern."""
    import fnmatch  # here: only configurations with exclude or per-file-ignores need it

    real, real_base = os.path.realpath(file), os.path.realpath(base)
    if real != real_base and not real.startswith(real_base.rstrip(os.sep) + os.sep):
        return False  # not inside base
    relative = os.path.relpath(real, real_base).replace(os.sep, "/")
    if fnmatch.fnmatchcase(relative, pattern):
        return True
    # "dir/**" and "**/x.xml" in the usual sense: any depth
    return (pattern.endswith("/**") and relative.startswith(pattern[:-2])) or \
        (pattern.startswith("**/") and fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern[3:]))


def discover(start: str | PathLike[str]) -> str | None:
    """The nearest .vmtune.yaml from start's directory up to the top of its work tree (the
    directory holding `.git`). Outside a work tree, up to $HOME when start is under it (the user's
    own tree, as yamllint stops there), else in start's directory only: never up to /, where a
    directory another user can write (/tmp, /srv/shared) would supply one. Whether what is found
    may be used is Document.discovered's question. (os.path, not pathlib: this runs for every
    check outside --isolated, and pathlib is needed only when a configuration is found.)"""
    directory = os.path.realpath(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    top = work_tree(directory) or _home_above(directory) or directory
    while True:
        config = os.path.join(directory, CONFIG_NAME)
        if os.path.isfile(config):
            return config
        parent = os.path.dirname(directory)
        if directory == top or parent == directory:
            return None
        directory = parent


def _home_above(directory: str) -> str | None:
    """$HOME, resolved, when directory is in it (a HOME of / is no boundary: it is none)."""
    home = os.environ.get("HOME")
    if not home or not os.path.isabs(home):
        return None
    home = os.path.realpath(home)
    if home == "/" or not (directory == home or directory.startswith(home + "/")):
        return None
    return home


def load_settings(path: str | PathLike[str], named: bool = True) -> Settings:
    """The configuration at path: named on the command line (read wherever it is), or discovered
    beside the checked files (itself confined to its repository). Its references never leave
    its repository either way."""
    return _load(Document.named(path) if named else Document.discovered(os.fspath(path)), ())


def _load(doc: Document, chain: tuple[str, ...]) -> Settings:
    if doc.path in chain:
        raise VmtuneError("configuration extends itself", doc.display)
    text = read_text(doc.path, doc.display, vet=doc.vet_opened)
    data = parse_document(text, doc.display, trusted=False, config=True)
    folder = os.path.dirname(doc.path)  # what `exclude`, `per-file-ignores` and references are relative to

    def line(key: str, *index: int) -> Callable[[], int | None]:
        """Where the document names a reference, found only for an error (it needs PyYAML)."""
        return lambda: yaml_line(text, [key, *index])

    def ref(key: str, *index: int) -> str:
        value = data[key][index[0]] if index else data[key]
        return doc.reference(value, key, line(key, *index))

    def policy(key: str, value: str, index: int | None) -> str | None:
        """A built-in name (unless a file of that name is beside the config), else the confined path."""
        if value in BUILTIN_NAMES and not os.path.isfile(os.path.join(folder, value)):
            return value if key == "policies" else None
        return doc.policy_reference(value, key, line(key) if index is None else line(key, index))

    settings = Settings()
    extends = data.get("extends", [])
    for index, parent in enumerate([extends] if isinstance(extends, str) else extends):
        found = policy("extends", parent, None if isinstance(extends, str) else index)
        if found is not None:
            settings = _merge(settings, _load(Document(found, found, doc.root), (*chain, doc.path)))
    own = Settings(
        path=doc.path,
        select=data.get("select"),
        ignore=list(data.get("ignore", [])),
        fail_on=data.get("fail-on"),
        unsafe_fixes=data.get("unsafe-fixes"),
        policies=[p for i, name in enumerate(data.get("policies", [])) if (p := policy("policies", name, i))],
        root=doc.root,
        host=ref("host") if "host" in data else None,
        domcaps=ref("domcaps") if "domcaps" in data else None,
        exclude=[(folder, g) for g in data.get("exclude", [])],
        per_file_ignores=[(folder, g, list(s)) for g, s in data.get("per-file-ignores", {}).items()],
        per_domain_ignores={g: list(s) for g, s in data.get("per-domain-ignores", {}).items()},
        baseline=ref("baseline") if "baseline" in data else None,
    )
    if any(k in data for k in ("rules", "checks", "extends")):
        own.policies.append(doc.path)  # the config is itself a policy
    return _merge(settings, own)


def _merge(parent: Settings, child: Settings) -> Settings:
    return Settings(
        path=child.path or parent.path,
        select=child.select if child.select is not None else parent.select,
        ignore=[*parent.ignore, *child.ignore],
        fail_on=child.fail_on or parent.fail_on,
        unsafe_fixes=child.unsafe_fixes if child.unsafe_fixes is not None else parent.unsafe_fixes,
        policies=child.policies or parent.policies,
        root=child.root or parent.root,
        host=child.host or parent.host,
        domcaps=child.domcaps or parent.domcaps,
        exclude=[*parent.exclude, *child.exclude],
        per_file_ignores=[*parent.per_file_ignores, *child.per_file_ignores],
        per_domain_ignores={**parent.per_domain_ignores, **child.per_domain_ignores},
        baseline=child.baseline or parent.baseline,
    )
