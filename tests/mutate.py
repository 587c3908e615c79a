"""A seeded mutator of domain XML: hostile values first, broken syntax second.

Used by tests/test_fuzz.py (a bounded run in CI) and bench/fuzz.py (the long run). Each mutation
keeps most of a real definition intact, so the rules get far enough to meet the bad value.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

# Values Python accepts in places libvirt does not, and values beyond every range.
HOSTILE_NUMBERS = (
    "\u00b2", "\u0663", "\uff11\uff12", "\U0001d7ce", "1\u00b2", "-1", "-0", "0", "1.5", "1e3", "0x10", " 4 ", "",
    "9" * 5001, str(2**70), str(2**64), str(2**53), "18446744073709551616", "4294967296", "99999999999",
)
HOSTILE_CPUSETS = ("0-99999999999", "0-4294967295", "16384", "5-2", "^0", ",,,", "0-3,^0-3", "\u00b2-3",
                   "0-" + "9" * 400, "-", "0--1", "a-b", "0-3" * 1000)
HOSTILE_UNITS = ("XiB", "", "bytes", "EiB", "eb", "G\u00b2", "k" * 100)
SYNTAX = ("truncate", "stray_lt", "entity", "nul", "unclosed")

_ATTR = re.compile(rb"""\b(vcpu|cpuset|nodeset|current|iothread|id|queues|retries|order|index|size|memory|cpus|"""
                   rb"""sockets|cores|threads|dies|unit|bus|slot|port)=(['"])([^'"]*)\2""")
_TEXT = re.compile(rb">([0-9]+)<")
_ELEMENT_LINE = re.compile(rb"^[ \t]*<[a-zA-Z][^\n]*/>[ \t]*\r?\n", re.M)


def _replace(data: bytes, match: re.Match[bytes], group: int, value: str) -> bytes:
    return data[:match.start(group)] + value.encode() + data[match.end(group):]


def _injected(rng: random.Random) -> bytes:
    """Tuning elements most real definitions lack, with a hostile value: where cpusets live."""
    cpuset, number = rng.choice(HOSTILE_CPUSETS), rng.choice(HOSTILE_NUMBERS)
    return rng.choice((
        f"<cputune><vcpupin vcpu='{number}' cpuset='{cpuset}'/><emulatorpin cpuset='{cpuset}'/>"
        f"<iothreadpin iothread='1' cpuset='{cpuset}'/></cputune>",
        f"<numatune><memory mode='strict' nodeset='{cpuset}'/></numatune>",
        f"<iothreads>{number}</iothreads>",
        f"<memoryBacking><hugepages><page size='{number}' unit='{rng.choice(HOSTILE_UNITS)}'/></hugepages>"
        "</memoryBacking>",
    )).encode()


def _value_mutation(data: bytes, rng: random.Random) -> bytes:
    vcpu_end = data.find(b"</vcpu>")
    if vcpu_end >= 0 and rng.random() < 0.3:
        return data[:vcpu_end + 7] + _injected(rng) + data[vcpu_end + 7:]
    attrs = list(_ATTR.finditer(data))
    texts = list(_TEXT.finditer(data))
    if not attrs and not texts:
        return data
    if texts and (not attrs or rng.random() < 0.3):
        return _replace(data, rng.choice(texts), 1, rng.choice(HOSTILE_NUMBERS))
    match = rng.choice(attrs)
    name = match.group(1)
    if name in (b"cpuset", b"nodeset", b"cpus"):
        value = rng.choice(HOSTILE_CPUSETS)
    elif name == b"unit":
        value = rng.choice(HOSTILE_UNITS)
    else:
        value = rng.choice(HOSTILE_NUMBERS)
    return _replace(data, match, 3, value.replace("'", "").replace('"', ""))


def _structure_mutation(data: bytes, rng: random.Random) -> bytes:
    lines = list(_ELEMENT_LINE.finditer(data))
    if not lines:
        return data
    line = rng.choice(lines)
    if rng.random() < 0.5:  # duplicated element
        return data[:line.end()] + line.group(0) * rng.randint(1, 3) + data[line.end():]
    return data[:line.start()] + data[line.end():]  # missing element


def _syntax_mutation(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(SYNTAX)
    at = rng.randrange(len(data)) if data else 0
    if kind == "truncate":
        return data[:at]
    if kind == "stray_lt":
        return data[:at] + b"<" + data[at:]
    if kind == "entity":
        return b'<!DOCTYPE domain [<!ENTITY x "y">]>\n' + data
    if kind == "nul":
        return data[:at] + b"\x00" + data[at:]
    return data.replace(b"</devices>", b"", 1)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three mutations: mostly values, some structure, a little syntax."""
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.7:
            data = _value_mutation(data, rng)
        elif roll < 0.9:
            data = _structure_mutation(data, rng)
        else:
            data = _syntax_mutation(data, rng)
    return data


@dataclass
class Outcome:
    name: str
    mode: str
    exit_code: int | None
    seconds: float
    problem: str | None  # a traceback, an internal error, an unknown exit code; None when fine


MODES = {
    "check": {},
    "fix-latency-host": {"fix": True, "unsafe_fixes": True, "policies": ["latency"]},
}


def run_vmtune_in_process(path: Path, mode: str, host: Path) -> Outcome:
    """`vmtune check` (or `check --fix --unsafe-fixes --policy latency --host`) on one file, as the
    CLI runs it, with its output captured; an exception escaping run_check is a traceback."""
    from vmtune.commands.check import CheckRequest, run_check

    options = dict(MODES[mode])
    if mode != "check":
        options["host"] = host
    request = CheckRequest(paths=[str(path)], isolated=True, jobs=1, **options)  # type: ignore[arg-type]
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    problem = None
    code: int | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_check(request)
    except BaseException as exc:  # every escape is what the fuzzer looks for
        problem = f"traceback: {type(exc).__name__}: {exc}"[:300]
    seconds = time.perf_counter() - start
    if problem is None and "internal error" in err.getvalue():
        problem = err.getvalue().strip()[:300]
    elif problem is None and code not in (0, 1, 2):
        problem = f"exit code {code}"
    elif problem is None and code == 2 and len(err.getvalue().strip().splitlines()) != 1:
        problem = f"exit 2 without a one-line error: {err.getvalue()[:300]!r}"
    return Outcome(path.name, mode, code, seconds, problem)
