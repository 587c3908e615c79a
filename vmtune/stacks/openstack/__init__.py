"""OpenStack: flavors, images and nova.conf, rendered as nova writes the domain. The front end's
declaration (vmtune.stacks.registry); its parts: detect.py, frontend.py, knobs_rows.py, and
novaconf.py, which reads and edits nova.conf."""

from __future__ import annotations

from typing import Any

from vmtune.stacks.registry import FrontEnd


class Settings:
    """What the command line tells the OpenStack front end: the flavor × image pairs to check
    (--pair FLAVOR:IMAGE; none: every pair) and the compute node nova places them on (--host:
    its NUMA cells, CPUs and page pools replace the assumed node's)."""

    __slots__ = ("host", "not_placed", "pairs", "problems")

    def __init__(self, pairs: list[tuple[str, str]] | None = None, host: Any = None,
                 not_placed: str | None = None) -> None:
        self.pairs: list[tuple[str, str]] = pairs or []
        self.host = host  # vmtune.stacks.openstack.render.NodeHost, or None: the assumed node
        self.not_placed = not_placed  # why --host's node could not be used (said on every pair)
        # a file that refused the renderings (vmtune.stacks.frontend._taken_problems says it)
        self.problems: list[Any] = []


def settings(request: Any) -> Settings:
    from vmtune.errors import VmtuneError

    pairs = []
    for text in request.pairs or []:
        flavor, colon, image = text.partition(":")
        if not colon or not flavor or not image:
            raise VmtuneError(f"--pair {text!r}: write FLAVOR:IMAGE")
        pairs.append((flavor, image))
    node = not_placed = None
    if request.host is not None:
        from vmtune.facts.host import load_host
        from vmtune.stacks.openstack.render import NodeHost

        facts = load_host(str(request.host), str(request.domcaps) if request.domcaps else None)
        node = NodeHost.from_facts(facts, str(request.host)) if facts is not None else None
        if node is None:  # the domain rules still use it; only nova's placement cannot
            not_placed = (f"--host {request.host} lists no NUMA cell with CPUs, which nova places a guest by: "
                          "placed on the assumed compute node")
    return Settings(pairs, node, not_placed)


FRONTEND = FrontEnd("openstack", title="OpenStack", stack_title="nova", walked=(".yaml", ".yml"),
                    named=(".json", ".conf"), own_format=(".conf",), editor="novaconf", knobs="knobs_rows",
                    settings=settings,
                    printed="printed by the openstack client: --fix does not edit it; run the command each "
                            "finding names (openstack … set --property …)",
                    notes={"STK001": ("frontend.pairs",),
                           "STK002": ("frontend.pairs", "frontend.render"),
                           "STK003": ("frontend.key_notes",),
                           "STK004": ("frontend.render_pair",)})
