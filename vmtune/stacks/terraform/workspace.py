"""Which values a directory's `libvirt_domain` resources are rendered with, as Terraform decides:
a root module's variables take their defaults, overridden by `terraform.tfvars` and then
`*.auto.tfvars` (lexical order; the `.json` forms too) from the same directory; a module called
with a local `source` (`module "db" { source = "./modules/vm", memory = 8 }`) takes the call's
arguments, resolved in the caller's scope, and is rendered once per call. The values of
--tf-var-file and --tf-var (`-var-file`, `-var`) come last, for every root directory checked.

Bounded: a module is read only inside the repository that holds the caller (the nearest parent
with `.git`, else the working directory), at most MAX_DEPTH calls deep and MAX_FILES files a
directory; a source outside it, a registry or git source, or a cycle is said (STK002), never
read. A module directory not among the files checked is read from disk; its findings are shown
but its fixes are not written (give its directory to fix it). A tfvars or module file is read as
a regular file of bounded size (vmtune.inputs), and refused if it links outside the repository.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from vmtune.stacks.frontend import Note, StackFile, read_file
from vmtune.stacks.terraform import hcl

MAX_DEPTH = 8
MAX_FILES = 64
# a module block's arguments that are Terraform's, not the module's variables
_MODULE_META = frozenset({"source", "version", "count", "for_each", "providers", "depends_on"})


class Instance:
    """One rendering of a directory's files: the scope its expressions resolve in, the address
    prefix of its resources (`module.db.`), and what makes its fixes shared or unwritable."""

    __slots__ = ("calls", "directory", "editable", "prefix", "scope")

    def __init__(self, directory: str, prefix: str, scope: hcl.Scope, editable: bool) -> None:
        self.directory = directory
        self.prefix = prefix
        self.scope = scope
        self.editable = editable
        self.calls: list[str] = []  # "module.db (main.tf:3)": the calls sharing this directory


class Workspace:
    def __init__(self, files: list[StackFile], parsed: dict[str, list[hcl.Block]],
                 command_line: dict[str, Any] | None = None) -> None:
        self.command_line: dict[str, Any] = command_line or {}  # --tf-var-file, --tf-var: a root's last word
        self.files: dict[str, list[StackFile]] = {}
        self.parsed = dict(parsed)
        for stack_file in files:
            self.files.setdefault(os.path.dirname(stack_file.name), []).append(stack_file)
        self.notes: list[Note] = []
        self.instances: list[Instance] = []

    def plan(self) -> list[Instance]:
        called = {target for directory in self.files for _b, target in self._calls(directory, quiet=True)
                  if target is not None and target in self.files and target != directory}
        for directory in list(self.files):  # the directories given; a module's read from disk joins them
            if directory in called:
                continue  # rendered with its callers' arguments, not as a root
            scope = self._scope(directory)
            scope.given.update(self._tfvars(directory))
            scope.given.update(self.command_line)  # -var-file and -var win over *.auto.tfvars
            self._visit(Instance(directory, "", scope, True), (directory,))
        by_directory: dict[str, list[Instance]] = {}
        for instance in self.instances:
            by_directory.setdefault(instance.directory, []).append(instance)
        for group in by_directory.values():
            calls = [c for i in group for c in i.calls]
            for instance in group:
                instance.calls = calls
        return self.instances

    def stack_files(self, directory: str) -> list[StackFile]:
        return self.files.get(directory, [])

    def _visit(self, instance: Instance, stack: tuple[str, ...]) -> None:
        self.instances.append(instance)
        for block, target in self._calls(instance.directory):
            if target is None:
                continue
            label = block.labels[0] if block.labels else "?"
            where = f"{self._file_of(block, instance.directory)}:{block.line}"
            if target in stack:
                self.notes.append(_not_read(self._file_of(block, instance.directory), block.line,
                                       f"module.{label} calls a module that calls it back: not read"))
                continue
            if len(stack) >= MAX_DEPTH:
                self.notes.append(_not_read(self._file_of(block, instance.directory), block.line,
                                       f"module.{label} is nested more than {MAX_DEPTH} calls deep: not read"))
                continue
            editable = target in self.files
            if not editable and not self._load(target, block, instance.directory):
                continue
            scope = self._scope(target)
            scope.given.update({key: instance.scope.resolve(item.value) for key, item in block.attrs.items()
                                if key not in _MODULE_META})
            child = Instance(target, f"{instance.prefix}module.{label}.", scope, editable)
            child.calls.append(f"{instance.prefix}module.{label} ({where})")
            if "count" in block.attrs or "for_each" in block.attrs:
                child.calls.append(f"each instance of its {'count' if 'count' in block.attrs else 'for_each'}")
            self._visit(child, (*stack, target))

    def _calls(self, directory: str, quiet: bool = False) -> list[tuple[hcl.Block, str | None]]:
        """The directory's module blocks with the directory each names (None: not read, said)."""
        found: list[tuple[hcl.Block, str | None]] = []
        for stack_file in self.files.get(directory, []):
            for block in self.parsed.get(stack_file.name, []):
                if block.type != "module":
                    continue
                found.append((block, self._target(block, directory, stack_file.name, quiet)))
        return found

    def _target(self, block: hcl.Block, directory: str, name: str, quiet: bool) -> str | None:
        label = block.labels[0] if block.labels else "?"
        source = block.attrs.get("source")
        value = source.value.value if source is not None and source.value.kind == "lit" else None
        if not isinstance(value, str) or not value.startswith(("./", "../")):
            if not quiet:
                self.notes.append(_not_read(name, block.line,
                                       f"module.{label}'s source is not a directory of this repository: its "
                                       "resources are not checked"))
            return None
        target = os.path.normpath(os.path.join(directory, value))
        root = _repository_root(directory)
        real = os.path.realpath(target)
        if os.path.commonpath([real, root]) != root:
            if not quiet:
                self.notes.append(_not_read(name, block.line,
                                       f"module.{label}'s source is outside the repository ({root}): not read"))
            return None
        return target

    def _load(self, directory: str, block: hcl.Block, caller: str) -> bool:
        """Read a called module's .tf files from disk (it was not among the files checked)."""
        name = self._file_of(block, caller)
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".tf"))
        except OSError as exc:
            self.notes.append(_not_read(name, block.line,
                                   f"module {block.labels[0] if block.labels else '?'}: cannot read its directory "
                                   f"({exc.strerror or exc}): not checked"))
            return False
        if len(names) > MAX_FILES:
            self.notes.append(_not_read(name, block.line, f"the module has more than {MAX_FILES} .tf files: "
                                                                 "not read"))
            return False
        loaded = []
        root = _repository_root(caller)
        for base in names:
            path = os.path.join(directory, base)
            data = _read_confined(path, root, "a module's .tf file")
            stack_file = read_file(path, data, explicit=False)
            self.parsed[path] = hcl.parse(data, path)
            loaded.append(stack_file)
        self.files[directory] = loaded
        return True

    def _scope(self, directory: str) -> hcl.Scope:
        scope = hcl.Scope()
        for stack_file in self.files.get(directory, []):
            scope.add(self.parsed.get(stack_file.name, []))
        return scope

    def _file_of(self, block: hcl.Block, directory: str) -> str:
        for stack_file in self.files.get(directory, []):
            if any(b is block for b in self.parsed.get(stack_file.name, [])):
                return stack_file.name
        return directory

    def _tfvars(self, directory: str) -> dict[str, Any]:
        """terraform.tfvars, terraform.tfvars.json, then *.auto.tfvars(.json) in lexical order:
        Terraform's order, later files winning."""
        try:
            names = os.listdir(directory or ".")
        except OSError:
            return {}
        auto = sorted(n for n in names if n.endswith((".auto.tfvars", ".auto.tfvars.json")))
        if len(auto) > MAX_FILES:
            raise hcl.HclError(f"more than {MAX_FILES} *.auto.tfvars files: not read", directory or ".", None)
        given: dict[str, Any] = {}
        empty = hcl.Scope()
        root = _repository_root(directory)
        for base in [n for n in ("terraform.tfvars", "terraform.tfvars.json") if n in names] + auto:
            path = os.path.join(directory, base)
            data = _read_confined(path, root, "a .tfvars file")
            if base.endswith(".json"):
                given.update(_json_tfvars(data, path))
            else:
                given.update({k: empty.resolve(i.value) for k, i in hcl.parse_tfvars(data, path).items()})
        return given


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def command_line_vars(var_files: list[str], assignments: list[str]) -> dict[str, Any]:
    """The values of --tf-var-file FILE (each a .tfvars or .tfvars.json file, anywhere: the user
    named it) then --tf-var NAME=VALUE, later ones winning: Terraform's -var-file and -var.
    A value that starts with `{` or `[` is read as an HCL expression (a list, map or object
    variable); any other is the literal string, as Terraform takes it for a primitive variable
    (Terraform converts "8" to a number where one is required)."""
    from vmtune.errors import VmtuneError
    from vmtune.inputs import read_bytes

    given: dict[str, Any] = {}
    empty = hcl.Scope()
    for path in var_files:
        data = read_bytes(path, path, "a --tf-var-file", hcl.MAX_BYTES)
        if path.lower().endswith(".json"):
            given.update(_json_tfvars(data, path))
        else:
            given.update({k: empty.resolve(i.value) for k, i in hcl.parse_tfvars(data, path).items()})
    for text in assignments:
        name, equals, value = text.partition("=")
        if not equals or not _NAME.fullmatch(name):
            raise VmtuneError(f"{name[:64]!r} is not NAME=VALUE (a variable's name, =, its value) as terraform -var "
                              "takes it", "--tf-var")
        if value.lstrip().startswith(("{", "[")):
            items = hcl.parse_tfvars(f"{name} = {value}\n".encode(), f"--tf-var {name}")
            given[name] = empty.resolve(items[name].value)
        else:
            given[name] = value
    return given


