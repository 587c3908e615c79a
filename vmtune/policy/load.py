"""Loading policies from YAML: built-in names or files, `extends`, schema validation.

Built-in policies are trusted and validated by the test suite, so a plain `vmtune check`
never imports jsonschema; user policies are always validated. Reading, parsing and
confining the files is vmtune.policy.document's job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.policy.document import (
    BUILTIN_NAMES,
    Document,
    builtin_text,
    is_config,
    keep_text,
    parse_document,
    read_text,
    schema,
    yaml_line,
)
from vmtune.policy.model import Entry, PolicySet, Scope
from vmtune.rules import BUILTIN_RULES
from vmtune.rules.base import Rule, Severity

__all__ = ["BUILTIN_NAMES", "load_policies", "parse_policy_text", "schema"]
parse_policy_text = parse_document  # the name tests and callers know


class _Loaded:
    """One policy file as read: its data, how messages name it, its text (for line numbers)."""

    def __init__(self, data: dict[str, Any], display: str, text: str | None, doc: Document | None) -> None:
        self.data, self.display, self.text, self.doc = data, display, text, doc

    def line(self, key_path: list[str | int]) -> int | None:
        return yaml_line(self.text, key_path) if self.text is not None else None


def _builtin(name: str) -> _Loaded:
    return _Loaded(parse_document(builtin_text(name), f"<builtin:{name}>", trusted=True), name, None, None)


def _read(doc: Document) -> _Loaded:
    text = read_text(doc.path, doc.display, "policy")
    config = is_config(doc.path)  # a configuration: policy plus run settings
    return _Loaded(parse_document(text, doc.display, trusted=False, config=config), doc.display, text, doc)


def _top_level(ref: str, root: str | None) -> _Loaded:
    """A policy named on the command line (root None: read wherever it is) or by a configuration
    (already resolved inside the configuration's root)."""
    if ref in BUILTIN_NAMES:  # a configuration already turned a file of that name into its path
        return _builtin(ref)
    if root is not None:
        return _read(Document(ref, ref, root))
    if not os.path.exists(ref) and "/" not in ref and not ref.endswith((".yaml", ".yml")):  # meant a built-in
        raise VmtuneError("cannot read policy: No such file or directory; built-in policies: "
                          f"{', '.join(BUILTIN_NAMES)}{did_you_mean(ref, BUILTIN_NAMES)}", ref)
    return _read(Document.named(ref))


def _parent(child: _Loaded, ref: str, index: int | None) -> _Loaded:
    """A policy an `extends:` names: a built-in name, else a file inside the child's root."""
    if child.doc is None or (ref in BUILTIN_NAMES and not os.path.isfile(os.path.join(os.path.dirname(child.doc.path),
                                                                                       ref))):
        return _builtin(ref)  # built-in policies extend only built-in names
    key_path: list[str | int] = ["extends"] if index is None else ["extends", index]
    path = child.doc.policy_reference(ref, "extends", lambda: child.line(key_path))
    return _read(Document(path, path, child.doc.root))


def load_policies(refs: list[str], root: str | None = None) -> PolicySet:
    """Load policies in order (each after its `extends`); custom checks become rules.

    refs are built-in names or files: named on the command line when root is None (read
    wherever they are), else a configuration's, resolved inside its root. Every `extends`
    stays inside the root of the file that names it."""
    entries: list[Entry] = []
    customs: list[Rule] = []
    custom_scopes: dict[str, Scope] = {}
    names: list[str] = []
    seen: set[str] = set()
    loaded: dict[str, _Loaded] = {}

    def visit(policy: _Loaded, chain: tuple[str, ...]) -> None:
        data, display = policy.data, policy.display
        if display in chain:
            raise VmtuneError(f"policy extends itself through {' -> '.join((*chain, display))}", display)
        if display in seen:
            return
        extends = data.get("extends", [])
        for index, parent in enumerate([extends] if isinstance(extends, str) else extends):
            visit(_parent(policy, parent, None if isinstance(extends, str) else index), (*chain, display))
        seen.add(display)
        loaded[display] = policy
        if policy.text is not None and data.get("checks"):
            keep_text(display, policy.text)
        names.append(data.get("name", display))
        for item in data.get("rules", []):
            entries.append(Entry(
                select=tuple(item.get("select", ())),
                ignore=tuple(item.get("ignore", ())),
                severity=Severity.parse(item["severity"]) if "severity" in item else None,
                params=dict(item.get("params", {})),
                scope=Scope.from_data(item.get("when")),
                origin=display,
            ))
        for index, check in enumerate(data.get("checks", [])):
            from vmtune.policy.custom import CustomCheck, InvalidCheck  # here: most policies have no checks

            try:
                rule = CustomCheck(check, display, index)
            except InvalidCheck as exc:  # an XPath or regex the restricted syntax refuses
                raise VmtuneError(f"invalid custom check {check.get('code')}: {exc.message}", display,
                                  policy.line(["checks", index, *exc.key_path])) from None
            if any(r.code == rule.code for r in (*BUILTIN_RULES, *customs)):
                raise VmtuneError(f"custom check code {rule.code} is already used", display,
                                  policy.line(["checks", index, "code"]))
            # A name is a selector too (--select, --ignore, `rules:`, suppressions): a custom check
            # named like a built-in rule would be selected, ignored and shown in its place.
            if any(r.name == rule.name for r in (*BUILTIN_RULES, *customs)):
                raise VmtuneError(f"custom check name {rule.name} is already used", display,
                                  policy.line(["checks", index, "name"]))
            customs.append(rule)
            custom_scopes[rule.code] = Scope.from_data(check.get("when"))

    for ref in refs:
        visit(_top_level(ref, root), ())
    policy = PolicySet(names, entries, (*BUILTIN_RULES, *customs), custom_scopes)
    for origin, selector in policy.unknown_selectors():
        raise VmtuneError(f"invalid policy: selector '{selector}' matches no rule"
                          f"{did_you_mean(selector, rule_keys(policy.rules))}", origin)
    places: dict[str, int] = {}
    for entry, selected, _ignored in policy.entry_rules:
        index = places[entry.origin] = places.get(entry.origin, -1) + 1  # its place in its own file
        check_params(entry, selected, _param_line(loaded[entry.origin], index))
    return policy


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def rule_keys(rules: Iterable[Rule]) -> list[str]:
    return [key for r in rules for key in (r.code, r.name)]


def check_params(entry: Entry, rules: list[Rule], line_of: Callable[[str], int | None]) -> None:
    """A parameter the selected rules do not take, or a value of the wrong kind, is an error of the
    policy (with its line), not an "internal error" of a rule blamed on some domain file."""
    for name, value in entry.params.items():
        takers = [r for r in rules if name in r.params]
        where = (entry.origin, line_of(name))
        if not takers:
            known = sorted({p for r in rules for p in r.params})
            codes = ", ".join(r.code for r in rules) or "no rule"
            raise VmtuneError(f"invalid policy: parameter '{name}' is not taken by {codes} (they take: "
                              f"{', '.join(known) or 'none'}){did_you_mean(name, known)}", *where)
        default = takers[0].params[name]
        problem = _param_problem(default, value)
        if problem:
            raise VmtuneError(f"invalid policy: parameter '{name}' of {takers[0].code}: {problem}", *where)


def _param_problem(default: object, value: object) -> str | None:
    from vmtune.facts.units import parse_cpuset, parse_size

    if isinstance(default, bool) != isinstance(value, bool):
        return f"expected {'true or false' if isinstance(default, bool) else 'a value like ' + repr(default)}, " \
               f"not {value!r}"
    if isinstance(default, int) and (not isinstance(value, int) or value < 0):
        return f"expected a non-negative integer, not {value!r}"
    if isinstance(default, str) and not isinstance(value, str):
        return f"expected a string like {default!r}, not {value!r}"
    if isinstance(default, str) and default.endswith("iB"):
        try:
            parse_size(str(value))
        except ValueError:
            return f"expected a size such as 8GiB, not {value!r}"
    if isinstance(value, str) and default == "" and value and parse_cpuset(value) is None:
        return f"expected a cpuset such as 0-1,8-9, not {value!r}"
    return None


def _param_line(policy: _Loaded, index: int) -> Callable[[str], int | None]:
    return lambda name: policy.line(["rules", index, "params", name])
