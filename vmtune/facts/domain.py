"""The domain model: one parsed definition and the facts rules read from it.

Everything is derived from the lxml tree on first use and cached, so a rule pays only
for the facts it reads and no rule scans the whole tree; only what every check reads (the
top-level and device indexes, the elements and lists most rules ask for) is made with the Domain.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lxml import etree

from vmtune.compiled import mypyc_attr
from vmtune.facts.creator import implied_os, recognise
from vmtune.facts.guestos import OsFamily, OsGuess, infer_os, strong_windows_signals, weak_windows_signals
from vmtune.facts.lazy import cached
from vmtune.facts.units import MAX_VCPUS, UINT_MAX, parse_cpuset, to_kib, uint_or_none
from vmtune.xml.safe import parse_domain

if TYPE_CHECKING:
    from vmtune.xml.xpath import Budget

LIBOSINFO_NS = "http://libosinfo.org/xmlns/libvirt/domain/1.0"
VMTUNE_NS = "https://vmtune.dev/xmlns/domain/1"
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
OVIRT_NS = "http://ovirt.org/vm/1.0"
OVIRT_TUNE_NS = "http://ovirt.org/vm/tune/1.0"  # ovirt-engine's QoS block; some VDSM definitions carry only it
CLOUDSTACK_PRODUCT = "CloudStack KVM Hypervisor"
CLOUDSTACK_MANUFACTURER = "Apache Software Foundation"
# Clark-notation tags read for every domain (formatted once, not per domain)
_NOVA_INSTANCE = f"{{{NOVA_NS}}}instance"
_OVIRT_TAG_PREFIXES = (f"{{{OVIRT_NS}}}", f"{{{OVIRT_TUNE_NS}}}")
_LIBOSINFO_BLOCK, _LIBOSINFO_OS = f"{{{LIBOSINFO_NS}}}libosinfo", f"{{{LIBOSINFO_NS}}}os"
_VMTUNE_BLOCK = f"{{{VMTUNE_NS}}}vmtune"
_CLOUDSTACK_NAME = r"^(?:i-[0-9]+-[0-9]+|[rsv]-[0-9]+)-VM$"  # compiled at first use (see vmtune.facts.units)
X86_ARCHES = frozenset({"x86_64", "i686", "i386"})
ARM_ARCHES = frozenset({"aarch64", "armv7l", "armv6l"})
MAX_IOTHREADS = 4096  # far beyond any real domain; bounds the cost of a hostile <iothreads> count

# libosinfo ids are URLs under the vendor's domain: http://microsoft.com/win/10,
# http://ubuntu.com/ubuntu/22.04, http://redhat.com/rhel/9.2 ...
_WINDOWS_PREFIXES = ("http://microsoft.com/win",)
_LINUX_HOSTS = (
    "ubuntu.com", "debian.org", "redhat.com", "fedoraproject.org", "centos.org", "opensuse.org",
    "suse.com", "archlinux.org", "almalinux.org", "rockylinux.org", "oracle.com/ol", "gentoo.org",
    "alpinelinux.org", "mageia.org", "mandriva.com", "slackware.com", "linuxmint.com",
    "voidlinux.org", "nixos.org", "clearlinux.org", "silverblue", "coreos", "cirros",
    "libosinfo.org/linux", "kylin", "openeuler", "anolis", "endlessos.com", "novell.com",
)


# Windows versions (libosinfo ids under http://microsoft.com/win/) older than Vista/2008.
LEGACY_WINDOWS = frozenset({"1.0", "2.0", "3.1", "95", "98", "me", "nt3.51", "nt4.0", "2k", "xp", "2k3", "2k3r2"})


def os_family_from_libosinfo(os_id: str | None) -> OsFamily | None:
    if not os_id:
        return None
    if os_id.startswith(_WINDOWS_PREFIXES):
        return "windows"
    for host in _LINUX_HOSTS:  # a loop, not any(): a generator cost 1 us of rule selection per domain
        if host in os_id:
            return "linux"
    return "other"


def _text(element: etree._Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""


def _int(text: str | None, default: int | None = None, maximum: int = UINT_MAX) -> int | None:
    """A validated unsigned integer (ASCII digits, at most `maximum`), else the default."""
    value = uint_or_none(text, maximum)
    return default if value is None else value


def _by_tag(element: etree._Element) -> dict[str, list[etree._Element]]:
    """The element children of `element` by tag, each list in document order: the indexes facts
    read children through (the top level, the devices, each element a rule asks about)."""
    index: dict[str, list[etree._Element]] = {}
    # Every child, the tag tested here: the list of them (element[:]) costs ~3,000 fewer
    # instructions to make and walk than iterchildren(etree.Element). A comment's or a
    # processing instruction's tag is a function (etree.Comment, etree.PI), an element's a str.
    # Any, not lxml-stubs' element, whose tag they type str: compiled (mypyc), a tag read from
    # a typed element is checked to be a str, and a comment's raises TypeError.
    kids: list[Any] = element[:]  # type: ignore[index,assignment]  # lxml-stubs type no slice of an element
    for kid in kids:
        tag = kid.tag
        same = index.get(tag)
        if same is None:
            if tag.__class__ is str:
                index[tag] = [kid]
        else:
            same.append(kid)
    return index


class Switch:
    """A feature element with an optional state='on|off' (Hyper-V, kvm, hap...). A plain class:
    a NamedTuple costs ~0.15 ms to create at every start."""

    __slots__ = ("element",)

    def __init__(self, element: etree._Element) -> None:
        self.element = element

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Switch) and self.element == other.element

    def __hash__(self) -> int:
        return hash(self.element)

    @property
    def state(self) -> str | None:
        return self.element.get("state")

    @property
    def on(self) -> bool:
        # libvirt treats a present element without state as on for <hap/>, <acpi/>; Hyper-V
        # features require state, but a bare element is read the same way by the parser.
        return self.state != "off"

    @property
    def explicitly_off(self) -> bool:
        return self.state == "off"


_USB_DEVICE_TAGS = frozenset({"redirdev", "hub", "smartcard"})
# device tag -> (attribute, value) of the device or of its first <target> that makes it a USB device
_USB_BY_ATTRIBUTE = {"controller": ("type", "ccid"),  # the smartcard reader is a USB device
                     "hostdev": ("type", "usb"), "sound": ("model", "usb")}
_USB_BY_TARGET = {"disk": ("bus", "usb"), "serial": ("type", "usb-serial"), "console": ("type", "usb-serial")}


def _needs_usb(dev: etree._Element, child: Callable[[etree._Element, str], etree._Element | None]) -> bool:
    """libvirt refuses `model='none'` ("USB is disabled for this domain") while any of these is present.
    Runs for every device of every domain (USB001, USB003): a dict lookup per tag, and the first
    <target> and <address> from the domain's per-element child index (which later rules reuse)."""
    tag = dev.tag
    if tag in _USB_DEVICE_TAGS or dev.get("bus") == "usb":
        return True
    by_attribute = _USB_BY_ATTRIBUTE.get(tag)
    if by_attribute is not None and dev.get(by_attribute[0]) == by_attribute[1]:
        return True
    if not len(dev):  # no children, so no <target> nor <address>: most controllers; no index built for it
        return False
    by_target = _USB_BY_TARGET.get(tag)
    if by_target is not None and (target := child(dev, "target")) is not None \
            and target.get(by_target[0]) == by_target[1]:
        return True
    address = child(dev, "address")
    return address is not None and address.get("type") == "usb"


