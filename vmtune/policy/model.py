"""Policies as data, and their resolution for one domain."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from functools import cached_property
from typing import Any, NamedTuple

from vmtune.facts.domain import Domain
from vmtune.facts.units import parse_size
from vmtune.rules.base import Rule, Severity


class Scope(NamedTuple):
    """`when:` in a policy entry. Every condition given must hold."""

    os: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    vcpus_min: int | None = None
    vcpus_max: int | None = None
    memory_min_kib: int | None = None
    memory_max_kib: int | None = None
    tags: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: dict[str, Any] | None) -> Scope:
        if not data:
            return cls()

        def strings(key: str) -> tuple[str, ...]:
            value = data.get(key, ())
            return (value,) if isinstance(value, str) else tuple(value)

        vcpus, memory = data.get("vcpus", {}), data.get("memory", {})
        size = lambda v: None if v is None else parse_size(str(v))  # noqa: E731
        return cls(strings("os"), strings("name"), strings("type"), vcpus.get("min"), vcpus.get("max"),
                   size(memory.get("min")), size(memory.get("max")), strings("tag"))

    def matches(self, domain: Domain) -> bool:
        if self == _EVERYWHERE:
            return True
        if self.os and (domain.os_family or "unknown") not in self.os:
            return False
        if self.names and not any(fnmatch.fnmatchcase(domain.name, g) for g in self.names):
            return False
        if self.types and domain.hypervisor not in self.types:
            return False
        if self.vcpus_min is not None and domain.vcpus < self.vcpus_min:
            return False
        if self.vcpus_max is not None and domain.vcpus > self.vcpus_max:
            return False
        if self.memory_min_kib is not None and domain.memory_kib < self.memory_min_kib:
            return False
        if self.memory_max_kib is not None and domain.memory_kib > self.memory_max_kib:
            return False
        return not (self.tags and not (domain.tags & set(self.tags)))


_EVERYWHERE = Scope()


class Entry(NamedTuple):
    select: tuple[str, ...]
    ignore: tuple[str, ...]
    severity: Severity | None
    params: dict[str, Any]
    scope: Scope
    origin: str  # policy name, for show-settings and errors


class RuleConfig(NamedTuple):
    severity: Severity | None  # None: the rule's own (per finding) severity
    params: dict[str, Any]


def selector_matches(selector: str, rule: Rule) -> bool:
    if selector == "ALL":
        return True
    if selector == rule.name or selector == rule.code:
        return True
    return selector.isupper() and rule.code.startswith(selector)


class PolicySet:
    """The entries of the chosen policies in order, plus the rules they can refer to. (A plain
    class, no slots: _entry_rules is a cached_property. A dataclass costs ~0.5 ms at every start.)"""

    def __init__(self, names: list[str], entries: list[Entry], rules: tuple[Rule, ...],
                 custom_scopes: dict[str, Scope] | None = None) -> None:
        self.names = names
        self.entries = entries
        self.rules = rules  # built-in rules followed by the policies' custom checks
        self.custom_scopes: dict[str, Scope] = {} if custom_scopes is None else custom_scopes
        self._resolved: dict[tuple[tuple[bool, ...], tuple[bool, ...]], dict[str, RuleConfig]] = {}

    @cached_property
    def _entry_rules(self) -> list[tuple[Entry, list[Rule], frozenset[str]]]:
        """Each entry with the rules it selects and the codes it ignores, matched once."""
        return [(entry,
                 [r for r in self.rules if any(selector_matches(s, r) for s in entry.select)],
                 frozenset(r.code for r in self.rules if any(selector_matches(s, r) for s in entry.ignore)))
                for entry in self.entries]

    def resolve(self, domain: Domain) -> dict[str, RuleConfig]:
        """code -> configuration of every rule enabled for this domain."""
        # Domains differ only in which scopes match; resolve each combination once.
        key = (tuple(s.matches(domain) for s in self.custom_scopes.values()),
               tuple(e.scope.matches(domain) for e in self.entries))
        cached = self._resolved.get(key)
        if cached is None:
            cached = self._resolved[key] = self._resolve(*key)
        return cached

    def _resolve(self, custom_matches: tuple[bool, ...], entry_matches: tuple[bool, ...]) -> dict[str, RuleConfig]:
        enabled: dict[str, RuleConfig] = {}
        for code, matched in zip(self.custom_scopes, custom_matches, strict=True):
            if matched:
                enabled[code] = RuleConfig(None, {})
        for (entry, selected, ignored), matched in zip(self._entry_rules, entry_matches, strict=True):
            if not matched:
                continue
            for rule in selected:
                previous = enabled.get(rule.code)
                params = {**rule.params, **(previous.params if previous else {}), **entry.params}
                severity = entry.severity or (previous.severity if previous else None)
                enabled[rule.code] = RuleConfig(severity, params)
            for code in ignored:
                enabled.pop(code, None)
        return enabled

    def unknown_selectors(self) -> list[tuple[str, str]]:
        """(policy, selector) pairs that match no rule: typos are errors, not silent no-ops."""
        bad = []
        for entry in self.entries:
            for sel in (*entry.select, *entry.ignore):
                if not any(selector_matches(sel, r) for r in self.rules):
                    bad.append((entry.origin, sel))
        return bad


def apply_cli_selection(config: dict[str, RuleConfig], rules: Iterable[Rule], select: list[str],
                        ignore: list[str]) -> dict[str, RuleConfig]:
    """--select replaces the policy's selection (keeping its parameters); --ignore removes."""
    if select:
        chosen = {r.code for r in rules if any(selector_matches(s, r) for s in select)}
        params = {r.code: r.params for r in rules}
        config = {c: config.get(c, RuleConfig(None, dict(params.get(c, {})))) for c in chosen}
    if ignore:
        dropped = {r.code for r in rules if any(selector_matches(s, r) for s in ignore)}
        config = {c: v for c, v in config.items() if c not in dropped}
    return config
