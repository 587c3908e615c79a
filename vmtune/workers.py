"""Worker processes for a run: work on chunks in processes forked from this one, results in
the chunks' order, and a run that stops (Ctrl-C, SIGTERM) or loses a worker (the OOM killer)
ending every worker, with no traceback and no hang. Used by `vmtune check` for domain files
(vmtune.commands.check) and for stack sources (vmtune.stacks.frontend); it knows neither."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from vmtune.errors import VmtuneError

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
    """A worker's start: signals first, then setup(*handed), which leaves in this worker what its
    chunks need (handed over once through fork, not pickled with every chunk).

    The parent forked it with SIGINT and SIGTERM blocked (_forking_workers): here, before they
    are let through, a worker ignores Ctrl-C (the parent's to handle: no traceback per worker),
    ends on SIGTERM without leaving a temp file (_end_worker), and asks to get SIGTERM when its
    parent dies. Otherwise a parent killed with SIGKILL (the OOM killer, a CI timeout) leaves
    workers that go on with every chunk left, holding the parent's stdout, so no reader of it
    sees end-of-file until they are done."""
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
    starts with setup(*handed) (inherited through fork, not pickled); a result must pickle. With
    `here`, this process is one of the `jobs`: it forks one fewer and works chunks itself with
    here(chunk), the last ones first while the workers take the first (_here).

    Used for domain files and for stack sources alike: a Ctrl-C or SIGTERM stops the run at once
    and ends every worker (KeyboardInterrupt or Terminated, raised here); a worker that dies
    (the OOM killer's SIGKILL) is WorkerDied, the results before it taken; no worker outlives
    the call, nor the parent when it is killed.

    Forked and fed here (_Pool), not by concurrent.futures' ProcessPoolExecutor: importing it
    and multiprocessing (54 modules: logging, tempfile, socket, subprocess...) took ~70 M
    instructions, 15-25 ms, before the first fork, on the run's serial path."""
    started = _Started(len(chunks)) if here is not None else None
    pool = _Pool(chunks, work, started)
    with _stop_signals_interrupt():
        try:
            with _forking_workers():
                pool.fork(jobs - 1 if here is not None else jobs, setup, handed)
            done = _here(chunks, started, here, pool.drain) if here is not None and started is not None else {}
            for index in range(len(chunks)):
                take(done.pop(index) if index in done else pool.result(index))
        except BaseException:  # Ctrl-C, SIGTERM, a dead worker: stop now, not after the chunks queued
            pool.end()
            raise
        finally:
            pool.close()  # every worker waited for: each exit code is known, none outlives the run


class _Pool:
    """Worker processes forked from this one. The chunks' indices wait in a pipe, written before
    the fork (by a thread after it, for more than the pipe holds): each worker reads the next 4
    bytes (the pipe gives each read to one reader) until end-of-file, works the chunk, and sends
    back its pickled result, length first, on a pipe of its own. A worker that ends otherwise than
    by finishing (a signal, an exit status, a result cut off) makes the run's results incomplete:
    WorkerDied once a missing one is asked."""

    def __init__(self, chunks: list[Any], work: Callable[[Any], Any], started: _Started | None) -> None:
        self.chunks = chunks
        self.work = work
        self.started = started
        self.results: dict[int, tuple[bool, Any]] = {}
        self.readers: dict[int, tuple[int, bytearray]] = {}  # result pipe -> (worker pid, bytes not yet a message)
        self.pids: list[int] = []
        self.codes: dict[int, int] = {}  # pid -> exit code (os.waitstatus_to_exitcode: -signal when killed)
        self.died = False

    def fork(self, count: int, setup: Callable[..., None], handed: tuple[Any, ...]) -> None:
        tasks, feed = os.pipe()
        indices = b"".join(index.to_bytes(4, "little") for index in range(len(self.chunks)))
        os.set_blocking(feed, False)  # what the pipe takes now (64 KiB: 16,384 chunks); the rest below
        written = _write_pieces(feed, indices)
        parent = os.getpid()
        for stream in (sys.stdout, sys.stderr):  # a worker must not write what this process buffered
            if stream is not None:
                stream.flush()
        try:
            for _ in range(count):
                reader, writer = os.pipe()
                _grow(writer)
                pid = os.fork()
                if pid == 0:  # the worker: never returns
                    os.close(reader)
                    os.close(feed)  # or it would never read the end of the indices
                    for other in self.readers:
                        os.close(other)
                    self._serve(parent, setup, handed, tasks, writer)
                os.close(writer)
                self.pids.append(pid)
                self.readers[reader] = (pid, bytearray())
        finally:
            os.close(tasks)
            if written < len(indices):  # more chunks than the pipe holds: fed as the workers take them
                _feed_later(feed, indices[written:])
            else:
                os.close(feed)  # the workers read end-of-file once every index is taken

    def _serve(self, parent: int, setup: Callable[..., None], handed: tuple[Any, ...], tasks: int,
               writer: int) -> NoReturn:
        """A worker's life: set-up, then chunks until the task pipe is empty; ends the process."""
        code = 1
        try:
            _start_worker(parent, setup, *handed)
            while len(raw := _read_exact(tasks, 4)) == 4:
                index = int.from_bytes(raw, "little")
                if self.started is not None and not self.started.by_worker(index):
                    continue  # this process's parent took it first: its result is the parent's
                try:
                    said: tuple[int, bool, Any] = (index, True, self.work(self.chunks[index]))
                except Exception as exc:  # raised in the parent, as in a run without workers
                    said = (index, False, exc)
                try:
                    data = _pickled(said)
                except Exception as exc:  # an exception that does not pickle: its text does
                    data = _pickled((index, False, RuntimeError(f"{type(exc).__name__}: {exc}")))
                _write_all(writer, len(data).to_bytes(8, "little") + data)
            code = 0
        finally:
            for stream in (sys.stdout, sys.stderr):  # what this worker said (a warning), never the parent's
                if stream is not None:
                    with contextlib.suppress(Exception):
                        stream.flush()
            os._exit(code)

    def result(self, index: int) -> Any:
        """Chunk `index`'s result, waiting for it; WorkerDied when a worker died before sending it."""
        while index not in self.results:
            if self.died or not self.readers:
                raise WorkerDied(f"a worker process died ({self._death()}): results incomplete")
            self._read(None)
        ok, value = self.results.pop(index)
        if not ok:
            raise value
        return value

    def drain(self) -> None:
        """The results sent so far read, without waiting: a worker is not left blocked on a full
        pipe while this process works a chunk of its own."""
        if self.readers:
            self._read(0)

    def _read(self, timeout: int | None) -> None:
        import select

        poller = select.poll()
        for reader in self.readers:
            poller.register(reader, select.POLLIN)
        for reader, _event in poller.poll(timeout):
            pid, pending = self.readers[reader]
            data = os.read(reader, 1 << 20)
            if data:
                pending += data
                self._messages(pending)
                continue
            os.close(reader)  # end-of-file: the worker has ended
            del self.readers[reader]
            code = self._wait(pid)
            if code != 0 or pending:  # killed, failed, or cut off in the middle of a result
                self.died = True

    def _messages(self, pending: bytearray) -> None:
        while len(pending) >= 8:
            size = int.from_bytes(pending[:8], "little")
            if len(pending) < 8 + size:
                return
            index, ok, value = _unpickled(pending[8:8 + size])
            del pending[:8 + size]
            self.results[index] = (ok, value)

    def _wait(self, pid: int) -> int:
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self.codes[pid] = code
        return code

    def end(self) -> None:
        """SIGTERM to each worker still running (it removes a temp file it was writing and ends),
        with Ctrl-C and SIGTERM ignored here from now on (the run is stopping)."""
        import signal

        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        for pid in self.pids:
            if pid not in self.codes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)

    def close(self) -> None:
        for reader in self.readers:
            os.close(reader)
        self.readers.clear()
        for pid in self.pids:
            if pid not in self.codes:
                self._wait(pid)

    def _death(self) -> str:
        """How a dead worker ended: the first that ended otherwise than by SIGTERM, which this
        process sends to the rest."""
        import signal

        codes = [code for code in self.codes.values() if code]
        code = next((c for c in codes if c != -signal.SIGTERM), codes[0] if codes else None)
        if code is None:
            return "exit status unknown"
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _pickled(value: Any) -> bytes:
    return _pickle_module().dumps(value, -1)  # type: ignore[no-any-return]  # the highest protocol


