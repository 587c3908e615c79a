"""Stack sources in `vmtune check`: the files of the front ends vmtune.stacks.registry lists.

A front end (`vmtune/stacks/<name>/frontend.py`) renders, from the files given, the libvirt
domains its stack would write (`Rendered`); the existing rules check those domains as they
check any file, and never learn where they came from. This module then places each finding
back on the source, in the stack's terms (`Rendered.place`: the line of the field to change,
or of the mapping it belongs in, and the knob from vmtune.stacks.knob_table), turns fixes into edits
of the source (vmtune.stacks.yamledit), and proves each fix by rendering and checking again.

What a front end is and declares: vmtune.stacks.registry. This module names no stack.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

# Imported here, not in the functions that use them: a stack source's check loads all of these
# anyway, and an import statement run per object (each costs about as much as placing a finding)
# added up to ~2 % of a run over 1,000 manifests.
from vmtune.compiled import mypyc_attr
from vmtune.engine import check_domain, enabled_rules
from vmtune.errors import InputError, VmtuneError, warn
from vmtune.facts.domain import Domain
from vmtune.record import Record
from vmtune.rules import BY_CODE
from vmtune.rules.base import DomainRef, Finding, Fix, FixSafety, RecordedFinding, Severity
from vmtune.rules.helpers import HOST_CPU_NOTES
from vmtune.stacks.registry import by_name, frontends, named_suffixes, owner_of_format
from vmtune.stacks.yamldoc import TemplatedYaml, load

if TYPE_CHECKING:
    from lxml import etree

    from vmtune.engine import CheckOptions
    from vmtune.report.model import Report, SourceResult
    from vmtune.request import OptionsResolver
    from vmtune.sources import Source
    from vmtune.stacks.yamldoc import Doc

    # How a process reports its share of a run as the run's own report would (vmtune.commands.check):
    # NewShare makes an empty report prepared as the run's, with the list its text is rendered into;
    # Shares adds what writes such text where the run's report goes. None: the parent reports every
    # result (a baseline counts its findings over the whole run, in order).
    NewShare = Callable[[], tuple[Report, list[str]]]
    Shares = tuple[NewShare, Callable[[str], object]]
    # A file's results reported where it was checked (_reported): the report part whose tally
    # (and baseline identities) count them, None when another file's part holds them (a chunk's
    # files whose results are always kept share one), its text, and the results the report kept.
    Share = tuple[Report | None, str, list[SourceResult]]

# Compiled with mypyc, this module's classes stay interpreted classes (mypyc_attr; their methods
# compiled): their objects (results, placed findings, files rendered apart) cross worker processes
# by pickle, which mypyc's native classes do not take (tests/test_stack_parallel.py).

REFUSED = "STK004"  # the rule of an object the stack refuses (vmtune.rules.stackinput)


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class SourceEdit(Record):
    """Set `path` (keys and list indices from the root of document `doc`) to `value` in a file,
    creating the mappings it needs; a mapping value is merged into what is there."""

    __slots__ = ("doc", "path", "source", "value")

    def __init__(self, source: str, doc: int, path: tuple[str | int, ...], value: object) -> None:
        self.source = source
        self.doc = doc
        self.path = path
        self.value = value


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class Placement(Record):
    """Where a finding on a rendered domain belongs in the stack's source, and what to do there."""

    __slots__ = ("advice", "command", "edits", "field", "knob", "line", "source", "unseen")

    def __init__(self, source: str, line: int, field: str, advice: str, edits: tuple[SourceEdit, ...] | None = None,
                 command: str | None = None, knob: bool = True, unseen: str | None = None) -> None:
        self.source = source  # the file to point at (a pair's finding may point at the image's file)
        self.line = line  # the field to change, or the mapping where it must be added
        self.field = field  # "spec.template.spec.domain.devices.networkInterfaceMultiqueue", "hw:cpu_policy"
        self.advice = advice  # in the stack's terms: which object, key and value
        self.edits = edits  # the fix in the source; None: no fix there (printed CLI output, no knob)
        self.command = command  # the command that applies it where the source is not a file to edit
        self.knob = knob  # False: the stack offers no knob (said in the note; the severity stays)
        # what the finding depends on that vmtune did not see (an object the source names but no
        # file given holds): the finding is info, since the value judged may not be the one that runs
        self.unseen = unseen


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class Note(Record):
    """A front end's own finding: a reference it could not resolve, a value it assumed (STK rules)."""

    __slots__ = ("code", "line", "message", "source")

    def __init__(self, code: str, source: str, line: int, message: str) -> None:
        self.code = code
        self.source = source
        self.line = line
        self.message = message


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class Rendered:
    """One domain a stack would write for one object (or flavor × image pair) of the sources."""

    __slots__ = ("line", "name", "notes", "os_family", "os_id", "placer", "release", "source", "stack", "takes_fix",
                 "xml")

    def __init__(self, name: str, xml: bytes, source: str, line: int, stack: str, release: str,
                 placer: Callable[[str, etree._Element | None, Domain], Placement],
                 notes: tuple[Note, ...] = (), os_family: str | None = None, os_id: str | None = None) -> None:
        self.name = name  # "VirtualMachine/win10", "m1.xlarge × win2k22"
        self.xml = xml
        self.source = source  # the file of the object; findings without a better place go to `line` there
        self.line = line
        self.stack = stack  # its front end's name (vmtune.stacks.registry.FrontEnd.name)
        self.release = release  # the release whose behaviour the rendering follows
        self.placer = placer
        # a front end that writes the rule's own XML fix; asked once, not at each finding (a
        # bound method has no such attribute, and getattr's miss on one costs ~2,500 instructions)
        self.takes_fix = getattr(placer, "takes_fix", False)
        self.notes = notes
        self.os_family = os_family  # "windows" / "linux" when the source says it (a preference's name)
        # the libosinfo id the source states (an image's os_distro/os_version, a template's OS label):
        # the edition and version rules read (CPU016: a Windows client uses two sockets)
        self.os_id = os_id

    def place(self, code: str, element: etree._Element | None, domain: Domain, fix: Fix | None = None) -> Placement:
        if self.takes_fix:
            return self.placer(code, element, domain, fix)  # type: ignore[call-arg]
        return self.placer(code, element, domain)


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class StackFile:
    """A stack source as read: its name, bytes (for INI files and edits) and YAML documents."""

    __slots__ = ("data", "docs", "explicit", "found", "identity", "name", "stdin", "templated", "wanted")

    def __init__(self, name: str, data: bytes, docs: list[Doc], explicit: bool = True, identity: Any = None,
                 stdin: bool = False, templated: bool = False) -> None:
        self.name = name
        # a template of YAML (no documents read), for a front end that renders templates itself
        # (FrontEnd.templates): it renders it with the template's own tool
        self.templated = templated
        self.stdin = stdin  # read from '-': a fixed version goes to stdout
        self.data = data
        self.docs = docs
        self.explicit = explicit
        self.identity = identity
        self.wanted: dict[str, bool] = {}  # front end -> whether it takes this file, asked once (_file_wants)
        self.found: dict[str, Any] = {}  # front end -> the objects it found in the file (its refuse() keeps them)


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class StackContext:
    """What the command line tells each front end: its settings by its name (FrontEnd.settings)."""

    __slots__ = ("looked", "settings")

    def __init__(self, settings: dict[str, object] | None = None) -> None:
        self.settings: dict[str, object] = settings or {}
        # front end -> what its ties(file, looked) looked up once a run (a directory's work tree...)
        self.looked: dict[str, dict[Any, Any]] = {}

    def read_elsewhere(self, names: Iterable[str]) -> None:
        """The names of files of the run read and rendered elsewhere (apart, in workers), for a
        front end whose settings keep them (an `elsewhere` set): what it reads besides the files
        given (a work tree's files, searched) skips them as it skips those, as in one process."""
        for settings in self.settings.values():
            known = getattr(settings, "elsewhere", None)
            if known is not None:
                known.update(names)

    @classmethod
    def of(cls, request: Any) -> StackContext:
        """Every front end's settings from the command line (a bad value is an error of the run)."""
        return cls({f.name: f.settings(request) for f in frontends() if f.settings is not None})


