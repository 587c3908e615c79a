"""libvirt's scaled integers (memory sizes) and cpuset strings."""

from __future__ import annotations

_KIB_PER_UNIT = {
    "b": 1 / 1024, "bytes": 1 / 1024,
    "k": 1, "kib": 1,
    "kb": 1000 / 1024,
    "m": 1024, "mib": 1024, "mb": 1000**2 / 1024,
    "g": 1024**2, "gib": 1024**2, "gb": 1000**3 / 1024,
    "t": 1024**3, "tib": 1024**3, "tb": 1000**4 / 1024,
}


def to_kib(value: str | None, unit: str | None = None) -> int | None:
    """'4', 'GiB' -> 4194304. libvirt's default unit for memory is KiB."""
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return None
    factor = _KIB_PER_UNIT.get((unit or "KiB").strip().lower())
    return None if factor is None else int(number * factor)


def parse_size(text: str) -> int:
    """Policy sizes like '8GiB', '512 MiB' or a bare KiB count -> KiB."""
    stripped = text.strip()
    digits = len(stripped) - len(stripped.lstrip("0123456789"))
    kib = to_kib(stripped[:digits], stripped[digits:].strip() or "KiB")
    if not digits or kib is None:
        raise ValueError(f"not a size: {text!r}")
    return kib


def parse_cpuset(text: str | None) -> frozenset[int] | None:
    """libvirt cpuset syntax: '0-3,^2,8' -> {0,1,3,8}. None when unparseable."""
    if text is None:
        return None
    include: set[int] = set()
    exclude: set[int] = set()
    try:
        for part in text.replace(" ", "").split(","):
            if not part:
                continue
            target = exclude if part.startswith("^") else include
            part = part.lstrip("^")
            if "-" in part:
                low, high = part.split("-", 1)
                target.update(range(int(low), int(high) + 1))
            else:
                target.add(int(part))
    except ValueError:
        return None
    return frozenset(include - exclude)


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
    for unit, size in (("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024)):
        if kib >= size:
            value = kib / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{kib} KiB"
