"""Opening libvirt connections and reading host facts from them."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

from vmtune.errors import VmtuneError
from vmtune.facts.host import Host, apply_capabilities, apply_domcapabilities
from vmtune.xml.safe import parse_xml

INSTALL_HINT = ("live domains need libvirt-python: pip install libvirt-python (it builds against libvirt-dev and "
                "pkg-config), or pip install '.[live]' in a vmtune checkout")
# How long one libvirt call may go unanswered before vmtune gives up on the daemon: libvirt's
# client waits forever for a daemon that accepted the connection and stopped answering (SIGSTOP,
# a deadlock, a dead NFS mount under a disk it stats).
CALL_TIMEOUT = 30.0
TIMEOUT_VARIABLE = "VMTUNE_LIBVIRT_TIMEOUT"  # overrides CALL_TIMEOUT (seconds)
T = TypeVar("T")
_event_loop_started = False
_event_lock = threading.Lock()


def libvirt_module() -> Any:
    try:
        import libvirt
    except ImportError:
        raise VmtuneError(INSTALL_HINT) from None
    return libvirt


def _ensure_event_loop(libvirt: Any) -> None:
    """The embedded QEMU driver needs a running event loop in the process; apply needs one to hear
    libvirt announce defines (apply.DefineWatch), and remote connections then get keepalive."""
    global _event_loop_started
    with _event_lock:
        if _event_loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                libvirt.virEventRunDefaultImpl()

        threading.Thread(target=run, name="libvirt-events", daemon=True).start()
        _event_loop_started = True


def call_timeout() -> float:
    try:
        value = float(os.environ.get(TIMEOUT_VARIABLE, CALL_TIMEOUT))
    except ValueError:
        return CALL_TIMEOUT
    return value if 0 < value < 86400 else CALL_TIMEOUT


def bounded(call: Callable[[], T], doing: str, label: str, timeout: float | None = None) -> T:
    """call() in a thread, waiting at most `timeout` seconds (default call_timeout()). The thread
    is a daemon thread, so an abandoned call does not keep the process alive."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="vmtune-libvirt-call", daemon=True)
    timeout = call_timeout() if timeout is None else timeout
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise VmtuneError(f"{doing}: libvirt did not answer within {timeout:g} s", label)
    if "error" in box:
        error = box["error"]
        if type(error).__name__ == "libvirtError":
            raise VmtuneError(f"{doing}: {libvirt_error(error)}", label) from None
        raise error
    return box["value"]  # type: ignore[no-any-return]


def keepalive(timeout: float) -> tuple[int, int]:
    """libvirt's keepalive (interval, count) that closes a connection whose daemon answered
    nothing for about `timeout` seconds: libvirt gives up after interval * (count + 1)."""
    interval = max(1, round(timeout / 3))
    return interval, 2


def default_uri() -> str | None:
    return os.environ.get("LIBVIRT_DEFAULT_URI") or None


def open_connection(uri: str | None) -> Any:
    libvirt = libvirt_module()
    _ensure_event_loop(libvirt)  # before the open: a connection binds to the loop it finds
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors come back as exceptions
    timeout = call_timeout()
    # The open itself is bounded: a stopped daemon's socket still accepts, then never answers.
    conn = bounded(lambda: libvirt.open(uri), "cannot connect", uri or "(default URI)", timeout)
    # Every later call on a remote connection is bounded by keepalive: libvirt closes the
    # connection and the waiting call fails (one line through libvirt_faults). Drivers in this
    # process (test:///, qemu:///embed) have no daemon to hang and refuse keepalive.
    with contextlib.suppress(libvirt.libvirtError):
        conn.setKeepAlive(*keepalive(timeout))
    return conn


class DomainGoneError(VmtuneError):
    """The domain is not (or no longer) defined: `apply --all` skips it and goes on."""


@contextlib.contextmanager
def libvirt_faults(label: str, doing: str) -> Iterator[None]:
    """Turn a libvirtError into one line naming the domain (exit 2): a daemon killed, a connection
    broken, a domain undefined by someone else while vmtune worked."""
    libvirt = libvirt_module()
    try:
        yield
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            raise DomainGoneError(f"{doing}: no longer defined ({libvirt_error(exc)})", label) from None
        raise VmtuneError(f"{doing}: {libvirt_error(exc)}", label) from None