def _not_read(source: str, line: int, message: str) -> Note:
    """A module call vmtune does not follow (its source, a cycle, the depth, an unreadable
    directory): said, as a value it was not given (STK002)."""
    return Note("STK002", source, line, message)


def _read_confined(path: str, root: str, what: str) -> bytes:
    """A file Terraform would read (a tfvars file, a module's .tf file), only inside the
    repository: one that links outside it is refused, as a regular file of bounded size."""
    from vmtune.inputs import read_bytes

    real = os.path.realpath(path)
    if os.path.commonpath([real, root]) != root:
        raise hcl.HclError(f"{what} that links outside the repository ({root}): not read", path, None)
    return read_bytes(real, path, what, hcl.MAX_BYTES)


def _json_tfvars(data: bytes, name: str) -> dict[str, Any]:
    if len(data) > hcl.MAX_BYTES:
        raise hcl.HclError(f"larger than {hcl.MAX_BYTES // (1024 * 1024)} MiB: not read", name, None)
    try:
        found = json.loads(data)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        raise hcl.HclError("not valid JSON", name, line) from None
    if not isinstance(found, dict):
        raise hcl.HclError("a .tfvars.json file holds one object of variable values", name, None)
    return found


def _repository_root(directory: str) -> str:
    """The nearest parent holding `.git` (a repository or a worktree), else the working directory."""
    here = os.path.realpath(directory or ".")
    probe = here
    for _level in range(64):
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    cwd = os.path.realpath(os.getcwd())
    return cwd if os.path.commonpath([here, cwd]) == cwd else here