def is_stack_name(name: str) -> bool:
    return name.lower().endswith(named_suffixes())


# YAML's and JSON's escapes of one character (\x2e, \u002e, \U0000002e) and the escaped line
# break of a double-quoted scalar, which joins its lines: what a front end's cheap test must see
# through (`apiVersion: "kubevirt\x2eio/v1"` is kubevirt.io/v1 to kubectl).
_ESCAPE = re.compile(rb"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|\r?\n[ \t]*)")


def unescaped(data: bytes) -> bytes:
    """`data` with those escapes written out (UTF-8), for a front end's `wants()`: the markers it
    looks for can be spelled with escapes, and such a file was skipped quietly (pre-commit's
    manifest hooks run with --skip-non-domain) though kubectl and Ansible read the object in it."""
    # find, not `in`: `in` makes and drops a TypeError a search (vmtune.stacks.openstack.detect)
    if data.find(b"\\") == -1 or _ESCAPE.search(data) is None:  # the same bytes: a caller need not search them again
        return data

    def spelled(match: re.Match[bytes]) -> bytes:
        code = match.group(1) or match.group(2) or match.group(3)
        if code is None:
            return b""
        value = int(code, 16)
        return chr(value).encode("utf-8", "replace") if value < 0x110000 else b"?"

    return _ESCAPE.sub(spelled, data)


_WANTS: dict[str, Callable[[bytes, str], bool]] = {}


def _wants(frontend: str, data: bytes, name: str) -> bool:
    """Whether a front end takes a file. Each front end's answer is in a module of its own
    (its detect.py): every stack source asks each front end, and a check of one stack's files
    must not load the other's renderer. The function is looked up once a run (importlib's lookup
    cost more than the answer)."""
    wants = _WANTS.get(frontend)
    if wants is None:
        declared = by_name(frontend)
        assert declared is not None, frontend
        wants = _WANTS[frontend] = declared.part("detect").wants
    return bool(wants(data, name))


def _file_wants(frontend: str, stack_file: StackFile) -> bool:
    answer = stack_file.wanted.get(frontend)
    if answer is None:
        answer = stack_file.wanted[frontend] = _wants(frontend, stack_file.data, stack_file.name)
    return answer


def read_file(name: str, data: bytes, explicit: bool = True, identity: Any = None, stdin: bool = False,
              templated: bool = False) -> StackFile:
    """A source's documents; a file a front end parses itself (FrontEnd.own_format) or a template
    (`templated`) has none, the front end reads its bytes."""
    if templated:
        return StackFile(name, data, [], explicit, identity, stdin, templated=True)
    if owner_of_format(name) is not None:
        return StackFile(name, data, [], explicit, identity, stdin)
    return StackFile(name, data, load(data, name), explicit, identity, stdin)


def render_all(files: list[StackFile], context: StackContext,
               refused: list[VmtuneError] | None = None) -> tuple[list[Rendered], set[str]]:
    """Every front end's renderings of the files it takes, and `files` extended by the files a
    front end read besides them (its module's `companions(settings)`, if it has one: what a
    finding may be placed on and a fix may edit). A front end's `refuse(file)` may
    refuse one file (VmtuneError) before any is rendered: with `refused`, the error goes there,
    the file counts as claimed (said once) and the others are rendered; without, it is raised.
    What its render() refused while rendering the others (claimed, not rendered: a build that
    failed, a module, a file), kept in its settings' `problems` list (_taken_problems), goes to
    `refused` the same way."""
    rendered: list[Rendered] = []
    claimed: set[str] = set()
    for frontend in frontends():
        wanted = [f for f in files if _file_wants(frontend.name, f)]
        if not wanted:
            continue
        module = frontend.part("frontend")
        refuse = getattr(module, "refuse", None)
        if refuse is not None:
            kept = []
            for stack_file in wanted:
                try:
                    refuse(stack_file)
                except VmtuneError as exc:
                    if refused is None:
                        raise
                    refused.append(exc)
                    claimed.add(stack_file.name)
                else:
                    kept.append(stack_file)
            wanted = kept
        settings = context.settings.get(frontend.name)
        found, recognised = module.render(wanted, settings)
        rendered += found
        claimed |= recognised
        for problem in _taken_problems(settings):
            # a group of files the front end could not render (a build refused or failed): said as a
            # refused file is, while the others' findings are reported
            if refused is None:
                raise problem
            refused.append(problem)
        companions = getattr(module, "companions", None)
        if companions is not None:
            # files the front end read besides those given (a build's other inputs), which a
            # finding may point at and a fix may edit: from now on part of the run's files
            known = {f.name for f in files}
            files.extend(f for f in companions(settings) if f.name not in known)
    return rendered, claimed


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class Together:
    """A file rendered with the others of the run, not apart (render_apart): for each front end
    taking it, the names of the objects in it that another file's objects may name (None: any)."""

    __slots__ = ("defines",)

    def __init__(self, defines: dict[str, frozenset[str] | None]) -> None:
        self.defines = defines


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class Apart:
    """A file's renderings made without the other files of the run (render_apart), and the names
    its objects take from whichever file defines them (`names`, of its front end `stack`): they are
    what render_all makes of the file when no other file of the run defines one of those names."""

    __slots__ = ("claimed", "names", "rendered", "stack")

    def __init__(self, rendered: list[Rendered], claimed: set[str], stack: str, names: frozenset[str]) -> None:
        self.rendered = rendered
        self.claimed = claimed
        self.stack = stack
        self.names = names


def render_apart(stack_file: StackFile, context: StackContext) -> Apart | Together:
    """render_all([stack_file], context) for a file whose renderings depend on the other files of
    the run through the names its objects give only, and that defines nothing another file's objects
    may name, so that it can be rendered apart (in a worker); Together for a file that may not be
    (tied_by)."""
    tied = tied_by(stack_file, context)
    if isinstance(tied, Together):
        return tied
    stack, names = tied
    found, recognised = _render_raising(stack, [stack_file], context)
    return Apart(found, set(recognised), stack, names)


def _render_raising(stack: str, files: list[StackFile], context: StackContext) -> tuple[list[Rendered], set[str]]:
    """One front end's render() of the files, raising the first file it refused
    (_taken_problems), as render_all does when not given a list to keep them in."""
    settings = context.settings.get(stack)
    found = _frontend(stack).render(files, settings)
    for problem in _taken_problems(settings):
        raise problem
    return found


def _taken_problems(settings: object) -> list[VmtuneError]:
    """What a front end's last render() refused while it rendered the other files (a build that
    failed, a Terraform module, OpenStack's pairs, a KubeVirt file), each one line at its file:
    the `problems` list its settings keep, if they keep one, taken (emptied for the next render)."""
    found: list[VmtuneError] | None = getattr(settings, "problems", None)
    if not found:
        return []
    settings.problems = []  # type: ignore[attr-defined]  # the attribute read above
    return found


def tied_by(stack_file: StackFile, context: StackContext) -> tuple[str, frozenset[str]] | Together:
    """The front end that may render a file apart (render_apart) and the names its objects take
    from whichever file of the run defines them; Together for a file taken by several front ends,
    or by one without a `ties(file, looked)` that says it defines nothing other files' objects may
    name and which names it takes (asked after its refuse(), which raises VmtuneError for a
    refused file as render_all does; `looked`: a dict of its own for the run, context.looked)."""
    taking = [frontend for frontend in frontends() if _file_wants(frontend.name, stack_file)]
    if len(taking) != 1:
        return Together({frontend.name: None for frontend in taking})
    stack = taking[0].name
    module = _frontend(stack)
    ties = getattr(module, "ties", None)
    if ties is None:
        return Together({stack: None})
    refuse = getattr(module, "refuse", None)
    if refuse is not None:
        refuse(stack_file)
    defines, names = ties(stack_file, context.looked.setdefault(stack, {}))
    if defines is None or defines or names is None:
        return Together({stack: defines})
    return stack, names


_FRONTENDS: dict[str, Any] = {}


