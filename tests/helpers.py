"""Calling vmtune's pure functions from tests, and rendering HTML reports in headless Chromium."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from vmtune.engine import CheckOptions, check_domain
from vmtune.facts.domain import Domain
from vmtune.facts.host import Host, load_host
from vmtune.fixer import FixOutcome, fix_document
from vmtune.host.inventory import DomainUsage, Inventory
from vmtune.policy.load import load_policies
from vmtune.rules.base import Finding, Severity
from vmtune.xml.safe import parse_domain

from conftest import HOSTS


def host(caps: str | None = None, domcaps: str | None = None) -> Host | None:
    return load_host(str(HOSTS / caps) if caps else None, str(HOSTS / domcaps) if domcaps else None)


def inventory(*xmls: str) -> Inventory:
    return Inventory([DomainUsage.of(Domain(parse_domain(x.encode(), "other.xml"), "other.xml")) for x in xmls])


def options(policies: tuple[str, ...] = ("default",), host_facts: Host | None = None,
            select: list[str] | None = None, os: str | None = None,
            others: Inventory | None = None, fix_select: tuple[str, ...] = (),
            fix_all: bool = False) -> CheckOptions:
    """fix_select: rules named as with `--select` on the command line, whose info fixes --fix applies;
    fix_all: every finding's fix, as `--fail-on info` gives."""
    opts = CheckOptions(load_policies(list(policies)), host_facts, os, select or [], [],  # type: ignore[arg-type]
                        fix_selected=fix_select, fix_severity=Severity.INFO if fix_all else Severity.WARNING)
    opts.inventory = others
    return opts


def findings(xml: str | bytes, opts: CheckOptions | None = None) -> list[Finding]:
    data = xml.encode() if isinstance(xml, str) else xml
    opts = opts or options()
    return check_domain(Domain(parse_domain(data, "test.xml"), "test.xml", opts.os_override), opts)


def codes(xml: str | bytes, opts: CheckOptions | None = None) -> list[str]:
    return [f.rule.code for f in findings(xml, opts)]


def fix(xml: str | bytes, opts: CheckOptions | None = None, unsafe: bool = False) -> FixOutcome:
    data = xml.encode() if isinstance(xml, str) else xml
    return fix_document(data, "test.xml", opts or options(), unsafe)


# libvirt's own RelaxNG schema of domain XML, as `virt-xml-validate FILE domain` uses it (that
# script runs `xmllint --relaxng` on it): the same libxml2 validator through lxml, compiled once per
# process instead of two processes per file (test_corpus.py checks the two agree).
DOMAIN_RNG = Path("/usr/share/libvirt/schemas/domain.rng")
_DOMAIN_SCHEMA: list[Any] = []


def schema_valid(data: bytes) -> bool:
    """Whether libvirt's schema accepts the domain XML; skips the test where the schema is missing."""
    from lxml import etree

    if not _DOMAIN_SCHEMA:
        if not DOMAIN_RNG.is_file():
            pytest.skip(f"{DOMAIN_RNG} missing: apt-get install libvirt-clients")
        _DOMAIN_SCHEMA.append(etree.RelaxNG(etree.parse(str(DOMAIN_RNG))))
    return bool(_DOMAIN_SCHEMA[0].validate(etree.fromstring(data)))


# Headless Chromium (Debian's `chromium`) for the HTML report. With `--enable-logging=stderr --v=0`
# it logs every console message (uncaught exceptions, Content-Security-Policy refusals, console.*
# calls) to stderr as `...:CONSOLE:N] "text", source: URL (N)`.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(page: Path, tmp_path: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    # --no-sandbox: the suite runs as root, where Chromium's sandbox refuses to start.
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
                           "--window-size=1280,1600", *mode, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def console_messages(page: Path, tmp_path: Path) -> tuple[list[str], str]:
    """What the page wrote to the console, and the DOM after its scripts ran."""
    done = _chromium(page, tmp_path, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if re.search(r":CONSOLE(:\d+)?\]", line)], done.stdout


def screenshot(page: Path, tmp_path: Path) -> tuple[int, int, int]:
    """Width, height and size in bytes of the PNG Chromium took of the page."""
    png = tmp_path / "report.png"
    done = _chromium(page, tmp_path, f"--screenshot={png}")
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height, len(data)


