"""`vmtune render`: the domain XML vmtune renders from KubeVirt manifests and OpenStack flavors ×
images, the XML `vmtune check` judges (vmtune.stacks). A user compares it with what the stack
wrote (`virsh dumpxml` in the virt-launcher pod, on the nova compute node) to see where vmtune's
view of the VM differs from the VM that runs.

Each domain is printed after comment lines that say where it came from (object, file and line,
the release whose behaviour the rendering follows, the OS it is judged as) and what vmtune had to
assume or did not see (the front end's STK notes): names and messages come from the input and are
escaped (vmtune.escape.xml_comment). An object the stack refuses (STK004) has no domain: its
comments say so and no XML follows.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from vmtune.errors import InputError, VmtuneError

if TYPE_CHECKING:
    from vmtune.stacks.frontend import Rendered

REFUSED = "STK004"


def header(item: Rendered) -> list[str]:
    """The comment lines before one rendered domain."""
    from vmtune.escape import xml_comment

    judged = ""
    if item.os_id or item.os_family:
        judged = f"; judged as a {item.os_family or 'guest'}" + (f" guest ({item.os_id})" if item.os_id else " guest")
    said = f"{item.name} ({item.source}:{item.line}), as {item.release} writes it{judged}"
    lines = [f"<!-- vmtune render: {xml_comment(said)} -->"]
    for note in item.notes:
        lines.append(f"<!-- {xml_comment(f'{note.code} {note.source}:{note.line}: {note.message}')} -->")
    if any(note.code == REFUSED for note in item.notes):
        lines.append("<!-- the stack refuses this object: it writes no domain for it -->")
    return lines


def rendered_text(item: Rendered) -> str:
    """One domain as printed: its header, then its XML (none for a refused object)."""
    from vmtune.escape import xml_visible

    text = "\n".join(header(item)) + "\n"
    if not any(note.code == REFUSED for note in item.notes):
        xml = item.xml.decode("utf-8")
        text += xml_visible(xml if xml.endswith("\n") else xml + "\n")
    return text


def run_render(paths: list[str], kubevirt_version: str | None, pairs: list[str], instancetypes: list[str],
               skip_non_domain: bool, isolated: bool, out: TextIO | None = None) -> int:
    """Print every domain the stack sources under `paths` render to; 0, or 2 after any input
    error (one line each on stderr; the domains that rendered are printed)."""
    from vmtune.commands.check import _is_stack_source, _walked
    from vmtune.request import CheckRequest
    from vmtune.sources import iter_sources
    from vmtune.stacks.frontend import load_and_render, no_definition

    out = out or sys.stdout
    if not paths:
        print("vmtune: nothing to render: give files, directories or '-'", file=sys.stderr)
        return 2
    errors: list[InputError] = []
    try:
        sources = list(iter_sources(paths, None, None,
                                    lambda source, reason: errors.append(InputError(source, None, reason)), isolated,
                                    _walked(paths)))
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return 2
    stack = []
    for source in sources:
        if _is_stack_source(source):
            stack.append(source)
        elif source.explicit and not skip_non_domain:
            errors.append(InputError(source.name, None, "domain XML: nothing to render (vmtune check reads it as "
                                                        "it is; --skip-non-domain skips such files)"))
    request = CheckRequest(paths=paths, kubevirt_version=kubevirt_version, pairs=pairs, instancetypes=instancetypes,
                           isolated=isolated, skip_non_domain=skip_non_domain)
    loaded = load_and_render(stack, request, errors) if stack else None
    if loaded is not None:
        files, rendered, claimed, _context = loaded
        for stack_file in files:
            if stack_file.name not in claimed and stack_file.explicit and not skip_non_domain:
                errors.append(InputError(stack_file.name, None, f"{no_definition()} (--skip-non-domain skips "
                                                                "such files)"))
        for item in rendered:
            out.write(rendered_text(item))
    out.flush()
    for error in errors:
        print(f"vmtune: {error}", file=sys.stderr)  # str() escapes the names (VmtuneError.__str__)
    return 2 if errors else 0
