"""libvirt URIs that run a program: refused unless `--allow-command-uri` says the caller means it.

A libvirt URI usually names a place to connect to: a local driver, a Unix socket, a host over TLS
or ssh. A few parts of it name a program instead (libvirt's docs/uri.rst, "Transport
configuration"):

- the `ext` transport (`qemu+ext://`, any `DRIVER+ext`) runs the program of its `command=`
  parameter on this machine and speaks the RPC protocol over its stdin/stdout;
- `command=` is also, for the `ssh` transport, the ssh binary libvirt runs on this machine;
- `netcat=` is the program libvirt has ssh run on the far host, which is this machine for
  `qemu+ssh://localhost/...`.

A URI on vmtune's command line can come from somewhere the user did not read (a script, a
wrapper, once a file name taken as an option), so these are refused with one line (exit 2) unless
`--allow-command-uri` is given. What the other parameters do stays libvirt's: `socket=` only
connects to a socket, `mode=`/`proxy=` choose among libvirt's own daemons and helpers, `keyfile=`,
`known_hosts=` and `pkipath=` name files. LIBVIRT_DEFAULT_URI, libvirt.conf's `uri_default` and
its aliases are the user's own settings, as every libvirt client reads them: vmtune opens them as
given, except for shell completion, which never opens a URI that runs a program (a TAB must not
start one).

libvirt splits the query on `&` and `;`, unescapes `%XX` in names and values and compares names
and the transport without regard to case; this module reads a URI the same way, and reads
everything after the first `?` as the query (a `#` ends a parameter here, so a URI libvirt would
read with a fragment is refused when any reading of it names a program).
"""

from __future__ import annotations

from vmtune.errors import VmtuneError

ALLOW_FLAG = "--allow-command-uri"
PROGRAM_PARAMETERS = ("command", "netcat")


def _unescaped(text: str) -> str:
    """`%XX` decoded as libxml2's xmlURIUnescapeString does (bytes, then UTF-8 with replacement)."""
    from urllib.parse import unquote

    return unquote(text, errors="replace")


def runs_program(uri: str) -> str | None:
    """Why opening `uri` would make libvirt run a program it names, or None when it names none."""
    scheme, colon, _rest = uri.partition(":")
    if colon and "+" in scheme and scheme.partition("+")[2].strip().lower() == "ext":
        return "the ext transport runs the program of its command= parameter"
    _before, question, query = uri.partition("?")
    if not question:
        return None
    for item in query.replace(";", "&").replace("#", "&").split("&"):
        name = _unescaped(item.partition("=")[0]).strip().lower()
        if name == "command":
            return "command= names a program libvirt runs on this machine"
        if name == "netcat":
            return "netcat= names a program libvirt runs on the host ssh logs in to"
    return None


def refuse_program_uri(uri: str | None, allowed: bool) -> None:
    """Raise (one line, exit 2) when `uri`, given on the command line, would run a program and
    `--allow-command-uri` was not given."""
    if uri is None or allowed:
        return
    reason = runs_program(uri)
    if reason is not None:
        raise VmtuneError(f"refused: {reason}; give {ALLOW_FLAG} if you mean it", uri)
