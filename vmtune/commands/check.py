"""`vmtune check` / `vmtune fix` on files and live domains: settings, sources, reporting."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from vmtune.engine import check_domain
from vmtune.errors import InputError, NotADomainError, VmtuneError, forget_warnings, held_warnings, say_warning
from vmtune.facts.domain import Domain  # loaded with the engine anyway
from vmtune.report.model import Report, SourceResult, Tally
from vmtune.request import CheckRequest, OptionsResolver
from vmtune.rules.base import record
from vmtune.sources import Source
from vmtune.workers import DEFAULT_JOBS, PARALLEL_MIN_FILES, WorkerDied, in_workers

if TYPE_CHECKING:
    from lxml import etree

    from vmtune.config import Settings
    from vmtune.host.inventory import Inventory

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _settings_of(source: Source, resolver: OptionsResolver) -> tuple[str | None, Settings]:
    """The path a source's configuration is looked up and matched by (stdin's --stdin-filename),
    and that configuration."""
    path = source.path or source.stands_for
    return path, resolver.settings_for_file(source.name) if source.path is not None else resolver.settings_for(path)


def _not_excluded(sources: list[Source], resolver: OptionsResolver) -> list[Source]:
    """Stack sources less those their configuration's `exclude:` names, skipped unread as
    check_source skips a domain file (they were all checked: `show-settings` said a manifest was
    excluded, and `check` reported it). A configuration that cannot be read is the run's error
    where the run reads it. Its warnings (a configuration ignored) are said by the run, where one
    process says them, not here in the sources' order (held, and said again when read again)."""
    kept: list[Source] = []
    with resolver.reading_ahead():
        for source in sources:
            try:
                path, settings = _settings_of(source, resolver)
            except VmtuneError:
                kept.append(source)
                continue
            if path is None or not settings.excluded(path):
                kept.append(source)
    return kept


def check_source(source: Source, resolver: OptionsResolver, report: Report, out: Callable[[str], object]) -> None:
    request = resolver.request
    path, settings = _settings_of(source, resolver)
    if path is not None and settings.excluded(path):
        return
    options = resolver.options_for(settings, path)
    if request.fix or request.diff:
        from vmtune.fileio import write_atomic
        from vmtune.fixer import fix_document, unified_diff

        # --fix opens the file it will rewrite without following a symlink, and remembers which file it was.
        data, identity = source.load(for_write=request.fix and not request.diff and source.path is not None)
        outcome = fix_document(data, source.name, options, resolver.unsafe(settings))
        if outcome.changed and request.diff:
            out(unified_diff(outcome, source.name))
            report.would_change = True
        elif outcome.changed and source.path is None:
            _write_document(outcome.fixed, source.name)
        elif outcome.changed and source.path is not None:
            try:
                write_atomic(source.path, outcome.fixed, identity)
            except OSError as exc:
                raise VmtuneError(f"cannot write the fixed file: {exc.strerror or exc}", source.name) from None
        # --diff writes nothing: report the file as it is (its lines), with what --fix would do.
        findings = outcome.original_findings if request.diff else outcome.findings
        name, applied, conflicts = outcome.domain.name, outcome.applied, outcome.conflicts
    else:
        domain = resolver.parsed.pop(source.name, None)  # parsed by the inventory pass: not again
        if domain is None:
            domain = Domain.parse(source.read(), source.name, options.os_override)
        findings, name, applied, conflicts = check_domain(domain, options), domain.name, [], []
    # Detached from the parsed tree, so memory stays flat however many files are checked. A
    # streamed text report renders and counts the result at once and keeps nothing of it (nor
    # does a baseline): its findings need no copy.
    if report.sink is None or report.keep is not None or report.identities is not None:
        keep_paths = request.shows_element_paths
        paths: dict[etree._Element, str] = {}  # the tree is checked, no longer edited: its paths are shared
        findings = [record(f, keep_paths, paths) for f in findings]
    report.add(SourceResult(source.name, name, findings, applied, conflicts, fail_on=resolver.fail_on(settings)))


def _write_document(data: bytes, name: str) -> None:
    """stdin --fix: the fixed document on stdout, flushed here, so a write that fails (a full
    disk, a closed descriptor) is this input's error and its fixes are not reported as applied.
    A closed pipe stays BrokenPipeError: the executable ends as SIGPIPE would (main.run)."""
    sys.stdout.flush()
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        from vmtune.terminal import discard

        discard(sys.stdout)  # the unwritten rest too: it is this error, not a second one at exit
        raise VmtuneError(f"cannot write the fixed document to stdout: {exc.strerror or exc}", name) from None