def _frontend(stack: str) -> Any:
    """A front end's frontend module, looked up once a run (importlib's lookup, asked per file,
    cost more than the answer)."""
    module = _FRONTENDS.get(stack)
    if module is None:
        declared = by_name(stack)
        assert declared is not None, stack
        module = _FRONTENDS[stack] = declared.part("frontend")
    return module


def render_alone(stack_file: StackFile, context: StackContext) -> tuple[list[Rendered], set[str]] | None:
    """render_all([stack_file], context) for a file whose renderings need no other file of the
    run and change none of theirs (render_apart, and its objects name nothing); None otherwise."""
    apart = render_apart(stack_file, context)
    if isinstance(apart, Together) or apart.names:
        return None
    return apart.rendered, apart.claimed


# -- checking one rendered domain and placing its findings -------------------------------------------

@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class Placed:
    """A finding on a rendered domain, placed on its source: what the report shows, and the
    edits that fix it there."""

    __slots__ = ("command", "edits", "finding", "source")

    def __init__(self, source: str, finding: RecordedFinding, edits: tuple[SourceEdit, ...],
                 command: str | None = None) -> None:
        self.source = source
        self.finding = finding
        self.edits = edits
        self.command = command  # the cure of a finding on printed CLI output, which --fix does not edit


def check_rendered(item: Rendered, options: CheckOptions) -> tuple[Domain, list[Placed]]:
    """The rules over one rendered domain, each finding placed on the source."""
    os_override = options.os_override or item.os_family
    try:
        domain = Domain.parse(item.xml, item.name, os_override,  # type: ignore[arg-type]
                              os_id=item.os_id if options.os_override is None else None)
    except VmtuneError as exc:  # past a domain's limits (50,000 elements): said at the object in its file
        raise VmtuneError(f"{item.name}: the domain it renders is refused: {exc.message}", item.source,
                          item.line) from None
    # An object the stack refuses (STK004) never runs: its refusal is the verdict, not the
    # tuning of a domain the stack will never write.
    refused = bool(item.notes) and any(note.code == REFUSED for note in item.notes)  # most objects have no note
    findings = [] if refused else check_domain(domain, options, stack_advice=False)
    ref = _ref(item, domain)  # one per domain: its findings share it
    placed = [_place(item, finding, domain, ref) for finding in findings]
    if item.notes:  # the rules enabled for the domain, asked once for all its notes
        enabled = enabled_rules(domain, options)
        placed += [_note(item, note, ref) for note in item.notes if note.code in enabled]
    return domain, placed


def _place(item: Rendered, finding: Finding, domain: Domain, ref: Any) -> Placed:
    placer = item.placer  # Rendered.place written out: a call less for each of a run's findings
    if item.takes_fix:
        where = placer(finding.rule.code, finding.element, domain, finding.fix)  # type: ignore[call-arg]
    else:
        where = placer(finding.rule.code, finding.element, domain)
    severity = finding.severity
    said = where.advice
    if not where.knob:
        # The cost is the same on the XML the stack writes (issue 48): the severity stays, the note
        # says the stack offers no knob, so that the user asks the stack or suppresses with a reason.
        said = f"{said} (no {_stack_title(item.stack)} knob)"
    if where.unseen:
        severity = min(severity, Severity.INFO)
        fixed = "" if where.edits else ", not fixed"
        said = f"{said} (depends on {where.unseen}, which vmtune did not see: reported as info{fixed})"
    if where.command:
        said = f"{said}; run: {where.command}"
    edits = where.edits or ()
    why = finding.note
    if why and (edits or where.command) and why.startswith(HOST_CPU_NOTES):
        why = None  # the stack's knob picks the host CPUs: vmtune's own XML fix needed them
    note = f"{said}; {why}" if why else said
    fix = None
    if edits:  # _fix_of's table read here (~2,200 of 1,000 manifests' findings), the call made to fill it
        safe = finding.fix is not None and finding.fix.safety is FixSafety.SAFE
        fix = _FIXES.get((where.field, safe)) or _fix_of(where.field, FixSafety.SAFE if safe else FixSafety.UNSAFE)
    recorded = RecordedFinding(finding.rule, severity, finding.message, None, ref, fix, note,
                               where.line, where.field or "/")
    return Placed(where.source, recorded, edits, where.command if not edits else None)


# A placed finding's Fix says only which field it sets and how safe it is: a value (vmtune.record),
# shared by every finding that sets the same field (~2,200 of 1,000 manifests' findings, a few
# dozen fields). Emptied when full: the fields hold list indices from the sources.
# Keyed by whether the fix is safe, not by the FixSafety itself: an Enum's hash is a Python call.
_FIXES: dict[tuple[str, bool], Fix] = {}


def _fix_of(field: str, safety: FixSafety) -> Fix:
    key = (field, safety is FixSafety.SAFE)  # FixSafety has two members
    fix = _FIXES.get(key)
    if fix is None:
        if len(_FIXES) >= 4096:
            _FIXES.clear()
        fix = _FIXES[key] = Fix(f"set {field}", (), safety)
    return fix


def _note(item: Rendered, note: Note, ref: Any) -> Placed:
    rule = BY_CODE[note.code]
    finding = RecordedFinding(rule, rule.severity, note.message, None, ref, None, None,
                              note.line, "/")
    return Placed(note.source, finding, ())


def _ref(item: Rendered, domain: Domain) -> Any:
    return DomainRef(item.name, domain.uuid)


def _stack_title(stack: str) -> str:
    title = _TITLES.get(stack)  # asked for each finding without a knob
    if title is None:
        declared = by_name(stack)
        title = _TITLES[stack] = declared.stack_title if declared is not None else stack
    return title


_TITLES: dict[str, str] = {}


# -- suppressions written in YAML --------------------------------------------------------------------

# `# vmtune: ignore[NET001] reason="..."` before a field (its subtree), before a document's first
# key (the object); `# vmtune: ignore-file[...]`; the annotation `vmtune.io/ignore` with the same text.
# Only the start is a pattern; the rest of the line, right-stripped, is the comment. `(vmtune:.*?)\s*$`
# tried `\s*$` at every character the lazy group took: quadratic in a run of spaces (a 200 KB
# comment line ran past 120 s).
_YAML_COMMENT = re.compile(r"#\s*vmtune:")
ANNOTATION = "vmtune.io/ignore"


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class YamlSuppression:
    __slots__ = ("first", "last", "line", "reason", "selectors", "used")

    def __init__(self, selectors: tuple[str, ...], reason: str | None, line: int, first: int, last: int) -> None:
        self.selectors = selectors
        self.reason = reason
        self.line = line  # where it is written
        self.first = first  # the lines it covers
        self.last = last
        self.used: set[str] = set()


def _parse_suppression(text: str) -> tuple[str, tuple[str, ...], str | None] | None:
    from vmtune.suppress import _suppression

    match = _suppression(text)
    if match is None:
        return None
    from vmtune.rules.base import note_renamed

    reason = match.group(3)[1:-1] if match.group(3) else None
    selectors = tuple(s.strip() for s in match.group(2).split(",") if s.strip())
    note_renamed(selectors)  # a renamed code still suppresses its rule: said once
    return match.group(1), selectors, reason