def _unpickled(data: bytearray) -> Any:
    return _pickle_module().loads(data)


def _pickle_module() -> Any:
    """CPython's pickle accelerator, which the pickle module re-exports: the module itself costs
    ~5 M instructions more to import, on the parent's serial path."""
    try:
        import _pickle

        return _pickle
    except ImportError:
        import pickle

        return pickle


# What a result pipe is grown to (F_SETPIPE_SZ; Linux's default limit for a process without
# CAP_SYS_RESOURCE): a worker then seldom waits on a parent busy with a chunk of its own.
RESULT_PIPE_SIZE = 1 << 20


def _grow(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), RESULT_PIPE_SIZE)
    except (ImportError, OSError):
        pass  # the default capacity: only slower


def _write_pieces(feed: int, indices: bytes) -> int:
    """Write the indices in pieces of PIPE_BUF bytes, each of which a pipe takes whole (POSIX), so
    a worker's 4-byte read never meets half an index; how many bytes were written (fewer when a
    non-blocking pipe is full)."""
    written = 0
    while written < len(indices):
        try:
            os.write(feed, indices[written:written + _PIPE_BUF])
        except BlockingIOError:
            break
        written += min(_PIPE_BUF, len(indices) - written)
    return written


_PIPE_BUF = 4096  # POSIX's PIPE_BUF on Linux, a multiple of an index's 4 bytes