def check_sources(sources: list[Source], resolver: OptionsResolver, report: Report,
                  out: Callable[[str], object]) -> None:
    for source in sources:
        try:
            check_source(source, resolver, report, out)
        except NotADomainError as exc:
            if source.explicit and not resolver.request.skip_non_domain:
                report.errors.append(InputError.of(exc))
            elif not source.explicit:
                report.skipped.append((source.name, exc.message))
        except VmtuneError as exc:
            report.errors.append(InputError.of(exc))


_worker_resolver: OptionsResolver | None = None


# How many parsed domains the inventory pass keeps for the check: a host's directory (hundreds of
# domains) is parsed once. A tree costs ~32 KB; past this many, the rest are parsed again (or
# their usage comes from the cache), so memory stays bounded however many files there are.
KEEP_PARSED = 1000
# Bump when DomainUsage or what it reads changes meaning; installed module files are in the key too.
USAGE_FORMAT = 1


def _absolute(name: str) -> str:
    """os.path.abspath, without its normalisation for a name already absolute and normal (a
    walk's names under an absolute directory): a microsecond a file on 10,000 files."""
    if name[:1] == "/" and "/." not in name and "//" not in name:
        return name
    return os.path.abspath(name)


def _usage_cache(sources: list[Source]) -> tuple[str, str]:
    """The cache entry (source, key) for these files' usages: one per set of inputs, valid for
    this vmtune's facts and inventory modules exactly (their files' size and mtime)."""
    import vmtune
    from vmtune.compiled import source_path

    # The modules' source files, not their __file__: mypyc derives a compiled module's __file__
    # from where its shared library is (vmtune.compiled), not always the module's own file. A
    # compiled module's source is installed beside it and changes with it.
    package = os.path.dirname(vmtune.__file__)
    stamps = [f"{(st := os.stat(source_path(package, module))).st_size}:{st.st_mtime_ns}"
              for module in ("vmtune.facts.domain", "vmtune.host.inventory")]
    names = "\0".join(sorted({_absolute(s.name) for s in sources if s.path is not None}))
    source = f"inventory\0{names}"
    return source, f"usage {USAGE_FORMAT} {' '.join(stamps)}\0{source}"


# A file changed this recently may change again without its size or times changing (the same
# clock tick): its usage is not cached ("racily clean", as git treats such index entries).
RACY_NS = 3_000_000_000


def build_inventory(sources: list[Source], keep: dict[str, Domain] | None = None,
                    os_override: str | None = None) -> Inventory:
    """A first pass over the files: what each domain pins and uses (unparseable files are skipped
    here and reported by the check itself).

    A file a previous run over the same inputs saw, unchanged since (same device, inode, size,
    mtime and ctime), gets its usage from the cache without being read: the check then parses it,
    once (VMTUNE_NO_CACHE=1 turns the cache off). A file parsed here stays parsed in `keep` (by
    source name, up to KEEP_PARSED of them) for the check to take instead of parsing it again."""
    import time

    from vmtune import cache
    from vmtune.facts.domain import Domain
    from vmtune.host.inventory import DomainUsage, Inventory

    entry, key = _usage_cache(sources)
    known = cache.lookup(entry, key)
    known = known if isinstance(known, dict) else {}
    seen: dict[tuple[int, ...], tuple[object, ...]] = {}
    settled_before = time.time_ns() - RACY_NS
    inventory = Inventory()
    for source in sources:
        if source.path is None:
            continue
        try:
            info = os.stat(source.name)  # the same file as source.path
        except OSError:
            continue
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        stored = known.get(stamp)
        if stored is not None:  # unchanged since a run read it: the check parses it, once
            inventory.domains.append(DomainUsage(*stored))
            seen[stamp] = stored
            continue
        try:
            domain = Domain.parse(source.read(), source.name, os_override)  # type: ignore[arg-type]
        except VmtuneError:
            continue
        usage = DomainUsage.of(domain)
        inventory.domains.append(usage)
        if max(info.st_mtime_ns, info.st_ctime_ns) < settled_before:
            seen[stamp] = tuple(usage)
        if keep is not None and len(keep) < KEEP_PARSED:
            keep[source.name] = domain
    if seen != known:
        cache.store(entry, key, seen)
    return inventory


