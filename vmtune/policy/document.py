"""Policy and configuration documents as a stranger's data: reading, YAML, schema, references.

A `.vmtune.yaml` arrives in pull requests from strangers, and pre-commit or CI runs vmtune
on it with the runner's files around (SSH keys, `.git-credentials`, `.env`). So:

- a path a document names (`extends`, `policies`, `host`, `domcaps`, `baseline`) resolves,
  symlinks followed, inside the document's trust root: the repository holding it (the
  nearest directory with `.git`), else its own directory. Only paths given on the command
  line are read wherever they are (their own references are confined the same way);
- a discovered `.vmtune.yaml`, and every file a document names, is read only when nobody but
  the invoking user and root (and, for what a document names, that document's owner) could have
  written it or a directory on the way to it (UntrustedFileError; vmtune.fileio's StrictModes
  rule): a directory above the checked files that others can write (/tmp) must not supply one;
- only regular files are read (no FIFO, device or /dev/zero), at most MAX_DOCUMENT_BYTES;
- YAML nesting and alias expansion are bounded before anything walks the data (PyYAML's C
  parser crashes on deep nesting; an alias bomb expands to billions of nodes);
- no error message quotes the file: a key is named only when it is one the schema knows
  (or a near miss of one), a value never, so a secret read as YAML by mistake stays out
  of public CI logs.

Light at import: pathlib loads when a configuration or policy file is read (a plain check
reads only the built-in policy), json when a schema is needed, PyYAML and jsonschema only when a
document is parsed, not served from the cache (vmtune.cache).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError
from vmtune.fileio import normal_name, path_others_could_write, work_tree
from vmtune.inputs import read_bytes

if TYPE_CHECKING:
    from os import PathLike

BUILTIN_NAMES = ("default", "latency")
# Package data beside this module (importlib.resources, pathlib or resolving symlinks cost start-up).
BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")
CONFIG_NAME = ".vmtune.yaml"

MAX_DOCUMENT_BYTES = 256 * 1024  # the largest real policy we know is under 10 KiB
MAX_NODES = 5_000  # YAML values after alias expansion: ~0.5 s to validate and resolve; real policies < 1,000
MAX_DEPTH = 64  # nesting of YAML collections (policies need 8), in the text and after aliases


def builtin_text(name: str) -> str:
    with open(os.path.join(BUILTIN_DIR, f"{name}.yaml"), encoding="utf-8") as stream:
        return stream.read()


@lru_cache(maxsize=1)
def schema_text() -> str:
    with open(os.path.join(BUILTIN_DIR, "policy.schema.json"), encoding="utf-8") as stream:
        return stream.read()


def schema() -> dict[str, Any]:
    """The policy schema, a fresh copy (callers may extend it)."""
    import json  # here: a policy or configuration served from the cache needs no JSON (~1.5 ms at start)

    return json.loads(schema_text())  # type: ignore[no-any-return]


# `.vmtune.yaml` is a policy plus these run settings.
CONFIG_TITLE = "vmtune configuration (.vmtune.yaml)"
_SELECTORS = {"$ref": "#/$defs/selectors"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
CONFIG_PROPERTIES: dict[str, Any] = {
    "policies": _STRINGS,
    "select": _SELECTORS,
    "ignore": _SELECTORS,
    "fail-on": {"$ref": "#/$defs/severity"},
    "unsafe-fixes": {"type": "boolean"},
    "host": {"type": "string"},
    "domcaps": {"type": "string"},
    "exclude": _STRINGS,
    "per-file-ignores": {"type": "object", "additionalProperties": _SELECTORS},
    "per-domain-ignores": {"type": "object", "additionalProperties": _SELECTORS},
    "baseline": {"type": "string"},
}


@lru_cache(maxsize=1)
def config_schema() -> dict[str, Any]:
    """The policy schema plus the run settings of `.vmtune.yaml`."""
    data = schema()
    data["title"] = CONFIG_TITLE
    data["properties"].update(CONFIG_PROPERTIES)
    return data


def _schema_identity(config: bool) -> str:
    """What a cached document was validated against, without parsing the schema (a hit needs
    neither JSON nor the schema): the schema file's text, and for a configuration its additions."""
    return f"{schema_text()}\0{CONFIG_TITLE}\0{CONFIG_PROPERTIES!r}" if config else schema_text()