def libvirt_error(exc: Exception) -> str:
    getter = getattr(exc, "get_error_message", None)
    message = (getter() if getter else None) or str(exc)
    if "keepalive timeout" in message:  # libvirt closed a connection whose daemon stopped answering
        return f"libvirt did not answer within {call_timeout():g} s"
    return str(message)


def host_name(conn: Any) -> str:
    try:
        return str(conn.getURI())
    except Exception:
        return "libvirt"


def host_facts(conn: Any, arch: str | None = None, virttype: str | None = None) -> Host:
    """Capabilities, domain capabilities for the guests' arch/type, free hugepages per node."""
    host = Host(name=host_name(conn))
    apply_capabilities(host, parse_xml(conn.getCapabilities().encode(), f"{host.name} capabilities"))
    with contextlib.suppress(Exception):  # drivers without node info leave the memory unknown
        host.node_memory_kib = int(conn.getInfo()[1]) * 1024  # MiB
    if host.cells:
        try:
            free = conn.getFreePages([2048], 0, len(host.cells))
            if free:
                host.free_2m_pages = {int(node): int(sizes.get(2048, 0)) for node, sizes in free.items()}
        except Exception:
            pass  # drivers without free-page accounting (test) leave the pool sizes to judge by
    try:
        domcaps = conn.getDomainCapabilities(None, arch or host.arch, None, virttype)
        apply_domcapabilities(host, parse_xml(domcaps.encode(), f"{host.name} domcapabilities"))
    except Exception:
        pass  # the test driver and older daemons have no domcapabilities; rules then assume the defaults
    return host


# What a lookup key is: a UUID vmtune read, a name libvirt gave, or what a user typed (either).
LookupBy = Literal["any", "name", "uuid"]
# A UUID as libvirt formats it. libvirt's own parser also takes surrounding spaces, so a domain
# named " <another domain's UUID>" would be found through the UUID lookup.
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")


def lookup_domain(conn: Any, key: str, by: LookupBy = "any") -> Any:
    """The domain named key, else (`any`, for what a user typed) the one whose UUID it is.
    vmtune's own lookups say which they mean: a UUID it read (`uuid`: re-reads, verification,
    the Ansible modules, `apply --all`) or a name libvirt gave (`name`: plan). Name first, a domain
    someone named after another's UUID was the one found and redefined instead; by UUID, one named
    with spaces around another's UUID. A key typed by a user that is both one domain's name and
    another's UUID is refused as ambiguous: either domain could be the one meant."""
    libvirt = libvirt_module()
    lookups = {"name": (conn.lookupByName,), "uuid": (conn.lookupByUUIDString,),
               "any": (conn.lookupByName,) + ((conn.lookupByUUIDString,) if _UUID.fullmatch(key) else ())}[by]
    found = []
    for lookup in lookups:
        try:
            found.append(lookup(key))
        except libvirt.libvirtError as exc:  # not found, or not a UUID: try the other lookup
            if exc.get_error_code() not in (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_INVALID_ARG):
                raise VmtuneError(f"cannot look up domain '{key}': {libvirt_error(exc)}", host_name(conn)) from None
    if len(found) == 2 and found[0].UUIDString() != found[1].UUIDString():
        named, other = found
        raise VmtuneError(f"'{key}' is the name of the domain with UUID {named.UUIDString()} and the UUID of the "
                          f"domain named '{other.name()}': give that UUID or that name", host_name(conn))
    if found:
        return found[0]
    raise DomainGoneError(f"no such domain '{key}'", host_name(conn))


def all_domains(conn: Any) -> list[Any]:
    with libvirt_faults(host_name(conn), "cannot list the domains"):
        return sorted(conn.listAllDomains(0), key=lambda d: d.name())


def persistent_xml(domain: Any, secure: bool = True) -> str:
    """The definition as `virsh edit` sees it: inactive, with secrets (so a redefine keeps them)."""
    libvirt = libvirt_module()
    flags = libvirt.VIR_DOMAIN_XML_INACTIVE | (libvirt.VIR_DOMAIN_XML_SECURE if secure else 0)
    return str(domain.XMLDesc(flags))