def _lasting_inventory(sources: list[Source], keep: dict[str, Domain] | None,
                       os_override: str | None) -> Inventory:
    """build_inventory, with its index, for a run that keeps them to the end: outside the cyclic
    GC's view, as main() keeps the start-up's objects.

    The inventory is a tuple and up to three frozensets per domain (~40,000 objects for 10,000
    files), and reading the usage cache makes as many again for a moment. The collector would
    walk them while they are made and in each full collection after, though none can be part of
    a cycle: ~2 us a file on 10,000 files, 1% of the run. It is off while they are made, and
    what then lives is frozen (never scanned; still freed when no longer referenced)."""
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        inventory = build_inventory(sources, keep, os_override)
        _ = inventory.index  # built here, so it is frozen too
    finally:
        if collecting:
            gc.freeze()
            gc.enable()
    return inventory


_worker_marks = False  # a domain worker's: return where each source's output begins (_check_chunk)


def _domain_worker(request: CheckRequest, inventory: Inventory | None, parsed: dict[str, Domain],
                   marks: bool) -> None:
    """A domain worker's resolver, built once, with the inventory and the domains the inventory
    pass kept parsed; `marks`: whether the parent holds warnings to print among the results."""
    global _worker_resolver, _worker_marks
    _worker_marks = marks
    _worker_resolver = OptionsResolver(request)
    if inventory is not None:
        _worker_resolver.set_inventory(inventory)
    _worker_resolver.parsed = parsed


Marks = list[tuple[int, int]]  # per source of a chunk: where its output begins (characters of text, results)


def _check_chunk(sources: list[Source]) -> tuple[Report, str, str, Marks | None]:
    """In a worker process: check a chunk as the parent would (tally and text rendering happen
    here, off the parent's core); return the report without its callbacks, the stdout it produced
    (diffs), its rendered report text and, when the parent asks (_domain_worker), where each
    source's output begins. With a baseline the results come back whole, neither
    filtered nor tallied nor rendered: a baseline allows each finding as many times as it recorded
    it over the whole run, which only the parent, taking the chunks in order, can count (check_files' take)."""
    resolver = _worker_resolver
    assert resolver is not None, "the pool initializer sets it"
    request = resolver.request
    report, rendered = _report_part(request) if request.baseline is None else (Report(dry_run=request.diff), [])
    stdout: list[str] = []
    marks: Marks | None = None
    if _worker_marks:  # the parent prints a warning it holds for a file where that file's output begins
        begins = []
        for source in sources:
            begins.append((len(rendered), len(report.results)))
            check_sources([source], resolver, report, stdout.append)
        from itertools import accumulate

        ends = list(accumulate(map(len, rendered), initial=0))
        marks = [(ends[pieces], results) for pieces, results in begins]
    else:
        check_sources(sources, resolver, report, stdout.append)
    report.sink = report.keep = None  # closures do not pickle; the parent's own are set
    return report, "".join(stdout), "".join(rendered), marks


def _report_part(request: CheckRequest) -> tuple[Report, list[str]]:
    """A report of a worker's share of the run, prepared as the run's own (prepare): tallied, and
    its text rendered into the list that comes with it for the parent to write in order."""
    part = Report(dry_run=request.diff)
    rendered: list[str] = []
    prepare(part, request, rendered.append)
    return part, rendered


def _is_stack_source(source: Source) -> bool:
    """A stack front end's file (vmtune.stacks.registry), by its name; stdin by --stdin-filename,
    or by its first byte when none is given ('<' is XML)."""
    name = source.stands_for or source.name
    if source.path is None and source.stands_for is None:
        from vmtune.sources import peek_stdin

        # A byte-order mark may open XML as it may open YAML: the first byte after it decides.
        return not peek_stdin().removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"<")
    lower = name.lower()  # VM.YAML is YAML to pre-commit too
    if lower.endswith(".xml"):  # domain XML, the common case: no front end is asked
        return False
    global _NAMED_SUFFIXES
    if _NAMED_SUFFIXES is None:
        # imported at the first name that is not XML, not at every one: an import statement in a
        # function costs ~8 k instructions each time, twice a manifest (16 M for 1,000)
        from vmtune.stacks.registry import named_suffixes

        _NAMED_SUFFIXES = named_suffixes()
    return lower.endswith(_NAMED_SUFFIXES)


_NAMED_SUFFIXES: tuple[str, ...] | None = None  # the front ends' file names (registry.named_suffixes), read once


