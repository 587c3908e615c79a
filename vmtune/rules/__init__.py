"""The rule registry: every built-in rule, by code and by name."""

from __future__ import annotations

import copyreg
from collections.abc import Callable

from vmtune.rules import (
    clock,
    cpu,
    disk,
    guestcpu,
    hostrules,
    hyperv,
    interrupts,
    latency,
    limits,
    memory,
    netdriver,
    network,
    numa,
    paravirt,
    pci,
    placement,
    realtime,
    refused,
    stackinput,
    storage,
    suppression,
    topology,
    usb,
    values,
    virtioswitches,
)
from vmtune.rules.base import Rule, current

BUILTIN_RULES: tuple[Rule, ...] = tuple(
    sorted(
        (*clock.RULES, *hyperv.RULES, *cpu.RULES, *memory.RULES, *latency.RULES, *network.RULES,
         *disk.RULES, *usb.RULES, *pci.RULES, *suppression.RULES, *placement.RULES, *hostrules.RULES,
         *topology.RULES, *values.RULES, *storage.RULES, *numa.RULES, *realtime.RULES,
         *netdriver.RULES, *limits.RULES, *paravirt.RULES, *refused.RULES, *interrupts.RULES, *stackinput.RULES,
         *guestcpu.RULES, *virtioswitches.RULES),
        key=lambda r: (r.area, r.code),
    )
)
BY_CODE: dict[str, Rule] = {r.code: r for r in BUILTIN_RULES}
BY_NAME: dict[str, Rule] = {r.name: r for r in BUILTIN_RULES}


def by_code(code: str) -> Rule:
    return BY_CODE[code]


def _pickled(rule: Rule) -> tuple[Callable[[str], Rule], tuple[str]]:
    return (by_code, (rule.code,))


# Rules are the registry's singletons: a finding sent to or from a worker process (`check -j`)
# names its rule by code and gets the registry's rule there. Said here, by the registry, rather
# than by Rule.__reduce__, which would have the base class import the registry that imports it.
for _rule in BUILTIN_RULES:
    copyreg.pickle(type(_rule), _pickled)


def lookup(key: str) -> Rule | None:
    """A rule by code (HV002), renamed code (vmtune.rules.base.RENAMED) or name (hyperv-dependency-broken),
    case-insensitive code."""
    return BY_CODE.get(current(key.upper())) or BY_NAME.get(key)
