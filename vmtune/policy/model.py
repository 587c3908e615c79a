"""Policies as data, and their resolution for one domain."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

from vmtune.facts.domain import Domain
from vmtune.facts.units import parse_size
from vmtune.record import Record
from vmtune.rules.base import RENAMED, Rule, Severity

# Scope, Entry and RuleConfig are values (vmtune.record: a NamedTuple costs ~0.15 ms to create at every start).


class Scope(Record):
    """`when:` in a policy entry. Every condition given must hold."""

    __slots__ = ("everywhere", "memory_max_kib", "memory_min_kib", "names", "os", "tags", "types", "vcpus_max",
                 "vcpus_min")

    def __init__(self, os: tuple[str, ...] = (), names: tuple[str, ...] = (), types: tuple[str, ...] = (),
                 vcpus_min: int | None = None, vcpus_max: int | None = None, memory_min_kib: int | None = None,
                 memory_max_kib: int | None = None, tags: tuple[str, ...] = ()) -> None:
        self.os = os
        self.names = names
        self.types = types
        self.vcpus_min = vcpus_min
        self.vcpus_max = vcpus_max
        self.memory_min_kib = memory_min_kib
        self.memory_max_kib = memory_max_kib
        self.tags = tags
        # No condition (most entries): matches() runs per domain and entry, so this is decided once.
        self.everywhere = not (os or names or types or tags) and vcpus_min is None and vcpus_max is None \
            and memory_min_kib is None and memory_max_kib is None

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
        if self.everywhere:
            return True
        if self.os and (domain.os_family or "unknown") not in self.os:
            return False
        if self.names:
            import fnmatch  # here: most scopes name no domains

            if not any(fnmatch.fnmatchcase(domain.name, g) for g in self.names):
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


class Entry(Record):
    """One item of a policy's `rules:`."""

    __slots__ = ("ignore", "origin", "params", "scope", "select", "severity")

    def __init__(self, select: tuple[str, ...], ignore: tuple[str, ...], severity: Severity | None,
                 params: dict[str, Any], scope: Scope, origin: str) -> None:
        self.select = select
        self.ignore = ignore
        self.severity = severity
        self.params = params
        self.scope = scope
        self.origin = origin  # policy name, for show-settings and errors


class RuleConfig(Record):
    """How a policy enables one rule for a domain."""

    __slots__ = ("params", "severity")

    def __init__(self, severity: Severity | None, params: dict[str, Any]) -> None:
        self.severity = severity  # None: the rule's own (per finding) severity
        self.params = params


def selector_matches(selector: str, rule: Rule) -> bool:
    if RENAMED:  # a renamed code selects the rule it became (vmtune.rules.base.RENAMED)
        selector = RENAMED.get(selector, selector)
    if selector == "ALL":
        return True
    if selector == rule.name or selector == rule.code:
        return True
    return selector.isupper() and rule.code.startswith(selector)


class PolicySet:
    """The entries of the chosen policies in order, plus the rules they can refer to. (A plain
    class, no slots: entry_rules is a cached_property. A dataclass costs ~0.5 ms at every start.)"""

    def __init__(self, names: list[str], entries: list[Entry], rules: tuple[Rule, ...],
                 custom_scopes: dict[str, Scope] | None = None) -> None:
        self.names = names
        self.entries = entries
        self.rules = rules  # built-in rules followed by the policies' custom checks
        self.custom_scopes: dict[str, Scope] = {} if custom_scopes is None else custom_scopes
        self._resolved: dict[tuple[tuple[bool, ...], tuple[bool, ...]], dict[str, RuleConfig]] = {}
        self._matching: dict[str, tuple[Rule, ...]] = {}

    def matching(self, selector: str) -> tuple[Rule, ...]:
        """The rules `selector_matches` accepts for this selector, in registry order. Each selector
        is matched once per run, though loading, checking parameters and resolving all ask."""
        found = self._matching.get(selector)
        if found is None:
            if selector == "ALL":
                found = self.rules
            elif selector.isupper():  # a code prefix (CLK, HV00), or a name written in capitals
                found = tuple(r for r in self.rules if r.code.startswith(selector) or r.name == selector)
            else:  # a name, or a code only when it is not all capitals
                found = tuple(r for r in self.rules if r.name == selector or r.code == selector)
            self._matching[selector] = found
        return found

    def _selected(self, selectors: tuple[str, ...]) -> list[Rule]:
        if len(selectors) == 1:
            return list(self.matching(selectors[0]))
        chosen = {id(r) for s in selectors for r in self.matching(s)}
        return [r for r in self.rules if id(r) in chosen]

    @cached_property
    def entry_rules(self) -> list[tuple[Entry, list[Rule], frozenset[str]]]:
        """Each entry with the rules it selects (in registry order) and the codes it ignores."""
        return [(entry, self._selected(entry.select), frozenset(r.code for s in entry.ignore for r in self.matching(s)))
                for entry in self.entries]

    @cached_property
    def _everywhere(self) -> tuple[tuple[bool, ...], tuple[bool, ...]] | None:
        """resolve()'s key when no scope has a condition (all match, whatever the domain), else None."""
        scopes = [*self.custom_scopes.values(), *(e.scope for e in self.entries)]
        if not all(scope.everywhere for scope in scopes):
            return None
        return (tuple(True for _ in self.custom_scopes), tuple(True for _ in self.entries))

    def resolve(self, domain: Domain) -> dict[str, RuleConfig]:
        """code -> configuration of every rule enabled for this domain."""
        # Domains differ only in which scopes match; resolve each combination once. Without any
        # `when:` (the built-in policies) every scope matches every domain: nothing to evaluate.
        key = self._everywhere
        if key is None:
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
        for (entry, selected, ignored), matched in zip(self.entry_rules, entry_matches, strict=True):
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
                if not self.matching(sel):
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
