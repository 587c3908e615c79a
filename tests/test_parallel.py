"""`--jobs`: worker processes must give byte-for-byte what one process gives.

Workers filter, tally and render their chunk themselves; the parent only merges. These
tests run a directory large enough to be split (PARALLEL_MIN_FILES) both ways.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vmtune.workers import PARALLEL_MIN_FILES, chunk_spans, in_workers

from conftest import DOMAINS, domain_xml, run_vmtune

VARIANTS = [
    domain_xml(name="tablet-{i}",
               devices="<controller type='usb' model='piix3-uhci'/>\n    <input type='tablet' bus='usb'/>"),
    domain_xml(name="clean-{i}"),
    domain_xml(name="win-{i}", os="windows", hyperv="<hyperv><relaxed state='on'/></hyperv>"),
    domain_xml(name="nic-{i}", devices="<interface type='network'><source network='default'/>"
               "<model type='e1000'/></interface>"),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many")
    fixtures = sorted(DOMAINS.glob("*.xml"))
    for i in range(PARALLEL_MIN_FILES + 20):
        folder = root / f"group{i % 3}"
        folder.mkdir(exist_ok=True)
        if i % 5 == 0:
            text = fixtures[i % len(fixtures)].read_text()
        else:
            text = VARIANTS[i % len(VARIANTS)].replace("{i}", str(i))
        (folder / f"vm{i:03d}.xml").write_text(text)
    (root / "group1" / "pom.xml").write_text("<project/>")  # skipped with a note
    return root


@pytest.mark.parametrize("args", [[], ["--diff", "--show-fixes"], ["-f", "json"], ["-f", "sarif"]])
def test_workers_print_exactly_what_one_process_prints(tree: Path, args: list[str]) -> None:
    one = run_vmtune("check", "--isolated", "-j", "1", *args, str(tree))
    two = run_vmtune("check", "--isolated", "-j", "2", *args, str(tree))
    assert one.returncode == 1
    assert one.stdout and one.stdout == two.stdout
    assert (one.returncode, one.stderr) == (two.returncode, two.stderr)


def test_workers_write_and_honour_the_same_baseline(tree: Path, tmp_path: Path) -> None:
    for jobs in ("1", "2"):
        result = run_vmtune("check", "--isolated", "-j", jobs, "--write-baseline", str(tmp_path / f"b{jobs}.json"),
                            str(tree))
        assert result.returncode == 0  # recorded findings are accepted
    assert (tmp_path / "b1.json").read_text() == (tmp_path / "b2.json").read_text()
    (tree / "group0" / "zz-new.xml").write_text(VARIANTS[0].replace("{i}", "new"))
    try:
        one = run_vmtune("check", "--isolated", "-j", "1", "--baseline", str(tmp_path / "b1.json"), str(tree))
        two = run_vmtune("check", "--isolated", "-j", "2", "--baseline", str(tmp_path / "b1.json"), str(tree))
    finally:
        (tree / "group0" / "zz-new.xml").unlink()
    assert one.stdout.count("== ") == 1 and "zz-new.xml" in one.stdout  # only the new domain's findings
    assert (one.returncode, one.stdout, one.stderr) == (two.returncode, two.stdout, two.stderr)


def test_a_baseline_hides_a_finding_as_often_as_it_recorded_it_whatever_worker_meets_it(
        tree: Path, tmp_path: Path) -> None:
    """A baseline allows each finding (rule, domain name, element) as many times as it recorded it,
    counted over the whole run: copies of a recorded domain beyond that count are reported, in
    whichever chunk each falls. Each worker filtering with the whole baseline hid them in every
    chunk (with 256 copies of one domain, 80 findings hidden where 5 were recorded)."""
    baseline = tmp_path / "b.json"
    assert run_vmtune("check", "--isolated", "-j", "1", "--write-baseline", str(baseline), str(tree)).returncode == 0
    recorded = (tree / "group2" / "vm002.xml").read_text()  # win-2, with findings
    copies = [tree / f"group{g}" / f"zz-copy{g}.xml" for g in range(3)]  # three chunks apart
    for copy in copies:
        copy.write_text(recorded)
    try:
        one = run_vmtune("check", "--isolated", "-j", "1", "--baseline", str(baseline), str(tree))
        two = run_vmtune("check", "--isolated", "-j", "2", "--baseline", str(baseline), str(tree))
    finally:
        for copy in copies:
            copy.unlink()
    assert one.returncode == 1 and one.stdout.count("== ") == 3  # four domains win-2, one recorded
    assert (one.returncode, one.stdout, one.stderr) == (two.returncode, two.stdout, two.stderr)


def _square(chunk: int) -> int:
    return chunk * chunk


@pytest.mark.parametrize("here", [False, True])
def test_more_chunks_than_the_task_pipe_holds_are_all_worked_in_order(here: bool) -> None:
    """Each chunk's index is 4 bytes in a pipe of 64 KiB (16,384 indices): -j 4096 over 200,000
    files makes 25,000 chunks; those the pipe cannot take before the fork are fed after it."""
    chunks = list(range(20_000))
    taken: list[int] = []
    in_workers(3, chunks, _square, taken.append, lambda: None, here=_square if here else None)
    assert taken == [chunk * chunk for chunk in chunks]
    assert len(chunk_spans(0, 200_000, 4096)) > 16_384 >= len(chunk_spans(0, 200_000, 8))


def test_a_broken_file_among_many_is_one_error_line_either_way(tree: Path) -> None:
    broken = tree / "group2" / "broken.xml"
    broken.write_text("<domain type='kvm'>\n  <name>x</name>\n")
    try:
        one = run_vmtune("check", "--isolated", "-j", "1", str(tree))
        two = run_vmtune("check", "--isolated", "-j", "2", str(tree))
    finally:
        broken.unlink()
    assert one.returncode == two.returncode == 2
    assert one.stderr == two.stderr
    assert [line for line in one.stderr.splitlines() if "broken.xml" in line] == \
        [line for line in one.stderr.splitlines() if line.startswith("vmtune: ") and "broken.xml" in line]
    assert one.stdout == two.stdout


@pytest.mark.parametrize("args", [["--diff"], ["--diff", "--baseline", "BASELINE"]])
def test_a_configuration_ignored_is_said_where_one_process_says_it(tmp_path: Path, args: list[str]) -> None:
    """A configuration ignored (writable by others) is said once, when the first file it applies
    to is checked: with --diff the report is on stderr too, the warning between the folder before's
    results and its folder's. The parent resolves every folder's settings before the workers fork
    (said once, not once a worker), and said it there, before every result: 240 files in 3
    folders, the warning on stderr's first line at -j 2, on line 161 at -j 1."""
    for i in range(PARALLEL_MIN_FILES + 40):
        folder = tmp_path / "tree" / f"group{i // 80}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"vm{i:03d}.xml").write_text(VARIANTS[i % len(VARIANTS)].replace("{i}", str(i)))
    config = tmp_path / "tree" / "group1" / ".vmtune.yaml"
    config.write_text("fail-on: info\n")
    config.chmod(0o666)
    baseline = tmp_path / "baseline.json"
    baseline.write_text('{"version": 1, "findings": []}\n')
    args = [str(baseline) if arg == "BASELINE" else arg for arg in args]
    one = run_vmtune("check", "-j", "1", *args, str(tmp_path / "tree"))
    two = run_vmtune("check", "-j", "2", *args, str(tmp_path / "tree"))
    lines = one.stderr.splitlines()
    said = [index for index, line in enumerate(lines) if "configuration ignored" in line]
    assert len(said) == 1 and said[0] > 0, one.stderr
    before, after = lines[said[0] - 1], lines[said[0] + 1]
    assert "/group0/" in before and after.startswith("== ") and "/group1/" in after
    assert (two.returncode, two.stdout, two.stderr) == (one.returncode, one.stdout, one.stderr)


