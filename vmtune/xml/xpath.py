"""The XPath subset policies and domain suppressions may use: linear in the domain's size.

Custom checks (`select:`, `assert.path:`) and `<vmtune:ignore xpath=...>` come from files a
stranger may write (a pull request, or domain metadata anyone with define rights edits).
Full XPath 1.0 lets them cost quadratic or worse time (`//*[count(//*[count(//*)>0])>0]`
takes 13 s on a 33 KB domain) or reach outside the document (`document('/etc/passwd')`).
What they need is much less, and this module accepts only that:

    path       := ['/' | '//' | './/'] step ('/' step)*   or '/' alone
    step       := NAME | '*' | '.' | 'text()' | '@' NAME | '@*'    each with predicates
    predicate  := '[' INTEGER ']' | '[' expr ']'
    expr       := term (('and' | 'or') term)*
    term       := 'not(' expr ')' | '(' expr ')' | value [op literal]
                | 'contains(' value ',' literal ')' | 'starts-with(' value ',' literal ')'
    value      := a short relative path without '//' or predicates (`source/@bridge`, `@type`,
                  `text()`, `.`), or 'local-name()' / 'name()'
    op         := '=' | '!=' | '<' | '<=' | '>' | '>='
    literal    := 'text' | "text" | number

No other function (no count(), document(), id()), no axes (`descendant::`), no namespace
prefixes (`*[local-name()='x']` reaches namespaced elements), no variables, no predicate
inside a predicate, at most MAX_TERMS comparisons and MAX_LENGTH characters.

libxml2 merges node sets with duplicate checks that grow with the set: `//` after a step
that selects many nodes, or a `..` step, costs quadratic time on a large domain
(`//c/..` and `devices/*//c`: 4 s each on 60,000 disks). So `//` may only open the
path (from the document or, as `.//`, from the context element), once per check, and
`..` is allowed only inside predicates (`//b[../@x='1']`, constant per node). Each
remaining step maps a node set to its children, and each predicate looks at a bounded
neighbourhood of one node: linear in the domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LENGTH = 512
MAX_STEPS = 16
MAX_PREDICATES = 8  # per step
MAX_VALUE_STEPS = 4  # in a path inside a predicate
MAX_NESTING = 4  # not( and ( inside a predicate
MAX_TERMS = 16  # comparisons and tests in all predicates of an expression

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<literal>'[^']*'|"[^"]*")
    | (?P<number>\d+(?:\.\d+)?)
    | (?P<function>(?:local-name|name|text|not|contains|starts-with)\s*\()
    | (?P<forbidden>[A-Za-z_][\w.-]*\s*\(|[A-Za-z_][\w.-]*::|\$)
    | (?P<op>//|/|\.\.|\.|\[|\]|\(|\)|@|,|!=|<=|>=|=|<|>|\*)
    | (?P<name>[A-Za-z_][\w.-]*)
    | (?P<other>\S)
    )""", re.VERBOSE)


class XPathNotAllowed(ValueError):
    """An expression outside the subset; the message says what and where."""


@dataclass
class _Token:
    kind: str
    text: str
    position: int


