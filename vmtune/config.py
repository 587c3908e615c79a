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
"""

from __future__ import annotations

import copy
import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from vmtune.errors import VmtuneError

CONFIG_NAME = ".vmtune.yaml"
SETTINGS_KEYS = ("policies", "select", "ignore", "fail-on", "unsafe-fixes", "host", "domcaps", "exclude",
                 "per-file-ignores", "per-domain-ignores", "baseline")


@lru_cache(maxsize=1)
def config_schema() -> dict[str, Any]:
    """The policy schema plus the run settings."""
    from vmtune.policy.load import schema

    data = copy.deepcopy(schema())
    data["title"] = "vmtune configuration (.vmtune.yaml)"
    selectors = {"$ref": "#/$defs/selectors"}
    strings = {"type": "array", "items": {"type": "string"}}
    data["properties"].update({
        "policies": strings,
        "select": selectors,
        "ignore": selectors,
        "fail-on": {"$ref": "#/$defs/severity"},
        "unsafe-fixes": {"type": "boolean"},
        "host": {"type": "string"},
        "domcaps": {"type": "string"},
        "exclude": strings,
        "per-file-ignores": {"type": "object", "additionalProperties": selectors},
        "per-domain-ignores": {"type": "object", "additionalProperties": selectors},
        "baseline": {"type": "string"},
    })
    return data


@dataclass
class Settings:
    path: Path | None = None  # the config file; None: no config
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    fail_on: str | None = None
    unsafe_fixes: bool | None = None
    policies: list[str] = field(default_factory=list)
    host: str | None = None
    domcaps: str | None = None
    exclude: list[tuple[Path, str]] = field(default_factory=list)  # (base dir, glob)
    per_file_ignores: list[tuple[Path, str, list[str]]] = field(default_factory=list)
    per_domain_ignores: dict[str, list[str]] = field(default_factory=dict)
    baseline: str | None = None  # a baseline file, relative to the configuration

    def excluded(self, file: Path) -> bool:
        return any(_glob_match(base, pattern, file) for base, pattern in self.exclude)

    def file_ignores(self, file: Path) -> list[str]:
        return [sel for base, pattern, sels in self.per_file_ignores if _glob_match(base, pattern, file)
                for sel in sels]

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": str(self.path) if self.path else None,
            "policies": self.policies or ["default"],
            "select": self.select,
            "ignore": self.ignore,
            "fail-on": self.fail_on or "warning",
            "unsafe-fixes": bool(self.unsafe_fixes),
            "host": self.host,
            "domcaps": self.domcaps,
            "exclude": [str(base / pattern) for base, pattern in self.exclude],
            "per-file-ignores": {str(base / pattern): sels for base, pattern, sels in self.per_file_ignores},
            "per-domain-ignores": self.per_domain_ignores,
            "baseline": self.baseline,
        }


def _glob_match(base: Path, pattern: str, file: Path) -> bool:
    try:
        relative = file.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return False
    if fnmatch.fnmatchcase(relative, pattern):
        return True
    # "dir/**" and "**/x.xml" in the usual sense: any depth
    return (pattern.endswith("/**") and relative.startswith(pattern[:-2])) or \
        (pattern.startswith("**/") and fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern[3:]))


def discover(start: Path) -> Path | None:
    """The nearest .vmtune.yaml from start's directory up to the repository root."""
    directory = start.resolve()
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        config = candidate / CONFIG_NAME
        if config.is_file():
            return config
        if (candidate / ".git").exists():
            return None
    return None


def _resolve(base: Path, ref: str) -> str:
    from vmtune.policy.load import BUILTIN_NAMES

    if ref in BUILTIN_NAMES and not (base / ref).is_file():
        return ref
    return str((base / ref).resolve())


def load_settings(path: Path, _chain: tuple[Path, ...] = ()) -> Settings:
    from vmtune.policy.load import BUILTIN_NAMES, parse_policy_text

    path = path.resolve()
    if path in _chain:
        raise VmtuneError("configuration extends itself", str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VmtuneError(f"cannot read configuration: {exc.strerror or exc}", str(path)) from None
    data = parse_policy_text(text, str(path), trusted=False, schema_data=config_schema())
    base = path.parent
    settings = Settings()
    extends = data.get("extends", [])
    for parent in [extends] if isinstance(extends, str) else extends:
        if parent not in BUILTIN_NAMES or (base / parent).is_file():
            settings = _merge(settings, load_settings(base / parent, (*_chain, path)))
    own = Settings(
        path=path,
        select=data.get("select"),
        ignore=list(data.get("ignore", [])),
        fail_on=data.get("fail-on"),
        unsafe_fixes=data.get("unsafe-fixes"),
        policies=[_resolve(base, p) for p in data.get("policies", [])],
        host=str(base / data["host"]) if "host" in data else None,
        domcaps=str(base / data["domcaps"]) if "domcaps" in data else None,
        exclude=[(base, g) for g in data.get("exclude", [])],
        per_file_ignores=[(base, g, list(s)) for g, s in data.get("per-file-ignores", {}).items()],
        per_domain_ignores={g: list(s) for g, s in data.get("per-domain-ignores", {}).items()},
        baseline=str(base / data["baseline"]) if "baseline" in data else None,
    )
    if any(k in data for k in ("rules", "checks", "extends")):
        own.policies.append(str(path))  # the config is itself a policy
    return _merge(settings, own)


def _merge(parent: Settings, child: Settings) -> Settings:
    return Settings(
        path=child.path or parent.path,
        select=child.select if child.select is not None else parent.select,
        ignore=[*parent.ignore, *child.ignore],
        fail_on=child.fail_on or parent.fail_on,
        unsafe_fixes=child.unsafe_fixes if child.unsafe_fixes is not None else parent.unsafe_fixes,
        policies=child.policies or parent.policies,
        host=child.host or parent.host,
        domcaps=child.domcaps or parent.domcaps,
        exclude=[*parent.exclude, *child.exclude],
        per_file_ignores=[*parent.per_file_ignores, *child.per_file_ignores],
        per_domain_ignores={**parent.per_domain_ignores, **child.per_domain_ignores},
        baseline=child.baseline or parent.baseline,
    )