def test_fix_on_a_file_given_twice_fixes_it_once_as_one_process_does(tmp_path: Path) -> None:
    """`--fix` on a file named twice: one process fixes it at its first name and finds nothing left
    to fix at the second. Workers met the two names in chunks worked at once: the second name's
    worker fixed it first, and the first name's found the file replaced since it read it ('nothing
    written', exit 2), in about half the runs of 121 files each named twice in a row."""
    runs = []
    for jobs in ("1", "2"):
        folder = tmp_path / f"j{jobs}"
        folder.mkdir()
        files = [folder / f"vm{i:03d}.xml" for i in range(121)]
        for index, name in enumerate(files):
            name.write_text((DOMAINS / "win-stimer-broken.xml").read_text().replace("<name>", f"<name>vm{index}-", 1))
        # 242 names: chunks of 15, so one chunk ends with a file's first name and the next begins with its second
        named = [files[0], files[0], *(name for name in files[1:] for _twice in (1, 2))][:242]
        result = run_vmtune("check", "--isolated", "-j", jobs, "--fix", "--show-fixes", *map(str, named))
        runs.append((result.returncode, result.stdout.replace(str(folder), "DIR"),
                     result.stderr.replace(str(folder), "DIR"), [name.read_text() for name in files]))
    one, two = runs
    assert one[0] == 0 and one[2] == ""
    assert "242 domain(s) checked: 726 finding(s) (0 error, 0 warning, 726 info); 242 fix(es) applied" in one[1]
    assert one[1].count("    fixed: HV001 ") == 121  # at each file's first name
    assert two == one