def yaml_suppressions(stack_file: StackFile) -> tuple[list[YamlSuppression], list[int]]:
    """The suppressions written in a file's comments and annotations, and the lines of comments
    that start like one (`# vmtune:`) but do not parse (SUP003)."""
    if stack_file.data.find(b"vmtune") == -1:  # find, not `in`: see unescaped()
        return [], []
    text = stack_file.data.decode("utf-8-sig", "replace")
    lines = text.splitlines()
    # made at the first comment that needs it: most files that mention vmtune (20 of 1,000
    # manifests, in a comment naming its advice) hold no suppression (~1 M instructions a file)
    spans: dict[int, tuple[int, int]] | None = None
    found: list[YamlSuppression] = []
    broken: list[int] = []
    for number, line in enumerate(lines, 1):
        if "vmtune" not in line or "#" not in line:
            continue
        match = _YAML_COMMENT.search(line)
        if match is None or not line.lstrip().startswith("#"):
            continue
        comment = line[match.end() - len("vmtune:"):].rstrip()
        parsed = _parse_suppression(comment)
        if parsed is None:
            broken.append(number)  # it starts with `vmtune:`: meant as one
            continue
        kind, selectors, reason = parsed
        if kind == "ignore-file":
            found.append(YamlSuppression(selectors, reason, number, 1, len(lines) + 1))
            continue
        target = next((n for n in range(number + 1, len(lines) + 1)
                       if lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")), None)
        if target is None:
            continue
        if spans is None:
            spans = _spans(stack_file.docs)
        first, last = spans.get(target, (target, target))
        found.append(YamlSuppression(selectors, reason, number, first, last))
    for doc in stack_file.docs:
        for annotated, first, last in _annotated(doc):
            # The annotation's value is the comment's text without `vmtune:`: ignore[CODES] reason="..."
            parsed = _parse_suppression("vmtune: " + annotated.value if isinstance(annotated.value, str) else "")
            if parsed is None:
                broken.append(annotated.line)
                continue
            found.append(YamlSuppression(parsed[1], parsed[2], annotated.line, first, last))
    return found, broken


def _spans(docs: list[Doc]) -> dict[int, tuple[int, int]]:
    """For each line that starts a mapping entry (or a document), the lines of its subtree.

    Each distinct node is walked once: a subtree an alias shares is not walked again, and the last
    line of every subtree comes from one pass (_last_lines). A walk per mapping entry cost the
    expanded size times the depth: 18 levels of two aliases each, a 1 KB file, took 10 s."""
    spans: dict[int, tuple[int, int]] = {}
    for doc in docs:
        root = doc.root
        last = _last_lines(root)
        spans.setdefault(root.line, (root.line, last[id(root)]))
        stack = [root]
        walked: set[int] = set()  # the children containers walked (an alias's copy shares its node's)
        while stack:
            node = stack.pop()
            children = node.children
            if children is None or id(children) in walked:
                continue
            walked.add(id(children))
            if isinstance(children, dict):
                for child in children.values():
                    spans.setdefault(child.key_line, (child.key_line, max(child.key_line, last[id(child)])))
                    stack.append(child)
            else:
                stack.extend(children)
    return spans


def _last_lines(root: Any) -> dict[int, int]:
    """id(node) -> the last line of its subtree, for every node under `root`, each computed once."""
    last: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        key = id(node)
        if key in last:
            continue
        children = node.children
        kids = children.values() if isinstance(children, dict) else children or ()
        if ready or not kids:
            last[key] = max(node.line, max((last[id(kid)] for kid in kids), default=node.line))
            continue
        stack.append((node, True))
        stack.extend((kid, False) for kid in kids if id(kid) not in last)
    return last


def _annotated(doc: Doc) -> Iterable[tuple[Any, int, int]]:
    """`metadata.annotations["vmtune.io/ignore"]` of each object in a document (a List's items,
    a Template's objects too), with the lines of the object it covers."""
    objects = [doc.root]
    for key in ("items", "objects"):
        holder = doc.root.get(key)
        if holder is not None and isinstance(holder.children, list):
            objects += holder.children
    last: dict[int, int] | None = None
    for obj in objects:
        annotation = obj.at(("metadata", "annotations", ANNOTATION))
        if annotation is not None:
            last = last if last is not None else _last_lines(doc.root)
            yield annotation, obj.line, last[id(obj)]


def apply_yaml_suppressions(placed: list[Placed], suppressions: dict[str, tuple[list[YamlSuppression], list[int]]]
                            ) -> list[Placed]:
    for item in placed:  # a loop, not any(): a generator made for each domain
        if suppressions.get(item.source, ((),))[0]:
            break
    else:
        return placed  # most files suppress nothing
    from vmtune.policy.model import selector_matches

    kept = []
    for item in placed:
        found = suppressions.get(item.source)
        line = item.finding.line or 0
        hit = None
        if found and found[0]:
            hit = next((s for s in found[0] if s.first <= line <= s.last
                        and any(selector_matches(sel, item.finding.rule) for sel in s.selectors)), None)
        if hit is None:
            kept.append(item)
        else:
            hit.used.add(item.finding.rule.code)  # judged per file by suppression_findings, once all are checked
    return kept


def suppression_findings(name: str, found: tuple[list[YamlSuppression], list[int]], config_codes: set[str],
                         ran: list[Any]) -> list[RecordedFinding]:
    """SUP001 (no reason), SUP002 (matched nothing), SUP003 (does not parse) for one file."""
    from vmtune.policy.model import selector_matches

    ref = DomainRef(name, None)
    out = []

    def add(code: str, line: int, message: str) -> None:
        if code in config_codes:
            rule = BY_CODE[code]
            out.append(RecordedFinding(rule, rule.severity, message, None, ref, None, None, line, "/"))  # type: ignore[arg-type]

    suppressions, broken = found
    for line in broken:
        add("SUP003", line, "comment starts with 'vmtune:' but is no suppression: write "
                            "# vmtune: ignore[CODE] reason=\"...\"")
    for s in suppressions:
        label = ",".join(s.selectors) or "(nothing)"
        if not s.reason:
            add("SUP001", s.line, f"suppression of {label} gives no reason")
        judged = any(selector_matches(sel, r) for sel in s.selectors for r in ran)
        if not s.used and judged:
            add("SUP002", s.line, f"suppression of {label} matched no finding")
    return out


# -- vmtune check on stack sources ------------------------------------------------------------------

def check_stack_sources(sources: list[Source], resolver: OptionsResolver, report: Report,
                        out: Callable[[str], object], shares: Shares | None = None) -> None:
    """Check the stack sources of a run: load all (references cross files), render, check, place,
    fix when asked, and add one result per rendered object and file to the report; files rendered
    and checked apart are reported by whichever process checked them, when `shares` says how."""
    request = resolver.request
    writing = request.fix and not request.diff
    _LAST_RUN.clear()  # a previous run in this process (tests, a caller of main()) is freed now
    apart: list[_Apart] = []
    if not (request.fix or request.diff):
        with _lasting():  # what the workers send back lives to the run's end as well
            split = _apart_in_workers(sources, resolver, shares[0] if shares is not None else None)
            if split is not None:
                sources, apart = split
    with _lasting():  # the sources, their documents and renderings live until the run's end
        # the files rendered apart are the run's too: read, though not loaded here
        loaded = load_and_render(sources, request, report.errors, writing, [done.source for done in apart])
        if loaded is None:
            return
        files, rendered, claimed, context = loaded
    for stack_file in files:
        if stack_file.name not in claimed and stack_file.explicit and not request.skip_non_domain:
            report.errors.append(InputError(stack_file.name, None, f"{no_definition()} "
                                            "(--skip-non-domain skips such files)"))
    with _lasting():  # the placed findings live to the end too; checking a domain makes no cycle
        results = _check_all(rendered, files, resolver, report.errors)
    homes = {(r.name, r.source) for r in rendered}
    reported: dict[str, Share] = {}  # file name -> its results reported where it was checked
    for done in apart:  # files rendered and checked apart: no key is another file's
        results.update(done.results)
        homes.update(done.homes)
        if done.reported is not None:
            reported[done.source] = done.reported
    if request.fix and not request.diff:
        _refuse_printed_output(results, rendered)
    applied: dict[str, list[Any]] = {}
    if (request.fix or request.diff) and results:
        results, applied, changed = _fix(files, rendered, results, resolver, context, out)
        report.would_change = report.would_change or (changed and request.diff)
    # In the order of one process: by file, then object. A file reported apart holds all results
    # placed on it (no object rendered together places a finding on it, _render_and_check). The
    # texts of files reported apart are written together up to the next result reported here.
    shared = sorted(reported.items())
    taken = 0
    texts: list[str] = []
    for result in _source_results(results, homes, resolver, applied):
        while taken < len(shared) and shared[taken][0] < result.source:
            _take_share(report, shared[taken][1], texts)
            taken += 1
        _write_texts(texts, shares)
        report.add(result)
    for _name, share in shared[taken:]:
        _take_share(report, share, texts)
    _write_texts(texts, shares)
    _LAST_RUN.append((files, rendered, results, apart))


def _source_results(results: Results, homes: set[tuple[str, str]], resolver: OptionsResolver,
                    applied: dict[str, list[Any]]) -> Iterator[SourceResult]:
    """One report result per rendered object and file, by file then object. An object whose
    findings sit in several files (a pair's on the flavor's and the image's) is one domain:
    counted where it is defined (homes)."""
    from vmtune.report.model import SourceResult

    # --fail-on by the file's directory as its name writes it (up to and with the last "/", so that
    # "vm.yaml" and "/vm.yaml" differ): the folder settings_for_file looks up, os.path.dirname, is
    # made from that part alone
    thresholds: dict[str, Severity] = {}
    for (item, where), (domain_name, placed) in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        findings: list[Finding] = [p.finding for p in placed]
        if len(findings) > 1:
            findings.sort(key=_finding_order)
        folder = where[:where.rfind("/") + 1]
        fail_on = thresholds.get(folder)
        if fail_on is None:
            fail_on = thresholds[folder] = resolver.fail_on(resolver.settings_for_file(where))
        # the key made only when a fix was applied (--fix, --diff): a plain check has none
        result = SourceResult(where, domain_name, findings, applied.get(f"{where}\0{item}", []) if applied else [],
                              fail_on=fail_on)
        result.counted = (item, where) in homes
        yield result


def _finding_order(finding: Finding) -> tuple[int, str]:
    return finding.line or 0, finding.rule.code


def _take_share(report: Report, share: Share, texts: list[str]) -> None:
    """A file's results as the process that checked it reported them (_reported): its text to
    write, its results added to the run's (when the report keeps them) and, when it comes with
    one, a report part's tally."""
    part, text, results = share
    if text:
        texts.append(text)
    if part is not None:
        report.merge(part)
    if results:
        report.results += results


def _write_texts(texts: list[str], shares: Shares | None) -> None:
    """The texts of files reported apart, written at once (one write a file cost ~16 k
    instructions over 1,000 manifests' ~1 KB each)."""
    if texts and shares is not None:
        shares[1]("".join(texts))
    texts.clear()


def _reported(results: Results, homes: set[tuple[str, str]], resolver: OptionsResolver,
              part: tuple[Report, list[str]]) -> tuple[list[SourceResult], str]:
    """One file's results reported here, in a worker (or this process working beside them), as
    the run's report adds them (check_stack_sources), into a report part (tallied, rendered, or
    kept when the report keeps them): the results it kept and the text rendered for them. What
    is sent back is that, not the placed findings (with their source edits, which only a fix
    needs): ~3 % of the parent's work over 1,000 manifests was rendering and tallying every
    file's results once the workers were done."""
    report, text = part
    first_result, first_text = len(report.results), len(text)
    for result in _source_results(results, homes, resolver, {}):
        report.add(result)
    return report.results[first_result:], "".join(text[first_text:])


def _sent(report: Report) -> None:
    """A report part made ready to cross to the parent: no closures (they do not pickle; the
    run's own report writes the text) and no results (each file's share carries its own)."""
    report.sink = report.keep = None
    report.results = []


@mypyc_attr(native_class=False)  # see `mypyc_attr` above
class _Apart:
    """A file rendered and checked apart, in a worker (_apart_in_workers): its results (as
    _check_all makes them) or, when the run says how (Shares), those results already reported
    (_reported: the report part and its text; then `results` is empty), the objects defined in it
    (rendered name, file), and the names its objects take from whichever file defines them, of its
    front end (render_apart): the results are the run's only if no file of the run defines one of
    those names."""

    __slots__ = ("homes", "names", "reported", "results", "source", "stack")

    def __init__(self, source: str, results: Results, homes: set[tuple[str, str]], stack: str, names: frozenset[str],
                 reported: Share | None = None) -> None:
        self.source = source
        self.results = results
        self.homes = homes
        self.stack = stack
        self.names = names
        self.reported = reported


# What a worker says of a source: _Apart when it was rendered and checked apart; SKIPPED for a
# walk's file no front end wants (skipped unread as load_and_render skips it); Together for one
# whose renderings may change others' (the parent loads it with them); AGAIN when anything went
# wrong (an error to report), so the parent does the whole run itself, in its usual order.
SKIPPED, AGAIN = "skipped", "again"


def _apart_in_workers(sources: list[Source], resolver: OptionsResolver,
                      new_share: NewShare | None = None
                      ) -> tuple[list[Source], list[_Apart]] | None:
    """The sources that render apart rendered and checked in worker processes and in this one
    (-j: every core by default, this process one of them; from PARALLEL_MIN_FILES sources on,
    vmtune.workers.in_workers' `here`): reading, parsing, rendering and checking a
    file take most of a run over manifests, and one process doing the first three for every
    file left the other cores idle. Returns the sources the parent still loads (together: their
    objects may reference each other's) and what the workers made of the others; None when the
    run stays in one process, or when a worker met an error: then the parent does the whole run,
    so what is reported and its order are those of one process whatever -j is.

    A file whose objects name others (a VM its instancetype) is rendered apart as if no file of
    the run defined them, and kept so once the workers have said what every file defines
    (_kept): in a run where the names resolve elsewhere (common-instancetypes, --instancetypes),
    such files were all loaded and rendered in this process, with the workers idle. With
    `new_share`, each file's results come back reported (_reported)."""
    from vmtune.workers import DEFAULT_JOBS, PARALLEL_MIN_FILES, chunk_spans, in_workers

    jobs = resolver.request.jobs or DEFAULT_JOBS
    if jobs < 2 or len(sources) < PARALLEL_MIN_FILES or any(s.path is None for s in sources):
        return None
    # Each directory's configuration before the workers fork, so that none is read, and none
    # ignored is said, once a worker. One process says a configuration ignored as it first checks a
    # file of its folder, in the order of the objects rendered from all files (the front ends'
    # order, then the files'), not in the sources' order: with one, the parent does the whole run
    # and says it there (rare: a configuration another user could have written).
    with resolver.reading_ahead() as held:
        # Once a folder, in the order of its first file, by settings_for_file's own key (a name up
        # to and with its last "/"): asking it for every file, a call into interpreted code each,
        # cost 4.4 M instructions over 1,000 manifests on the run's serial path.
        folders: set[str] = set()
        for source in sources:
            folder = source.name[:source.name.rfind("/") + 1]
            if folder in folders:
                continue
            folders.add(folder)
            with contextlib.suppress(VmtuneError):  # said again by the run that reports it
                resolver.settings_for_file(source.name)
    if held:
        return None  # read again, and said, in the order of the run
    try:
        context = StackContext.of(resolver.request)
    except VmtuneError:
        return None  # the parent's run says it
    # A file given twice (named and found by a walk, a folder given twice) is loaded twice by one
    # process, and its objects' findings reported twice under one key; rendered apart, each copy's
    # results came back under that same key and the parent kept one copy's. Loaded here, with the rest.
    from collections import Counter

    twice = frozenset(name for name, count in Counter(source.name for source in sources).items() if count > 1)
    # The first files here, until one is rendered and checked (of 8 at most): the modules a check imports, the
    # configuration's resolved rules, the compiled expressions are then made once, in this process,
    # and inherited through fork, not made again in every worker (that cost ~0.3 s of CPU a run).
    made: list[_Apart | Together | str] = []
    while len(made) < min(len(sources), 8) and not any(isinstance(said, _Apart) for said in made):
        made.append(_apart_files([sources[len(made)]], resolver, context, new_share, twice)[0])
        if made[-1] == AGAIN:
            return None
    in_workers(jobs, chunk_spans(len(made), len(sources), jobs, here=True), _apart_chunk, made.extend, _start_apart,
               sources, resolver, context, new_share, twice,
               here=lambda span: _apart_files(sources[span[0]:span[1]], resolver, context, new_share, twice,
                                              parallel=False))
    if AGAIN in made:
        return None
    kept = _kept(made)
    rest = [source for source, said in zip(sources, made, strict=True)
            if said != SKIPPED and (not kept(said) or source.name in twice)]
    return rest, [said for said in made if isinstance(said, _Apart) and kept(said) and said.source not in twice]


def _kept(made: list[_Apart | Together | str]) -> Callable[[_Apart | Together | str], bool]:
    """Whether a file rendered apart keeps its results: no file rendered together defines a name
    its objects give (for its front end), nor may define any name."""
    defined: dict[str, set[str]] = {}
    unknown: set[str] = set()  # front ends with a file that may define anything
    for said in made:
        if isinstance(said, Together):
            for stack, names in said.defines.items():
                if names is None:
                    unknown.add(stack)
                else:
                    defined.setdefault(stack, set()).update(names)

    def kept(said: _Apart | Together | str) -> bool:
        if not isinstance(said, _Apart):
            return False
        return not said.names or (said.stack not in unknown and said.names.isdisjoint(defined.get(said.stack, ())))

    return kept


_apart: tuple[list[Source], OptionsResolver, StackContext, NewShare | None, frozenset[str]] | None = None
# a worker's, see _apart_in_workers


def _start_apart(sources: list[Source], resolver: OptionsResolver, context: StackContext,
                 new_share: NewShare | None, twice: frozenset[str]) -> None:
    """A worker's set-up: the parent's sources, resolver and front-end settings, through fork.
    The cyclic GC stays off: the worker ends with its chunks, and a file's documents, renderings
    and domains hold no cycle worth collecting (see _lasting)."""
    import gc

    global _apart
    _apart = (sources, resolver, context, new_share, twice)
    gc.disable()


def _apart_chunk(span: tuple[int, int]) -> list[_Apart | Together | str]:
    """In a worker: what each of sources[start:stop] is (_Apart, Together, SKIPPED or AGAIN)."""
    assert _apart is not None, "the pool initializer sets it"
    sources, resolver, context, new_share, twice = _apart
    return _apart_files(sources[span[0]:span[1]], resolver, context, new_share, twice)


def _apart_files(sources: list[Source], resolver: OptionsResolver, context: StackContext,
                 new_share: NewShare | None, twice: frozenset[str], parallel: bool = True
                 ) -> list[_Apart | Together | str]:
    """load_and_render, the unclaimed-file check and _check_all of check_stack_sources on the
    sources that render apart (tied_by), and what each source is (_Apart, Together, SKIPPED;
    AGAIN for all on any error). Those files are rendered and checked in one call of each, not
    one a file: nothing ties them, so each file's renderings and results are what a call of its
    own makes, and the calls' own costs (a front end's lookups of kustomizations and charts, the
    rules' set-up) are paid once a chunk: 3.5 % of a run's instructions over 1,000 manifests.

    With `new_share`, the files are reported here (_reported). A file the parent may yet load
    with the others (its objects name others', _kept; or given twice, `twice`) has a report part
    of its own, dropped with it; the others' results are always the run's, and share one part
    (one report made, tallied and sent a chunk, not one a file)."""
    said: list[_Apart | Together | str] = []
    apart: dict[str, list[tuple[int, StackFile, frozenset[str]]]] = {}  # front end -> (index, file, names)
    try:
        for source in sources:
            stack_file = _read(source, resolver.request, False)
            if stack_file is None:
                said.append(SKIPPED)
                continue
            tied = tied_by(stack_file, context)
            if isinstance(tied, Together):
                said.append(tied)
                continue
            apart.setdefault(tied[0], []).append((len(said), stack_file, tied[1]))
            said.append(AGAIN)  # until rendered and checked below
    except VmtuneError:
        return [AGAIN] * len(sources)
    chunk: tuple[Report, list[str]] | None = None  # the part of the files always kept
    parts: list[Report] = []
    for stack, group in apart.items():
        done = _render_and_check(stack, [stack_file for _i, stack_file, _n in group], resolver, context, parallel)
        if done is None:
            return [AGAIN] * len(sources)
        for index, stack_file, names in group:
            results, homes = done[stack_file.name]
            if new_share is None:
                said[index] = _Apart(stack_file.name, results, homes, stack, names)
                continue
            alone = bool(names) or stack_file.name in twice
            part, carried = chunk, None  # carried: the part this file's share brings the parent
            if alone or part is None:
                part = new_share()
                carried = part[0]
                parts.append(carried)
                # Identities (--write-baseline) go to the run's in the order of the files: a part a file
                if not alone and carried.identities is None:
                    chunk = part
            kept, text = _reported(results, homes, resolver, part)
            said[index] = _Apart(stack_file.name, {}, homes, stack, names, (carried, text, kept))
    for report in parts:
        _sent(report)
    return said


def _render_and_check(stack: str, files: list[StackFile], resolver: OptionsResolver, context: StackContext,
                      parallel: bool = True) -> dict[str, tuple[Results, set[tuple[str, str]]]] | None:
    """Files that render apart, rendered and checked: each file's results and the objects defined
    in it (rendered name, file); None when anything is to be said (an error)."""
    request = resolver.request
    if len({f.name for f in files}) != len(files):
        return None  # a file given twice: the parent's run says what it says
    try:
        rendered, claimed = _render_raising(stack, files, context)
    except VmtuneError:
        return None
    if any(f.name not in claimed and f.explicit and not request.skip_non_domain for f in files):
        return None  # no definition in it: an error
    errors: list[InputError] = []
    try:
        results = _check_all(rendered, files, resolver, errors, parallel)
    except VmtuneError:
        # A folder's configuration that fails (an unknown rule) ends the run: the parent's run
        # says the first such error in the sources' order; a chunk here may be any (in_workers).
        return None
    if errors:
        return None
    by_file: dict[str, tuple[Results, set[tuple[str, str]]]] = {f.name: ({}, set()) for f in files}
    for item in rendered:
        home = by_file.get(item.source)
        if home is None:
            return None  # an object rendered from no file given (none is): the parent's run
        home[1].add((item.name, item.source))
    for key, value in results.items():
        home = by_file.get(key[1])
        if home is None:
            return None  # a finding placed on a file not rendered apart (none is): the parent's run
        home[0][key] = value
    return by_file


def _read(source: Source, request: Any, writing: bool) -> StackFile | None:
    """A source read and parsed; None for one skipped unparsed. VmtuneError when it cannot be read."""
    data, identity = source.load(for_write=writing and source.path is not None)
    answers: dict[str, bool] = {}
    # A walk's file, or with --skip-non-domain (the hooks) a named one: a file no front end
    # wants is skipped unparsed, so a Helm chart's Service template is no error (#50)
    if not source.explicit or request.skip_non_domain:
        for frontend in frontends():
            answers[frontend.name] = _wants(frontend.name, data, source.name)
            if answers[frontend.name]:
                break
        else:
            return None  # YAML that holds no stack object: skipped quietly, not even parsed
    try:
        stack_file = read_file(source.name, data, source.explicit, identity, source.path is None)
    except TemplatedYaml:
        takers = [f for f in frontends() if f.templates and source.path is not None and
                  _wants(f.name, data, source.name) and f.part("frontend").takes_template(source.name)]
        if not takers:
            raise
        # a front end renders it with the template's own tool (or says why it cannot)
        stack_file = read_file(source.name, data, source.explicit, identity, templated=True)
        stack_file.wanted.update({f.name: f in takers for f in frontends()})
        return stack_file
    stack_file.wanted.update(answers)  # render_all asks each front end again
    return stack_file


def load_and_render(sources: list[Source], request: Any, errors: list[InputError], writing: bool = False,
                    elsewhere: Iterable[str] = ()
                    ) -> tuple[list[StackFile], list[Rendered], set[str], StackContext] | None:
    """The stack files of the sources (a walk's files that hold no stack object skipped unparsed),
    and what the front ends render of them with the command line's settings (`request`, a
    vmtune.request.CheckRequest): for `check` and `render` alike. A file that cannot be read or is
    refused is an error in `errors` and the others go on; None when the command line itself is
    wrong (--pair, --instancetypes) or no rendering can be made. The context is what a fix renders
    again with. `elsewhere`: the names of the run's other files, rendered apart (StackContext.read_elsewhere)."""
    files: list[StackFile] = []
    for source in sources:
        try:
            stack_file = _read(source, request, writing)
        except VmtuneError as exc:
            errors.append(InputError.of(exc))
            continue
        if stack_file is not None:
            files.append(stack_file)
    try:
        context = StackContext.of(request)
    except VmtuneError as exc:
        errors.append(InputError.of(exc))
        return None
    context.read_elsewhere(elsewhere)
    try:
        refused: list[VmtuneError] = []
        rendered, claimed = render_all(files, context, refused)
        errors += [InputError.of(exc) for exc in refused]
    except VmtuneError as exc:
        errors.append(InputError.of(exc))
        return None
    return files, rendered, claimed, context


# What a run's stack sources made (documents, renderings, placed findings) is kept until the
# process ends, not freed when check_stack_sources returns: all of it lived to this point anyway
# (an instancetype in one file resolves a VM in another), and freeing the ~10^5 objects of 1,000
# manifests cost ~20 ms that `vmtune check`, which ends without teardown (main._exit_now), never
# needs to spend. The next run in the same process frees it first, so at most one run is kept.
_LAST_RUN: list[Any] = []


def no_definition() -> str:
    """What a file named on the command line that no front end recognised is said to lack."""
    titles = [f.title for f in frontends()]
    return f"no {', '.join(titles[:-1])} or {titles[-1]} definition in it" if len(titles) > 1 else \
        f"no {titles[0]} definition in it"


def _refuse_printed_output(results: Results, rendered: list[Rendered]) -> None:
    """--fix on what a stack's client printed (`openstack … show`): nothing to edit (the cloud holds
    the object); one line per such file, in the front end's words (FrontEnd.printed), and each
    finding carries the command that applies its cure."""
    stacks = {item.name: item.stack for item in rendered}
    for (name, _source), (_n, placed) in results.items():
        declared = by_name(stacks.get(name, ""))
        for p in placed:
            if p.command and declared is not None and declared.printed:
                warn(f"{p.source}: {declared.printed}")

@contextlib.contextmanager
def _lasting() -> Iterator[None]:
    """The cyclic GC off while what lives to the end of the run is made, and that frozen after.

    Every source is loaded before any is checked (an instancetype in one file resolves a VM in
    another), so a run of 1,000 manifests holds ~10^5 nodes, strings and dicts, none part of a
    cycle; the collector would walk them again and again as they are made (a quarter of the time
    spent reading YAML). As vmtune.commands.check._lasting_inventory does for the inventory:
    frozen, they are never scanned, and still freed when no longer referenced."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.freeze()
            gc.enable()


def _any_domain() -> Domain:
    """A minimal domain, for the configuration that applies to a file's suppressions (policies
    may resolve per domain; a file's suppressions are judged against the file's configuration)."""
    return Domain.parse(b"<domain type='kvm'><name>suppressions</name></domain>", "suppressions")


Results = dict[tuple[str, str], tuple[str, list[Placed]]]  # (rendered name, source) -> (name, placed findings)


Suppressions = dict[str, tuple[list[YamlSuppression], list[int]]]  # file name -> yaml_suppressions(file)


def _check_all(rendered: list[Rendered], files: list[StackFile], resolver: OptionsResolver,
               errors: list[InputError], parallel: bool = True) -> Results:
    """Check every rendered object; one whose domain cannot be checked is an error of its file,
    and the others are checked (in workers when `parallel` and there are many, _checked)."""
    from vmtune.rules import BUILTIN_RULES

    suppressions = {f.name: yaml_suppressions(f) for f in files}
    results: Results = {}
    for item, checked in zip(rendered, _checked(rendered, suppressions, resolver, parallel), strict=True):
        if isinstance(checked, InputError):
            errors.append(checked)
            continue
        own = results.setdefault((item.name, item.source), (item.name, []))[1]
        for p in checked:  # most on the object's own file: no key, pair or list made for each
            if p.source == item.source:
                own.append(p)
            else:
                results.setdefault((item.name, p.source), (item.name, []))[1].append(p)
    for stack_file in files:
        found = suppressions.get(stack_file.name)
        if not found or not (found[0] or found[1]):
            continue
        settings = resolver.settings_for_file(stack_file.name)
        options = resolver.options_for(settings, stack_file.name)
        codes = set(enabled_rules(_any_domain(), options))
        ran = [r for r in BUILTIN_RULES if r.code in codes]
        extra = suppression_findings(stack_file.name, found, codes, ran)
        if extra:  # with the file's first object, or on their own when it rendered none
            key = next((k for k in results if k[1] == stack_file.name), ("(suppressions)", stack_file.name))
            results.setdefault(key, (key[0], []))[1].extend(Placed(stack_file.name, f, ()) for f in extra)
    return results


def _check_one(item: Rendered, suppressions: Suppressions, resolver: OptionsResolver) -> list[Placed] | InputError:
    """One rendered object's findings placed on its sources, less the suppressed (each suppression
    that matched notes the rule, for SUP002), or why its domain cannot be checked."""
    options = resolver.options_for(resolver.settings_for_file(item.source), item.source)
    try:
        _domain, placed = check_rendered(item, options)
    except VmtuneError as exc:
        return InputError.of(exc)
    return apply_yaml_suppressions(placed, suppressions)


def _checked(rendered: list[Rendered], suppressions: Suppressions, resolver: OptionsResolver,
             parallel: bool = True) -> list[list[Placed] | InputError]:
    """_check_one of each rendered object, in order: in worker processes as domain files are
    (vmtune.workers: -j, all cores by default, from PARALLEL_MIN_FILES objects on), else here.

    The sources that need each other are loaded and rendered here first (an instancetype in one
    file resolves a VM in another; the others went to workers whole, _apart_in_workers); the
    workers, forked after, inherit the renderings and check a range of them each.
    What they return is what this process would have made, merged in the objects' order, so the
    report, its order and the exit code are the same whatever -j is."""
    from vmtune.workers import DEFAULT_JOBS, PARALLEL_MIN_FILES

    jobs = resolver.request.jobs or DEFAULT_JOBS
    # not in a worker, nor here while the workers run (_apart_in_workers): they fork none
    if jobs < 2 or len(rendered) < PARALLEL_MIN_FILES or not parallel or _apart is not None:
        return [_check_one(item, suppressions, resolver) for item in rendered]
    from vmtune.workers import chunk_spans, in_workers

    # Every object's settings and options before the workers fork: a configuration ignored or
    # broken is said once, here, in the order one process says it, and not once a worker.
    for item in rendered:
        resolver.options_for(resolver.settings_for_file(item.source), item.source)
    checked: list[list[Placed] | InputError] = []

    def take(result: tuple[list[list[Placed] | InputError], list[tuple[str, int, set[str]]]]) -> None:
        done, used = result
        checked.extend(done)
        for name, index, codes in used:
            suppressions[name][0][index].used |= codes

    in_workers(jobs, chunk_spans(0, len(rendered), jobs), _check_chunk, take, _start_checking, rendered, suppressions,
               resolver)
    return checked


_checking: tuple[list[Rendered], Suppressions, OptionsResolver] | None = None  # a worker's, see _checked


def _start_checking(rendered: list[Rendered], suppressions: Suppressions, resolver: OptionsResolver) -> None:
    """A worker's set-up: the parent's renderings, suppressions and resolver, inherited through fork."""
    global _checking
    _checking = (rendered, suppressions, resolver)


def _check_chunk(span: tuple[int, int]) -> tuple[list[list[Placed] | InputError], list[tuple[str, int, set[str]]]]:
    """In a worker: _check_one of rendered[start:stop], and the rules each suppression matched
    (the parent judges SUP002 once every object is checked), each said once."""
    assert _checking is not None, "the pool initializer sets it"
    rendered, suppressions, resolver = _checking
    done = [_check_one(item, suppressions, resolver) for item in rendered[span[0]:span[1]]]
    used = []
    for name, (found, _broken) in suppressions.items():
        for index, suppression in enumerate(found):
            if suppression.used:
                used.append((name, index, suppression.used))
                suppression.used = set()
    return done, used


# -- --fix and --diff --------------------------------------------------------------------------------

def _refused(rendered: list[Rendered]) -> set[str]:
    """The objects the stack refuses (an STK004 note), whatever rules are selected."""
    return {item.name for item in rendered if any(note.code == REFUSED for note in item.notes)}


def _fix(files: list[StackFile], rendered: list[Rendered], results: Results, resolver: OptionsResolver,
         context: StackContext, out: Callable[[str], object]) -> tuple[Results, dict[str, list[Any]], bool]:
    """Apply the wanted fixes' edits to the sources, render and check again, and keep only edits
    whose finding is gone and that raise no new failing finding; write (or diff) the files."""
    from vmtune.fixer import AppliedFix

    request = resolver.request
    wanted: list[tuple[str, Placed]] = []
    for (name, _source), (_n, placed) in results.items():
        for p in placed:
            if p.edits and _wanted(p, resolver):
                wanted.append((name, p))
    if not wanted:
        return results, {}, False
    by_name = {f.name: f for f in files}
    before = _failing(results, resolver)
    judged = _severities(results)
    withheld: dict[tuple[str, str], str] = {}  # (object, rule) -> why its fix is not applied
    for _attempt in range(4):
        chosen = [(n, p) for n, p in wanted if (n, p.finding.rule.code) not in withheld]
        new_data, refused = _apply_edits(by_name, [e for _n, p in chosen for e in p.edits])
        if refused:  # an edit yamledit cannot make exactly: that file's fixes are withheld, the run goes on
            for n, p in chosen:
                why = next((refused[e.source] for e in p.edits if e.source in refused), None)
                if why is not None:
                    withheld[n, p.finding.rule.code] = f"the edit cannot be made exactly ({why})"
            continue
        try:
            new_files = [read_file(f.name, new_data.get(f.name, f.data), f.explicit, f.identity, f.stdin, f.templated)
                         for f in files]
            # What the first rendering refused (a file that does not parse, a build that fails) is
            # refused again and was said: only a refusal of a file the fix changed is the fix's
            again: list[VmtuneError] = []
            new_rendered, _claimed = render_all(new_files, context, again)
            made = next((e for e in again if e.source in new_data), None)
            if made is not None:
                raise made
        except VmtuneError as exc:  # yamledit verifies what it writes: this is a bug, said, nothing written
            raise VmtuneError(f"a fix made the file unreadable, nothing written ({exc.message})", exc.source,
                              exc.line) from None
        new_results = _check_all(new_rendered, new_files, resolver, [])  # said by the first check
        remaining = {(n, p.finding.rule.code) for (n, _s), (_x, placed) in new_results.items() for p in placed}
        failing_now = _failing(new_results, resolver)
        unproven = {(n, p.finding.rule.code) for n, p in chosen if (n, p.finding.rule.code) in remaining}
        raised = failing_now - before
        # no worse in any warning or error, whatever --fail-on says: a fix that makes the stack
        # drop a value it kept (a VM-level field shadowing a preference's) shows as a finding the
        # source did not have. A new info finding is a suggestion the fixed value opens (enabling
        # multiqueue opens the ring size one), not a cost.
        raised |= {key for key, severity in _severities(new_results).items()
                   if severity >= Severity.WARNING and severity > judged.get(key, 0)}
        # a fix that makes the stack refuse the object is harmful even where --select leaves STK004 out
        raised |= {(name, REFUSED) for name in _refused(new_rendered) - _refused(rendered)}
        if not unproven and not raised:
            break
        for key in unproven:
            withheld[key] = "rendered again with it, the finding stays"
        if raised:  # a fix that raises a new failing finding: withhold the fixes of that object
            said = ", ".join(sorted({code for _n, code in raised}))
            for n, p in chosen:
                if any(r[0] == n for r in raised):
                    withheld.setdefault((n, p.finding.rule.code), f"fixing it raises {said}")
    else:
        chosen, new_data, new_results = [], {}, results
    applied: dict[str, list[Any]] = {}
    for name, p in chosen:
        applied.setdefault(f"{p.source}\0{name}", []).append(
            AppliedFix(p.finding.rule.code, p.finding.fix.description if p.finding.fix else "",
                       p.finding.fix.safety if p.finding.fix else FixSafety.SAFE, p.finding.xpath))
    changed = False
    for stack_file in files:
        fixed = new_data.get(stack_file.name)
        if fixed is None or fixed == stack_file.data:
            continue
        changed = True
        if request.diff:
            from vmtune.fixer import diff_text

            out(diff_text(stack_file.data.decode("utf-8", "replace"), fixed.decode("utf-8", "replace"),
                          stack_file.name))
        else:
            _write(stack_file, fixed)
    if request.diff:  # nothing written: the report shows the files as they are
        return results, applied, changed
    for (name, _s), (_x, placed) in new_results.items():
        for p in placed:
            why = withheld.get((name, p.finding.rule.code))
            if why is not None and p.finding.fix is not None:
                p.finding.fix = None  # no "[*]": --fix did not and will not apply it
                p.finding.note = (f"{p.finding.note}; " if p.finding.note else "") + f"fix withheld: {why}"
    return new_results, applied, changed


def _severities(results: Results) -> dict[tuple[str, str], Severity]:
    """(object, rule) -> the highest severity of its findings."""
    found: dict[tuple[str, str], Severity] = {}
    for (name, _s), (_x, placed) in results.items():
        for p in placed:
            key = (name, p.finding.rule.code)
            if key not in found or p.finding.severity > found[key]:
                found[key] = p.finding.severity
    return found


def _failing(results: Results, resolver: OptionsResolver) -> set[tuple[str, str]]:
    """(object, rule) of the findings at or above their file's --fail-on."""
    return {(n, p.finding.rule.code) for (n, _s), (_x, placed) in results.items() for p in placed
            if p.finding.severity >= resolver.fail_on(resolver.settings_for_file(p.source))}