def _walked(paths: list[str]) -> tuple[str, ...]:
    """What a directory walk reads: domain XML and the files the stack front ends walk. The front
    ends' declarations are read only when a directory is given."""
    from vmtune.sources import WALKED

    if not any(os.path.isdir(path) for path in paths if path != "-"):
        return WALKED
    from vmtune.stacks.registry import walked_suffixes

    return (*WALKED, *walked_suffixes())


def check_files(resolver: OptionsResolver, report: Report) -> None:
    from vmtune.sources import iter_sources

    request = resolver.request
    sources = list(iter_sources(request.paths, lambda source, reason: report.skipped.append((source, reason)),
                                request.stdin_filename,
                                lambda source, reason: report.errors.append(InputError(source, None, reason)),
                                request.isolated, _walked(request.paths)))
    stack = [s for s in sources if _is_stack_source(s)]
    if stack:
        sources = [s for s in sources if not _is_stack_source(s)]
        stack = _not_excluded(stack, resolver)
    if stack:
        from vmtune.stacks.frontend import check_stack_sources

        shares = None if request.baseline is not None else (lambda: _report_part(request), _stream(request).write)
        try:
            check_stack_sources(stack, resolver, report, sys.stdout.write, shares)
        except WorkerDied:
            print_errors(report)  # the sources that could not be read; no summary of a partial run
            raise
    if resolver.has_host(sources):
        keep = None if request.fix or request.diff else resolver.parsed  # the fixer needs the bytes
        resolver.set_inventory(_lasting_inventory(sources, keep, request.os_family))
    jobs = request.jobs or DEFAULT_JOBS
    if jobs < 2 or len(sources) < PARALLEL_MIN_FILES or any(s.path is None for s in sources) or \
            (request.fix and not request.diff and _one_file_twice(sources)):
        check_sources(sources, resolver, report, sys.stdout.write)
        return
    # Each directory's configuration before the workers fork: a warning (a configuration ignored)
    # is said once, not once a worker. Held, and printed where one process says it: after the
    # output of the files before the first it applies to (take), not before every result.
    said: dict[int, list[str]] = {}  # a source's index -> the warnings said as it is checked
    with held_warnings() as held:
        for index, source in enumerate(sources):
            with contextlib.suppress(VmtuneError):  # reported by the worker that checks the file, as before
                resolver.settings_for_file(source.name)
            if held:
                said[index] = held[:]
                held.clear()
    size = max(8, len(sources) // (jobs * 8))  # several chunks per worker to balance uneven files
    chunks = [sources[i:i + size] for i in range(0, len(sources), size)]
    starts = iter(range(0, len(sources), size))  # each chunk's first source, in the order taken
    stream = _stream(request)

    def take(result: tuple[Report, str, str, Marks | None]) -> None:
        part, printed, rendered, marks = result
        first = next(starts)
        sys.stdout.write(printed)
        results: list[SourceResult] = []
        if request.baseline is not None:  # filtered, tallied and rendered here, in order (_check_chunk)
            results, part.results, part.tally = part.results, [], Tally()
        chars = count = 0  # of the chunk's text and results, given out so far
        for index, (begins, before) in enumerate(marks or (), first):
            if index in said:
                stream.write(rendered[chars:begins])
                for each in results[count:before]:
                    report.add(each)
                chars, count = begins, before
                for message in said[index]:
                    say_warning(message)
        stream.write(rendered[chars:])
        for each in results[count:]:
            report.add(each)
        report.merge(part)

    try:
        in_workers(jobs, chunks, _check_chunk, take, _domain_worker, request, resolver.inventory, resolver.parsed,
                   bool(said))
    except WorkerDied:
        print_errors(report)  # the completed chunks' unreadable inputs; no summary of a partial run
        raise


def _one_file_twice(sources: list[Source]) -> bool:
    """Whether a file is among the sources twice (named twice, named and found by a walk, two
    hard links). --fix then checks in this process: one process fixes the file at its first name
    and finds it fixed at the next, where workers met the names in chunks worked at once, the
    later name's worker fixing it first and the other's then finding it replaced since it read
    it ('nothing written', exit 2). A rare run, and a stat a file only for --fix. A symlink is
    not followed: --fix never rewrites through one (Source.load)."""
    seen: set[tuple[int, int]] = set()
    for source in sources:
        try:
            info = os.stat(source.name, follow_symlinks=False)
        except OSError:
            continue  # reported by its check
        if (info.st_dev, info.st_ino) in seen:
            return True
        seen.add((info.st_dev, info.st_ino))
    return False


def _stream(request: CheckRequest) -> TextIO:
    # With --diff or stdin --fix, stdout carries the patch/document, so the report goes to stderr.
    return sys.stderr if request.diff or (request.fix and "-" in request.paths) else sys.stdout


def prepare(report: Report, request: CheckRequest, write_report: Callable[[str], object] | None = None) -> None:
    """Baseline handling, and streaming for text output (memory flat in the number of files)."""
    if request.baseline is not None:
        from vmtune.baseline import BaselineFilter

        report.keep = BaselineFilter(request.baseline)
    if request.write_baseline is not None:
        report.identities = []
    if request.output_format == "text" and request.output_file is None:
        from vmtune.report.text import render_result

        write_text = write_report or _stream(request).write

        def write(result: SourceResult) -> None:
            if not request.statistics:  # --statistics: only the per-rule counts, at the end
                write_text(render_result(result, request.show_fixes, request.diff, request.color))

        report.sink = write


def emit(report: Report, request: CheckRequest) -> None:
    if report.sink is not None:
        from vmtune.report.text import render_footer, render_statistics

        if request.statistics:
            _stream(request).write(render_statistics(report))
        if not request.quiet:
            _stream(request).write(render_footer(report, request.unsafe_fixes))
    else:
        from vmtune.report import render

        text = render(request.output_format, report, show_fixes=request.show_fixes,
                      unsafe_fixes=request.unsafe_fixes, statistics=request.statistics)
        if request.output_file is not None:
            from vmtune.fileio import write_output

            write_output(request.output_file, text.encode("utf-8"), "report")
        else:
            _stream(request).write(text)
    print_errors(report)


def print_errors(report: Report) -> None:
    for error in report.errors:
        print(f"vmtune: {error}", file=sys.stderr)


def _refuse_conflicting_modes(request: CheckRequest) -> None:
    if request.measure is not None and not (request.domains or request.all_domains):
        raise VmtuneError("--measure reads running domains: give --domain NAME or --all")
    if (request.fix or request.diff) and (request.domains or request.all_domains or request.connect):
        raise VmtuneError("--fix and --diff work on files; for live domains use `vmtune apply` "
                          "(`vmtune apply --dry-run` prints the diff)")
    if request.diff and request.output_format != "text" and request.output_file is None:
        raise VmtuneError(f"--diff writes the diff to stdout; give -o FILE for the {request.output_format} report")
    if request.connect:
        from vmtune.live.uri import refuse_program_uri

        for uri in request.connect:  # before any file is read or written: the whole run is refused
            refuse_program_uri(uri, request.allow_command_uri)


def run_check(request: CheckRequest) -> int:
    report = Report(dry_run=request.diff, metrics_host=request.metrics_host)
    forget_warnings()  # once a run, also when a process runs several (tests, fleets)
    try:
        _refuse_conflicting_modes(request)
        resolver = OptionsResolver(request)
        if request.baseline is None and request.write_baseline is None:
            configured = resolver.settings_for(None).baseline  # .vmtune.yaml's `baseline:`
            if configured:
                from pathlib import Path

                request.baseline = Path(configured)
        prepare(report, request)
        if request.domains or request.all_domains or request.connect:
            from vmtune.live.check import check_live_domains

            check_live_domains(resolver, report)
        if request.paths:
            check_files(resolver, report)
        elif not (request.domains or request.all_domains):
            raise VmtuneError("nothing to check: give files, directories, '-', --domain or --all")
        emit(report, request)
        if request.write_baseline is not None:
            from vmtune.baseline import write_baseline

            entries = write_baseline(request.write_baseline, report.identities or [])
            from vmtune.escape import printable

            print(f"vmtune: wrote {entries} baseline entries ({len(report.identities or [])} finding(s)) to "
                  f"{printable(str(request.write_baseline))}", file=sys.stderr)
            return EXIT_ERROR if report.errors else EXIT_CLEAN  # recorded: accepted until they change
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if report.errors:
        return EXIT_ERROR
    if request.exit_zero:
        return EXIT_CLEAN
    if request.exit_non_zero_on_fix and report.tally.applied and not request.diff:
        return EXIT_FINDINGS
    # --diff exits 1 when it shows a change, as ruff does ("Would fix N errors").
    return EXIT_FINDINGS if report.failing() or report.would_change else EXIT_CLEAN