# -- a worker that dies (the OOM killer's SIGKILL) ends the run; it does not hang it ----------------
DIED = "vmtune: a worker process died (killed by signal 9): results incomplete"


def _children_like(pid: int) -> list[int]:
    """Processes forked by pid (same command line): its workers, found by scanning /proc."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
            if int(fields[1]) == pid and (stat.parent / "cmdline").read_bytes() == cmdline:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def _kill_a_worker_midway(tmp_path: Path, args: list[str], write: Callable[[Path, int], None],
                          files: int = 3000) -> tuple[subprocess.CompletedProcess[bytes], list[Path]]:
    """Run `vmtune check -j 2 ARGS DIR` on `files` domains, SIGKILL a worker once the first chunk's
    output is out, and return the run. A run that finished before the kill is retried with more files."""
    for attempt in range(4):
        folder = tmp_path / f"batch{attempt}"
        folder.mkdir()
        names = [folder / f"vm{i:05d}.xml" for i in range(files)]
        for index, name in enumerate(names):
            write(name, index)
        command = [sys.executable, "-m", "vmtune", "check", "--isolated", "-j", "2", *args, str(folder)]
        # Unbuffered: the byte read below is not kept in a buffer communicate() does not see.
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, cwd=tmp_path)
        try:
            first = proc.stdout.read(1)  # type: ignore[union-attr]  # a chunk is done: workers are busy
            deadline = time.monotonic() + 60
            workers = _children_like(proc.pid)
            while not workers and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
                workers = _children_like(proc.pid)
            killed = False
            if workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(workers[0], signal.SIGKILL)
                    killed = True
            out, err = proc.communicate(timeout=120)  # the old multiprocessing.Pool hung here forever
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        done = subprocess.CompletedProcess(command, proc.returncode, first + out, err)
        if killed and proc.returncode == 2:
            return done, names
        # Finished before the kill landed (a fast machine): the run must then be whole.
        assert proc.returncode in (0, 1) and f"{files} domain(s) checked".encode() in done.stdout + err, err
        files *= 2
    pytest.fail("every run finished before a worker could be killed")


def _domain(name: Path, index: int) -> None:
    name.write_text((DOMAINS / "win10-timer-storm.xml").read_text().replace("<name>win10<", f"<name>vm{index}<"))


def test_a_killed_worker_ends_the_run_with_one_line_and_exit_2(tmp_path: Path) -> None:
    def write(name: Path, index: int) -> None:
        if index == 0:  # malformed: the first chunk's error line is kept too
            name.write_text("<domain type='kvm'>\n")
        else:
            _domain(name, index)

    done, names = _kill_a_worker_midway(tmp_path, [], write)
    errors = done.stderr.decode().splitlines()
    assert len(errors) == 2 and errors[0].startswith(f"vmtune: {names[0]}:") and errors[1] == DIED
    out = done.stdout.decode()
    assert "domain(s) checked" not in out  # no summary claims the batch was checked
    # What completed chunks printed is kept, whole and in input order: a prefix of the files.
    shown = [line.rsplit("(", 1)[1].rstrip(")") for line in out.splitlines() if line.startswith("== ")]
    assert shown and shown == [str(n) for n in names[1:len(shown) + 1]] and len(shown) < len(names) - 1
    assert out.count(":40: DSK008 info") == len(shown)


def test_a_worker_killed_during_fix_leaves_every_file_whole(tmp_path: Path) -> None:
    """--fix replaces each file atomically: a killed worker leaves each one as it was or fixed."""
    sample = tmp_path / "sample.xml"
    _domain(sample, 0)
    original = sample.read_bytes()
    assert run_vmtune("check", "--isolated", "--fix", str(sample)).returncode in (0, 1)
    fixed = sample.read_bytes()
    assert fixed != original
    done, names = _kill_a_worker_midway(tmp_path, ["--fix"], _domain)
    assert done.stderr.decode().splitlines() == [DIED]
    states = [n.read_bytes().replace(f"<name>vm{i}<".encode(), b"<name>vm0<") for i, n in enumerate(names)]
    assert all(state in (original, fixed) for state in states)
    assert fixed in states and original in states  # it was killed midway
    assert sorted(p.name for p in names[0].parent.iterdir() if not p.name.endswith(".vmtune-tmp")) == \
        sorted(n.name for n in names)  # nothing else written (a killed write may leave its hidden temp file)


# -- the parent stopped (SIGTERM, SIGKILL, Ctrl-C): no worker outlives it, no file half-written ----
def _alive(pid: int, started: str) -> bool:
    """Whether process pid (started at `started`, field 22 of its stat: not a reused pid) still
    runs: a zombie waiting for a reaper has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and fields[19] == started