def _wanted(p: Placed, resolver: OptionsResolver) -> bool:
    from vmtune.fixer import wanted

    finding = p.finding
    settings = resolver.settings_for_file(p.source)
    if finding.fix is None or not (resolver.unsafe(settings) or finding.fix.safety is FixSafety.SAFE):
        return False
    return wanted(finding, resolver.options_for(settings, p.source))


def _apply_edits(files: dict[str, StackFile], edits: list[SourceEdit]) -> tuple[dict[str, bytes], dict[str, str]]:
    """The sources' new bytes with the edits made, and the files whose edits were refused (why)."""
    from vmtune.stacks.yamledit import YamlEditError, set_paths

    by_source: dict[str, list[tuple[int, tuple[str | int, ...], object]]] = {}
    for edit in edits:
        plan = by_source.setdefault(edit.source, [])
        if not any(d == edit.doc and p == edit.path for d, p, _v in plan):  # the same knob asked twice: once
            plan.append((edit.doc, edit.path, edit.value))
    changed: dict[str, bytes] = {}
    refused: dict[str, str] = {}
    for name, plan in by_source.items():
        stack_file = files.get(name)
        if stack_file is None:
            continue
        try:
            owner = owner_of_format(name)
            if owner is not None and owner.editor is not None:  # a format the front end parses itself
                changed[name] = owner.part(owner.editor).set_paths(stack_file.data, plan, name)
            else:
                changed[name] = set_paths(stack_file.data, plan, name=name)
        except YamlEditError as exc:
            refused[name] = exc.message
        except VmtuneError as exc:  # a front end's own editor: a value it will not write
            refused[name] = exc.message
    return changed, refused


def _write(stack_file: StackFile, fixed: bytes) -> None:
    import sys

    if stack_file.stdin:
        sys.stdout.flush()
        sys.stdout.buffer.write(fixed)
        sys.stdout.buffer.flush()
        return
    from vmtune.fileio import normal_name, write_atomic

    try:
        write_atomic(normal_name(stack_file.name), fixed, stack_file.identity)
    except OSError as exc:
        raise VmtuneError(f"cannot write the fixed file: {exc.strerror or exc}", stack_file.name) from None
