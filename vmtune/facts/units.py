"""Numbers, scaled sizes and cpusets read from untrusted XML: one validated way, bounded cost.

Every reader accepts ASCII digits only (Python's int() and str.isdigit() take '²' or '٣'),
refuses values beyond what libvirt itself accepts, and never builds anything whose size the
input chooses: a cpuset is parsed as ranges and checked against MAX_CPU_ID before it is
expanded. Readers raise InvalidValue with the reason; the `*_or_none` forms return None, which
facts treat as "not set" (rule VAL001 reports the value itself).
"""

from __future__ import annotations

import re

# libvirt's VIR_DOMAIN_CPUMASK_LEN: a cpuset names CPUs 0..16383 at most (virBitmapParse refuses more).
MAX_CPU_ID = 16383
# The vCPU count libvirt's parser takes; QEMU's own limit (4096 on q35) is lower still.
MAX_VCPUS = 16384
# libvirt's VIR_DOMAIN_MEMORY_PARAM_UNLIMITED: the largest memory size virDomainParseMemory accepts, in KiB.
MAX_MEMORY_KIB = 2**53 - 1
UINT_MAX = 2**32 - 1  # an unsigned int in libvirt's parser (queues, retries, ids, counts)
ULLONG_MAX = 2**64 - 1
# Patterns in this module and the facts and rules a check loads are compiled at their first use
# (re's own cache), not at import: a one-file check never uses most, and compiling the seven
# cost 6 M instructions, 3 % of its start (docs/benchmarks.md, issue 45).
_HEX = r"0[xX][0-9a-fA-F]{1,16}"

# unit -> (numerator, denominator) of KiB per unit: integer arithmetic, no float overflow.
_KIB_PER_UNIT = {
    "b": (1, 1024), "bytes": (1, 1024),
    "k": (1, 1), "kib": (1, 1),
    "kb": (1000, 1024),
    "m": (1024, 1), "mib": (1024, 1), "mb": (1000**2, 1024),
    "g": (1024**2, 1), "gib": (1024**2, 1), "gb": (1000**3, 1024),
    "t": (1024**3, 1), "tib": (1024**3, 1), "tb": (1000**4, 1024),
    "p": (1024**4, 1), "pib": (1024**4, 1), "pb": (1000**5, 1024),
    "e": (1024**5, 1), "eib": (1024**5, 1), "eb": (1000**6, 1024),
}


class InvalidValue(ValueError):
    """A value libvirt would not accept; the message says why, for a finding or an error."""


def parse_uint(text: str | None, maximum: int = UINT_MAX, *, base16: bool = False) -> int:
    """'12' -> 12. ASCII decimal digits (or 0x hex with base16), at most `maximum`."""
    if text is None:
        raise InvalidValue("missing")
    value = text.strip()
    if base16 and re.fullmatch(_HEX, value):
        number = int(value, 16)
    # ASCII digits only (isdigit alone takes '²'); 20 digits, the longest uint64: more is invalid
    # before int() sees it.
    elif value.isascii() and value.isdigit() and len(value) <= 20:
        number = int(value)
    else:
        raise InvalidValue(f"'{_shown(value)}' is not a non-negative integer")
    if number > maximum:
        raise InvalidValue(f"{_shown(value)} is above the maximum {maximum}")
    return number


def uint_or_none(text: str | None, maximum: int = UINT_MAX, *, base16: bool = False) -> int | None:
    if not text:  # most calls (an absent attribute, an empty element): no InvalidValue raised and
        return None  # caught for them, ~4,000 instructions each, ~9,600 times in the corpus-2000 run
    try:
        return parse_uint(text, maximum, base16=base16)
    except InvalidValue:
        return None


def parse_kib(value: str | None, unit: str | None = None, maximum: int = MAX_MEMORY_KIB) -> int:
    """'4', 'GiB' -> 4194304 (libvirt's default unit for memory is KiB), rounding bytes up."""
    number = parse_uint(value, ULLONG_MAX)
    factor = _KIB_PER_UNIT.get((unit or "KiB").strip().lower())
    if factor is None:
        raise InvalidValue(f"unknown unit '{_shown(unit or '')}'")
    numerator, denominator = factor
    kib = -(-number * numerator // denominator)
    if kib > maximum:
        raise InvalidValue(f"{_shown(value or '')} {unit or 'KiB'} is above libvirt's maximum of {maximum} KiB")
    return kib


def to_kib(value: str | None, unit: str | None = None) -> int | None:
    """parse_kib, or None when absent or invalid."""
    if value is None:
        return None
    try:
        return parse_kib(value, unit)
    except InvalidValue:
        return None


def parse_size(text: str) -> int:
    """Policy sizes like '8GiB', '512 MiB' or a bare KiB count -> KiB."""
    stripped = text.strip()
    digits = len(stripped) - len(stripped.lstrip("0123456789"))
    kib = to_kib(stripped[:digits], stripped[digits:].strip() or "KiB")
    if not digits or kib is None:
        raise ValueError(f"not a size: {text!r}")
    return kib


def parse_cpuset_ranges(text: str | None, max_id: int = MAX_CPU_ID) -> tuple[tuple[int, int], ...]:
    """libvirt cpuset syntax as sorted, disjoint, inclusive ranges: '0-3,^2,8' -> ((0,1),(3,3),(8,8)).

    Nothing is expanded: the cost is linear in the length of the text, whatever ranges it names."""
    if text is None:
        raise InvalidValue("missing")
    include: list[tuple[int, int]] = []
    exclude: list[tuple[int, int]] = []
    parts = [p for p in text.replace(" ", "").split(",") if p]
    if not parts:
        raise InvalidValue("empty cpuset")
    for part in parts:
        target = exclude if part.startswith("^") else include
        low_text, _, high_text = part.lstrip("^").partition("-")
        low = parse_uint(low_text, max_id)
        high = parse_uint(high_text, max_id) if high_text else low
        if high < low:
            raise InvalidValue(f"range '{_shown(part)}' runs backwards")
        target.append((low, high))
    ranges = _subtract(_merge(include), _merge(exclude))
    if not ranges:
        raise InvalidValue(f"cpuset '{_shown(text)}' names no CPU")
    return ranges


def parse_cpuset(text: str | None, max_id: int = MAX_CPU_ID) -> frozenset[int] | None:
    """'0-3,^2,8' -> {0,1,3,8}; None when absent or invalid. At most max_id+1 members."""
    if text is None:
        return None
    try:
        ranges = parse_cpuset_ranges(text, max_id)
    except InvalidValue:
        return None
    return frozenset(cpu for low, high in ranges for cpu in range(low, high + 1))


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return merged


def _subtract(ranges: list[tuple[int, int]], holes: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for low, high in ranges:
        for hole_low, hole_high in holes:
            if hole_high < low or hole_low > high:
                continue
            if hole_low > low:
                out.append((low, hole_low - 1))
            low = hole_high + 1
            if low > high:
                break
        if low <= high:
            out.append((low, high))
    return tuple(out)


def format_cpuset(cpus: frozenset[int] | set[int]) -> str:
    """{0,1,2,5} -> '0-2,5'."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)


def human_kib(kib: int) -> str:
    for unit, size in (("PiB", 1024**4), ("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024)):
        if kib >= size:
            whole, rest = divmod(kib, size)
            return f"{whole} {unit}" if not rest else f"{whole + rest / size:.1f} {unit}"
    return f"{kib} KiB"


def _shown(text: str) -> str:
    """A value as an error message quotes it: a 5,000-digit number is not echoed whole."""
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
