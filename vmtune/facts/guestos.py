"""Which OS a domain runs, from the best evidence available: its libosinfo metadata, the
user's `--os`, then signals in the definition strong enough to say Windows.

One function decides for every OS-dependent rule, so they cannot disagree; the answer keeps
its provenance, so a finding can say what the OS was inferred from and how to override it.

Strong signals (enough on their own): Hyper-V enlightenments switched on and the
`hypervclock` timer. Only Windows (and Hyper-V guests) use them, and every stack writes them
for Windows only: virt-install (`virtinst/domain/features.py`, `clock.py`: `os.is_windows()`),
nova (`driver.py` `_set_features`/`_set_kvm_timers`: `os_type == 'windows'`), oVirt (the
engine's Windows OS types), Proxmox (`ostype win*`) and KubeVirt's Windows preferences.

Weak signals (never enough): a `localtime`/`timezone` clock (virt-install writes it for
Windows, but dual-boot and migrated physical Linux guests keep one, and Proxmox's
`localtime` option applies to any OS), `<kvm><hidden>` and a Hyper-V `vendor_id` (GPU
passthrough of any OS), emulated IDE/e1000 devices (any legacy OS). A definition that boots
a kernel directly (`<os><kernel>`) is not Windows whatever else it says.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol

    from lxml import etree

    class _Switch(Protocol):
        @property
        def on(self) -> bool: ...

    class Domain(Protocol):
        """What the inference reads of a domain (vmtune.facts.domain.Domain): described here, not
        imported, as the domain model imports this module (and vmtune.facts.creator) to decide."""

        @property
        def hyperv(self) -> etree._Element | None: ...
        @property
        def hyperv_mode(self) -> str: ...
        @property
        def hyperv_features(self) -> Mapping[str, _Switch]: ...
        @property
        def clock(self) -> etree._Element | None: ...
        def timer_present(self, name: str) -> bool | None: ...
        def top(self, tag: str) -> etree._Element | None: ...

# The guest OS families rules tell apart; vmtune.facts.domain and the rest read it from here.
OsFamily = Literal["windows", "linux", "other"]
OsSource = Literal["libosinfo", "--os", "tool", "definition"]

# Hyper-V children that are settings of a feature rather than enlightenments a guest uses:
# vendor_id is set to hide the hypervisor from GPU drivers on any OS.
_NOT_ENLIGHTENMENTS = frozenset({"vendor_id"})


class OsGuess:
    """The guest OS and how it was known. A value (a plain class: a NamedTuple costs ~0.15 ms
    to create at every start)."""

    __slots__ = ("evidence", "family", "source")

    def __init__(self, family: OsFamily | None, source: OsSource | None, evidence: tuple[str, ...] = ()) -> None:
        self.family = family
        self.source = source  # None: unknown
        self.evidence = evidence  # what in the definition said so (sources 'tool' and 'definition')

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OsGuess) and (self.family, self.source, self.evidence) == (
            other.family, other.source, other.evidence)

    def __hash__(self) -> int:
        return hash((self.family, self.source, self.evidence))

    def __repr__(self) -> str:
        return f"OsGuess({self.family!r}, {self.source!r}, {self.evidence!r})"


def strong_windows_signals(domain: Domain) -> tuple[str, ...]:
    """Signals that on their own say Windows (see the module docstring for why)."""
    found = []
    on = [tag for tag, switch in domain.hyperv_features.items() if switch.on and tag not in _NOT_ENLIGHTENMENTS]
    if domain.hyperv is not None and (domain.hyperv_mode == "passthrough" or on):
        found.append("Hyper-V enlightenments")
    if domain.timer_present("hypervclock"):
        found.append("a hypervclock timer")
    return tuple(found)


def weak_windows_signals(domain: Domain) -> tuple[str, ...]:
    """Signals common on Windows that other guests carry too: corroboration, never proof."""
    clock = domain.clock
    if clock is not None and clock.get("offset") in ("localtime", "timezone"):
        return (f"clock offset='{clock.get('offset')}'",)
    return ()


def _boots_a_kernel(domain: Domain) -> bool:
    os_el = domain.top("os")
    return os_el is not None and bool((os_el.findtext("kernel") or "").strip())


def infer_os(domain: Domain, libosinfo_family: OsFamily | None, override: OsFamily | None,
             tool: tuple[OsFamily | None, str] = (None, "")) -> OsGuess:
    """libosinfo > --os > the tool that wrote the domain > strong signals in the definition >
    unknown.

    libosinfo comes first: it is this domain's own declaration, while `--os` applies to every
    file of a run and is meant for domains without metadata (README). `tool` is what the
    creating tool implies (vmtune.facts.creator): minikube, CRC and multipass run Linux, kcli
    and virt-lightning record the image or distro; it says more than a Hyper-V switch does."""
    if libosinfo_family is not None:
        return OsGuess(libosinfo_family, "libosinfo")
    if override is not None:
        return OsGuess(override, "--os")
    if tool[0] is not None:
        return OsGuess(tool[0], "tool", (tool[1],))
    strong = strong_windows_signals(domain)
    if strong and not _boots_a_kernel(domain):
        return OsGuess("windows", "definition", strong + weak_windows_signals(domain))
    return OsGuess(None, None)


def provenance_note(guess: OsGuess) -> str | None:
    """What a finding of an OS-dependent rule says when the OS was inferred."""
    if guess.source not in ("definition", "tool"):
        return None
    return (f"OS inferred as {guess.family} from {', '.join(guess.evidence)} (no libosinfo metadata); "
            f"if wrong, give --os linux|windows")


# libosinfo short ids (what virt-install's --os-variant, OpenShift's common templates and their
# os.template.kubevirt.io/<id> labels, and glance images name) -> the libosinfo id URL they stand
# for (libosinfo's osinfo-db: data/os/<vendor>/<id>.xml.in). Only the families whose id vmtune
# reads: Windows editions and versions (CPU016, legacy Windows), and Linux distributions (family).
# Patterns, compiled at first use (re's own cache): compiling the twelve cost every start ~4 M
# instructions, and only a stack source's short id is read.
_SHORT_IDS: tuple[tuple[str, str], ...] = (
    (r"win(\d+(?:\.\d+)?|2k\d*(?:r2)?|xp|vista|me|9[58]|nt\d+\.\d+)", "http://microsoft.com/win/{0}"),
    (r"rhel(\d+(?:\.\d+)?)", "http://redhat.com/rhel/{0}"),
    (r"centos-stream(\d+)", "http://centos.org/centos-stream/{0}"),
    (r"centos(\d+(?:\.\d+)?)", "http://centos.org/centos/{0}"),
    (r"fedora(\d+|-unknown|-rawhide)", "http://fedoraproject.org/fedora/{0}"),
    (r"ubuntu(\d+\.\d+)", "http://ubuntu.com/ubuntu/{0}"),
    (r"debian(\d+)", "http://debian.org/debian/{0}"),
    (r"sles(\d+(?:sp\d+)?)", "http://suse.com/sles/{0}"),
    (r"opensuse(\d+\.\d+|tumbleweed|leap\d+\.\d+)", "http://opensuse.org/opensuse/{0}"),
    (r"almalinux(\d+(?:\.\d+)?)", "http://almalinux.org/almalinux/{0}"),
    (r"rocky(\d+(?:\.\d+)?)", "http://rockylinux.org/rocky/{0}"),
    (r"ol(\d+\.\d+)", "http://oracle.com/ol/{0}"),
)
MAX_SHORT_ID = 64  # libosinfo's short ids are a few characters; a longer text names none


def libosinfo_id_from_short(short: str) -> str | None:
    """The libosinfo id of a short id (`win10` -> http://microsoft.com/win/10), or None."""
    short = short.strip().lower()
    if len(short) > MAX_SHORT_ID:
        return None
    for pattern, template in _SHORT_IDS:
        match = re.fullmatch(pattern, short)
        if match:
            return template.format(match.group(1))
    return None