def is_config(path: str) -> bool:
    """A configuration (policy plus run settings) rather than a plain policy file."""
    return os.path.basename(path).endswith("vmtune.yaml")


# -- where documents may be read from -------------------------------------------------------

def trust_root(directory: str) -> str:
    """The tree the references of a document in `directory` must stay in: the repository
    holding it, else the directory itself. (Paths here are resolved str, not pathlib: a run with
    a configuration would import pathlib, urllib.parse and ipaddress for it, ~3 ms.)"""
    directory = os.path.realpath(directory)
    return work_tree(directory) or directory


class Document:
    """A document to read: where it is, how to name it in messages, and the root its references
    are confined to. A value, not changed once made (a plain class: a dataclass costs ~0.5 ms to
    create at every start)."""

    __slots__ = ("display", "owners", "path", "root")

    def __init__(self, path: str, display: str, root: str, owners: tuple[int, ...] | None = None) -> None:
        self.path = path  # resolved
        self.display = display
        self.root = root
        self.owners = owners  # a discovered document: the only users who may have written it

    def vet_opened(self, info: os.stat_result) -> None:
        """The file as opened for reading (read_text), held to the owners its path was vetted for:
        a .vmtune.yaml swapped in between Document.discovered and the read is not read."""
        from vmtune.fileio import others_could_write

        why = others_could_write(info, self.owners) if self.owners is not None else None
        if why is not None:
            raise UntrustedFileError(f"{why} (replaced after it was checked), so another user could have written it",
                                     self.display)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Document) and (self.path, self.display, self.root) == (
            other.path, other.display, other.root)

    def __hash__(self) -> int:
        return hash((self.path, self.display, self.root))

    @classmethod
    def named(cls, path: str | PathLike[str], display: str | None = None) -> Document:
        """A file named on the command line: read wherever it is (named as str(Path(path)) would)."""
        name = normal_name(os.fspath(path))
        resolved = os.path.realpath(name)
        return cls(resolved, display or name, trust_root(os.path.dirname(resolved)))

    @classmethod
    def discovered(cls, path: str) -> Document:
        """A `.vmtune.yaml` found beside the checked files: itself a reference, confined, and
        used only if nobody but the invoking user and root could have written it (UntrustedFileError)."""
        _vetted(path, (0, os.geteuid()), "", path, None)  # first: a planted one is ignored, not an error
        root = trust_root(os.path.dirname(path))  # where it was found, not where a symlink points
        return cls(_inside(path, root, path, "the configuration", None), path, root, (0, os.geteuid()))

    def reference(self, ref: str, key: str, line: Callable[[], int | None]) -> str:
        """The file a key of this document names, resolved and confined to this document's root,
        and no more exposed to other users than this document: nobody but the invoking user,
        root or this document's owner (whom whoever chose it trusts) could have written it or a
        directory on the way. (A document named on the command line that others could rewrite,
        such as a checkout made with umask 0000, was accepted as it is, and so is what it names.)
        `line` finds where the document names it, for the error only: it needs PyYAML (~15 ms),
        which a configuration served from the cache does not load otherwise."""
        try:
            resolved = _inside(os.path.join(os.path.dirname(self.path), ref), self.root, self.display,
                               f"{key} '{ref}'", None)
            owners = (0, os.geteuid(), os.stat(self.path).st_uid)
        except VmtuneError as exc:
            raise VmtuneError(exc.message, exc.source, line()) from None
        except OSError as exc:  # the document itself vanished since it was read
            raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.display, None) from None
        if _exposed(self.path, owners):
            return resolved
        existing = resolved  # a missing file is the reader's error, but not one another user may create
        while not os.path.lexists(existing):
            existing = os.path.dirname(existing)
        _vetted(existing, owners, f"{key} '{ref}': ", self.display, line, resolved)
        return resolved

    def policy_reference(self, ref: str, key: str, line: Callable[[], int | None]) -> str:
        """A policy file `extends` or `policies` names, as reference(); one that does not exist is
        said as `-p NAME` says it, naming this document and line, with the built-in names (a
        misspelt `latency` is the usual cause). The value is not quoted, only a built-in name."""
        path = self.reference(ref, key, line)
        if not os.path.lexists(path):
            import difflib

            close = difflib.get_close_matches(ref, BUILTIN_NAMES, n=1, cutoff=0.6)
            raise VmtuneError(f"{key}: cannot read policy: No such file or directory; built-in policies: "
                              f"{', '.join(BUILTIN_NAMES)}" + (f"; did you mean '{close[0]}'?" if close else ""),
                              self.display, line())
        return path


