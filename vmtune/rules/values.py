"""Values libvirt's parser would refuse: numbers, sizes and cpusets read defensively."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import MAX_VCPUS, InvalidValue, parse_cpuset_ranges, parse_kib, parse_uint
from vmtune.rules.base import Context, Finding, Rule, Severity

Reader = Callable[[str, etree._Element], object]


def _uint(text: str, element: etree._Element) -> object:
    return parse_uint(text)


def _vcpus(text: str, element: etree._Element) -> object:
    return parse_uint(text, MAX_VCPUS)


def _cpuset(text: str, element: etree._Element) -> object:
    return parse_cpuset_ranges(text)


def _size(text: str, element: etree._Element) -> object:
    return parse_kib(text, element.get("unit"))


# (element path from <domain>, attribute or None for the text, reader): every place a rule reads
# a number, a size or a cpuset from. Facts treat an invalid value as absent; this rule says so.
LOCATIONS: tuple[tuple[str, str | None, Reader], ...] = (
    ("vcpu", None, _vcpus), ("vcpu", "current", _vcpus), ("vcpu", "cpuset", _cpuset),
    ("iothreads", None, _uint), ("iothreadids/iothread", "id", _uint),
    ("cputune/vcpupin", "vcpu", _vcpus), ("cputune/vcpupin", "cpuset", _cpuset),
    ("cputune/emulatorpin", "cpuset", _cpuset),
    ("cputune/iothreadpin", "iothread", _uint), ("cputune/iothreadpin", "cpuset", _cpuset),
    ("numatune/memory", "nodeset", _cpuset), ("numatune/memnode", "nodeset", _cpuset),
    ("memory", None, _size), ("currentMemory", None, _size), ("maxMemory", None, _size),
    ("memtune/hard_limit", None, _size), ("memtune/soft_limit", None, _size),
    ("memoryBacking/hugepages/page", "size", _size),
    ("cpu/topology", "sockets", _vcpus), ("cpu/topology", "dies", _vcpus),
    ("cpu/topology", "cores", _vcpus), ("cpu/topology", "threads", _vcpus),
    ("cpu/numa/cell", "cpus", _cpuset), ("cpu/numa/cell", "memory", _size),
    ("features/hyperv/spinlocks", "retries", _uint),
    ("devices/interface/driver", "queues", _uint), ("devices/disk/driver", "queues", _uint),
    ("devices/disk/boot", "order", _uint), ("devices/interface/boot", "order", _uint),
    ("devices/controller", "index", _uint),
)

# Locations of plain tags are walked from the domain's indexes (no path compiled or walked per
# domain: _PLANS below); one written with more than plain tags (a predicate, '*', '.') goes
# through findall.
def _plain(where: str) -> bool:
    """Whether a location is plain tags joined by '/' (each `[A-Za-z_][\\w.-]*`). Not a regex: the
    locations are read once, at import, and compiling one cost ~0.9 M instructions of every start."""
    for step in where.split("/"):
        first, rest = step[:1], step[1:].replace(".", "").replace("-", "").replace("_", "")
        if not (first.isascii() and (first.isalpha() or first == "_")) or (rest and not rest.isalnum()):
            return False
    return True


# A value every reader of its kind accepts, known without calling the reader: ASCII digits, at
# most this many (so below the reader's maximum: 999,999,999 < UINT_MAX; 9,999 < MAX_VCPUS; a size
# of 999,999,999 GiB < libvirt's maximum; a cpuset of one CPU, 9,999 < MAX_CPU_ID) and, for a
# size, no unit or one of _PLAIN_UNITS. Most values are such (a controller index, a vCPU count, a
# memory size, a vCPU pinned to one CPU): the reader's two calls were most of VAL001's cost
# (issue 45: -26 M instructions checking corpus-2000; a cpuset's reader, ~10 K instructions,
# ~1.4 times a rendered KubeVirt domain). Anything else (a range, a list) goes through its reader.
_SURELY_VALID_DIGITS: dict[Reader, int] = {_uint: 9, _vcpus: 4, _size: 9, _cpuset: 4}
_PLAIN_UNITS = frozenset({None, "KiB", "k", "K", "MiB", "M", "GiB", "G"})  # at most 1024**2 KiB per unit

_OTHER_PATHS = tuple((where, attribute, read, _SURELY_VALID_DIGITS.get(read, 0))
                     for where, attribute, read in LOCATIONS if not _plain(where))


# The locations of plain tags by top-level element, in LOCATIONS order: (top, ((steps below it,
# its checks), ...)), neighbouring locations at the same path sharing one group (`vcpu`'s three,
# `cpu/topology`'s four). A domain pays a dict lookup for each absent top-level element, and a
# child index lookup per step of a group whose parents are there (the device index for a child
# of <devices>: Domain._devices_by_tag is its child index). The checks read the groups in
# LOCATIONS order, so findings keep their order. VAL001 runs on every domain: its own cost fell
# from ~113 K to ~81 K instructions a domain with a plan of shared prefixes (slots filled by a
# walk, then read), and to ~68 K with these groups (issue 45, corpus-2000).
Check = tuple[str | None, Reader, int]  # (attribute, or None for the text; reader; digits)


def _groups() -> tuple[tuple[str, tuple[tuple[tuple[str, ...], tuple[Check, ...]], ...]], ...]:
    plans: dict[str, list[tuple[tuple[str, ...], list[Check]]]] = {}
    for where, attribute, read in LOCATIONS:
        if not _plain(where):
            continue
        top, *below = where.split("/")
        groups = plans.setdefault(top, [])
        if not groups or groups[-1][0] != tuple(below):
            groups.append((tuple(below), []))
        groups[-1][1].append((attribute, read, _SURELY_VALID_DIGITS.get(read, 0)))
    return tuple((top, tuple((steps, tuple(checks)) for steps, checks in groups)) for top, groups in plans.items())


_GROUPS = _groups()


class ValueLibvirtRefuses(Rule):
    """
    ## What it checks
    A number, size or cpuset that libvirt's parser would refuse, in any place a vmtune rule
    reads one: vCPU counts and ids, I/O thread ids, cpusets and nodesets, memory sizes and
    their units, CPU topology, spinlock retries, queue counts, boot orders, controller
    indexes. Numbers are ASCII digits within libvirt's ranges (an unsigned int; vCPUs up to
    16384; memory up to libvirt's maximum of 2^53-1 KiB); a cpuset names CPUs 0-16383
    (libvirt's VIR_DOMAIN_CPUMASK_LEN) and no backwards range.

    ## Why it matters
    libvirt refuses to define the domain, so the file cannot be what runs. vmtune reads such
    a value as absent and every other rule still runs; this finding says where it is.

    ## Example
    ```xml
    <vcpu>²</vcpu>
    <vcpupin vcpu='0' cpuset='0-99999999999'/>
    ```

    ## Fix
    None: only the author knows the value meant.

    ## Calibration
    Error: libvirt's parser refuses the definition.
    Versions: libvirt 9.0's parser (the values it refuses are listed above).

    ## References
    - https://libvirt.org/formatdomain.html
    - libvirt `src/util/virbitmap.c` (`virBitmapParse`), `src/conf/domain_conf.c`
      (`virDomainParseMemory`, `VIR_DOMAIN_CPUMASK_LEN`)
    """

    code = "VAL001"
    name = "invalid-value"
    severity = Severity.ERROR

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        present = domain.top_tags
        for top, groups in _GROUPS:
            tops = present.get(top)
            if tops is None:  # most: no such top-level element
                continue
            for steps, checks in groups:
                elements = domain.below(tops, steps) if steps else tops  # a top-level value: no walk
                if not elements:  # most paths: nothing there, for any of its locations
                    continue
                for attribute, read, digits in checks:
                    for element in elements:  # inline: a generator per location costs more than most reads
                        text = element.get(attribute) if attribute else element.text
                        if text is None:
                            continue
                        if len(text) <= digits and text.isdigit() and text.isascii() \
                                and (read is not _size or element.get("unit") in _PLAIN_UNITS):
                            continue  # surely valid (see _SURELY_VALID_DIGITS)
                        try:
                            read(text, element)
                        except InvalidValue as exc:
                            yield self._finding(domain, element, attribute, exc)
        for where, attribute, read, _digits in _OTHER_PATHS:  # none today: a location not plain tags
            for element in domain.root.findall(where):
                text = element.get(attribute) if attribute else element.text
                if text is None:
                    continue
                try:
                    read(text, element)
                except InvalidValue as exc:
                    yield self._finding(domain, element, attribute, exc)

    def _finding(self, domain: Domain, element: etree._Element, attribute: str | None, exc: InvalidValue) -> Finding:
        label = f"<{element.tag} {attribute}>" if attribute else f"<{element.tag}>"
        return self.finding(domain, element, f"invalid value in {label}: {exc}")


RULES: list[Rule] = [ValueLibvirtRefuses()]
