"""Loading policies from YAML: built-in names or files, `extends`, schema validation.

Built-in policies are trusted and validated by the test suite, so a plain `vmtune check`
never imports jsonschema; user policies are always validated.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.policy.model import Entry, PolicySet, Scope, selector_matches
from vmtune.rules import BUILTIN_RULES
from vmtune.rules.base import Rule, Severity

BUILTIN_NAMES = ("default", "latency")


BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"  # package data (importlib.resources costs start-up)


def builtin_text(name: str) -> str:
    return (BUILTIN_DIR / f"{name}.yaml").read_text(encoding="utf-8")


def schema() -> dict[str, Any]:
    import json  # here: a built-in policy served from the cache needs no JSON (~1.5 ms at start)

    return json.loads((BUILTIN_DIR / "policy.schema.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _yaml_line(text: str, key_path: list[str | int]) -> int | None:
    """Line of the node at key_path in a YAML document (1-based), for error messages."""
    import yaml

    try:
        node: Any = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in key_path:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == key), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def validate(data: Any, text: str, source: str, schema_data: dict[str, Any] | None = None) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema_data or schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    error = jsonschema.exceptions.best_match(errors)
    key_path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            key_path.append(extra[0])
            line = _yaml_line(text, key_path)
            dotted = ".".join(str(k) for k in key_path)
            raise VmtuneError(f"invalid policy: unknown key '{dotted}'", source, line)
    dotted = ".".join(str(k) for k in key_path) or "(top level)"
    raise VmtuneError(f"invalid policy: key '{dotted}': {error.message}", source, _yaml_line(text, key_path))


def parse_policy_text(text: str, source: str, trusted: bool,
                      schema_data: dict[str, Any] | None = None) -> dict[str, Any]:
    """YAML text -> data, validated unless trusted; valid results are cached (see vmtune.cache)."""
    from vmtune import cache

    if not trusted:
        schema_data = schema_data or schema()
    # The key is everything the result depends on: the text and the schema it passed.
    if trusted:
        key = text
    else:
        import json

        key = f"{json.dumps(schema_data, sort_keys=True)}\0{text}"
    cached = cache.lookup(source, key)
    if isinstance(cached, dict):
        return cached
    import yaml

    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise VmtuneError(f"invalid YAML: {getattr(exc, 'problem', exc)}", source,
                          mark.line + 1 if mark else None) from None
    if data is None:
        data = {}  # an empty file (or only comments) is an empty policy, not an error
    if not trusted:
        validate(data, text, source, schema_data)
    data = data if isinstance(data, dict) else {}
    cache.store(source, key, data)
    return data


def _read(ref: str, base: Path | None) -> tuple[dict[str, Any], str, Path | None]:
    """A policy reference -> (data, display name, directory for relative extends)."""
    if ref in BUILTIN_NAMES and not (base and (base / ref).is_file()):
        return parse_policy_text(builtin_text(ref), f"<builtin:{ref}>", trusted=True), ref, None
    path = Path(ref) if base is None or Path(ref).is_absolute() else base / ref
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        hint = ""
        if "/" not in ref and not ref.endswith((".yaml", ".yml")):  # meant a built-in name
            hint = f"; built-in policies: {', '.join(BUILTIN_NAMES)}{did_you_mean(ref, BUILTIN_NAMES)}"
        raise VmtuneError(f"cannot read policy: {exc.strerror or exc}{hint}", str(path)) from None
    schema_data = None
    if path.name.endswith("vmtune.yaml"):  # a configuration (policy plus run settings)
        from vmtune.config import config_schema

        schema_data = config_schema()
    return parse_policy_text(text, str(path), trusted=False, schema_data=schema_data), str(path), path.parent


def load_policies(refs: list[str]) -> PolicySet:
    """Load policies in order (each after its `extends`); custom checks become rules."""
    entries: list[Entry] = []
    customs: list[Rule] = []
    custom_scopes: dict[str, Scope] = {}
    names: list[str] = []
    seen: set[str] = set()

    def visit(ref: str, base: Path | None, chain: tuple[str, ...]) -> None:
        data, display, directory = _read(ref, base)
        if display in chain:
            raise VmtuneError(f"policy extends itself through {' -> '.join((*chain, display))}", display)
        if display in seen:
            return
        extends = data.get("extends", [])
        for parent in [extends] if isinstance(extends, str) else extends:
            visit(parent, directory, (*chain, display))
        seen.add(display)
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
        from vmtune.policy.custom import CustomCheck

        for check in data.get("checks", []):
            try:
                rule = CustomCheck(check, display)
            except Exception as exc:  # lxml.etree.XPathSyntaxError, re.error
                raise VmtuneError(f"invalid custom check {check.get('code')}: {exc}", display,
                                  _line_for_check(display, check.get("code"))) from None
            if any(r.code == rule.code for r in (*BUILTIN_RULES, *customs)):
                raise VmtuneError(f"custom check code {rule.code} is already used", display)
            customs.append(rule)
            custom_scopes[rule.code] = Scope.from_data(check.get("when"))

    for ref in refs:
        visit(ref, Path.cwd() if ref not in BUILTIN_NAMES else None, ())
    policy = PolicySet(names, entries, (*BUILTIN_RULES, *customs), custom_scopes)
    for origin, selector in policy.unknown_selectors():
        raise VmtuneError(f"invalid policy: selector '{selector}' matches no rule"
                          f"{did_you_mean(selector, rule_keys(policy.rules))}", origin)
    for position, entry in enumerate(entries):
        index = sum(1 for e in entries[:position] if e.origin == entry.origin)  # its place in its own file
        check_params(entry, [r for r in policy.rules if any(selector_matches(s, r) for s in entry.select)], index)
    return policy


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def rule_keys(rules: Iterable[Rule]) -> list[str]:
    return [key for r in rules for key in (r.code, r.name)]


def check_params(entry: Entry, rules: list[Rule], index: int) -> None:
    """A parameter the selected rules do not take, or a value of the wrong kind, is an error of the
    policy (with its line), not an "internal error" of a rule blamed on some domain file."""
    for name, value in entry.params.items():
        takers = [r for r in rules if name in r.params]
        where = (entry.origin, _param_line(entry.origin, index, name))
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


def _param_line(origin: str, index: int, name: str) -> int | None:
    if origin.startswith("<builtin:"):
        return None
    try:
        text = Path(origin).read_text(encoding="utf-8")
    except OSError:
        return None
    return _yaml_line(text, ["rules", index, "params", name])


def _line_for_check(source: str, code: str | None) -> int | None:
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError:
        return None
    for number, line in enumerate(text.splitlines(), 1):
        if code and code in line:
            return number
    return None