@lru_cache(maxsize=64)
def _exposed(path: str, owners: tuple[int, ...]) -> bool:
    """Whether a user other than `owners` could have written path (asked once per document)."""
    return path_others_could_write(path, owners) is not None


class UntrustedFileError(VmtuneError):
    """A document, or a file it names, that another user could have written (or a directory on
    the way to it that another user could write): not read. A discovered configuration is then
    ignored with a warning; a file that a document named on the command line names is this
    error (exit 2). What the command line names itself is read wherever it is."""


def _vetted(path: str, owners: tuple[int, ...], prefix: str, source: str,
            line: Callable[[], int | None] | None, named: str | None = None) -> None:
    """UntrustedFileError unless only `owners` could have written path and the directories to it
    (the message names the file or directory at fault, unless it is `named`, the one asked for)."""
    found = path_others_could_write(path, owners)
    if found is None:
        return
    where, why = found
    named = path if named is None else named
    subject = why if where in (named, os.path.abspath(named), os.path.realpath(named)) else f"{where} is {why}"
    raise UntrustedFileError(f"{prefix}{subject}, so another user could have written it", source,
                             line() if line is not None else None)

def _within(path: str, root: str) -> bool:
    """Whether a resolved path is root or below it (PurePath.is_relative_to, on resolved names)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _inside(path: str, root: str, source: str, what: str, line: int | None) -> str:
    if "\0" in path:  # YAML's "\0": realpath() and open() raise ValueError, not OSError
        raise VmtuneError(f"{what} is not a file name (it holds a NUL byte)", source, line)
    resolved = os.path.realpath(path)
    if not _within(resolved, root):
        raise VmtuneError(f"{what} is outside the repository ({root}); a file outside it is read only when "
                          "named on the command line", source, line)
    if ".git" in os.path.relpath(resolved, root).split("/"):  # actions/checkout keeps its token in .git/config
        raise VmtuneError(f"{what} is inside .git, which holds git's credentials, not configuration", source, line)
    return resolved


def read_text(path: str, display: str, what: str = "configuration",
              vet: Callable[[os.stat_result], None] | None = None) -> str:
    """A regular file's text, at most MAX_DOCUMENT_BYTES of UTF-8; anything else is one line naming it."""
    data = read_bytes(path, display, what, MAX_DOCUMENT_BYTES, vet)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise VmtuneError(f"cannot read {what}: not UTF-8 text", display, line) from None


# -- YAML, bounded --------------------------------------------------------------------------

_QUOTED = r"""\s*(?:'[^'\n]*'|"[^"\n]*")"""  # in PyYAML's messages (compiled by re when one is shown)
_EXPECTED = r"expected(?: '[^'\n]{1,3}' or)?$"  # "expected ',' or ']'": PyYAML's words


def _nesting_line(text: str) -> int | None:
    """The line where collections first nest deeper than MAX_DEPTH (vmtune.yamldepth)."""
    from vmtune.yamldepth import nesting_line

    return nesting_line(text, MAX_DEPTH)


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's description of a syntax error without the bits of the file it quotes
    ("found character '%' that cannot start any token", "found undefined alias 'x'")."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or "not YAML"

    def keep(match: re.Match[str]) -> str:
        quoted = match.group().strip()
        # PyYAML's own words stay ('<block end>', ':'), and so does what it "expected" (its
        # grammar's punctuation: "did not find expected ',' or ']'"); anything else may come from
        # the file ("found character '%'", "found undefined alias 'x'").
        before = str(problem)[:match.start()]
        if quoted[1:2] == "<" or quoted in ("':'", "'-'", "'?'") or re.search(_EXPECTED, before):
            return match.group()
        return ""

    return " ".join(re.sub(_QUOTED, keep, str(problem)).split())


