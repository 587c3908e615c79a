"""`vmtune check` / `vmtune fix` on files and live domains: settings, sources, reporting."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from vmtune.engine import check_domain
from vmtune.errors import InputError, NotADomainError, VmtuneError, forget_warnings
from vmtune.facts.domain import Domain  # loaded with the engine anyway
from vmtune.report.model import Report, SourceResult
from vmtune.request import CheckRequest, OptionsResolver
from vmtune.rules.base import record
from vmtune.sources import Source

if TYPE_CHECKING:
    import multiprocessing.process
    from concurrent.futures import Future, ProcessPoolExecutor

    from vmtune.host.inventory import Inventory

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
T = TypeVar("T")
PARALLEL_MIN_FILES = 200  # below this, starting worker processes costs more than it saves
# Workers by default: every core. On 2 cores, 2 workers take 0.6-0.8x the wall time of one
# process for 2,000 files and more, for ~10% more CPU (docs/benchmarks.md).
DEFAULT_JOBS = os.cpu_count() or 1


def check_source(source: Source, resolver: OptionsResolver, report: Report, out: Callable[[str], object]) -> None:
    request = resolver.request
    path = source.path or source.stands_for
    settings = resolver.settings_for_file(source.name) if source.path is not None else resolver.settings_for(path)
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
        findings = [record(f, keep_paths) for f in findings]
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
    import vmtune.facts.domain
    import vmtune.host.inventory

    stamps = [f"{(st := os.stat(m.__file__ or '')).st_size}:{st.st_mtime_ns}"
              for m in (vmtune.facts.domain, vmtune.host.inventory)]
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


def _start_worker(request: CheckRequest, inventory: Inventory | None, parsed: dict[str, Domain],
                  parent: int) -> None:
    """Pool initializer: each worker builds its resolver once, with the inventory (and the domains
    the inventory pass kept parsed) handed over once through fork, not pickled with every chunk.

    The parent forked it with SIGINT and SIGTERM blocked (_forking_workers): here, before they
    are let through, a worker ignores Ctrl-C (the parent's to handle: no traceback per worker),
    ends on SIGTERM without leaving a temp file (_end_worker), and asks to get SIGTERM when its
    parent dies. Otherwise a parent killed with SIGKILL (the OOM killer, a CI timeout) leaves
    workers that never exit: each holds the write end of the queue it reads its next chunk from,
    so it never sees end-of-file, and it holds the parent's stdout, so no reader sees one either."""
    global _worker_resolver
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _end_worker)
    _die_with_parent(parent)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a signal held since the fork lands now
    _worker_resolver = OptionsResolver(request)
    if inventory is not None:
        _worker_resolver.set_inventory(inventory)
    _worker_resolver.parsed = parsed


# Linux's prctl(2) option: the signal a process gets when the thread that forked it ends (the
# parent's main thread forks the workers, so: when the parent ends, however it ends).
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the parent dies (Linux); and at once if it died before this was asked, since
    then no signal will come (the worker was already an orphan: its parent is init or a reaper)."""
    import signal

    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # cannot fail with these arguments
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)  # held until the initializer lets it through


def _end_worker(signum: int, frame: object) -> None:
    """A worker's SIGTERM (from the parent ending the pool, or the parent's death): remove the
    temp file of a fix being written, if any (the file itself is untouched until the rename),
    then end by the signal itself, as the parent's pool expects a terminated worker to end."""
    import signal

    from vmtune.fileio import abandon_write

    abandon_write()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _check_chunk(sources: list[Source]) -> tuple[Report, str, str]:
    """In a worker process: check a chunk as the parent would (baseline filter, tally, text
    rendering all happen here, off the parent's core); return the report without its callbacks,
    the stdout it produced (diffs) and its rendered report text."""
    resolver = _worker_resolver
    assert resolver is not None, "the pool initializer sets it"
    request = resolver.request
    report = Report(dry_run=request.diff)
    stdout: list[str] = []
    rendered: list[str] = []
    prepare(report, request, rendered.append)
    check_sources(sources, resolver, report, stdout.append)
    report.sink = report.keep = None  # closures do not pickle; the parent's own are set
    return report, "".join(stdout), "".join(rendered)


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
    from vmtune.stacks.registry import named_suffixes

    return lower.endswith(named_suffixes())


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
        from vmtune.stacks.frontend import check_stack_sources

        sources = [s for s in sources if not _is_stack_source(s)]
        check_stack_sources(stack, resolver, report, sys.stdout.write)
    if resolver.has_host(sources):
        keep = None if request.fix or request.diff else resolver.parsed  # the fixer needs the bytes
        resolver.set_inventory(_lasting_inventory(sources, keep, request.os_family))
    jobs = request.jobs or DEFAULT_JOBS
    if jobs < 2 or len(sources) < PARALLEL_MIN_FILES or any(s.path is None for s in sources):
        check_sources(sources, resolver, report, sys.stdout.write)
        return
    for source in sources:  # each directory's configuration before the workers fork: one warning, not one a worker
        with contextlib.suppress(VmtuneError):  # reported by the worker that checks the file, as before
            resolver.settings_for_file(source.name)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    size = max(8, len(sources) // (jobs * 8))  # several chunks per worker to balance uneven files
    chunks = [sources[i:i + size] for i in range(0, len(sources), size)]
    handed = (request, resolver.inventory, resolver.parsed, os.getpid())
    # Not multiprocessing.Pool: it replaces a worker that dies (the OOM killer's SIGKILL) and
    # waits forever for the chunk the dead one held. The executor fails the pending chunks.
    context = multiprocessing.get_context("fork")
    workers: list[multiprocessing.process.BaseProcess] = []
    futures: list[Future[tuple[Report, str, str]]] = []
    broken = False
    with _stop_signals_interrupt():
        pool = ProcessPoolExecutor(jobs, context, _start_worker, handed)
        try:
            with _forking_workers():
                # All submitted here, not with pool.map: on an interrupt, map cancels the chunks not
                # yet started, and the executor's thread then fails to fail them (InvalidStateError,
                # a thread traceback after Ctrl-C, CPython 3.11).
                futures = [pool.submit(_check_chunk, chunk) for chunk in chunks]  # the first forks the workers
                workers = multiprocessing.active_children()  # their exit codes tell which died how
            futures.reverse()  # popped in input order: each result is freed once merged
            stream = _stream(request)
            while futures:
                part, printed, rendered = _chunk_result(futures.pop(), workers, pool)
                sys.stdout.write(printed)
                stream.write(rendered)
                report.merge(part)
        except BrokenProcessPool:
            broken = True
        except BaseException:  # Ctrl-C, SIGTERM: stop now, not after the chunks already queued
            _stop_workers(workers, pool)
            raise
        finally:
            try:
                pool.shutdown(wait=True)  # every worker joined: each exit code is known, none outlives the run
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM while a finished run winds down
                _stop_workers(workers, pool)
                pool.shutdown(wait=True)
                raise
    if broken:
        print_errors(report)  # the completed chunks' unreadable inputs; no summary of a partial run
        raise VmtuneError(f"a worker process died ({_death(workers)}): results incomplete")


# Signals that stop a run: Ctrl-C, and SIGTERM (kill's default; CI runners and service managers
# send it at a timeout), handled alike (_interrupted).
STOP_SIGNALS = frozenset({2, 15})  # SIGINT, SIGTERM: numbers, so the signal module is not loaded for them


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C's KeyboardInterrupt is: the run stops the same way (workers
    ended, no traceback); main() exits with 128 + the signal's number, as a shell reports it."""

    signum = 15


