"""Custom checks written in a policy: an XPath, an assertion, an optional fix. No Python.

A policy may come from a stranger's pull request, so what it can make vmtune do is bounded:
XPaths are restricted to the linear subset of vmtune.xml.xpath, and `matches:` regexes run
on RE2 (google-re2), whose matching time is linear in the attribute, never exponential
like Python's backtracking `re` (`(a|aa)*c` on 40 characters: 17 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lxml import etree

from vmtune.errors import VmtuneError
from vmtune.facts.domain import Domain
from vmtune.facts.units import ULLONG_MAX, uint_or_none
from vmtune.patch.edits import Edit, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity

if TYPE_CHECKING:
    from vmtune.xml.xpath import Shape

MAX_REGEX_LENGTH = 1000
REGEX_MAX_MEM = 8 << 20  # RE2's default budget, stated: a larger program is a load-time error


class InvalidCheck(Exception):
    """A check the loader refuses: the key it is about (below checks[i]) and why."""

    def __init__(self, key_path: list[str | int], message: str) -> None:
        super().__init__(message)
        self.key_path = key_path
        self.message = message


def _xpath(expression: str, key_path: list[str | int], relative_only: bool = False,
           descendants: bool = True) -> tuple[Any, Shape]:
    """The compiled XPath and its shape (its `//` and what it costs)."""
    from vmtune.xml.xpath import XPathNotAllowed, compile_checked

    try:
        return compile_checked(expression, relative_only, descendants)
    except XPathNotAllowed as exc:
        raise InvalidCheck(key_path, f"{'.'.join(map(str, key_path))}: XPath outside the allowed subset: {exc} "
                           "(see SECURITY.md)") from None


def compile_regex(pattern: str) -> Any:
    """An RE2 program for `matches:` (same syntax as Python's re, minus backreferences and
    lookaround); a pattern RE2 refuses is a load-time error."""
    try:
        import re2  # google-re2: only policies with `matches:` pay for it
    except ImportError:  # a dependency, but vmtune may run as a library where it was not installed
        raise InvalidCheck(["assert", "matches"], "assert.matches needs google-re2 (pip install google-re2): "
                           "patterns never run on Python's backtracking re") from None

    if len(pattern) > MAX_REGEX_LENGTH:
        raise InvalidCheck(["assert", "matches"], f"assert.matches: longer than {MAX_REGEX_LENGTH} characters")
    options = re2.Options()
    options.log_errors = False  # RE2 would print the pattern to stderr itself
    options.max_mem = REGEX_MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidCheck(["assert", "matches"], f"assert.matches: not a pattern RE2 accepts: {reason}") from None


class CustomCheck(Rule):
    """A rule built from policy data; `doc` is whatever the policy author wrote."""

    def __init__(self, data: dict[str, Any], origin: str, index: int | None = None) -> None:
        self.data = data
        self.code = data["code"]  # type: ignore[misc]
        self.name = data["name"]  # type: ignore[misc]
        self.severity = Severity.parse(data["severity"])  # type: ignore[misc]
        self.message = data["message"]
        spec = data["assert"]
        self.select, select_shape = _xpath(data["select"], ["select"])
        # Evaluated once per selected element: relative, below it, and no second //.
        self.target, target_shape = _xpath(spec.get("path", "."), ["assert", "path"], relative_only=True,
                                           descendants=select_shape.descendants == 0)
        self.passes = (select_shape.passes, target_shape.passes)
        self.spec = spec
        self.matches = compile_regex(spec["matches"]) if "matches" in spec else None
        self.fix_spec = data.get("fix")
        self.fixable = self.fix_spec is not None  # type: ignore[misc]
        self.fix_safety = FixSafety(self.fix_spec["safety"]) if self.fix_spec else None  # type: ignore[misc]
        self.origin = origin
        self.index = index  # its place in the policy's checks, for the line of a budget error
        self.__doc__ = (
            f"## What it checks\n{data.get('doc') or self.message}\n\n"
            f"## Why it matters\nA custom check from policy {origin}.\n\n"
            f"## Example\n```\nselect: {data['select']}\nassert: {spec}\n```\n\n"
            f"## Fix\n{'Defined by the policy (' + self.fix_spec['safety'] + ').' if self.fix_spec else 'None.'}\n\n"
            f"## References\n- {origin}\n"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (CustomCheck, (self.data, self.origin, self.index))

    @property
    def area(self) -> str:
        return "X"

    @property
    def category(self) -> str:
        return "custom"

    def _value_ok(self, value: str | None) -> bool:
        spec = self.spec
        if value is None:
            return False
        if "equals" in spec and value != str(spec["equals"]):
            return False
        if "in" in spec and value not in [str(v) for v in spec["in"]]:
            return False
        if self.matches is not None and not self.matches.fullmatch(value):
            return False
        if "min" in spec or "max" in spec:
            number = uint_or_none(value, ULLONG_MAX, base16=True)
            if number is None:
                return False
            if ("min" in spec and number < spec["min"]) or ("max" in spec and number > spec["max"]):
                return False
        return True

    def _violation(self, selected: etree._Element) -> tuple[bool, etree._Element | None]:
        found = self.target(selected)
        target = found[0] if isinstance(found, list) and found and isinstance(found[0], etree._Element) else None
        want_present = self.spec.get("present", True)
        if target is None:
            return want_present, None
        if not want_present:
            return True, target
        if "attribute" in self.spec:
            return not self._value_ok(target.get(self.spec["attribute"])), target
        return False, target

    def _fix(self, selected: etree._Element, target: etree._Element | None) -> Fix | None:
        spec = self.fix_spec
        if not spec:
            return None
        edit: Edit
        if "set_attribute" in spec:
            if target is None:
                return None
            edit = set_attrs(target, {spec["set_attribute"]["name"]: spec["set_attribute"]["value"]})
        else:
            steps = path(*spec["ensure"]["path"].split("/"))
            edit = ensure(selected, steps, dict(spec["ensure"].get("attributes", {})))
        return Fix(f"{self.name} fix", (edit,), FixSafety(spec["safety"]))

    def _charge(self, domain: Domain, passes: int, calls: int = 1, findings: int = 0) -> None:
        """Spend XPath work from the domain's budget, or stop the run with one line naming the
        check: every check may be cheap, a policy of many on a large domain is not."""
        from vmtune.xml.xpath import MAX_WORK

        over = domain.xpath_budget.charge(passes, calls, findings)
        if over is not None:
            from vmtune.policy.document import check_line

            line = check_line(self.origin, self.index) if self.index is not None else None
            raise VmtuneError(f"custom check {self.code} not run on {domain.source}: the policy's checks would "
                              f"cost {over:,} node visits (XPaths and findings) on its {domain.xpath_budget.nodes:,} "
                              f"nodes, more than the {MAX_WORK:,} vmtune spends per domain (see SECURITY.md)",
                              self.origin, line)

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        select_passes, target_passes = self.passes
        self._charge(domain, select_passes)
        selection = self.select(domain.root)
        if isinstance(selection, list) and selection:
            # Evaluated once per selected node: the paths below them do not overlap (Shape.passes).
            self._charge(domain, target_passes, len(selection))
        violations = []
        for selected in selection if isinstance(selection, list) else []:
            if not isinstance(selected, etree._Element):
                continue
            violated, target = self._violation(selected)
            if violated:
                violations.append((selected, target))
        if violations:
            self._charge(domain, 0, 0, len(violations))
        for selected, target in violations:
            yield self.finding(domain, target if target is not None else selected, self.message,
                               self._fix(selected, target))