def _expansion(node: Any, source: str) -> None:
    """Refuse a node graph that aliases would expand beyond MAX_NODES nodes or MAX_DEPTH levels,
    or that refers to itself. Iterative, and linear in the distinct nodes: aliases are shared."""
    import yaml

    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        key = id(current)
        if isinstance(current, yaml.ScalarNode):
            size[key], depth[key] = 1, 1
            continue
        children = [n for pair in current.value for n in pair] if isinstance(current, yaml.MappingNode) \
            else list(current.value)
        if children_done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > MAX_NODES:
                raise VmtuneError(f"invalid YAML: more than {MAX_NODES} values once aliases are expanded",
                                  source, current.start_mark.line + 1)
            if depth[key] > MAX_DEPTH:
                raise VmtuneError(f"invalid YAML: nested deeper than {MAX_DEPTH} levels", source,
                                  current.start_mark.line + 1)
            continue
        if key in size:
            continue
        if key in open_:
            raise VmtuneError("invalid YAML: an alias refers to the collection that holds it", source,
                              current.start_mark.line + 1)
        open_.add(key)
        stack.append((current, True))
        stack.extend((c, False) for c in children if id(c) not in size)
        for child in children:  # a child already on the way down is a cycle
            if id(child) in open_:
                raise VmtuneError("invalid YAML: an alias refers to the collection that holds it", source,
                                  child.start_mark.line + 1)


def load_yaml(text: str, source: str) -> Any:
    """YAML text -> data, bounded: nesting checked on the text, aliases on the node graph,
    both before any Python object is built. Errors quote nothing from the text."""
    line = _nesting_line(text)
    if line is not None:
        raise VmtuneError(f"invalid YAML: nested deeper than {MAX_DEPTH} levels", source, line)
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expansion(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        if mark is None and isinstance(getattr(exc, "position", None), int):  # a ReaderError: a bad character
            mark_line = text[: exc.position].count("\n") + 1  # type: ignore[attr-defined]
            raise VmtuneError("invalid YAML: a character YAML does not allow", source, mark_line) from None
        raise VmtuneError(f"invalid YAML: {_yaml_problem(exc)}", source, mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()


def yaml_line(text: str, key_path: list[str | int]) -> int | None:
    """Line of the node at key_path in a YAML document (1-based), for error messages."""
    import yaml

    if _nesting_line(text) is not None:
        return None
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


# Each policy's text by the name messages give it (kept by vmtune.policy.load for policies with
# checks): the line of a check is found only when a domain's XPath budget stops it (composing the
# YAML again costs the import of PyYAML, which a cached configuration never pays). Here, below
# the loader and the custom checks, as both use it. Forked workers inherit it.
_TEXTS: dict[str, str] = {}


def keep_text(display: str, text: str) -> None:
    _TEXTS[display] = text


def check_line(display: str, index: int) -> int | None:
    """The line of the policy's check number `index`, when its text was read."""
    text = _TEXTS.get(display)
    return yaml_line(text, ["checks", index]) if text is not None else None


# -- validation, quoting nothing from the document -------------------------------------------

def _schema_words(schema_data: dict[str, Any]) -> set[str]:
    """Every property name the schema defines: the only keys a message may quote."""
    words: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            words.update(k for k in node.get("properties", {}) if isinstance(k, str))
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema_data)
    return words


def _dotted(key_path: list[Any], known: set[str]) -> str:
    return ".".join(str(k) if isinstance(k, int) or k in known else "…" for k in key_path) or "(top level)"


_TYPES = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
          "boolean": "true or false", "number": "a number", "null": "nothing"}