# Interpreted by mypyc (its methods compiled): the lazy facts (@cached) store in the instance's
# __dict__, which a native class has not.
@mypyc_attr(native_class=False)
class Domain:
    """A parsed libvirt domain definition with derived facts."""

    def __init__(self, root: etree._Element, source: str, os_override: OsFamily | None = None,
                 may_have_comments: bool = True, os_id: str | None = None) -> None:
        self.root = root
        self.source = source
        self._os_override = os_override
        self._os_id = os_id  # the libosinfo id the definition's source states (a stack's), below its metadata
        self.may_have_comments = may_have_comments  # False: the file has no `<!--` (comments is empty)
        self._children: dict[etree._Element, dict[str, list[etree._Element]]] = {}
        # The direct children of <domain> by tag (a mapping: `tag in domain.top_tags`): one pass
        # over the top level, which nearly every fact below reads. Made here, a plain attribute,
        # not a cached fact: every check reads it (~19 times a domain), and an attribute that a
        # class-level descriptor shadows costs ~300 instructions a read, its first read through
        # the descriptor ~2,000 (issue 45).
        self.top_tags: dict[str, list[etree._Element]] = _by_tag(root)
        # The top-level elements and the device lists rules read most, the same way (dict lookups,
        # read thousands of times a run): the first of each top-level tag, as top() gives it.
        top = self.top
        self.vcpu_element, self.cpu, self.cputune = top("vcpu"), top("cpu"), top("cputune")
        self.memory_backing, self.features, self.clock = top("memoryBacking"), top("features"), top("clock")
        self.devices = top("devices")
        # <features><hyperv> and the clock's timers by name: what the Hyper-V and clock rules (and the
        # OS inference) read first, for ~4 domains in 5
        self.hyperv = self.child(self.features, "hyperv") if self.features is not None else None
        self.timers: dict[str, etree._Element] = {t.get("name", ""): t for t in self.children(self.clock, "timer")} \
            if self.clock is not None else {}
        # The device index: <devices>' own child index (see child()), so children(devices, tag),
        # VAL001's walk, reads it too. Of the first <devices>, as libvirt reads one.
        self._devices_by_tag: dict[str, list[etree._Element]] = \
            self._index_children(self.devices) if self.devices is not None else {}
        devices = self._devices_by_tag
        self.interfaces: list[etree._Element] = devices.get("interface", [])
        self.disks: list[etree._Element] = devices.get("disk", [])
        self.controllers: list[etree._Element] = devices.get("controller", [])
        self.inputs: list[etree._Element] = devices.get("input", [])
        self.graphics: list[etree._Element] = devices.get("graphics", [])
        self._controllers_by_type: dict[str | None, list[etree._Element]] = {}
        for controller in self.controllers:
            self._controllers_by_type.setdefault(controller.get("type"), []).append(controller)
        # What every check reads of the identity, the OS type and the metadata, also made here.
        self.name: str = _text(top("name")) or "<unnamed>"
        self.hypervisor: str = root.get("type", "")  # the domain type: kvm, qemu (TCG), xen, lxc, test...
        os_el = top("os")
        os_type = self.os_type_element = self.child(os_el, "type") if os_el is not None else None
        self.arch: str | None = os_type.get("arch") if os_type is not None else None
        self.machine: str = (os_type.get("machine") or "") if os_type is not None else ""
        meta = top("metadata")
        # the list of children, comments and PIs (whose tag is a function) left out: cheaper
        # than iterchildren(etree.Element) (see _by_tag)
        # (Any: a comment's tag is no str, see _by_tag)
        kids: list[Any] = meta[:] if meta is not None else []  # type: ignore[index,assignment]  # lxml-stubs type no slice of an element
        self._metadata: dict[str, etree._Element] = {
            tag: child for child in kids if (tag := child.tag).__class__ is str}
        # where a suppression can be written (vmtune.engine asks for every domain): a plain
        # attribute, not a cached fact (a first read through the descriptor ~2,000 instructions)
        self.vmtune_metadata: etree._Element | None = self._metadata.get(_VMTUNE_BLOCK)

    @classmethod
    def parse(cls, data: bytes, source: str, os_override: OsFamily | None = None, os_id: str | None = None) -> Domain:
        """Parse a definition (vmtune.xml.safe: no entities, no network). A file without `<!--`
        has no comment, so looking for suppression comments costs no walk of its tree."""
        # parse_domain imported with this module, not here: an import statement in a function
        # costs ~8 k instructions each time it runs. find, not `in`: `bytes in bytes` first tries
        # its operand as an integer and makes and drops a TypeError (~1.8 k instructions). `!`
        # first: a memchr, where `<!--` costs a general search of the whole file (~7 K
        # instructions a domain; vmtune.xml.safe._entity_declaration).
        comments = data.find(b"!") != -1 and data.find(b"<!--") != -1
        return cls(parse_domain(data, source), source, os_override, may_have_comments=comments, os_id=os_id)

    def child(self, element: etree._Element, tag: str) -> etree._Element | None:
        """The first child of `element` with this tag (element.find(tag) for a plain tag). Rules
        ask for a device's <driver>, <target>, <model> or <address> many times per domain, and
        each lxml lookup costs about a microsecond: the children are indexed once per element.
        The index lives as long as this Domain; a tree is never edited while a Domain reads it
        (the fixer re-parses after every edit)."""
        # The index lookup is written out here and in children(): ~30 calls a domain, and a
        # call to a shared helper cost as much as the lookup itself.
        index = self._children.get(element)
        if index is None:
            index = self._index_children(element)
        kids = index.get(tag)
        return kids[0] if kids else None

    def children(self, element: etree._Element, tag: str) -> list[etree._Element]:
        """Every child of `element` with this tag, in document order, from the same index (the
        index's own list: read it, do not change it)."""
        index = self._children.get(element)
        if index is None:
            index = self._index_children(element)
        return index.get(tag, [])

    def _index_children(self, element: etree._Element) -> dict[str, list[etree._Element]]:
        index = self._children[element] = _by_tag(element)
        return index

    @cached
    def xpath_budget(self) -> Budget:
        """The XPath work custom checks and xpath suppressions may still do on this domain."""
        from vmtune.xml.xpath import Budget

        return Budget(self.root)

    # -- the top level (top_tags): every fact below reads from it ----------------------------
    def top(self, tag: str) -> etree._Element | None:
        """The first direct child of <domain> with this tag (cheaper than root.find)."""
        children = self.top_tags.get(tag)
        return children[0] if children else None

    @cached
    def comments(self) -> list[etree._Element]:
        """The XML comments before <domain> and inside it, in document order (one walk, shared by
        the suppression reader and the check for malformed suppressions)."""
        if not self.may_have_comments:
            return []
        root = self.root
        preceding: Iterable[Any] = root.itersiblings(preceding=True)  # Any: a comment's tag is no str, see _by_tag
        return [c for c in preceding if c.tag is etree.Comment] + list(root.iter(etree.Comment))

    def find_all(self, steps: tuple[str, ...]) -> list[etree._Element]:
        """Every element at this path of tags below <domain> (`("cputune", "vcpupin")`), in document
        order, as root.findall("cputune/vcpupin") without compiling a path: from the top-level
        index and the child indexes (a child of one <devices> from the device index, its child
        index), so absent parents cost a dict lookup. The list may be an index's own: read it, do
        not change it."""
        return self.below(self.top_tags.get(steps[0], []), steps[1:])

    def below(self, elements: list[etree._Element], steps: tuple[str, ...]) -> list[etree._Element]:
        """The elements at this path of tags below `elements`, in document order (what findall
        gives), from the child indexes (each index's own list when there is one parent: read it,
        do not change it)."""
        children = self.children
        for tag in steps:
            if not elements:
                break
            if len(elements) == 1:
                elements = children(elements[0], tag)
            else:  # a loop, not a comprehension: that is a function with closure cells, ~2 K instructions
                found: list[etree._Element] = []
                for node in elements:
                    found += children(node, tag)
                elements = found
        return elements

    # -- identity -------------------------------------------------------------------------
    @cached
    def uuid(self) -> str | None:
        return _text(self.top("uuid")) or None

    @property
    def is_kvm(self) -> bool:
        return self.hypervisor == "kvm"

    @cached
    def is_q35(self) -> bool:
        return "q35" in self.machine

    @cached
    def is_x86(self) -> bool:
        # Without an arch libvirt uses the host's. vmtune assumes an x86 host then, unless the
        # machine type or emulator says otherwise (virt, pseries, s390-ccw...).
        if self.arch:
            return self.arch in X86_ARCHES
        if self.machine:
            return self.machine.startswith(("pc", "q35", "xenfv", "xenpv"))
        return not self.emulator or self.emulator.endswith(("x86_64", "i386", "kvm"))

    @cached
    def is_hvm(self) -> bool:
        el = self.os_type_element
        return el is not None and (el.text or "").strip() == "hvm"

    @cached
    def emulator(self) -> str:
        return _text(self._devices_by_tag.get("emulator", [None])[0])

    # -- guest OS ---------------------------------------------------------------------------
    @cached
    def libosinfo_id(self) -> str | None:
        block = self._metadata.get(_LIBOSINFO_BLOCK)
        el = self.child(block, _LIBOSINFO_OS) if block is not None else None
        return el.get("id") if el is not None else self._os_id

    @cached
    def os_guess(self) -> OsGuess:
        """The guest OS with its provenance: libosinfo > --os > strong signals in the definition
        (vmtune.facts.guestos.infer_os, the one place that decides)."""
        libosinfo = os_family_from_libosinfo(self.libosinfo_id)
        undecided = libosinfo is None and self._os_override is None  # only then is the tool asked
        return infer_os(self, libosinfo, self._os_override, self.creator_os if undecided else (None, ""))

    @cached
    def os_family(self) -> OsFamily | None:
        """windows, linux, other, or None when unknown (OS-specific rules then skip)."""
        return self.os_guess.family

    @property
    def os_inferred(self) -> bool:
        """The OS comes from the definition (signals in it, or the tool that wrote it), not from
        libosinfo or --os."""
        return self.os_guess.source in ("definition", "tool")

    @property
    def is_windows(self) -> bool:
        return self.os_family == "windows"

    @property
    def is_linux(self) -> bool:
        return self.os_family == "linux"

    @cached
    def windows_version(self) -> str | None:
        """The libosinfo version of a Windows guest: '10', '8.1', '2k19', 'xp'... (None if unknown)."""
        os_id = self.libosinfo_id or ""
        return os_id.split("/win/", 1)[1] if "/win/" in os_id else None

    @property
    def windows_server(self) -> bool | None:
        """True for Windows Server (2k8...2k25), False for client editions, None when unknown."""
        version = self.windows_version
        return None if version is None else version.startswith("2k") and version not in LEGACY_WINDOWS

    @property
    def windows_legacy(self) -> bool:
        """Windows before Vista/2008: no Hyper-V enlightenments, no xHCI driver."""
        return self.windows_version in LEGACY_WINDOWS

    @property
    def windows_before_8(self) -> bool:
        """No in-box xHCI (USB 3) driver before Windows 8 / Server 2012."""
        return self.windows_version in LEGACY_WINDOWS | {"vista", "7", "2k8", "2k8r2"}

    @cached
    def windows_signals(self) -> tuple[str, ...]:
        """Everything in the definition, besides libosinfo, that points at Windows, strong or weak
        (a clock in local time): enough to be careful, not to infer (see vmtune.facts.guestos)."""
        return strong_windows_signals(self) + weak_windows_signals(self)

    @property
    def may_be_windows(self) -> bool:
        """Windows, or an unknown OS whose definition carries a Windows signal."""
        return self.is_windows or (self.os_family is None and bool(self.windows_signals))

    # -- managers and tags -------------------------------------------------------------------
    @cached
    def tags(self) -> frozenset[str]:
        """<metadata><vmtune:vmtune><vmtune:tag>dedicated</vmtune:tag>..."""
        meta = self.vmtune_metadata
        if meta is None:
            return frozenset()
        return frozenset((t.text or "").strip() for t in meta.iterfind(f"{{{VMTUNE_NS}}}tag"))

    @cached
    def manager(self) -> str | None:
        """'nova', 'kubevirt', 'ovirt' or 'cloudstack' when another system owns this definition."""
        metadata = self._metadata
        if metadata:  # most definitions have none, or only libosinfo's
            if _NOVA_INSTANCE in metadata:
                return "nova"
            for tag in metadata:
                if "kubevirt" in tag:
                    return "kubevirt"
            # ovirt-engine's per-VM metadata, which VDSM reads back, or its tune (QoS) block alone:
            # engine-written definitions of older clusters carry only `<ovirt-tune:qos/>`
            if any(tag.startswith(_OVIRT_TAG_PREFIXES) for tag in metadata):
                return "ovirt"
        if self._cloudstack:
            return "cloudstack"
        return None

    @cached
    def creator(self) -> tuple[str, str] | None:
        """(tool, image or distro it recorded) when a tool that writes a domain once made this
        one: kcli, virt-lightning, minikube, crc, multipass, webvirtcloud (vmtune.facts.creator)."""
        if self.manager is not None:  # a manager's definition is the manager's
            return None
        sources = [s.get("file") or "" for d in self.disks for s in self.children(d, "source")]
        macs = [m.get("address") or "" for i in self.interfaces for m in self.children(i, "mac")]
        return recognise(self._metadata, sources, macs, _text(self.top("description")))

    @cached
    def creator_os(self) -> tuple[OsFamily | None, str]:
        """The OS the creating tool implies and why ((None, '') when it does not say)."""
        creator = self.creator
        return implied_os(*creator) if creator is not None else (None, "")

    @cached
    def _cloudstack(self) -> bool:
        """CloudStack's KVM agent writes SMBIOS system entries manufacturer 'Apache Software
        Foundation' and product 'CloudStack KVM Hypervisor' (newer releases let the operator
        change both: `VirtualMachineManagerImpl.updateVmMetadataManufacturerAndProduct`), and
        names guests i-<account>-<id>-VM (system VMs s-/v-/r-<id>-VM)."""
        sysinfo = self.top("sysinfo")
        if sysinfo is not None:  # sysinfo.iterfind("system/entry"), from the child index
            entries = {e.get("name"): (e.text or "").strip()
                       for system in self.children(sysinfo, "system") for e in self.children(system, "entry")}
            if entries.get("product") == CLOUDSTACK_PRODUCT or entries.get("manufacturer") == CLOUDSTACK_MANUFACTURER:
                return True
        # The pattern ends in -VM: most names are settled without running it (names are stripped,
        # so `$` cannot match before a trailing newline here).
        return self.name.endswith("-VM") and re.match(_CLOUDSTACK_NAME, self.name) is not None

    # -- CPU ----------------------------------------------------------------------------------
    @cached
    def vcpus(self) -> int:
        """vCPUs at boot, at least 1: the `current` attribute when set; else, with a `<vcpus>` list,
        the ones it enables (libvirt derives `current` from it: a KubeVirt VM under the LiveUpdate
        rollout strategy lists its hot-plug slots enabled='no' and writes no `current`)."""
        el = self.vcpu_element
        if el is None:
            return 1
        current = _int(el.get("current"), None, MAX_VCPUS)
        if current is None:
            listed = self.top("vcpus")
            if listed is not None:
                current = sum(1 for v in listed.iterchildren("vcpu") if v.get("enabled") != "no") or None
        return max(1, current or _int(el.text, 1, MAX_VCPUS) or 1)

    @cached
    def max_vcpus(self) -> int:
        el = self.vcpu_element
        return max(self.vcpus, _int(el.text, 1, MAX_VCPUS) or 1) if el is not None else 1

    @cached
    def cpu_mode(self) -> str:
        """host-passthrough, host-model, maximum or custom (libvirt's default)."""
        return (self.cpu.get("mode") if self.cpu is not None else None) or "custom"

    @cached
    def cpu_model(self) -> str | None:
        model = self.child(self.cpu, "model") if self.cpu is not None else None  # cpu.findtext("model")
        return (model.text or "") if model is not None else None

    @cached
    def guest_numa_cells(self) -> list[etree._Element]:
        cpu = self.cpu  # cpu.findall("numa/cell"), from the child index
        return [cell for numa in self.children(cpu, "numa") for cell in self.children(numa, "cell")] \
            if cpu is not None else []

    @cached
    def vcpu_pins(self) -> dict[int, frozenset[int]]:
        """vCPU id -> host CPUs from <cputune><vcpupin>, plus <vcpu cpuset> for unpinned ones."""
        pins: dict[int, frozenset[int]] = {}
        if self.cputune is not None:
            for pin in self.cputune.iterchildren("vcpupin"):
                vcpu, cpus = _int(pin.get("vcpu"), None, MAX_VCPUS), parse_cpuset(pin.get("cpuset"))
                if vcpu is not None and cpus is not None:
                    pins[vcpu] = cpus
        return pins

    @cached
    def vcpu_placement_auto(self) -> bool:
        """<vcpu placement='auto'>: numad places the vCPUs."""
        return self.vcpu_element is not None and self.vcpu_element.get("placement") == "auto"

    @cached
    def vcpu_cpuset(self) -> frozenset[int] | None:
        el = self.vcpu_element
        return parse_cpuset(el.get("cpuset")) if el is not None else None

    @cached
    def online_vcpu_ids(self) -> tuple[int, ...]:
        """The vCPU ids that run at boot: those a `<vcpus>` list does not mark enabled='no'
        (hot-plug slots), else 0..vcpus-1."""
        listed = self.top("vcpus")
        if listed is not None:
            ids = [i for v in listed.iterchildren("vcpu") if v.get("enabled") != "no"
                   and (i := _int(v.get("id"), None, MAX_VCPUS)) is not None]
            if ids:
                return tuple(ids)
        return tuple(range(self.vcpus))

    @cached
    def all_vcpus_pinned(self) -> bool:
        return all(v in self.vcpu_pins for v in range(self.vcpus))

    @cached
    def dedicated_pinning(self) -> bool:
        """Every vCPU pinned to exactly one host CPU, none shared: nova's cpu_policy=dedicated."""
        if not self.all_vcpus_pinned:
            return False
        cpus = [self.vcpu_pins[v] for v in range(self.vcpus)]
        return all(len(c) == 1 for c in cpus) and len(set().union(*cpus)) == self.vcpus

    @cached
    def exclusive_vcpu_cpus(self) -> frozenset[int]:
        """The host CPUs a vCPU has to itself: pinned to that one CPU, which no other vCPU's pin
        names. A vCPU pinned to a set of CPUs, or to one another vCPU shares, is placed there,
        not given a CPU (nova pins a shared-CPU flavor's vCPUs to their whole NUMA cell)."""
        singles: dict[int, int] = {}
        placed: set[int] = set()
        for cpus in self.vcpu_pins.values():
            if len(cpus) == 1:
                (cpu,) = cpus
                singles[cpu] = singles.get(cpu, 0) + 1
            else:
                placed |= cpus
        return frozenset(cpu for cpu, count in singles.items() if count == 1 and cpu not in placed)

    @cached
    def pinned_cpus(self) -> frozenset[int]:
        used: set[int] = set()
        for cpus in self.vcpu_pins.values():
            used |= cpus
        return frozenset(used)

    @cached
    def emulator_pin(self) -> frozenset[int] | None:
        el = self.child(self.cputune, "emulatorpin") if self.cputune is not None else None
        return parse_cpuset(el.get("cpuset")) if el is not None else None

    @cached
    def iothread_pins(self) -> dict[int, frozenset[int]]:
        pins: dict[int, frozenset[int]] = {}
        if self.cputune is not None:
            for pin in self.cputune.iterchildren("iothreadpin"):
                tid, cpus = _int(pin.get("iothread")), parse_cpuset(pin.get("cpuset"))
                if tid is not None and cpus is not None:
                    pins[tid] = cpus
        return pins

    @cached
    def iothreads(self) -> int:
        return _int(_text(self.top("iothreads")), 0) or 0

    @cached
    def iothread_ids(self) -> tuple[int, ...]:
        """The I/O thread ids libvirt gives the domain: those `<iothreadids>` declares, then the
        lowest unused ids up to the `<iothreads>` count (virDomainDefPostParseIOThreads)."""
        declared = self.top("iothreadids")
        ids = [i for t in declared.iterchildren("iothread") if (i := _int(t.get("id"))) is not None and i > 0] \
            if declared is not None else []
        candidate = 1
        while len(ids) < min(self.iothreads, MAX_IOTHREADS):
            if candidate not in ids:
                ids.append(candidate)
            candidate += 1
        return tuple(dict.fromkeys(ids))

    # -- memory -------------------------------------------------------------------------------
    def _memory(self, tag: str) -> int | None:
        el = self.top(tag)
        return to_kib((el.text or "").strip(), el.get("unit")) if el is not None else None

    @cached
    def memory_kib(self) -> int:
        return self._memory("memory") or 0

    @cached
    def current_memory_kib(self) -> int | None:
        return self._memory("currentMemory")

    @cached
    def hugepages(self) -> etree._Element | None:
        mb = self.memory_backing
        return self.child(mb, "hugepages") if mb is not None else None

    @cached
    def hugepage_size_kib(self) -> int | None:
        """Size of the guest's hugepages, or None without <hugepages>. Default 2 MiB on x86."""
        if self.hugepages is None:
            return None
        page = self.child(self.hugepages, "page")
        if page is not None and page.get("size"):
            return to_kib(page.get("size"), page.get("unit") or "KiB")
        return 2048

    @cached
    def numatune_memory(self) -> etree._Element | None:
        numatune = self.top("numatune")
        return self.child(numatune, "memory") if numatune is not None else None

    @cached
    def memory_nodeset(self) -> frozenset[int] | None:
        """The host nodes `<numatune><memory nodeset=.../>` names, whatever its mode."""
        binding = self.numatune_memory
        return parse_cpuset(binding.get("nodeset")) if binding is not None else None

    @cached
    def memballoon(self) -> etree._Element | None:
        return self._devices_by_tag.get("memballoon", [None])[0]

    @cached
    def has_active_balloon(self) -> bool:
        mb = self.memballoon
        return mb is not None and mb.get("model") not in (None, "none")

    # -- features, clock ------------------------------------------------------------------------
    @cached
    def hyperv_mode(self) -> str:
        return (self.hyperv.get("mode") if self.hyperv is not None else None) or "custom"

    @cached
    def hyperv_features(self) -> dict[str, Switch]:
        if self.hyperv is None:
            return {}
        return {child.tag: Switch(child) for child in self.hyperv if isinstance(child.tag, str)}

    def hyperv_on(self, feature: str) -> bool:
        if self.hyperv_mode == "passthrough":
            return True
        switch = self.hyperv_features.get(feature)
        return switch is not None and switch.on

    def hyperv_explicitly_off(self, feature: str) -> bool:
        switch = self.hyperv_features.get(feature)
        return switch is not None and switch.explicitly_off

    @cached
    def kvm_features(self) -> dict[str, Switch]:
        kvm = self.child(self.features, "kvm") if self.features is not None else None
        if kvm is None:
            return {}
        return {child.tag: Switch(child) for child in kvm if isinstance(child.tag, str)}

    def feature(self, tag: str) -> etree._Element | None:
        return self.child(self.features, tag) if self.features is not None else None

    def timer_present(self, name: str) -> bool | None:
        """True/False when the timer is listed with present=yes/no (or listed without it), None if absent."""
        timer = self.timers.get(name)
        if timer is None:
            return None
        return timer.get("present") != "no"

    # -- devices ------------------------------------------------------------------------------
    @cached
    def boot_disk(self) -> etree._Element | None:
        """The disk the guest boots from: the lowest per-device boot order among disks, else the
        first disk (what `<os><boot dev='hd'/>`, libvirt's default, boots)."""
        disks = [d for d in self.disks if d.get("device", "disk") == "disk"]
        ordered = [(order, d) for d in disks if (b := self.child(d, "boot")) is not None
                   and (order := _int(b.get("order"))) is not None]
        if ordered:
            return min(ordered, key=lambda pair: pair[0])[1]
        return disks[0] if disks else None

    def controllers_of(self, ctype: str) -> list[etree._Element]:
        return self._controllers_by_type.get(ctype, [])

    @cached
    def _disks_by_bus(self) -> dict[str | None, list[etree._Element]]:
        """The disks by their <target bus> (None: no <target> or no bus), read once: six rules ask
        which disks are virtio (or SCSI, IDE), and reading the target and its bus per rule cost
        ~2 K instructions a disk each time."""
        child = self.child
        by_bus: dict[str | None, list[etree._Element]] = {}
        for disk in self.disks:
            target = child(disk, "target")
            by_bus.setdefault(target.get("bus") if target is not None else None, []).append(disk)
        return by_bus

    def disks_on(self, bus: str) -> list[etree._Element]:
        """The disks whose <target> names this bus, in document order (the index's own list: read
        it, do not change it)."""
        return self._disks_by_bus.get(bus, [])

    def has_disks_on(self, buses: frozenset[str]) -> bool:
        """Whether any disk's <target> names one of these buses."""
        return not buses.isdisjoint(self._disks_by_bus)

    @cached
    def has_usb_consumer(self) -> bool:
        """Whether a device needs a USB controller (a USB input, disk, redirdev, hostdev, hub...:
        _needs_usb), settled at the first found: redirdevs, hubs and smartcards first, found by
        libxml2 without a Python object per device (most guests with a USB device have a
        redirdev). USB001 and USB003 ask only this; the list of them it replaces walked every
        device in Python (issue 45: corpus-2000 -j 1, 3,128 M -> 3,093 M instructions)."""
        devices = self.devices
        if devices is None:
            return False
        if not _USB_DEVICE_TAGS.isdisjoint(self._devices_by_tag):  # from the device index
            return True
        child = self.child
        # every child in document order, comments (whose tag is a function) left out by the
        # tag test: cheaper than iterchildren(etree.Element) (see _by_tag); an iterator, not
        # element[:], as the first USB device found ends the walk
        walked: Iterable[Any] = devices  # Any: a comment's tag is no str (see _by_tag)
        return any(dev.tag.__class__ is str and _needs_usb(dev, child) for dev in walked)
