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
    value      := a short relative path of child steps, without '..', '//' or predicates
                  (`source/@bridge`, `@type`, `text()`, `.`), or 'local-name()' / 'name()'
    op         := '=' | '!=' | '<' | '<=' | '>' | '>='
    literal    := 'text' | "text" | number

No other function (no count(), document(), id()), no axes (`descendant::`), no namespace
prefixes (`*[local-name()='x']` reaches namespaced elements), no variables, no predicate
inside a predicate, at most MAX_TERMS comparisons and MAX_LENGTH characters.

libxml2 merges node sets with duplicate checks that grow with the set: `//` after a step
that selects many nodes, or a `..` step, costs quadratic time on a large domain
(`//c/..` and `devices/*//c`: 4 s each on 60,000 disks). So `//` may only open the
path (from the document or, as `.//`, from the context element), once per check, and
there is no `..` step at all: inside a predicate it makes every node look at its parent's
other children, attributes or text (`//*[contains(../*, 'x')]`, `//*[../@x='1']` below an
element with many attributes, `//*[contains(.., 'x')]`: minutes on a 4 MiB domain). A
predicate on the parent's step says the same: `//*[@type='network']/model`.

An element compared as a value (`.`, `model`, `*` before `=`, `contains(`, `starts-with(`) is
compared by its own text, as if `/text()` followed it: XPath's string value of an element
is the text of its whole subtree, and `//*[contains(., 'x')]` on a domain nested 250 deep
copied each text 250 times (0.6 s for one comparison, minutes for a policy of checks).
An element as a test without comparison (`[readonly]`) still asks whether it exists.

Each remaining step maps a node set to its children, and each predicate looks at the
context node and the children below it: one evaluation visits each node of the domain at
most once per step and comparison (`Shape.passes`), which the callers budget per domain.
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


_PARENT = ("a .. step is not allowed (put the predicate on the parent's step: //*[@type='network']/model "
           "rather than //model[../@type='network'], //b[c] rather than //c/..)")


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
        self.steps = 0  # location steps of the path itself, and of the paths inside predicates
        self.text_after: list[int] = []  # where `/text()` goes: after an element compared as a value

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
            self.steps += 1
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
            raise XPathNotAllowed(_PARENT)
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
            self.compared(self.value())
            if not self.take(","):
                raise self.fail("expected ,")
            self.literal()
            if not self.take(")"):
                raise self.fail("expected )")
            return
        element = self.value()
        if self.take("=", "!=", "<", "<=", ">", ">="):
            self.compared(element)
            self.literal()

    def compared(self, element: _Token | None) -> None:
        """A value path ending at this element token is compared: by its own text (module doc)."""
        if element is not None:
            self.text_after.append(element.position + len(element.text))
            self.steps += 1

    def literal(self) -> None:
        token = self.peek()
        if token is None or token.kind not in ("literal", "number"):
            raise self.fail("expected a quoted string or a number")
        self.index += 1

    def value(self) -> _Token | None:
        """Parse a value; its last token when the path ends at an element (not @, text(), a name())."""
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise XPathNotAllowed(f"more than {MAX_TERMS} comparisons in predicates")
        if self.take("local-name(", "name("):
            if not self.take(")"):
                raise self.fail("expected )")
            self.steps += 1
            return None
        steps = 0
        while True:
            steps += 1
            self.steps += 1
            if steps > MAX_VALUE_STEPS:
                raise XPathNotAllowed(f"a path inside [] has more than {MAX_VALUE_STEPS} steps")
            if self.take("@"):
                if not (self.take("*") or self._name()):
                    raise self.fail("expected an attribute name after @")
                return None  # an attribute ends the path
            if self.take("text("):
                if not self.take(")"):
                    raise self.fail("expected ) after text(")
                return None
            if self.take(".."):
                raise XPathNotAllowed(_PARENT)
            element = self.peek()
            if not (self.take(".", "*") or self._name()):
                raise self.fail("expected a relative path, local-name() or a function allowed here")
            if self.peek() is not None and self.peek().text == "//":  # type: ignore[union-attr]
                raise self.fail("// is not allowed inside []")
            if self.peek() is not None and self.peek().text == "[":  # type: ignore[union-attr]
                raise self.fail("a predicate is not allowed inside []")
            if not self.take("/"):
                return element


@dataclass(frozen=True)
class Shape:
    """What an accepted expression costs: its `//` (0 or 1), its comparisons and steps, and the
    expression libxml2 evaluates (elements compared as values by their own text)."""

    descendants: int
    terms: int
    steps: int
    expression: str

    @property
    def passes(self) -> int:
        """How many times at most one evaluation visits each node of a domain: once to start,
        once per step of the path (each maps a node set to its children, the `//` one to every
        descendant), and once per step of each path inside a predicate (`source/@bridge` is
        two; each step goes one level down from the context node, and each node is reached
        from one ancestor only) or per name() test. A relative path evaluated once per
        selected node costs as much in all: the nodes one path selects are the same number of
        steps below the document (or nested below a `//`, and then no second `//` follows), so
        the parts of the tree they look at do not overlap."""
        return 1 + self.steps


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
    evaluated = expression
    for offset in reversed(parser.text_after):
        evaluated = evaluated[:offset] + "/text()" + evaluated[offset:]
    return Shape(parser.descendant_steps, parser.terms, parser.steps, evaluated)


# What evaluating the subset may cost per domain, in node visits (Shape.passes times the
# domain's nodes, elements, attributes, text and comments; XPATH_CALL per evaluation from
# Python, FINDING per finding of a custom check): custom checks and xpath suppressions
# together. The costliest visits measured take about 150 ns (`contains(*/*/*/*, 'x')` on
# 250-deep chains), so at most about 0.75 s. A domain of 1,000 nodes (an ordinary one)
# allows 5,000 passes; 50,000 elements in 150,000 nodes, 33.
MAX_WORK = 5_000_000
XPATH_CALL = 20  # ~3 us to enter libxml2's evaluator and wrap its result, in node visits
# A finding is made, kept and written: ~45 us and 5 KB in SARIF (3 checks of `//*` on 49,000
# elements: 6.6 s and 730 MB), so a check selecting every node is bounded by its output too.
FINDING = 300


class Budget:
    """The XPath work left for one domain (MAX_WORK); `nodes` are counted on first use."""

    __slots__ = ("nodes", "root", "spent")

    def __init__(self, root: object) -> None:
        self.root = root
        self.nodes = -1
        self.spent = 0

    def charge(self, passes: int, calls: int = 1, findings: int = 0) -> int | None:
        """Spend what `calls` evaluations of `passes` (and `findings`) cost at most; None when
        done, else the work they would have taken the domain to (nothing is spent then)."""
        if self.nodes < 0:
            # libxml2 counts in C: ~3 ms for 150,000 nodes, microseconds for an ordinary domain
            self.nodes = int(self.root.xpath("count(//node()) + count(//@*)"))  # type: ignore[attr-defined]
        cost = passes * self.nodes + calls * XPATH_CALL + findings * FINDING
        if self.spent + cost > MAX_WORK:
            return self.spent + cost
        self.spent += cost
        return None


def compile_checked(expression: str, relative_only: bool = False, descendants: bool = True) -> tuple[object, Shape]:
    """(lxml.etree.XPath, its shape) for an expression in the subset."""
    from lxml import etree

    shape = check(expression, relative_only, descendants)
    try:
        return etree.XPath(shape.expression, smart_strings=False), shape
    except etree.XPathError as exc:
        raise XPathNotAllowed(f"not XPath: {exc}") from None