def _started(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _stop_midway(tmp_path: Path, args: list[str], stop: Callable[[int], None],
                 files: int = 3000) -> tuple[int, bytes, dict[int, str], float, list[Path]]:
    """Start `vmtune check ARGS -j 2 DIR` on `files` domains in a session of its own, wait for a
    chunk's output (the workers are busy), note the workers, stop(pid), then read stdout and
    stderr to their end as a caller would. Returns the exit code, stderr, the workers, the seconds
    until every worker had ended, and the files."""
    folder = tmp_path / "many"
    folder.mkdir()
    names = [folder / f"vm{i:05d}.xml" for i in range(files)]
    for index, name in enumerate(names):
        _domain(name, index)
    command = [sys.executable, "-m", "vmtune", "check", "--isolated", *args, "-j", "2", str(folder)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, cwd=tmp_path,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.read(1)  # a chunk is done: the workers are busy
        workers = {pid: _started(pid) for pid in _children_like(proc.pid)}
        stop(proc.pid)
        stopped = time.monotonic()
        _, err = proc.communicate(timeout=30)  # a worker left alive holds stdout open: this timed out
        while any(_alive(pid, started) for pid, started in workers.items()) and time.monotonic() < stopped + 10:
            time.sleep(0.01)
        ended = time.monotonic() - stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the session (the old code's workers)
        proc.wait()
    return proc.returncode, err, workers, ended, names


def _fix_states(names: list[Path], tmp_path: Path) -> tuple[bytes, bytes, list[bytes]]:
    """(original, fixed, each file's bytes with its own name put back to vm0's)."""
    sample = tmp_path / "sample.xml"
    _domain(sample, 0)
    original = sample.read_bytes()
    assert run_vmtune("check", "--isolated", "--fix", str(sample)).returncode in (0, 1)
    return original, sample.read_bytes(), [
        n.read_bytes().replace(f"<name>vm{i}<".encode(), b"<name>vm0<") for i, n in enumerate(names)]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_workers_end_with_a_parent_killed_during_fix(tmp_path: Path, signum: int) -> None:
    """A CI timeout's SIGTERM, the OOM killer's SIGKILL: the workers end with their parent (they
    kept rewriting files and held stdout open, so a caller reading it waited forever)."""
    code, err, workers, ended, names = _stop_midway(tmp_path, ["--fix"], lambda pid: os.kill(pid, signum))
    assert len(workers) == 2
    assert ended < 10 and not any(_alive(pid, started) for pid, started in workers.items())
    if signum == signal.SIGTERM:  # stopped as Ctrl-C stops it: 128 + 15, as a shell reports it, and no traceback
        assert (code, err) == (143, b"")
    else:
        assert code == -signal.SIGKILL
    original, fixed, states = _fix_states(names, tmp_path)
    assert all(state in (original, fixed) for state in states)  # each file whole: as it was, or fixed
    assert original in states  # stopped midway
    assert sorted(p.name for p in names[0].parent.iterdir()) == sorted(n.name for n in names)  # no temp file left


def test_ctrl_c_stops_workers_without_a_traceback_or_a_hang(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the terminal's process group: the workers get it too), pressed once or
    twice, at moments a few milliseconds apart: exit 130, no traceback, no worker left. The
    executor's thread printed an InvalidStateError traceback, or the run hung on a worker stopped
    while sending its result (7 of 20 runs of --diff before)."""
    for attempt, presses in enumerate([1, 2, 1, 2, 1, 2, 1, 2]):
        def press(pid: int, presses: int = presses, attempt: int = attempt) -> None:
            for _ in range(presses):
                os.killpg(pid, signal.SIGINT)
                time.sleep(0.002 * attempt)

        folder = tmp_path / str(attempt)
        folder.mkdir()
        code, err, workers, ended, _ = _stop_midway(folder, ["--diff"], press, files=1500)
        assert code == 130, (attempt, err[-2000:])
        # --diff: the report goes to stderr; what the run checked is there, and nothing else.
        assert all(line.startswith((b"== ", str(folder).encode())) for line in err.splitlines()), err[-2000:]
        assert ended < 10 and not any(_alive(pid, started) for pid, started in workers.items())


def test_workers_killed_while_a_result_is_half_sent_end_the_run(tmp_path: Path) -> None:
    """A worker killed while it writes its result leaves half a message in the result pipe: the
    executor's thread read it and waited for the rest forever (1 CI run in ~40 hung here). Made
    certain: the parent is stopped (SIGSTOP) while the workers finish their chunks, so the first to
    send fills the pipe (64 KiB; a chunk's result is larger) and blocks mid-message; both workers
    are then killed and the parent continued. It must end with one line and exit 2."""
    folder = tmp_path / "batch"
    folder.mkdir()
    for index in range(3000):
        _domain(folder / f"vm{index:05d}.xml", index)
    command = [sys.executable, "-m", "vmtune", "check", "--isolated", "-j", "2", str(folder)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.read(1)  # a chunk is done: the workers are busy
        workers = _children_like(proc.pid)
        assert len(workers) == 2, workers
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(3)  # the workers finish their chunks; the first to send blocks on the full pipe
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2
    assert err.decode().splitlines()[-1] == DIED
    assert b"domain(s) checked" not in out


def test_a_long_report_text_is_written_in_whole_lines_of_at_most_pipe_buf_bytes() -> None:
    """What keeps the report's lines whole when Ctrl-C lands on a write to a full pipe (the test
    above: the cut fell mid-line at 65,536 bytes, the pipe's capacity, before): each piece a
    write(2) of whole lines, at most 4,096 bytes, which a pipe takes whole or not at all."""
    from vmtune.terminal import whole_lines

    lines = [f"/tmp/many/vm{i:05d}.xml:{i % 90}: NET007 info {'é' * (i % 400)} (rule)\n" for i in range(3000)]
    text = "".join(lines) + "an unfinished last line"
    pieces = list(whole_lines(text))
    assert "".join(pieces) == text
    assert all(piece.endswith("\n") for piece in pieces[:-1])
    assert all(len(piece.encode()) <= 4096 for piece in pieces)
    assert len(pieces) > 100  # cut, not written at once
    long_line = "x" * 5000 + "\n"
    assert list(whole_lines("a\n" + long_line + "b\n")) == ["a\n", long_line, "b\n"]  # too long for a piece: alone