def _interrupted(signum: int, frame: object) -> None:
    """The parent's SIGINT and SIGTERM while the workers run. The first one stops the run; the
    ones after it are ignored from here on: Ctrl-C pressed twice, or SIGTERM sent to the whole
    process group after a Ctrl-C, would otherwise break off the clean-up (the workers not yet
    terminated, and the pool then waited for until they finish every chunk)."""
    import signal

    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


@contextlib.contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt and SIGTERM Terminated while the workers run, once
    (_interrupted); the handlers in place before come back after a run that was not stopped
    (tests call main())."""
    import signal

    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    for number in STOP_SIGNALS:
        signal.signal(number, _interrupted)
    try:
        yield
    except KeyboardInterrupt:
        raise  # the process is ending: the signals stay ignored, or a second Ctrl-C would kill its exit
    except BaseException:
        _restore(previous)
        raise
    _restore(previous)


def _restore(handlers: dict[int, Any]) -> None:
    import signal

    for number, handler in handlers.items():
        signal.signal(number, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _forking_workers() -> Iterator[None]:
    """SIGINT and SIGTERM held (blocked, not lost) while the workers are forked. One landing in a
    child between its fork and its initializer would run the parent's handler there: a
    KeyboardInterrupt inside multiprocessing's start-up, a worker that hangs the pool. The workers
    and the executor's threads start with them blocked; the parent gets a held one on leaving."""
    import signal

    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _stop_workers(workers: list[multiprocessing.process.BaseProcess], pool: ProcessPoolExecutor) -> None:
    """After an interrupt (or an unexpected error): SIGTERM to each worker (it removes a temp
    file it was writing and ends), and Ctrl-C or SIGTERM ignored while the pool winds down."""
    import signal

    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    _end_workers(workers, pool)


def _end_workers(workers: list[multiprocessing.process.BaseProcess], pool: ProcessPoolExecutor) -> None:
    """SIGTERM to each worker, and this process's write end of the result pipe closed.

    A worker ended while it sent its result leaves part of a message in the result pipe: the
    executor's thread reads it and waits for the rest, which no one will send, while this process
    keeps a write end of the pipe open (pool.shutdown then waits forever, 1 Ctrl-C in 7 measured).
    Closing that end lets the thread see end-of-file once the workers are gone, and fail the pool."""
    for worker in workers:
        worker.terminate()
    results = getattr(pool, "_result_queue", None)  # CPython's executor: its SimpleQueue of results
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()


# Seconds a pool may take to fail once one of its workers is dead: the executor notices a death at
# once, unless the worker died while it sent a result (see _end_workers).
DEATH_GRACE = 2.0


def _chunk_result(future: Future[T], workers: list[multiprocessing.process.BaseProcess],
                  pool: ProcessPoolExecutor) -> T:
    """future.result(), and a pool that does not fail after one of its workers died made to: a
    worker killed (the OOM killer) while it sent its result left the executor's thread waiting for
    the rest of the message, and the run hung (1 CI run in ~40)."""
    import time

    dead_since: float | None = None
    ended = False
    while True:
        try:
            return future.result(timeout=0.25)
        except TimeoutError:
            pass
        if dead_since is None:
            if any(worker.exitcode is not None for worker in workers):  # none ends before shutdown
                dead_since = time.monotonic()
        elif not ended and time.monotonic() - dead_since > DEATH_GRACE:
            _end_workers(workers, pool)  # the executor's thread reads end-of-file and fails the pool
            ended = True


def _death(workers: list[multiprocessing.process.BaseProcess]) -> str:
    """How a dead pool's worker ended: the executor itself terminates the rest with SIGTERM."""
    import signal

    codes = [w.exitcode for w in workers if w.exitcode]
    code = next((c for c in codes if c != -signal.SIGTERM), codes[0] if codes else None)
    if code is None:
        return "exit status unknown"
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


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