class DevTools:
    """Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
    commands in on fd 3, answers out on fd 4, each a JSON object ended by a NUL byte), for what
    `--dump-dom` cannot tell: a layout at a phone's width, and the page after a user typed.
    `Runtime.evaluate` runs outside the page's Content-Security-Policy, so the page is the one
    vmtune wrote, unmodified. Console messages, uncaught exceptions and CSP refusals are
    collected in `problems`."""

    def __init__(self, tmp_path: Path) -> None:
        if CHROMIUM is None:
            pytest.skip("chromium is not installed (apt-get install chromium)")
        commands_r, self._commands = os.pipe()
        self._answers, answers_w = os.pipe()
        # The child's ends above 9, so that making them its fds 3 and 4 never closes one of them.
        low = (commands_r, answers_w)
        commands_r, answers_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in low)
        for fd in low:
            os.close(fd)
        self._proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{commands_r} 4>&{answers_w} {commands_r}<&- {answers_w}>&-', "chromium",
             CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'chromium-devtools'}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(commands_r, answers_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands_r)
        os.close(answers_w)
        self._buffer = b""
        self._next = 0
        self._events: list[dict[str, object]] = []
        self.problems: list[str] = []

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self.call("Browser.close")
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._commands)
        os.close(self._answers)

    def _read(self, deadline: float) -> dict[str, object]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._answers], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "Chromium did not answer within 60 s"
            chunk = os.read(self._answers, 1 << 20)
            assert chunk, "Chromium closed the DevTools pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        data: dict[str, object] = json.loads(message)
        if data.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded"):
            self.problems.append(json.dumps(data.get("params"))[:500])
        return data

    def call(self, method: str, session: str | None = None, **params: object) -> dict[str, object]:
        self._next += 1
        message: dict[str, object] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            data = self._read(deadline)
            if data.get("id") == self._next:
                assert "error" not in data, (method, data["error"])
                return data.get("result", {})  # type: ignore[return-value]
            self._events.append(data)

    def wait(self, event: str, session: str) -> None:
        deadline = time.monotonic() + 60
        while True:
            for i, data in enumerate(self._events):
                if data.get("method") == event and data.get("sessionId") == session:
                    del self._events[: i + 1]
                    return
            self._events.append(self._read(deadline))

    def open(self, page: Path, width: int, height: int, mobile: bool = False) -> str:
        """A tab of width x height CSS pixels showing page (a phone's when mobile: the page's
        viewport meta applies), loaded; returns its session id."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = str(self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"])
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session)
        self.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height,
                  deviceScaleFactor=1, mobile=mobile)
        self.call("Page.navigate", session, url=page.as_uri())
        self.wait("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str) -> object:
        result = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")  # type: ignore[union-attr]

    def screenshot(self, session: str, path: Path) -> tuple[int, int, int]:
        """The whole page as a PNG at path: its width, height and size in bytes."""
        data = base64.b64decode(str(self.call("Page.captureScreenshot", session, format="png",
                                              captureBeyondViewport=True)["data"]))
        path.write_bytes(data)
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        return width, height, len(data)


# --- vmtune in a subprocess, measured (hostile-input bounds: about a second and 200 MB) ---

# CPU seconds: "about a second", with the interpreter's start-up. CPU time, not wall time: what a
# hostile input costs is computation, and the wall time of a run on a machine shared with other
# runs (or another pytest-xdist worker) measures the machine. A run that blocks instead is killed
# after 60 s and fails on its exit code and output.
TIME_LIMIT = 1.5
MEMORY_LIMIT_KB = 200 * 1024


class Run(NamedTuple):
    code: int
    stdout: str
    stderr: str
    cpu_seconds: float  # vmtune's own, user and system
    max_rss_kb: int


# Linux carries a process's peak RSS across fork and exec: a child forked straight from pytest
# (hundreds of MB by the time these tests run) would report pytest's size. A small interpreter
# forks vmtune instead and reports the child's own rusage on the pipe named in argv[1].
LAUNCHER = """import os, sys
report = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(report)
    os.execv(sys.executable, [sys.executable, "-m", "vmtune", *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
os.write(report, f"{usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}".encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(*args: str, cwd: Path) -> Run:
    """vmtune in a subprocess, with its CPU time and peak memory (its own, through LAUNCHER)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        read_end, write_end = os.pipe()
        process = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, str(write_end), *args], cwd=cwd,
                                   stdout=out, stderr=err, env={**os.environ, "VMTUNE_NO_CACHE": "1"},
                                   pass_fds=(write_end,))
        os.close(write_end)
        timer = threading.Timer(60, process.kill)
        timer.start()
        try:
            process.wait()
        finally:
            timer.cancel()
        with os.fdopen(read_end, "rb") as report:
            rss, cpu = (report.read().decode() or "0 0").split()
        out.seek(0)
        err.seek(0)
        # Strict UTF-8: whatever the input, vmtune's output decodes.
        return Run(process.returncode, out.read().decode("utf-8"), err.read().decode("utf-8"), float(cpu), int(rss))


def set_knob(spec: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    """Set a KubeVirt knob's path in a VMI spec ("[]": every item) as the fix does, merging a
    mapping value into a mapping already there, at every depth (tests/test_kubevirt_render.py and
    tests/test_knob_proof.py)."""
    import copy

    node: Any = spec
    for i, key in enumerate(path[:-1]):
        if key == "[]":
            for item in node:
                set_knob(item, path[i + 1:], value)
            return
        node = node.setdefault(key, {})
    last = path[-1]
    if last == "[]":
        for item in node:
            item.update(copy.deepcopy(value))  # type: ignore[arg-type]
    elif isinstance(value, dict) and value and isinstance(node.get(last), dict):
        for key, item in value.items():  # merged leaf by leaf, as the fix's edits are (frontend._split)
            set_knob(node[last], (key,), item)
    else:
        node[last] = copy.deepcopy(value)


def cpu_run(*args: str, cwd: Path, timeout: float,
            env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    """The real CLI in a subprocess (`env` added to this one's), with the CPU seconds it used
    (children's rusage)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "vmtune", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, **(env or {})})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