def _tokens(expression: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None or match.end() == position:  # only trailing blanks are left
            break
        kind = match.lastgroup or "other"
        text = match.group(kind)
        if kind == "other":
            raise XPathNotAllowed(f"'{text}' is not allowed (column {match.start(kind) + 1})")
        if kind == "forbidden":
            what = {"(": f"function {text.rstrip('(').strip()}()", ":": f"axis {text}", "$": "a variable"}[text[-1]]
            raise XPathNotAllowed(f"{what} is not allowed (column {match.start(kind) + 1})")
        if kind == "function":
            text = text.rstrip("(").strip() + "("
        tokens.append(_Token(kind, text, match.start(kind)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, expression: str) -> None:
        self.tokens = _tokens(expression)
        self.index = 0
        self.descendant_steps = 0
        self.terms = 0

    # -- helpers
    def peek(self, offset: int = 0) -> _Token | None:
        position = self.index + offset
        return self.tokens[position] if position < len(self.tokens) else None

    def take(self, *texts: str) -> _Token | None:
        token = self.peek()
        if token is not None and token.kind in ("op", "function", "name") and token.text in texts:
            self.index += 1
            return token
        return None

    def fail(self, what: str) -> XPathNotAllowed:
        token = self.peek()
        where = f"'{token.text}' (column {token.position + 1})" if token else "the end"
        return XPathNotAllowed(f"{what}, found {where}")

    # -- grammar
    def path(self) -> None:
        steps = 0
        if self.take("/"):
            if self.peek() is None:
                return  # the document itself
        elif self.take("//"):
            self.descendant_steps += 1
        while True:
            self.step()
            steps += 1
            if steps > MAX_STEPS:
                raise XPathNotAllowed(f"more than {MAX_STEPS} steps")
            if self.take("/"):
                continue
            token = self.peek()
            if token is not None and token.text == "//":
                previous = self.tokens[self.index - 1]
                if not (steps == 1 and previous.text == "." and self.index == 1):
                    raise self.fail("// may only open the path (//name, or .//name below the element)")
                self.index += 1
                self.descendant_steps += 1
                continue
            return

    def step(self) -> None:
        if self.take("@"):
            if not (self.take("*") or self._name()):
                raise self.fail("expected an attribute name after @")
        elif self.take("text("):
            if not self.take(")"):
                raise self.fail("expected ) after text(")
        elif self.take(".."):
            raise XPathNotAllowed("a .. step is allowed only inside [] (select the parent with a predicate: "
                                  "//b[c] rather than //c/..)")
        elif not (self.take(".", "*") or self._name()):
            raise self.fail("expected an element name, *, ., text() or @attribute")
        predicates = 0
        while self.take("["):
            predicates += 1
            if predicates > MAX_PREDICATES:
                raise XPathNotAllowed(f"more than {MAX_PREDICATES} predicates on one step")
            token = self.peek()
            if token is not None and token.kind == "number" and (self.peek(1) or _Token("", "", 0)).text == "]":
                self.index += 1  # [2]: a position
            else:
                self.expr(0)
            if not self.take("]"):
                raise self.fail("expected ]")

    def _name(self) -> bool:
        token = self.peek()
        if token is not None and token.kind == "name" and token.text not in ("and", "or"):
            self.index += 1
            return True
        return False

    def expr(self, nesting: int) -> None:
        self.term(nesting)
        while self.take("and", "or"):
            self.term(nesting)

    def term(self, nesting: int) -> None:
        if self.take("not(", "("):
            if nesting >= MAX_NESTING:
                raise XPathNotAllowed(f"more than {MAX_NESTING} nested parentheses")
            self.expr(nesting + 1)
            if not self.take(")"):
                raise self.fail("expected )")
            return
        if self.take("contains(", "starts-with("):
            self.value()
            if not self.take(","):
                raise self.fail("expected ,")
            self.literal()
            if not self.take(")"):
                raise self.fail("expected )")
            return
        self.value()
        if self.take("=", "!=", "<", "<=", ">", ">="):
            self.literal()

    def literal(self) -> None:
        token = self.peek()
        if token is None or token.kind not in ("literal", "number"):
            raise self.fail("expected a quoted string or a number")
        self.index += 1

    def value(self) -> None:
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise XPathNotAllowed(f"more than {MAX_TERMS} comparisons in predicates")
        if self.take("local-name(", "name("):
            if not self.take(")"):
                raise self.fail("expected )")
            return
        steps = 0
        while True:
            steps += 1
            if steps > MAX_VALUE_STEPS:
                raise XPathNotAllowed(f"a path inside [] has more than {MAX_VALUE_STEPS} steps")
            if self.take("@"):
                if not (self.take("*") or self._name()):
                    raise self.fail("expected an attribute name after @")
                return  # an attribute ends the path
            if self.take("text("):
                if not self.take(")"):
                    raise self.fail("expected ) after text(")
                return
            if not (self.take(".", "..", "*") or self._name()):
                raise self.fail("expected a relative path, local-name() or a function allowed here")
            if self.peek() is not None and self.peek().text == "//":  # type: ignore[union-attr]
                raise self.fail("// is not allowed inside []")
            if self.peek() is not None and self.peek().text == "[":  # type: ignore[union-attr]
                raise self.fail("a predicate is not allowed inside []")
            if not self.take("/"):
                return


@dataclass(frozen=True)
class Shape:
    """What an accepted expression costs: its `//` (0 or 1) and its comparisons."""

    descendants: int
    terms: int


def check(expression: str, relative_only: bool = False, descendants: bool = True) -> Shape:
    """Raise XPathNotAllowed unless the expression is in the subset; return its shape.
    relative_only: no leading / or // (assert paths, evaluated once per selected element,
    stay below it); descendants False: no `//` at all."""
    if len(expression) > MAX_LENGTH:
        raise XPathNotAllowed(f"longer than {MAX_LENGTH} characters")
    if not expression.strip():
        raise XPathNotAllowed("empty")
    parser = _Parser(expression)
    first = parser.peek()
    if relative_only and first is not None and first.text in ("/", "//"):
        raise XPathNotAllowed("must be relative to the selected element (no leading /)")
    parser.path()
    if parser.peek() is not None:
        raise parser.fail("expected / or the end")
    if parser.descendant_steps > (1 if descendants else 0):
        raise XPathNotAllowed("at most one // per check" if descendants else
                              "// is allowed once per check: the select already has it")
    return Shape(parser.descendant_steps, parser.terms)


def compile_checked(expression: str, relative_only: bool = False, descendants: bool = True) -> tuple[object, Shape]:
    """(lxml.etree.XPath, its shape) for an expression in the subset."""
    from lxml import etree

    shape = check(expression, relative_only, descendants)
    try:
        return etree.XPath(expression, smart_strings=False), shape
    except etree.XPathError as exc:
        raise XPathNotAllowed(f"not XPath: {exc}") from None