def _feed_later(feed: int, rest: bytes) -> None:
    """The indices the task pipe could not take before the fork, written by a thread started
    after it (a thread must not be running when the workers fork) as the workers read; then the
    pipe's end. A daemon: when every worker is gone, its write fails (EPIPE) and it ends."""
    import threading

    def write() -> None:
        try:
            os.set_blocking(feed, True)
            _write_pieces(feed, rest)
        except OSError:
            pass  # the workers are gone: the run reports what they left undone
        finally:
            os.close(feed)

    threading.Thread(target=write, name="vmtune-task-feed", daemon=True).start()


def _read_exact(fd: int, size: int) -> bytes:
    """`size` bytes from fd, fewer only at end-of-file."""
    data = os.read(fd, size)
    while data and len(data) < size:
        more = os.read(fd, size - len(data))
        if not more:
            break
        data += more
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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


def _here(chunks: list[Any], started: _Started, here: Callable[[Any], T], drain: Callable[[], None]) -> dict[int, T]:
    """The chunks this process works itself (by index), from the last on while the workers take
    the first, until they meet (each side marks a chunk before it looks at the other's mark, and
    this process works every chunk it marks: a chunk is worked once, or twice where both marked it
    at once, this process's result taken; never by neither). One process fewer to fork, and this
    one's results are not pickled (5 % of a worker's instructions) nor unpickled: over 1,000
    manifests on 2 cores, 4.48 G -> 4.34 G instructions against two workers beside an idle parent
    (docs/benchmarks.md). Between its chunks, the workers' results sent so far are read (drain)."""
    done: dict[int, T] = {}
    for index in range(len(chunks) - 1, -1, -1):
        alone = started.here(index)
        done[index] = here(chunks[index])
        drain()
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
    child between its fork and its start (_start_worker) would run the parent's handler there: a
    KeyboardInterrupt in a worker. The workers start with them blocked; the parent gets a held
    one on leaving."""
    import signal

    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
