"""OpenStack: flavors, images and nova.conf, rendered as nova writes the domain. The front end's
declaration (vmtune.stacks.registry); its parts: detect.py, frontend.py, knobs_rows.py, and
novaconf.py, which reads and edits nova.conf."""

from __future__ import annotations

from typing import Any

from vmtune.stacks.registry import FrontEnd


def settings(request: Any) -> list[tuple[str, str]]:
    """The flavor × image pairs to check (--pair FLAVOR:IMAGE); none: every pair."""
    from vmtune.errors import VmtuneError

    pairs = []
    for text in request.pairs or []:
        flavor, colon, image = text.partition(":")
        if not colon or not flavor or not image:
            raise VmtuneError(f"--pair {text!r}: write FLAVOR:IMAGE")
        pairs.append((flavor, image))
    return pairs


FRONTEND = FrontEnd("openstack", title="OpenStack", stack_title="nova", walked=(".yaml", ".yml"),
                    named=(".json", ".conf"), own_format=(".conf",), editor="novaconf", knobs="knobs_rows",
                    settings=settings,
                    printed="printed by the openstack client: --fix does not edit it; run the command each "
                            "finding names (openstack … set --property …)",
                    notes={"STK001": ("frontend.pairs",),
                           "STK002": ("frontend.pairs", "frontend.render"),
                           "STK003": ("frontend.key_notes",),
                           "STK004": ("frontend.render_pair",)})
