"""The rule contract: metadata, documentation, a pure check, and fixes as edit lists.

A rule is a class whose docstring is its documentation, written under fixed headings
(What it checks / Why it matters / Example / Fix / References), like ruff's rule modules.
`vmtune rule CODE`, `docs/rules.md` and SARIF help text all render that docstring.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.guestos import provenance_note
from vmtune.patch.edits import Edit
from vmtune.record import Record
from vmtune.xml.paths import stable_path
from vmtune.xml.safe import line_of

if TYPE_CHECKING:
    from vmtune.facts.host import Host  # annotations only: host facts load with --host
    from vmtune.host.inventory import Inventory

T = TypeVar("T")


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    def __str__(self) -> str:
        return _SEVERITY_LABELS[self]  # enum's .name is a descriptor call; this runs per finding

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


_SEVERITY_LABELS = {severity: severity.name.lower() for severity in Severity}


def cleandoc(doc: str) -> str:
    """inspect.cleandoc, written out as CPython 3.11 has it (tests/test_docs.py holds them
    equal): importing inspect imports ast, dis, tokenize and linecache, ~4.5 ms of a one-file
    `-f sarif` check, whose report carries each reported rule's documentation."""
    lines = doc.expandtabs().split("\n")
    margin = sys.maxsize  # the least indentation of the lines after the first that hold text
    for line in lines[1:]:
        content = len(line.lstrip())
        if content:
            margin = min(margin, len(line) - content)
    lines[0] = lines[0].lstrip()
    if margin < sys.maxsize:
        for index in range(1, len(lines)):
            lines[index] = lines[index][margin:]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


class FixSafety(enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"

    def __str__(self) -> str:
        return self.value


class Fix(Record):
    """What a finding's fix does, in words, and its edits. A value (vmtune.record)."""

    __slots__ = ("description", "edits", "safety")

    def __init__(self, description: str, edits: tuple[Edit, ...], safety: FixSafety = FixSafety.SAFE) -> None:
        self.description = description
        self.edits = edits
        self.safety = safety


class Finding:
    # A plain class with slots, not a dataclass: creating a dataclass costs ~0.5 ms at every start.
    __slots__ = ("domain", "element", "fix", "message", "note", "rule", "severity")

    def __init__(self, rule: Rule, severity: Severity, message: str, element: etree._Element | None,
                 domain: Domain, fix: Fix | None = None, note: str | None = None) -> None:
        self.rule = rule
        self.severity = severity
        self.message = message
        self.element = element
        self.domain = domain
        self.fix = fix
        self.note = note  # why there is no fix, or what the fix could not do

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.rule.code}, {self.severity}, {self.message!r})"

    @property
    def line(self) -> int | None:
        return line_of(self.element)

    @property
    def xpath(self) -> str:
        if self.element is None:
            return "/domain"
        return stable_path(self.element)


class DomainRef:
    """What a recorded finding keeps of its domain once the parsed tree is gone. A value (a plain
    class: a NamedTuple costs ~0.15 ms to create at every start)."""

    __slots__ = ("name", "uuid")

    def __init__(self, name: str, uuid: str | None) -> None:
        self.name = name
        self.uuid = uuid

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DomainRef) and (self.name, self.uuid) == (other.name, other.uuid)

    def __hash__(self) -> int:
        return hash((self.name, self.uuid))

    def __repr__(self) -> str:
        return f"DomainRef({self.name!r}, {self.uuid!r})"


class RecordedFinding(Finding):
    """A finding detached from its lxml tree, so it can cross a process boundary."""

    __slots__ = ("recorded_line", "recorded_xpath")

    def __init__(self, rule: Rule, severity: Severity, message: str, element: etree._Element | None,
                 domain: Domain, fix: Fix | None = None, note: str | None = None,
                 recorded_line: int | None = None, recorded_xpath: str | None = "/domain") -> None:
        Finding.__init__(self, rule, severity, message, element, domain, fix, note)
        self.recorded_line = recorded_line
        self.recorded_xpath = recorded_xpath  # None: not recorded (see record)

    @property
    def line(self) -> int | None:
        return self.recorded_line

    @property
    def xpath(self) -> str:
        if self.recorded_xpath is None:
            raise AttributeError("this finding was recorded without its element path")
        return self.recorded_xpath


def record(finding: Finding, keep_path: bool = True,
           paths: dict[etree._Element, str] | None = None) -> RecordedFinding:
    """Detach a finding from its tree. Element paths cost a walk over siblings and ancestors, so
    a caller that never shows them (the text report of a finding with a line) can leave them out.
    `paths`: the element paths made for the other findings of this tree (vmtune.xml.paths.stable_path),
    shared by the caller that records a domain's findings while its tree stays as it is."""
    fix = Fix(finding.fix.description, (), finding.fix.safety) if finding.fix is not None else None
    ref = DomainRef(finding.domain.name, finding.domain.uuid)
    line = finding.line
    xpath = None
    if keep_path or line is None:
        if finding.element is None or isinstance(finding, RecordedFinding):
            xpath = finding.xpath
        else:
            xpath = stable_path(finding.element, paths)
    return RecordedFinding(finding.rule, finding.severity, finding.message, None, ref,  # type: ignore[arg-type]
                           fix, finding.note, line, xpath)


