"""Custom checks written in a policy: an XPath, an assertion, an optional fix. No Python."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import ULLONG_MAX, uint_or_none
from vmtune.patch.edits import Edit, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity


class CustomCheck(Rule):
    """A rule built from policy data; `doc` is whatever the policy author wrote."""

    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data = data
        self.code = data["code"]  # type: ignore[misc]
        self.name = data["name"]  # type: ignore[misc]
        self.severity = Severity.parse(data["severity"])  # type: ignore[misc]
        self.message = data["message"]
        self.select = etree.XPath(data["select"])
        spec = data["assert"]
        self.target = etree.XPath(spec.get("path", "."))
        self.spec = spec
        self.matches = re.compile(spec["matches"]) if "matches" in spec else None
        self.fix_spec = data.get("fix")
        self.fixable = self.fix_spec is not None  # type: ignore[misc]
        self.fix_safety = FixSafety(self.fix_spec["safety"]) if self.fix_spec else None  # type: ignore[misc]
        self.origin = origin
        self.__doc__ = (
            f"## What it checks\n{data.get('doc') or self.message}\n\n"
            f"## Why it matters\nA custom check from policy {origin}.\n\n"
            f"## Example\n```\nselect: {data['select']}\nassert: {spec}\n```\n\n"
            f"## Fix\n{'Defined by the policy (' + self.fix_spec['safety'] + ').' if self.fix_spec else 'None.'}\n\n"
            f"## References\n- {origin}\n"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (CustomCheck, (self.data, self.origin))

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

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        selection = self.select(domain.root)
        for selected in selection if isinstance(selection, list) else []:
            if not isinstance(selected, etree._Element):
                continue
            violated, target = self._violation(selected)
            if violated:
                yield self.finding(domain, target if target is not None else selected, self.message,
                                   self._fix(selected, target))
