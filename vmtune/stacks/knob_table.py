"""The one table of each stack's knobs: for a rule, the setting in the stack's own terms that
cures its finding, structured so that the same row drives the advice on XML the stack generated
(vmtune.manager_advice), the placement of findings on the stack's source, and the fix written there.

Each stack's rows live beside its front end, in the module its declaration names (`knobs`, see
vmtune.stacks.registry): `ROWS`, rule code -> alternatives, the first being the fix; `NO_KNOB`,
rule code -> why the stack offers none; optionally `SAID_ON`, rule code -> (object, key) where a
finding without a knob is said when not on the front end's usual object.
"""

from __future__ import annotations

from vmtune.record import Record


class Knob(Record):
    """Where a stack's setting cures a rule's finding.

    `on`: the object that carries it. KubeVirt: "vmi" (the VMI spec inside a VirtualMachine,
    VirtualMachineInstance, pool or template), "preference", "instancetype"; nova: "flavor",
    "image", "nova.conf". `path`: KubeVirt: keys below the VMI spec (("domain", "devices",
    "networkInterfaceMultiqueue")), "[]" for each item of a list; a flavor's extra spec or an
    image's property: (key,); nova.conf: (section, option). `value`: what cures the finding
    (True, {}, "virtio", 1024, a mapping to merge); None when it depends on the guest (advice
    only, never a fix). `text`: the advice as a sentence."""

    __slots__ = ("on", "path", "text", "value")

    def __init__(self, on: str, path: tuple[str, ...], value: object, text: str) -> None:
        self.on = on
        self.path = path
        self.value = value
        self.text = text


_TABLES: dict[str, tuple[dict[str, tuple[Knob, ...]], dict[str, str], dict[str, tuple[str, str]]]] = {}


def _table(stack: str) -> tuple[dict[str, tuple[Knob, ...]], dict[str, str], dict[str, tuple[str, str]]]:
    """A stack's ROWS, NO_KNOB and SAID_ON, looked up once per run: a front end asks at each finding
    it places (~5 a flavor × image pair), and the registry's import lookup cost ~13 us each time."""
    table = _TABLES.get(stack)
    if table is None:
        from vmtune.stacks.registry import by_name

        declared = by_name(stack)
        if declared is None or declared.knobs is None:
            table = ({}, {}, {})
        else:
            module = declared.part(declared.knobs)
            table = (module.ROWS, module.NO_KNOB, getattr(module, "SAID_ON", {}))
        _TABLES[stack] = table
    return table


def rows(stack: str) -> tuple[dict[str, tuple[Knob, ...]], dict[str, str]]:
    """A stack's rows and its no-knob reasons (its front end's `knobs` module, vmtune.stacks.registry),
    imported when first asked for; none for a stack without a table."""
    table = _table(stack)
    return table[0], table[1]


def said_on(stack: str) -> dict[str, tuple[str, str]]:
    """Where a stack says its findings without a knob, when not at its usual place (SAID_ON)."""
    return _table(stack)[2]


def knobs(stack: str, code: str) -> tuple[Knob, ...]:
    """The stack's knobs for a rule, the fix first; () when it has none."""
    return rows(stack)[0].get(code, ())