class Context:
    """What a rule may read besides the domain: host facts and its parameters."""

    __slots__ = ("derived", "host", "inventory", "params")

    def __init__(self, host: Host | None, params: dict[str, Any] | None = None,
                 inventory: Inventory | None = None) -> None:
        self.host = host
        self.params: dict[str, Any] = {} if params is None else params
        self.inventory = inventory  # the other domains of the host, when known
        self.derived: dict[Callable[[dict[str, Any]], Any], Any] = {}  # see derive()

    def derive(self, compute: Callable[[dict[str, Any]], T]) -> T:
        """compute(params), worked out once: the engine makes a rule's context once per
        configuration, for every domain it checks (issue 45: MEM001's size and DSK012's kernel
        and path list parsed per domain; with VAL001's fast path, -56 M instructions of the
        corpus-2000 run, the fast path alone -26 M).
        A compute that raises is asked again at the next domain, as before."""
        try:
            return self.derived[compute]  # type: ignore[no-any-return]
        except KeyError:
            value = self.derived[compute] = compute(self.params)
            return value


AREAS = {
    "CLK": "clock and timers",
    "HV": "Hyper-V enlightenments",
    "CPU": "CPU model, pinning and NUMA",
    "MEM": "memory: hugepages, balloon, EPT/NPT, locking, KSM",
    "LAT": "idle latency",
    "NET": "network",
    "DSK": "disk",
    "USB": "USB and input",
    "PCI": "PCI topology",
    "SUP": "suppressions",
    "HOST": "host configuration",
    "VAL": "values libvirt refuses",
    "STK": "stack sources: what a manifest, flavor or image leaves open",
}


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    fixable: ClassVar[bool] = False
    fix_safety: ClassVar[FixSafety | None] = None  # the usual safety of its fix
    # What some of its findings have instead, shown by `vmtune rules` and docs/rules.md:
    other_severities: ClassVar[tuple[Severity, ...]] = ()
    other_fix_safety: ClassVar[FixSafety | None] = None
    # Applicability, checked by the engine before check() runs:
    os: ClassVar[str | None] = None  # "windows" / "linux": skipped when the OS is unknown
    reads_os: ClassVar[bool] = False  # judges by the OS without requiring one (its findings say how it was known)
    enlightened_windows: ClassVar[bool] = False  # Hyper-V advice: skipped for Windows before Vista/2008
    hypervisors: ClassVar[frozenset[str] | None] = None  # e.g. {"kvm"}
    x86_only: ClassVar[bool] = False
    needs_host: ClassVar[bool] = False
    # A top-level element (a direct child of <domain>, e.g. "cputune") without which check() finds
    # nothing: the engine does not call check() on a domain without one. Most domains have no
    # <cputune>, <memoryBacking> or <memtune>, and the rules about them then cost nothing
    # (issue 45: 18 rules fewer on such a domain; corpus-2000 -j 1: 3,332 M -> 3,219 M instructions).
    needs: ClassVar[str | None] = None
    engine_driven: ClassVar[bool] = False  # findings made by the engine (suppressions), not check()
    params: ClassVar[dict[str, Any]] = {}  # parameter -> default
    param_docs: ClassVar[dict[str, str]] = {}
    # Lifecycle, as ruff has it, so that users can pin behaviour across releases: `stable`, or
    # `preview` (no built-in policy enables it: it runs when selected by code, and its severity,
    # fix or scope may still change); `since`: the release that first shipped it ("unreleased"
    # until one does: the release commit writes its version). A renamed code is redirected (RENAMED,
    # at the end of this module).
    stability: ClassVar[str] = "stable"
    since: ClassVar[str] = "0.1.0"  # the first release: every rule not saying otherwise was in it

    @property
    def severity_label(self) -> str:
        """'warning', or the range its findings take: 'info|warning'."""
        return "|".join(str(s) for s in sorted({self.severity, *self.other_severities}))

    @property
    def category(self) -> str:
        return AREAS[self.area]

    @property
    def area(self) -> str:
        return self.code.rstrip("0123456789")

    @property
    def doc(self) -> str:
        return cleandoc(self.__doc__ or "")

    @property
    def summary(self) -> str:
        """First paragraph under 'What it checks'."""
        body = self.doc.split("## What it checks", 1)[-1].strip()
        return " ".join(body.split("\n\n", 1)[0].split())

    def applies(self, domain: Domain, host: Host | None) -> bool:
        if self.os is not None and domain.os_family != self.os:
            return False
        if self.enlightened_windows and domain.windows_legacy:
            return False
        if self.hypervisors is not None and domain.hypervisor not in self.hypervisors:
            return False
        if self.x86_only and not domain.is_x86:
            return False
        if self.needs is not None and self.needs not in domain.top_tags:
            return False
        return not (self.needs_host and host is None)

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(self, domain: Domain, element: etree._Element | None, message: str,
                fix: Fix | None = None, note: str | None = None,
                severity: Severity | None = None) -> Finding:
        if (self.os is not None or self.reads_os) and domain.os_inferred:
            said = provenance_note(domain.os_guess)
            note = f"{note}; {said}" if note else said
        return Finding(self, severity or self.severity, message, element, domain, fix, note)


# Rule codes that were renamed, old -> new: an old code still selects, ignores and suppresses the
# rule it became, and each use says so once (as ruff redirects its renamed rules). A code is never
# reused for another rule. Empty while no rule has been renamed; a rename adds its line here and a
# CHANGELOG entry. Here, beside Rule's lifecycle fields, not in a module of its own: every check
# reads it (policy selectors), and a module more costs each start ~3 M instructions.
RENAMED: dict[str, str] = {}


def current(selector: str) -> str:
    """The code a selector stands for now (itself unless it is a renamed code)."""
    return RENAMED.get(selector, selector)


def note_renamed(selectors: tuple[str, ...] | list[str], where: str = "") -> None:
    """One warning per renamed code used (`where`: the file, for a configuration or a comment)."""
    if not RENAMED:
        return
    from vmtune.errors import warn

    for selector in selectors:
        new = RENAMED.get(selector)
        if new is not None:
            warn(f"{where + ': ' if where else ''}{selector} is now {new}: read as {new} (write {new})")