def _expected(error: Any) -> str:
    """What the schema wanted, in words taken from the schema only (never the instance)."""
    kind, want = error.validator, error.validator_value
    if kind == "type":
        wanted = [want] if isinstance(want, str) else list(want)
        return "expected " + " or ".join(_TYPES.get(t, t) for t in wanted)
    if kind == "enum":
        import json

        return "expected one of " + ", ".join(json.dumps(v) for v in want)
    if kind == "required" and isinstance(error.instance, dict):
        missing = [k for k in want if k not in error.instance]
        return f"missing key '{missing[0]}'" if missing else "missing a key"
    if kind == "pattern":
        return f"does not match {want}"
    if kind in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties"):
        return f"{kind} is {want}"
    if kind in ("oneOf", "anyOf"):
        return "matches none of the allowed forms"
    if kind == "propertyNames":
        return "a key has a form the schema does not allow"
    return f"invalid value ({kind})"


# How `pattern` is matched, part of every cache key (a changed meaning must not serve stale data).
PATTERN_SEMANTICS = "ecma-end-ascii"


@lru_cache(maxsize=64)
def _ecma(pattern: str) -> re.Pattern[str]:
    """A schema pattern with JSON Schema's (ECMA-262) meaning in Python's re: `$` only at the
    very end (Python's also matches before a final newline, so `code: "XORG001\\n"` passed
    `^X[A-Z]{0,4}[0-9]{3}$` and printed a raw newline in text output), `\\w` and `\\d` ASCII."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return re.compile(pattern, re.ASCII)


def _pattern(validator: Any, pattern: str, instance: Any, schema_node: Any) -> Any:
    import jsonschema

    if validator.is_type(instance, "string") and not _ecma(pattern).search(instance):
        yield jsonschema.ValidationError(f"does not match {pattern}")  # never quotes the value


@lru_cache(maxsize=1)
def _strict_validator() -> Any:
    """Draft 2020-12 with ECMA `pattern` (see _ecma): one class per process, not one per document."""
    import jsonschema

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _pattern})


def validate(data: Any, text: str, source: str, schema_data: dict[str, Any] | None = None) -> None:
    import difflib

    import jsonschema

    schema_data = schema_data or schema()
    validator = _strict_validator()(schema_data)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    known = _schema_words(schema_data)
    error = jsonschema.exceptions.best_match(errors)
    key_path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            line = yaml_line(text, [*key_path, extra[0]])
            close = difflib.get_close_matches(str(extra[0]), allowed, n=1, cutoff=0.6) if allowed else []
            if close:  # a near miss of a known key: quoting it gives nothing away
                dotted = _dotted(key_path, known)
                dotted = f"{dotted}.{extra[0]}" if key_path else str(extra[0])
                raise VmtuneError(f"invalid policy: unknown key '{dotted}'; did you mean '{close[0]}'?", source, line)
            where = f" in '{_dotted(key_path, known)}'" if key_path else ""
            keys = f" (keys: {', '.join(allowed)})" if allowed else ""
            raise VmtuneError(f"invalid policy: unknown key{where}{keys}", source, line)
    raise VmtuneError(f"invalid policy: key '{_dotted(key_path, known)}': {_expected(error)}", source,
                      yaml_line(text, key_path))


_parsed: dict[tuple[str, str], dict[str, Any]] = {}


def parse_document(text: str, source: str, trusted: bool, schema_data: dict[str, Any] | None = None,
                   config: bool = False) -> dict[str, Any]:
    """YAML text -> data, validated unless trusted (against schema_data, else the policy schema
    or with `config` the configuration schema); valid results are cached (see vmtune.cache)."""
    from vmtune import cache

    # The key is everything the result depends on: the text and the schema it passed.
    if trusted:
        key = text
    else:
        identity = repr(schema_data) if schema_data is not None else _schema_identity(config)
        key = f"{identity}\0{PATTERN_SEMANTICS}\0{text}"
    if (source, key) in _parsed:  # a configuration is read as settings and again as a policy
        return _parsed[source, key]
    cached = cache.lookup(source, key)
    if isinstance(cached, dict):
        return cached
    data = load_yaml(text, source)
    if data is None:
        data = {}  # an empty file (or only comments) is an empty policy, not an error
    if not trusted:
        validate(data, text, source, schema_data or (config_schema() if config else schema()))
    data = data if isinstance(data, dict) else {}
    cache.store(source, key, data)
    _parsed[source, key] = data
    return data
