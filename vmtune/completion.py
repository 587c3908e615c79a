"""Values for shell completion: rule codes and names, and live domain names.

Imported only when the shell asks (typer's `_VMTUNE_COMPLETE=complete_bash ... vmtune`, set
up by `vmtune --install-completion`); a failure here must never print a traceback into the
user's prompt, so every function degrades to "no suggestions".
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def rule_selectors(incomplete: str) -> list[tuple[str, str]]:
    """Rule codes (with their name as the help), or names when the word is lower case, for
    `--select`/`--ignore`, which take comma-separated lists: `CLK001,HV` completes the last item."""
    from vmtune.rules import BUILTIN_RULES

    head, comma, last = incomplete.rpartition(",")
    keep = head + comma
    by_code = [(keep + r.code, r.name) for r in BUILTIN_RULES if r.code.startswith(last.upper())]
    if last and last.islower():  # `--select hyperv-` completes names, `--select hv` codes and names
        by_code += [(keep + r.name, r.code) for r in BUILTIN_RULES if r.name.startswith(last)]
    return by_code


def rules(incomplete: str) -> list[tuple[str, str]]:
    """For `vmtune rule CODE`: one rule, by code or name."""
    return rule_selectors(incomplete.rpartition(",")[2])


def domain_names(uris: list[str], incomplete: str) -> list[str]:
    """Names of the domains of these libvirt URIs (or the default one) starting with `incomplete`,
    as `virsh` completes them: read-only connections, nothing printed on failure. A URI that would
    run a program (vmtune.live.uri: the ext transport, command=, netcat=) is skipped, even with
    --allow-command-uri on the line and even as LIBVIRT_DEFAULT_URI: a TAB never starts one."""
    from vmtune.live.uri import runs_program

    try:
        from vmtune.live.connection import default_uri, libvirt_module

        libvirt = libvirt_module()
    except Exception:  # libvirt-python is optional: no live names without it
        return []
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # libvirt would print to stderr
    names: set[str] = set()
    given: list[str | None] = list(uris) or [default_uri()]
    targets = [uri for uri in given if uri is None or runs_program(uri) is None]
    with _quiet_stderr():  # libxml2 and drivers also write there directly, into the user's prompt
        for uri in targets:
            names.update(_names(libvirt, uri))
    return sorted(name for name in names if name.startswith(incomplete))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _names(libvirt: Any, uri: str | None) -> list[str]:
    conn: Any = None
    try:
        conn = libvirt.openReadOnly(uri)
        return [dom.name() for dom in conn.listAllDomains(0)]
    except Exception:
        return []
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

