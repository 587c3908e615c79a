"""Worker processes for a run: work on chunks in processes forked from this one, results in
the chunks' order, and a run that stops (Ctrl-C, SIGTERM) or loses a worker (the OOM killer)
ending every worker, with no traceback and no hang. Used by `vmtune check` for domain files
(vmtune.commands.check) and for stack sources (vmtune.stacks.frontend); it knows neither."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from vmtune.errors import VmtuneError

if TYPE_CHECKING:
    import multiprocessing.process
    from concurrent.futures import Future, ProcessPoolExecutor

T = TypeVar("T")
# Below this many files (domains, or domains rendered from stack sources), starting worker
# processes costs more than it saves.
PARALLEL_MIN_FILES = 200
# Workers by default: every core. On 2 cores, 2 workers take 0.6-0.8x the wall time of one
# process for 2,000 files and more, for ~10% more CPU (docs/benchmarks.md).
DEFAULT_JOBS = os.cpu_count() or 1


def chunk_spans(start: int, stop: int, jobs: int, smallest: int = 8, here: bool = False) -> list[tuple[int, int]]:
    """[start, stop) cut into chunks for `jobs` workers, the largest first: each a quarter of a
    worker's share of what is left, and at least `smallest`. Few large chunks first keep the
    handing out cheap; small ones last let the workers finish together (with equal chunks of a
    sixteenth of the files, one worker went on alone for up to a whole chunk, 30-45 ms of a run
    over 1,000 manifests). `here`: this process is one of the jobs and works the chunks from the
    last on (in_workers): its share, the last 1/jobs, is cut the same way from the end."""
    if not here:
        return _guided(start, stop, jobs, smallest)
    middle = start + (stop - start) * (jobs - 1) // jobs
    back = [(stop - last, stop - first) for first, last in _guided(0, stop - middle, 1, smallest)]
    return _guided(start, middle, jobs - 1, smallest) + back[::-1]


def _guided(start: int, stop: int, jobs: int, smallest: int) -> list[tuple[int, int]]:
    cut: list[tuple[int, int]] = []
    while start < stop:
        size = max(smallest, (stop - start) // (jobs * 4))
        cut.append((start, min(start + size, stop)))
        start += size
    return cut


def _start_worker(parent: int, setup: Callable[..., None], *handed: Any) -> None:
    """Pool initializer: signals first, then setup(*handed), which leaves in this worker what its
    chunks need (handed over once through fork, not pickled with every chunk).

    The parent forked it with SIGINT and SIGTERM blocked (_forking_workers): here, before they
    are let through, a worker ignores Ctrl-C (the parent's to handle: no traceback per worker),
    ends on SIGTERM without leaving a temp file (_end_worker), and asks to get SIGTERM when its
    parent dies. Otherwise a parent killed with SIGKILL (the OOM killer, a CI timeout) leaves
    workers that never exit: each holds the write end of the queue it reads its next chunk from,
    so it never sees end-of-file, and it holds the parent's stdout, so no reader sees one either."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _end_worker)
    _die_with_parent(parent)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a signal held since the fork lands now
    setup(*handed)


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


class WorkerDied(VmtuneError):
    """A worker process died (the OOM killer): the run's results are incomplete."""


def in_workers(jobs: int, chunks: list[Any], work: Callable[[Any], T], take: Callable[[T], object],
               setup: Callable[..., None], *handed: Any, here: Callable[[Any], T] | None = None) -> None:
    """work(chunk) for every chunk, in `jobs` worker processes forked from this one, each result
    given to take() in the chunks' order as soon as it and those before it are done. A worker
    starts with setup(*handed) (inherited through fork, not pickled); `work` must be a module's
    function (it is pickled by name), and a chunk and a result must pickle. With `here`, this
    process is one of the `jobs`: it forks one fewer and works chunks itself with here(chunk), the
    last ones first while the workers take the first (_here).

    Used for domain files and for stack sources alike: a Ctrl-C or SIGTERM stops the run at once
    and ends every worker (KeyboardInterrupt or Terminated, raised here); a worker that dies
    (the OOM killer's SIGKILL) is WorkerDied, the results before it taken; no worker outlives
    the call, nor the parent when it is killed."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # Not multiprocessing.Pool: it replaces a worker that dies (the OOM killer's SIGKILL) and
    # waits forever for the chunk the dead one held. The executor fails the pending chunks.
    context = multiprocessing.get_context("fork")
    workers: list[multiprocessing.process.BaseProcess] = []
    futures: list[Future[T]] = []
    broken = False
    with _stop_signals_interrupt():
        if here is None:
            pool = ProcessPoolExecutor(jobs, context, _start_worker, (os.getpid(), setup, *handed))
        else:
            started = _Started(len(chunks))
            pool = ProcessPoolExecutor(jobs - 1, context, _start_worker,
                                       (os.getpid(), _start_sharing, started, work, setup, *handed))
        try:
            with _forking_workers():
                # All submitted here, not with pool.map: on an interrupt, map cancels the chunks not
                # yet started, and the executor's thread then fails to fail them (InvalidStateError,
                # a thread traceback after Ctrl-C, CPython 3.11). The first submit forks the workers.
                futures = [pool.submit(work, chunk) for chunk in chunks] if here is None else \
                    [pool.submit(_shared_work, (index, chunk)) for index, chunk in enumerate(chunks)]
                workers = multiprocessing.active_children()  # their exit codes tell which died how
            done = _here(chunks, started, here) if here is not None else {}
            futures.reverse()  # popped in input order: each result is freed once taken
            while futures:
                future = futures.pop()
                index = len(chunks) - len(futures) - 1
                take(done.pop(index) if index in done else _chunk_result(future, workers, pool))
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
        raise WorkerDied(f"a worker process died ({_death(workers)}): results incomplete")


class _Started:
    """Which chunks the workers and this process started, in memory shared with the workers (an
    anonymous mapping made before they fork), for in_workers' `here`: a byte per chunk for the
    workers, then one per chunk for this process."""

    def __init__(self, chunks: int) -> None:
        import mmap

        self.chunks = chunks
        self.marks = mmap.mmap(-1, 2 * chunks or 1)  # MAP_SHARED: the workers write what this process reads

    def by_worker(self, index: int) -> bool:
        """A worker's: marks the chunk its own; False when this process took it first."""
        self.marks[index] = 1
        return not self.marks[self.chunks + index]

    def here(self, index: int) -> bool:
        """This process's: marks the chunk its own (it works it whatever the answer); False when a
        worker has reached it too, and the chunks before it are the workers'."""
        self.marks[self.chunks + index] = 1
        return not self.marks[index]


_sharing: tuple[_Started, Callable[[Any], Any]] | None = None  # a worker's, see _start_sharing


def _start_sharing(started: _Started, work: Callable[[Any], Any], setup: Callable[..., None], *handed: Any) -> None:
    global _sharing
    _sharing = (started, work)
    setup(*handed)


def _shared_work(job: tuple[int, Any]) -> Any:
    """In a worker: work(chunk), unless the parent took the chunk first (None, never taken).

    Each side marks a chunk before it looks at the other's mark, and the parent works every chunk
    it marks: a chunk is worked once, or twice where both marked it at once (the parent's result
    is taken), never by neither, whatever order the two processors see the marks in."""
    assert _sharing is not None, "the pool initializer sets it"
    started, work = _sharing
    index, chunk = job
    return work(chunk) if started.by_worker(index) else None


def _here(chunks: list[Any], started: _Started, here: Callable[[Any], T]) -> dict[int, T]:
    """The chunks this process works itself (by index), from the last on while the workers take
    the first (the executor hands them out in order), until they meet. One process fewer to fork,
    and this one's results are not pickled (5 % of a worker's instructions) nor unpickled: over
    1,000 manifests on 2 cores, 4.48 G -> 4.34 G instructions against two workers beside an idle
    parent (docs/benchmarks.md)."""
    done: dict[int, T] = {}
    for index in range(len(chunks) - 1, -1, -1):
        alone = started.here(index)
        done[index] = here(chunks[index])
        if not alone:
            break
    return done


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
