"""Finding the domain XML to check: files, directories, stdin."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Iterator

from vmtune.errors import VmtuneError
from vmtune.fileio import FileIdentity, normal_name, read_bounded, read_nofollow, special_kind, work_tree

# The largest definition libvirt's daemon takes: `virsh define` sends the XML as one RPC string of
# at most REMOTE_STRING_MAX bytes (src/remote/remote_protocol.x); one byte more fails with "Unable
# to encode message payload" (measured on libvirt 9.0, tests/test_live_faults.py). Larger files
# are not definable domains, and refusing them bounds the time and memory one file can cost.
MAX_INPUT_BYTES = 4 * 1024 * 1024


_STDIN: list[bytes] = []  # stdin read ahead by peek_stdin, for the one load() that follows


def peek_stdin() -> bytes:
    """Standard input, read once (to tell XML from YAML) and handed to the Source that loads it."""
    if not _STDIN:
        _STDIN.append(sys.stdin.buffer.read(MAX_INPUT_BYTES + 1))
    return _STDIN[0]


class Source:
    """An input to check. A value, compared and hashed by its fields, not changed once made; a
    plain class, not a dataclass: creating a dataclass costs ~0.5 ms at every start."""

    __slots__ = ("directory", "explicit", "name", "path", "stands_for")

    def __init__(self, name: str, path: str | None, explicit: bool, stands_for: str | None = None,
                 directory: tuple[int, int] | None = None) -> None:
        self.name = name  # path as given, or "-" / "<stdin>"
        self.path = path  # normal_name of the file; None for stdin
        self.explicit = explicit  # named on the command line (errors) vs found in a directory (skips)
        self.stands_for = stands_for  # stdin read as this file (--stdin-filename): its config and ignores
        self.directory = directory  # device, inode of the directory a walk found it in

    def _key(self) -> tuple[object, ...]:
        return self.name, self.path, self.explicit, self.stands_for, self.directory

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Source) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Source({self.name!r}, explicit={self.explicit})"

    def read(self) -> bytes:
        return self.load(for_write=False)[0]

    def load(self, for_write: bool) -> tuple[bytes, FileIdentity | None]:
        """The content, and for a file the identity a rewrite must find again (write_atomic).
        A file named on the command line is read where a symlink leads, unless it is to be
        rewritten; a file found by a walk, or one to rewrite, is opened without following a
        symlink and only in the directory the walk saw."""
        identity = None
        if self.path is None:
            data = _STDIN.pop() if _STDIN else sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        elif self.explicit and not for_write:
            try:
                # iter_sources found a regular file, but a FIFO swapped in since would block open()
                # for good: O_NONBLOCK opens it at once and fstat refuses it (a regular file reads
                # the same either way), as read_nofollow and inputs.read_bytes do.
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode):  # swapped since: read_bounded reads regular files
                        raise VmtuneError("not a regular file (changed since it was named); not read", self.name)
                    data = read_bounded(fd, info.st_size, MAX_INPUT_BYTES)
                finally:
                    os.close(fd)
            except OSError as exc:
                raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None
        else:
            try:
                data, identity = read_nofollow(self.name, MAX_INPUT_BYTES, self.directory)  # name: the same file
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise VmtuneError(f"cannot read: {exc.strerror or exc}", self.name) from None
                if self.explicit:
                    raise VmtuneError("a symlink: vmtune does not rewrite files through symlinks (name the file it "
                                      "points to)", self.name) from None
                raise VmtuneError("swapped for a symlink while the directory was walked; not read",
                                  self.name) from None
            except ValueError:
                raise VmtuneError("not a regular file (changed while the directory was walked); not read",
                                  self.name) from None
        if len(data) > MAX_INPUT_BYTES:
            raise VmtuneError(f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB, the largest definition "
                              "libvirt accepts", self.name)
        return data, identity


# What pathlib's exists() reads as "not there" (anything else, such as EACCES, is an error to show).
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


# `vmtune check a.xml -f json` reads `-f` as a file: options end at the first operand or `--`
# (vmtune.main); a pre-commit hook's `args:` come after the entry's `--`.
_AFTER_OPERANDS = " (options go before the first file and before '--': after either, every argument is a file)"


def _named_kind(path: str, given: str) -> str | None:
    """None for a regular file named on the command line, else what it is (FIFOs and devices
    would block or never end); VmtuneError when it is missing or cannot be looked at."""
    try:
        mode = os.stat(path).st_mode
    except ValueError:  # a NUL in the name
        raise VmtuneError("no such file or directory", given) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise VmtuneError("a loop of symbolic links: it names no file", given) from None
        if exc.errno in _MISSING:
            raise VmtuneError("no such file or directory" + _AFTER_OPERANDS * given.startswith("-"), given) from None
        raise VmtuneError(f"cannot read: {exc.strerror or exc}", given) from None
    return special_kind(mode)


def _join(folder: str, name: str) -> str:
    # Path-like names without a Path per file: `folder` is already normalised (normal_name).
    if folder == ".":
        return name
    return folder + name if folder.endswith(os.sep) else folder + os.sep + name


# What a directory walk reads unless told more: domain XML. `vmtune check` adds the suffixes the
# stack front ends walk (vmtune.stacks.registry); files of others are read when named.
WALKED = (".xml",)
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def walk(directory: str, skipped: Callable[[str, str], None],
         failed: Callable[[str, str], None], walked: tuple[str, ...] = WALKED) -> list[tuple[str, tuple[int, int]]]:
    """Regular *.xml files below a directory (names as `directory / ...` would print them), in
    order, each with the identity (device, inode) of the directory it was found in; other kinds
    are reported to `skipped`, directories that cannot be read (EACCES) to `failed`: their
    files are not checked, which must not read as a clean run. Git-ignored files are still in
    (iter_sources asks git once).

    Symlinks are not followed, to files or to directories (as black and ruff stay in the tree
    they check): one that stays inside the tree names a file the walk reaches anyway, one that
    leaves it would make `--fix DIR` rewrite files elsewhere. Each directory is opened relative
    to its parent's descriptor with O_NOFOLLOW, so a symlink swapped in during the walk is not
    entered; one scandir per directory gives each entry's type without a stat per file."""
    found: list[tuple[str, tuple[int, int]]] = []
    try:
        top_fd = os.open(directory, _DIRECTORY_FLAGS)  # named on the command line: walked where it leads
    except OSError as exc:
        failed(directory, _unreadable(exc))
        return found
    pending = [(directory, top_fd)]
    while pending:
        folder, dir_fd = pending.pop()
        try:
            info = os.fstat(dir_fd)
            identity = (info.st_dev, info.st_ino)
            with os.scandir(dir_fd) as listing:
                entries = list(listing)
            subfolders: list[str] = []
            for entry in entries:
                name = entry.name
                try:
                    if entry.is_symlink():
                        if not name.startswith(".") and entry.is_dir():
                            skipped(_join(folder, name), "a symlink to a directory: not followed in a directory walk")
                        elif name.endswith(walked):
                            skipped(_join(folder, name), "a symlink: not followed in a directory walk (name it to "
                                                         "check it)")
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if not name.startswith("."):
                            subfolders.append(name)
                        continue
                    regular = entry.is_file(follow_symlinks=False)
                except OSError:
                    regular = False
                if not name.endswith(walked):
                    continue
                kind = None if regular else _kind_at(name, dir_fd)
                if kind is None:
                    found.append((_join(folder, name), identity))
                else:
                    skipped(_join(folder, name), kind)
            # Depth first, in name order, as os.walk: pushed in reverse so the first is walked first.
            for name in sorted(subfolders, reverse=True):
                try:
                    child = os.open(name, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno in _MISSING:  # swapped for a symlink (ELOOP) or removed since it was listed
                        skipped(_join(folder, name), "changed while the directory was walked: not followed")
                    else:  # EACCES (mode 000, another user's): its files are not checked
                        failed(_join(folder, name), _unreadable(exc))
                    continue
                pending.append((_join(folder, name), child))
        finally:
            os.close(dir_fd)
    found.sort(key=lambda item: item[0].split(os.sep))  # Path.parts order, without Path's slow __lt__
    return found


def _unreadable(exc: OSError) -> str:
    return f"cannot read the directory: {exc.strerror or exc}; its files were not checked"


def _kind_at(name: str, dir_fd: int) -> str | None:
    """What a directory entry is (None: a regular file), for an entry of an open directory, a symlink not followed."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError as exc:
        return exc.strerror or "unreadable"
    if stat.S_ISLNK(mode):
        return "a symlink: not followed in a directory walk (name it to check it)"
    return special_kind(mode)


def _all_names(directory: str) -> Iterator[str]:
    for _root, _dirs, files in os.walk(directory):
        yield from files


# How long git may take to say which files it ignores. A .gitignore comes with the pull request,
# and git's wildmatch backtracks: `*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b` against a file named with
# 50 a's ran for minutes (git 2.39). Ordinary answers take milliseconds (20,000 files: 0.25 s on
# a loaded machine). git stays the one that decides what is ignored (nested .gitignore files,
# negations, info/exclude, core.excludesFile); past this, nothing is ignored and one line says so.
GIT_IGNORE_SECONDS = 2.0


def _ignores_not_applied(top: str, why: str) -> None:
    where = os.path.relpath(top)
    if where == os.pardir or where.startswith(os.pardir + os.sep):
        where = top
    message = f".gitignore not applied in {where}: {why}; all its *.xml files are checked"
    print(f"vmtune: {VmtuneError(message)}", file=sys.stderr, flush=True)  # escaped like every error


# The checked tree's own .git/config may name programs, and an archive, a CI artifact or a copied
# checkout is owned by whoever unpacked it (root on a hypervisor), so safe.directory does not
# object. Of what git's configuration can run, check-ignore reaches the index's file-system
# monitor (core.fsmonitor: a command, or `true` for git's own daemon) and nothing else (no hook,
# pager, filter, diff driver, credential helper, ssh or editor); hooksPath is closed too in case
# a later git runs one. `-c` outranks every configuration file, included ones too. Optional
# locks off: a linter never writes the tree's index.
_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--no-pager")


def _git_dir_of_nothing(parent: str) -> str:
    """An empty repository (HEAD, objects/, refs/: what git needs to call a directory one) for
    `--isolated`: git then reads the work tree's .gitignore files and nothing of its .git."""
    git_dir = os.path.join(parent, "empty.git")
    os.makedirs(os.path.join(git_dir, "objects"))
    os.makedirs(os.path.join(git_dir, "refs"))
    with open(os.path.join(git_dir, "HEAD"), "w", encoding="ascii") as head:
        head.write("ref: refs/heads/main\n")
    return git_dir


def gitignored(files: list[str], isolated: bool = False) -> set[str]:
    """The files git ignores (.gitignore, .git/info/exclude, core.excludesFile), as ruff skips
    them; nothing when git is missing or they are in no work tree. One git call per work tree
    (one per run, usually), none outside a work tree, each given GIT_IGNORE_SECONDS. No program
    the tree's configuration names runs (_GIT_SAFE); with `isolated`, git reads nothing of the
    tree's .git at all (no config, no index, no info/exclude): only its .gitignore files."""
    if not files:
        return set()
    by_tree: dict[str, list[str]] = {}
    folders: dict[str, str | None] = {}
    explicit_git_dir = bool(os.environ.get("GIT_DIR"))
    for file in files:
        folder = os.path.dirname(file) or "."
        if folder not in folders:
            folders[folder] = work_tree(folder) or (os.path.abspath(folder) if explicit_git_dir else None)
        top = folders[folder]
        if top is not None:
            by_tree.setdefault(top, []).append(file)
    # No work tree (a host's /etc/libvirt/qemu, a scratch directory): git has nothing to say, and
    # subprocess and tempfile stay unimported (one-file check 217 -> 187 M instructions).
    if not by_tree:
        return set()
    import subprocess
    import tempfile

    from vmtune.programs import find_program

    git = find_program("git", by_tree)  # never a git the tree holds (a relative PATH entry finds it)
    if git is None:
        return set()
    ignored: set[str] = set()
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    scratch = tempfile.TemporaryDirectory(prefix="vmtune-git-") if isolated and by_tree else None
    empty = _git_dir_of_nothing(scratch.name) if scratch is not None else ""
    for top, names in by_tree.items():
        # Relative to the work tree's top as reached through the same path (a symlinked parent
        # stays out of it); git answers with the names it was given.
        relative = {os.path.relpath(os.path.abspath(name), top): name for name in names}
        if scratch is not None:
            command = [git, *_GIT_SAFE, "--git-dir", empty, "--work-tree", top, "-C", top,
                       "check-ignore", "--no-index", "--stdin", "-z"]
        else:
            command = [git, *_GIT_SAFE, "-C", top, "check-ignore", "--stdin", "-z"]
        try:
            done = subprocess.run(command, input=b"\0".join(os.fsencode(r) for r in relative), capture_output=True,
                                  timeout=GIT_IGNORE_SECONDS, check=False, env=env)
        except subprocess.TimeoutExpired:  # git is killed; what it answered so far may be incomplete
            _ignores_not_applied(top, f"git check-ignore did not answer within {GIT_IGNORE_SECONDS:g} s (a pattern "
                                      "too costly to match?)")
            continue
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode not in (0, 1):  # 128: not a git work tree after all
            continue
        ignored.update(relative[n] for n in (os.fsdecode(b) for b in done.stdout.split(b"\0") if b) if n in relative)
    if scratch is not None:
        scratch.cleanup()
    return ignored


def _raise(source: str, reason: str) -> None:
    raise VmtuneError(reason, source)


def iter_sources(paths: list[str], skipped: Callable[[str, str], None] | None = None,
                 stdin_filename: str | None = None, failed: Callable[[str, str], None] | None = None,
                 isolated: bool = False, walked: tuple[str, ...] = WALKED) -> Iterator[Source]:
    """The sources the paths name (in a directory: the files whose names end with `walked`).
    `skipped(name, why)` hears of files a walk leaves out;
    `failed(name, why)` of directories it cannot read (without it: VmtuneError, as `plan`
    must not place domains around files it could not see)."""
    note = skipped or (lambda _source, _reason: None)
    unreadable: list[str] = []
    incomplete: set[str] = set()  # walks that met a directory they could not read

    def fail(source: str, reason: str) -> None:
        unreadable.append(source)
        (failed or _raise)(source, reason)

    given_sources: list[tuple[str, Source | list[tuple[str, tuple[int, int]]]]] = []
    for given in paths:
        if given == "-":
            given_sources.append((given, Source(stdin_filename or "<stdin>", None, True,
                                                normal_name(stdin_filename) if stdin_filename else None)))
            continue
        path = normal_name(given)
        if os.path.isdir(path):
            before = len(unreadable)
            given_sources.append((path, walk(path, note, fail, walked)))
            if len(unreadable) > before:
                incomplete.add(path)
        else:
            kind = _named_kind(path, given)
            if kind is not None:
                raise VmtuneError(f"{kind}, not a domain file (use '-' to read a stream)", given)
            given_sources.append((given, Source(given, path, True)))
    ignored = gitignored([f for _given, found in given_sources if isinstance(found, list) for f, _ in found],
                         isolated)
    for given, found in given_sources:
        if not isinstance(found, list):
            yield found
            continue
        kept = [(f, d) for f, d in found if f not in ignored]  # skipped silently, as ruff does
        if not kept and given not in incomplete:  # an unreadable directory is an error, said already
            others = sorted({name.split(".", 1)[-1] for name in _all_names(given) if ".xml." in name})
            hint = f" (other files are checked when named: *.{', *.'.join(others)})" if others else ""
            note(given, f"no *.xml file to check in it{hint}")
        for file, directory in kept:
            yield Source(file, file, False, directory=directory)  # a walk's names are normal already
