"""The domain XML nova 34.0.0's libvirt driver writes for a flavor × image × nova.conf.

Follows `LibvirtDriver._get_guest_config` (nova/virt/libvirt/driver.py at openstack/nova
00a0304, the 34.0.0 release) and what it calls: nova/virt/hardware.py for the CPU topology
(`get_best_cpu_topology`), the guest NUMA topology (`numa_get_constraints`), pinning, emulator
threads, realtime masks and page sizes; nova/virt/libvirt/vif.py for the NIC model and its
queues; blockinfo.py for disk buses; config.py for the element shapes. PURE: objects in, bytes
out; nothing of the input is evaluated.

What a live compute node would supply is fixed here (FAKE_HOST, stated in reports and in
docs): an x86_64 KVM host with two NUMA cells, no SMT, 4 KiB / 2 MiB / 1 GiB pages; the
instance directory supports O_DIRECT (cache='none'); a kernel newer than 4.x (tap devices have
no queue limit nova knows of, so multiqueue gives one queue per vCPU); VNC enabled, SPICE and
the serial console proxy disabled (nova's defaults); one OVS port on a bridge. A request nova
would refuse (a value its extra spec validator rejects, a combination its API or hardware.py
rejects, a request the stated host cannot meet) is said in nova's terms (the front end makes
it an error, STK004, and judges nothing else of the pair); the domain is still rendered
without the refused part, to show, never as a crash.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from vmtune.escape import printable
from vmtune.stacks.openstack import validators
from vmtune.stacks.openstack.model import Flavor, Image, NovaConf
from vmtune.stacks.xmltext import escape, quoteattr

RELEASE = "nova 34.0.0"
NOVA_VERSION = "34.0.0"
NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"


class NodeHost:
    """The compute node nova places the guest on: the assumed one (HOST, the module docstring), or
    the host `--host` describes (from_facts). Per cell: CPU ids, MiB of memory, KiB of memory in
    pages of each size."""

    def __init__(self, arch: str, cells: tuple[tuple[int, ...], ...], cell_memory_mib: int,
                 pages_kib: dict[int, int], text: str) -> None:
        self.arch = arch
        self.cells = cells
        self.cell_memory_mib = cell_memory_mib  # the smallest cell's: a guest node must fit any
        self.pages_kib = pages_kib  # page size (KiB) -> KiB of such pages in the smallest cell's pool
        self.page_sizes_kib = tuple(sorted(pages_kib))
        self.cpus = frozenset(c for cell in cells for c in cell)  # every CPU of the node
        self.text = text  # what reports say was assumed

    @classmethod
    def from_facts(cls, host: Any, source: str) -> NodeHost | None:
        """The node `--host` describes (vmtune.facts.host.Host); None when its capabilities list no
        NUMA cell with CPUs (nova needs the topology to place a guest)."""
        cells = [c for c in host.cells if c.cpus]
        if not cells:
            return None
        pages: dict[int, int] = {}
        for size in sorted({size for c in cells for size in c.pages} | set(host.page_sizes_kib)):
            pages[size] = min(c.pages.get(size, 0) * size for c in cells)
        if not pages:
            pages = {4: min(c.memory_kib for c in cells)}
        return cls(host.arch or "x86_64", tuple(tuple(sorted(c.cpu_ids)) for c in cells),
                   min(c.memory_kib for c in cells) // 1024, pages, f"the host of --host {source}")


HOST = NodeHost(
    "x86_64", (tuple(range(0, 16)), tuple(range(16, 32))), 32768,
    # as the oracle's generate.py gives fakelibvirt: 4 KiB pages for 16 GiB, 4096 x 2 MiB, 8 x 1 GiB
    {4: 16 * 1024 * 1024, 2048: 8 * 1024 * 1024, 1048576: 8 * 1024 * 1024},
    "an x86_64 KVM host with 2 NUMA cells of 8 cores x 2 threads (CPUs 0-15, 16-31) and 32 GiB each "
    "(4 KiB pages for 16 GiB, 2 MiB pages for 8 GiB, 1 GiB pages for 8 GiB), instance storage with "
    "O_DIRECT, one OVS port; the host of fixtures/stacks/nova/oracle")


class Refused(Exception):
    """A request nova refuses; the message says why, in nova's terms."""


def bool_from_string(value: object) -> bool:
    """oslo.utils strutils.bool_from_string (non-strict): what nova reads booleans with."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "t", "true", "on", "y", "yes")


def _prop_bool(value: object) -> bool | None:
    if value is None:
        return None
    return bool_from_string(value)


# CPUs one spec may name, its ranges counted in full: each range is at most 4,096 wide, but a
# 350 KB hw:cpu_dedicated_mask of 50,000 `0-4096` took 13 s (a 4 MiB one minutes). Sixteen times
# KVM's 4,096 vCPUs covers any host's CPU list.
MAX_SPEC_CPUS = 65_536


def parse_cpu_spec(spec: str) -> set[int]:
    """hardware.parse_cpu_spec: "0-3,^2,5" -> {0, 1, 3, 5}."""
    include: set[int] = set()
    exclude: set[int] = set()
    named = 0
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            continue
        negate = part.startswith("^")
        body = part[1:] if negate else part
        try:
            if "-" in body:
                low, high = (int(x) for x in body.split("-", 1))
                if low > high or high - low > 4096:  # said without the range: a spec is the file's text
                    raise Refused("invalid CPU range in a CPU spec (its low end above its high end, or more "
                                  "than 4,097 CPUs)")
                values = set(range(low, high + 1))
            else:
                values = {int(body)}
        except ValueError:
            raise Refused("invalid CPU spec (a part that is neither a CPU number nor a range)") from None
        named += len(values)
        if named > MAX_SPEC_CPUS:  # said without the spec: it may be megabytes
            raise Refused(f"a CPU spec naming more than {MAX_SPEC_CPUS:,} CPUs, ranges counted in full")
        (exclude if negate else include).update(values)
    return include - exclude


def format_cpu_spec(cpus: Iterable[int]) -> str:
    """hardware.format_cpu_spec (ranges): {0, 1, 2, 5} -> "0-2,5"."""
    ordered = sorted(set(cpus))
    parts = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


# Enumerated image properties (nova/objects/fields.py, nova/network/model.py at 34.0.0): a value
# outside them fails ImageMeta.from_dict, and nova refuses the server ("Invalid image metadata").
IMAGE_ENUMS: dict[str, frozenset[str]] = {
    "hw_pointer_model": frozenset({"usbtablet"}),
    "hw_input_bus": frozenset({"usb", "virtio"}),
    "hw_disk_bus": frozenset({"fdc", "ide", "lxc", "sata", "scsi", "usb", "virtio", "xen", "uml"}),
    "hw_cdrom_bus": frozenset({"fdc", "ide", "lxc", "sata", "scsi", "usb", "virtio", "xen", "uml"}),
    "hw_vif_model": frozenset({"virtio", "ne2k_pci", "pcnet", "rtl8139", "e1000", "e1000e", "netfront",
                               "spapr-vlan", "lan9118", "vmxnet", "vmxnet3", "igb"}),
    "hw_video_model": frozenset({"vga", "cirrus", "vmvga", "xen", "qxl", "tcx", "cg3", "gop", "none", "virtio",
                                 "bochs"}),
    "hw_scsi_model": frozenset({"buslogic", "ibmvscsi", "lsilogic", "lsisas1068", "lsisas1078", "virtio-scsi",
                                "vmpvscsi"}),
    "hw_firmware_type": frozenset({"bios", "uefi"}),
    "hw_usb_model": frozenset({"none", "nec-xhci", "qemu-xhci", "piix3-uhci", "usb"}),
    "hw_watchdog_action": frozenset({"disabled", "pause", "poweroff", "reset", "none"}),
    "hw_cpu_policy": frozenset({"shared", "dedicated", "mixed"}),
    "hw_cpu_thread_policy": frozenset({"prefer", "isolate", "require"}),
}


# What XML 1.0 cannot carry: C0 controls but tab, newline and carriage return; lone surrogates;
# U+FFFE and U+FFFF. nova's libvirt driver writes names, extra specs and image properties into the
# domain's <metadata> with lxml, which raises ValueError on them ("All strings must be XML
# compatible"): the instance goes to ERROR.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_WRITTEN_PROPS = ("hw_", "os_", "img_")
_CANNOT_WRITE = "nova's libvirt driver cannot write it into the domain's metadata: the server goes to ERROR"


class Inputs:
    """The flavor, image properties and nova.conf as nova's code reads them."""

    def __init__(self, flavor: Flavor, image: Image, conf: NovaConf | None, host: NodeHost | None = None) -> None:
        self.flavor = flavor
        self.image = image
        self.conf = conf or NovaConf()
        self.host = host or HOST
        self.notes: list[str] = []  # what nova refuses, each in nova's terms
        self.graphics: tuple[bool, bool, bool] | None = None  # _graphics(), asked four times a domain
        refused = set()
        # One search over the pair's names, keys and values, and one match of its keys: almost no
        # pair holds a character XML cannot carry or a key the API refuses (each key and value
        # searched apart cost 1 % of a run over 1,000 flavors)
        odd = _NOT_XML.search("\n".join([flavor.name, image.name, *flavor.specs, *map(str, flavor.specs.values()),
                                          *image.props, *map(str, image.props.values())])) is not None
        keys = "\n".join(flavor.specs)  # a key holding a newline is no key the pattern takes: counted
        keys_ok = not flavor.specs or (keys.count("\n") == len(flavor.specs) - 1
                                       and validators.SPEC_KEYS.fullmatch(keys) is not None)
        self.flavor_name = self._writable("the flavor name", flavor.name, "the compute API takes printable "
                                          "characters only (InvalidName)") if odd else flavor.name
        # nova writes the image's uuid, not its name (vmtune's metadata names it, for the reader)
        self.image_name = printable(image.name) if odd and _NOT_XML.search(image.name) else image.name
        for key, spec in flavor.specs.items():
            if not keys_ok and not validators.SPEC_KEY.fullmatch(key):
                refused.add(key)
                self.notes.append(f"nova refuses the extra spec key {printable(repr(key))}: the compute API takes "
                                  "keys of 1-255 letters, digits, '-', '_', ':', '.' and spaces (its request schema)")
                continue
            why = validators.refusal(key, str(spec))
            if why is not None:
                refused.add(key)
                self.notes.append(f"nova refuses the extra spec {key}: {why} (its extra spec validator, which "
                                  "`openstack flavor set` meets from API microversion 2.86)")
            elif odd and _NOT_XML.search(str(spec)):
                refused.add(key)
                self.notes.append(f"nova refuses the extra spec {key}: its value holds a control character; "
                                  f"{_CANNOT_WRITE}")
        self.specs = {k: v for k, v in flavor.specs.items() if k not in refused} if refused else flavor.specs
        self.props = dict(image.props)
        for key, value in image.props.items() if odd else ():  # those the metadata carries, as nova's does
            if key.startswith(_WRITTEN_PROPS) and (_NOT_XML.search(key) or _NOT_XML.search(str(value))):
                self.notes.append(f"nova refuses image property {printable(repr(key))}: it holds a control "
                                  f"character; {_CANNOT_WRITE}")
                del self.props[key]
        for key, allowed in IMAGE_ENUMS.items():
            value = self.props.get(key)
            if value is not None and str(value) not in allowed:
                self.notes.append(f"nova refuses image property {key}={value!r}: not one of "
                                  f"{', '.join(sorted(allowed))} (InvalidRequest: Invalid image metadata)")
                del self.props[key]

    def _writable(self, what: str, name: str, why: str) -> str:
        """A name as the domain can carry it: one XML cannot is noted as refused and rendered escaped
        (the object is judged by its refusal alone, STK004)."""
        if not _NOT_XML.search(name):
            return name
        self.notes.append(f"nova refuses {what} {printable(repr(name))}: {why}")
        return printable(name)

    def spec(self, key: str, default: str | None = None) -> str | None:
        value = self.specs.get(key)
        return default if value is None else str(value)

    def prop(self, key: str) -> object:
        return self.props.get(key)

    def opt(self, section: str, option: str, default: str | None = None) -> str | None:
        value = self.conf.values.get((section, option)) if self.conf.values else None
        return default if value is None or value == "" else value

    def int_opt(self, section: str, option: str, default: int | None,
                choices: tuple[int, ...] | None = None) -> int | None:
        """An integer option of nova.conf; a value oslo.config would refuse (nova-compute does not
        start) is said, and the default used."""
        text = self.opt(section, option)
        if text is None:
            return default
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or (choices is not None and value not in choices):
            allowed = f"one of {', '.join(map(str, choices))}" if choices else "an integer"
            self.notes.append(f"nova refuses [{section}] {option}={text!r}: not {allowed} (nova-compute would not "
                              "start)")
            return default
        return value

    def int_prop(self, key: str) -> int:
        value = self.props.get(key)
        if value is None or value == "":
            return 0
        try:
            return int(str(value))
        except ValueError:
            raise Refused(f"image property {key}={value!r} is not an integer") from None

    def int_spec(self, key: str) -> int:
        value = self.specs.get(key)
        if value is None or value == "":
            return 0
        try:
            return int(str(value))
        except ValueError:
            raise Refused(f"flavor extra spec {key}={value!r} is not an integer "
                          "(nova: Invalid flavor extra spec)") from None


# -- CPU topology (hardware.get_best_cpu_topology) ----------------------------------------------------

_F_MAX = ("hw:cpu_max_sockets", "hw:cpu_max_cores", "hw:cpu_max_threads")
_I_MAX = ("hw_cpu_max_sockets", "hw_cpu_max_cores", "hw_cpu_max_threads")
_F_PREF = ("hw:cpu_sockets", "hw:cpu_cores", "hw:cpu_threads")
_I_PREF = ("hw_cpu_sockets", "hw_cpu_cores", "hw_cpu_threads")


def cpu_topology(inp: Inputs) -> tuple[int, int, int]:
    f_max = tuple(map(inp.int_spec, _F_MAX))
    i_max = tuple(map(inp.int_prop, _I_MAX))
    if any(fm and im > fm for fm, im in zip(f_max, i_max, strict=True)):
        raise Refused("the image's hw_cpu_max_* exceed the flavor's hw:cpu_max_* (ImageVCPULimitsRangeExceeded)")
    return _best_topology(inp.flavor.vcpus, f_max, i_max, tuple(map(inp.int_spec, _F_PREF)),
                          tuple(map(inp.int_prop, _I_PREF)))


# The answer depends on these numbers alone, which few flavors of a listing differ in (their vCPU
# counts): worked out once each, not once per flavor × image pair (~160 k instructions a pair).
# A request nova refuses raises Refused, which is not remembered.
@functools.lru_cache(maxsize=1024)
def _best_topology(vcpus: int, f_max: tuple[int, ...], i_max: tuple[int, ...], f_pref: tuple[int, ...],
                   i_pref: tuple[int, ...]) -> tuple[int, int, int]:
    maxima = [im or fm or 65536 for fm, im in zip(f_max, i_max, strict=True)]
    if any(p > m for p, m in zip(f_pref, maxima, strict=True)):
        f_pref = (0, 0, 0)
    if any(p > m for p, m in zip(i_pref, maxima, strict=True)):
        raise Refused("the image's hw_cpu_* exceed the maximum topology (ImageVCPUTopologyRangeExceeded)")
    want = i_pref if any(i_pref) else f_pref
    max_s, max_c, max_t = (min(vcpus, m) for m in maxima)
    possible = []
    # The products s*c*t == vcpus over divisors: what nova's triple loop finds, without its cubic cost.
    small = [d for d in range(1, int(vcpus ** 0.5) + 1) if vcpus % d == 0]
    divisors = sorted(set(small + [vcpus // d for d in small]))
    for s in divisors:
        if s > max_s:
            break
        rest = vcpus // s
        for c in divisors:
            if c > max_c or rest % c:
                continue
            t = rest // c
            if t <= max_t:
                possible.append((s, c, t))
    if not possible:
        raise Refused(f"no CPU topology gives {vcpus} vCPUs within sockets<={max_s}, cores<={max_c}, "
                      f"threads<={max_t} (ImageVCPULimitsRangeImpossible)")
    possible.sort(key=lambda x: (x[0] * x[1], x[0], x[2]), reverse=True)

    def score(top: tuple[int, int, int]) -> int:
        return sum(1 for have, wanted in zip(top, want, strict=True) if wanted and have == wanted)

    best = max(range(len(possible)), key=lambda i: (score(possible[i]), -i))
    return possible[best]


# -- guest NUMA topology and pinning (hardware.numa_get_constraints, numa_fit_instance_to_host) ------

class Cell:
    __slots__ = ("cpus", "host", "memory", "pagesize", "pinning", "reserved")

    def __init__(self, cpus: list[int], memory: int) -> None:
        self.cpus = cpus  # guest vCPU ids
        self.memory = memory  # MiB
        self.pagesize: int | None = None  # KiB, or MEMPAGES_* below
        self.host = 0  # host cell id
        self.pinning: dict[int, int] = {}
        self.reserved: set[int] = set()


MEMPAGES_SMALL, MEMPAGES_LARGE, MEMPAGES_ANY = -1, -2, -3


def _pagesize(inp: Inputs) -> int | None:
    flavor_request = inp.spec("hw:mem_page_size")
    image_request = inp.prop("hw_mem_page_size")
    if not flavor_request and image_request:
        raise Refused(f"the image asks hw_mem_page_size={image_request} but the flavor sets no hw:mem_page_size "
                      "(MemoryPageSizeForbidden)")
    if not flavor_request:
        return None

    def parse(request: str) -> int:
        request = request.strip().lower()
        named = {"any": MEMPAGES_ANY, "large": MEMPAGES_LARGE, "small": MEMPAGES_SMALL}
        if request in named:
            return named[request]
        if request.isdigit():
            return int(request)
        units = {"kb": 1, "k": 1, "kib": 1, "mb": 1024, "m": 1024, "mib": 1024, "gb": 1024 ** 2, "g": 1024 ** 2,
                 "gib": 1024 ** 2}
        for suffix in sorted(units, key=len, reverse=True):
            if request.endswith(suffix) and request[:-len(suffix)].strip().isdigit():
                return int(request[:-len(suffix)]) * units[suffix]
        raise Refused(f"hw:mem_page_size={request!r} is no page size (MemoryPageSizeInvalid)")

    size = parse(flavor_request)
    if image_request and size in (MEMPAGES_ANY, MEMPAGES_LARGE):
        return parse(str(image_request))
    if image_request:
        raise Refused(f"the image asks hw_mem_page_size={image_request}, the flavor fixes "
                      f"hw:mem_page_size={flavor_request} (MemoryPageSizeForbidden)")
    return size


def cpu_policy(inp: Inputs) -> str | None:
    flavor_policy = inp.spec("hw:cpu_policy")
    image_policy = inp.prop("hw_cpu_policy")
    for value, where in ((flavor_policy, "hw:cpu_policy"), (image_policy, "hw_cpu_policy")):
        if value is not None and value not in ("shared", "dedicated", "mixed"):
            raise Refused(f"{where}={value!r} is not shared, dedicated or mixed (InvalidCPUAllocationPolicy)")
    if flavor_policy == "dedicated":
        return "dedicated"
    if flavor_policy in ("shared", "mixed"):
        if image_policy == "dedicated":
            raise Refused("the image asks hw_cpu_policy=dedicated, the flavor forbids it (ImageCPUPinningForbidden)")
        return flavor_policy
    return str(image_policy) if image_policy else None


def realtime_cpus(inp: Inputs) -> set[int] | None:
    if not bool_from_string(inp.spec("hw:cpu_realtime", "")):
        return None
    mask = inp.prop("hw_cpu_realtime_mask") or inp.spec("hw:cpu_realtime_mask")
    vcpus = inp.flavor.vcpus
    everything = set(range(vcpus))
    if mask:
        mask = str(mask)
        rt = parse_cpu_spec(f"0-{vcpus - 1},{mask}" if mask.strip().startswith("^") else mask)
    else:
        rt = set(everything)
    if not rt:
        raise Refused("hw:cpu_realtime_mask leaves no realtime vCPU (RealtimeMaskNotFoundOrInvalid)")
    if rt == everything and not inp.spec("hw:emulator_threads_policy"):
        raise Refused("hw:cpu_realtime=yes needs hw:cpu_realtime_mask to leave a vCPU for the emulator threads, "
                      "or hw:emulator_threads_policy (RealtimeMaskNotFoundOrInvalid)")
    if not rt <= everything:
        raise Refused("hw:cpu_realtime_mask names vCPUs the flavor does not have (RealtimeMaskNotFoundOrInvalid)")
    return rt


def numa_cells(inp: Inputs) -> tuple[list[Cell] | None, str | None, set[int]]:
    """The instance NUMA topology nova builds and fits on FAKE_HOST (pinning included), the
    emulator threads policy, and the realtime vCPUs."""
    policy = cpu_policy(inp)
    emu = inp.spec("hw:emulator_threads_policy") or None
    if emu is not None and emu not in ("share", "isolate"):
        raise Refused(f"hw:emulator_threads_policy={emu!r} is not share or isolate (InvalidEmulatorThreadsPolicy)")
    rt = realtime_cpus(inp) if policy in ("dedicated", "mixed") else None
    thread_policy = inp.spec("hw:cpu_thread_policy") or inp.prop("hw_cpu_thread_policy")
    if thread_policy and policy not in ("dedicated", "mixed"):
        raise Refused("hw:cpu_thread_policy needs hw:cpu_policy=dedicated (CPUThreadPolicyConfigurationInvalid)")
    if thread_policy == "isolate":  # FAKE_HOST has SMT siblings
        raise Refused("hw:cpu_thread_policy=isolate on a host with hyperthreads: nova's scheduler finds no host "
                      "(NoValidHost)")
    if policy not in ("dedicated", "mixed"):
        if emu == "isolate":
            raise Refused("hw:emulator_threads_policy=isolate needs hw:cpu_policy=dedicated "
                          "(BadRequirementEmulatorThreadsPolicy)")
        if bool_from_string(inp.spec("hw:cpu_realtime", "")):
            raise Refused("hw:cpu_realtime needs hw:cpu_policy=dedicated (RealtimeConfigurationInvalid)")
    node_text = inp.spec("hw:numa_nodes")
    image_nodes = inp.int_prop("hw_numa_nodes")
    if node_text is not None and image_nodes and int_or_refuse(node_text, "hw:numa_nodes") != image_nodes:
        raise Refused("the image's hw_numa_nodes differs from the flavor's hw:numa_nodes (ImageNUMATopologyForbidden)")
    nodes = int_or_refuse(node_text, "hw:numa_nodes") if node_text is not None else image_nodes
    if node_text is not None and nodes < 1:
        raise Refused(f"hw:numa_nodes={node_text} (InvalidNUMANodesNumber)")
    pagesize = _pagesize(inp)
    if not (nodes or pagesize or policy in ("dedicated", "mixed")):
        return None, emu, set()
    nodes = nodes or 1
    flavor = inp.flavor
    if flavor.vcpus % nodes or flavor.ram % nodes:
        raise Refused(f"{flavor.vcpus} vCPUs and {flavor.ram} MiB do not split evenly over {nodes} NUMA nodes "
                      "(ImageNUMATopologyAsymmetric)")
    per = flavor.vcpus // nodes
    cells = [Cell(list(range(n * per, (n + 1) * per)), flavor.ram // nodes) for n in range(nodes)]
    manual = _manual_cells(inp, nodes)
    if manual is not None:
        cells = manual
    for cell in cells:
        cell.pagesize = pagesize
    if nodes > len(inp.host.cells):
        raise Refused(f"hw:numa_nodes={nodes}: the host has {len(inp.host.cells)} NUMA cells (NoValidHost)")
    dedicated = set(range(flavor.vcpus)) if policy == "dedicated" else (rt or set()) if policy == "mixed" else set()
    if policy == "mixed" and rt and inp.spec("hw:cpu_dedicated_mask"):
        raise Refused("hw:cpu_policy=mixed takes its dedicated CPUs from hw:cpu_dedicated_mask or "
                      "hw:cpu_realtime_mask, not both (RequiredMixedOrRealtimeCPUMask)")
    if policy == "mixed" and not (rt or inp.spec("hw:cpu_dedicated_mask")):
        raise Refused("hw:cpu_policy=mixed needs hw:cpu_dedicated_mask or a realtime mask "
                      "(RequiredMixedOrRealtimeCPUMask)")
    if policy == "mixed" and inp.spec("hw:cpu_dedicated_mask"):
        mask = str(inp.spec("hw:cpu_dedicated_mask"))
        dedicated = parse_cpu_spec(f"0-{flavor.vcpus - 1},{mask}" if mask.strip().startswith("^") else mask)
    _fit(inp.host, cells, dedicated, emu == "isolate", *host_pools(inp))
    return cells, emu, rt or set()


def int_or_refuse(text: str, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise Refused(f"flavor extra spec {key}={text!r} is not an integer") from None


def _manual_cells(inp: Inputs, nodes: int) -> list[Cell] | None:
    cpus = [inp.spec(f"hw:numa_cpus.{n}") for n in range(nodes)]
    mems = [inp.spec(f"hw:numa_mem.{n}") for n in range(nodes)]
    if not any(cpus) and not any(mems):
        return None
    if not all(cpus) or not all(mems):
        raise Refused("hw:numa_cpus.N and hw:numa_mem.N must be given for every node (ImageNUMATopologyIncomplete)")
    cells = [Cell(sorted(parse_cpu_spec(str(c))), int_or_refuse(str(m), "hw:numa_mem"))
             for c, m in zip(cpus, mems, strict=True)]
    if sum(c.memory for c in cells) != inp.flavor.ram:
        raise Refused("hw:numa_mem.N do not add up to the flavor's RAM (ImageNUMATopologyMemoryOutOfRange)")
    return cells


def host_pools(inp: Inputs) -> tuple[AbstractSet[int], AbstractSet[int]]:
    """The host CPUs for pinned and for floating vCPUs: [compute] cpu_dedicated_set and
    cpu_shared_set; neither set (the legacy layout): every CPU serves both."""
    everything = inp.host.cpus
    dedicated_text = inp.opt("compute", "cpu_dedicated_set")
    shared_text = inp.opt("compute", "cpu_shared_set")
    if not dedicated_text and not shared_text:
        return everything, everything
    dedicated = parse_cpu_spec(dedicated_text) & everything if dedicated_text else set()
    shared = parse_cpu_spec(shared_text) & everything if shared_text else everything - dedicated
    return dedicated, shared


def _fit(host: NodeHost, cells: list[Cell], dedicated: set[int], isolate: bool, pool: AbstractSet[int],
         shared_pool: AbstractSet[int]) -> None:
    """numa_fit_instance_to_host on an empty host: instance cells on host cells in order
    (nova's default packing sorts equally used cells stably), dedicated vCPUs on the cell's
    lowest free CPUs of cpu_dedicated_set, an isolated emulator thread on the next free one of
    the first cell. Which free CPUs nova picks (it packs by thread siblings) differs; that the
    pins are single, distinct dedicated CPUs is what the rules read."""
    for index, cell in enumerate(cells):
        host_cpus = tuple(c for c in host.cells[index] if c in pool) if dedicated else host.cells[index]
        cell.host = index
        if cell.memory > host.cell_memory_mib:
            raise Refused(f"{cell.memory} MiB do not fit a host NUMA cell of {host.cell_memory_mib} MiB "
                          "(NoValidHost)")
        pinned = [v for v in cell.cpus if v in dedicated]
        floating = len(cell.cpus) - len(pinned)
        shared_here = len(set(host.cells[index]) & shared_pool)
        if floating > shared_here:  # hardware._numa_fit_instance_cell: "Not enough host cell CPUs"
            raise Refused(f"{floating} shared vCPUs in a guest NUMA node need as many host CPUs of the cell's "
                          f"cpu_shared_set; it has {shared_here} (NoValidHost)")
        need = len(pinned) + (1 if isolate and index == 0 else 0)
        if need > len(host_cpus):
            raise Refused(f"{need} dedicated CPUs do not fit a host NUMA cell of {len(host_cpus)} CPUs "
                          "(NoValidHost; set hw:numa_nodes)")
        cell.pinning = dict(zip(pinned, host_cpus, strict=False))
        if isolate and index == 0:
            cell.reserved = {host_cpus[len(pinned)]}


def memory_pages(cell: Cell, host: NodeHost = HOST) -> int | None:
    """The page size (KiB) hardware._numa_cell_supports_pagesize_request picks for a cell."""
    size = cell.pagesize
    if size is None:
        return None
    memory_kib = cell.memory * 1024
    sizes = sorted(host.page_sizes_kib, reverse=True)
    if size == MEMPAGES_SMALL:
        candidates = sizes[-1:]
    elif size == MEMPAGES_LARGE:
        candidates = sizes[:-1]
    elif size == MEMPAGES_ANY:
        candidates = sizes
    else:
        if size not in host.page_sizes_kib:
            raise Refused(f"page size {size} KiB: the host has none (MemoryPageSizeNotSupported)")
        candidates = [size]
    for candidate in candidates:
        if memory_kib % candidate == 0 and memory_kib <= host.pages_kib.get(candidate, 0):
            return candidate
    # hardware._numa_cell_supports_pagesize_request: a size the cell's memory is no multiple of, or
    # more such pages than the cell's pool holds (the scheduler then finds no host)
    pools = ", ".join(f"{_size_text(c)} pages for {host.pages_kib.get(c, 0) // 1024 ** 2} GiB" for c in candidates)
    divides = [c for c in candidates if memory_kib % c == 0]
    why = (f"more than the stated host's cell holds ({pools})" if divides else
           f"no multiple of the page size{'s' if len(candidates) > 1 else ''} asked")
    raise Refused(f"hw:mem_page_size: a guest NUMA node of {cell.memory} MiB is {why} "
                  "(NoValidHost)")


def _size_text(kib: int) -> str:
    return f"{kib // 1024 ** 2} GiB" if kib >= 1024 ** 2 else f"{kib // 1024} MiB" if kib >= 1024 else f"{kib} KiB"


# -- the domain --------------------------------------------------------------------------------------

_SPECIAL = frozenset("&<>\"'\n\r\t")


def _attr(value: object) -> str:
    if value.__class__ is int:  # a number (a fifth of the values): nothing to escape
        return f'"{value}"'
    text = str(value)
    if _SPECIAL.isdisjoint(text):  # the common case, without quoteattr's replace chain
        return f'"{text}"'
    return quoteattr(text)


def _body(value: object) -> str:
    text = str(value)
    return escape(text) if not _SPECIAL.isdisjoint(text) else text


def _el(tag_: str, text: object = None, **attrs: object) -> str:
    """An element, its attributes in order (those None left out). Where every attribute is
    known to be there, the renderer writes `name={_attr(value)}` itself: the keyword mapping
    cost more than the quoting (~10 of a domain's ~17 elements)."""
    attr_text = ""  # a loop, not a joined list comprehension: most elements have one or two
    for key, value in attrs.items():
        if value is not None:
            attr_text += f" {key}={_attr(value)}"
    if text is None:
        return f"<{tag_}{attr_text}/>"
    return f"<{tag_}{attr_text}>{_body(text)}</{tag_}>"


def locked_memory(inp: Inputs) -> bool:
    """hardware.get_locked_memory_constraint: hw:locked_memory / hw_locked_memory (needs a page
    size); memory encryption's need of locked memory does not arise on the stated host (no SEV)."""
    flavor_value = inp.spec("hw:locked_memory")
    image_value = _prop_bool(inp.prop("hw_locked_memory"))
    locked = bool_from_string(flavor_value) if flavor_value is not None else image_value
    if flavor_value is not None and image_value is not None and locked != image_value:
        raise Refused("the flavor's hw:locked_memory conflicts with the image's hw_locked_memory "
                      "(FlavorImageLockedMemoryConflict)")
    if locked and not (inp.spec("hw:mem_page_size") or inp.prop("hw_mem_page_size")):
        raise Refused("hw:locked_memory needs hw:mem_page_size (LockMemoryForbidden)")
    return bool(locked)


def memory_encryption(inp: Inputs) -> None:
    """hw:mem_encryption / hw_mem_encryption need AMD SEV, which FAKE_HOST lacks: placement
    offers no candidate (no MEM_ENCRYPTION_CONTEXT inventory)."""
    encryption = inp.spec("hw:mem_encryption")
    if (bool_from_string(encryption) if encryption is not None else False) or _prop_bool(
            inp.prop("hw_mem_encryption")):
        raise Refused("memory encryption (hw:mem_encryption) needs an AMD SEV host; the stated host has none "
                      "(NoValidHost)")


def machine_type(inp: Inputs) -> str:
    given = inp.prop("hw_machine_type")
    if given:
        return str(given)
    for mapping in (inp.opt("libvirt", "hw_machine_type") or "").split(","):
        arch, _sep, mtype = mapping.strip().partition("=")
        if mtype and arch.strip() == inp.host.arch:
            return mtype.strip()
    return "pc"


def disk_bus(inp: Inputs) -> str:
    bus = inp.prop("hw_disk_bus")
    return str(bus) if bus else "virtio"


_DEV_PREFIX = {"virtio": "vd", "scsi": "sd", "sata": "sd", "usb": "sd", "ide": "hd", "fdc": "fd", "xen": "xvd"}


def render(flavor: Flavor, image: Image, conf: NovaConf | None = None, name: str | None = None,
           host: NodeHost | None = None) -> tuple[bytes, list[str]]:
    """The domain XML and the notes (requests nova refuses, said in nova's terms), on `host`
    (default: the assumed HOST)."""
    inp = Inputs(flavor, image, conf, host)
    display = name or f"{inp.flavor_name} × {inp.image_name}"
    parts = _domain(inp, printable(display) if _NOT_XML.search(display) else display)  # refused already
    return "\n".join(parts).encode(), inp.notes


T = TypeVar("T")


def _attempt(inp: Inputs, what: str, default: T, func: Callable[[], T]) -> T:
    try:
        return func()
    except Refused as exc:
        inp.notes.append(f"nova refuses {what}: {exc}")
        return default


def _domain(inp: Inputs, display: str) -> list[str]:
    flavor = inp.flavor
    windows = str(inp.prop("os_type") or "").lower() == "windows"
    import uuid as uuidlib  # here: ~2.5 ms of every stack source's start (each asks every front end)

    uuid = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "vmtune-nova:" + display))
    _attempt(inp, "the guest", None, lambda: memory_encryption(inp))
    no_numa: tuple[list[Cell] | None, str | None, set[int]] = (None, None, set())
    cells, emu, rt = _attempt(inp, "the flavor's NUMA/CPU pinning request", no_numa, lambda: numa_cells(inp))
    topology = _attempt(inp, "the CPU topology request", (flavor.vcpus, 1, 1), lambda: cpu_topology(inp))
    shared_set = inp.opt("compute", "cpu_shared_set")
    shared_cpus: set[int] | None = None
    if shared_set:
        shared_cpus = _attempt(inp, "[compute] cpu_shared_set", None, lambda: parse_cpu_spec(shared_set))
    virt_type = inp.opt("libvirt", "virt_type", "kvm")
    opening = _DOMAIN_OPEN if virt_type == "kvm" else _DOMAIN_OPEN.replace("'kvm'", _attr(virt_type))
    out = [opening, f"<uuid>{uuid}</uuid><name>instance-00000001</name><memory>{flavor.ram * 1024}</memory>"]
    # memoryBacking
    pages: list[tuple[int, int]] = []
    if cells:
        for index, cell in enumerate(cells):
            size = _attempt(inp, "the page size request", None, lambda c=cell: memory_pages(c, inp.host))  # type: ignore[misc]
            if size and size > min(inp.host.page_sizes_kib):
                pages.append((index, size))
    realtime = bool(rt)
    backing = []
    if pages:
        backing.append("<hugepages>" + "".join(_el("page", size=s, nodeset=n, unit="KiB") for n, s in pages)
                       + "</hugepages>")
    if realtime:
        backing.append("<nosharepages/>")
    if realtime or _attempt(inp, "hw:locked_memory", False, lambda: locked_memory(inp)):
        backing.append("<locked/>")
    if backing:
        out += ["<memoryBacking>", *backing, "</memoryBacking>"]
    if cells:
        nodeset = format_cpu_spec(c.host for c in cells)
        out += ["<numatune>", _el("memory", mode="strict", nodeset=nodeset)]
        out += [_el("memnode", cellid=i, mode="strict", nodeset=c.host) for i, c in enumerate(cells)]
        out.append("</numatune>")
        out.append(f"<vcpu>{flavor.vcpus}</vcpu>")
    elif shared_cpus:
        out.append(f"<vcpu cpuset='{format_cpu_spec(shared_cpus)}'>{flavor.vcpus}</vcpu>")
    else:
        out.append(f"<vcpu>{flavor.vcpus}</vcpu>")
    out += _metadata(inp, display)
    out.append(_SYSINFO.format(uuid=uuid))
    out += _os(inp)
    out += _features(inp, windows)
    out.append("<iothreads>1</iothreads>")
    out += _cputune(inp, cells, emu, rt, shared_cpus)
    out += _clock(inp, windows)
    out += _cpu(inp, topology, cells, bool(pages))
    out.append("<devices>")
    out += _disks(inp)
    out += _interface(inp)
    out.append(f"<serial type='pty'><log file='/var/lib/nova/instances/{uuid}/console.log' append='off'/></serial>")
    out += _graphics_and_input(inp)
    out += _other_devices(inp)
    out.append("</devices>")
    out.append("</domain>")
    return out


_DOMAIN_OPEN = f"<domain type='kvm' xmlns:nova={quoteattr(NOVA_NS)}>"
_SYSINFO = ("<sysinfo type='smbios'><system><entry name='manufacturer'>OpenStack Foundation</entry>"
            "<entry name='product'>OpenStack Nova</entry><entry name='version'>" + NOVA_VERSION + "</entry>"
            "<entry name='serial'>{uuid}</entry><entry name='uuid'>{uuid}</entry>"
            "<entry name='family'>Virtual Machine</entry></system></sysinfo>")


def _metadata(inp: Inputs, display: str) -> list[str]:
    flavor = inp.flavor
    specs = "".join([_named("nova:extraSpec", k, v) for k, v in sorted(inp.specs.items())])
    props = "".join([_named("nova:property", k, v) for k, v in sorted(inp.props.items())
                     if k.startswith(_WRITTEN_PROPS)])
    return [f"<metadata><nova:instance><nova:package version='{NOVA_VERSION}'/><nova:name>{_body(display)}"
            "</nova:name>",
            f"<nova:flavor name={_attr(inp.flavor_name)}><nova:memory>{flavor.ram}</nova:memory>"
            f"<nova:disk>{flavor.disk}</nova:disk><nova:swap>{flavor.swap}</nova:swap>"
            f"<nova:ephemeral>{flavor.ephemeral}</nova:ephemeral><nova:vcpus>{flavor.vcpus}</nova:vcpus>",
            f"<nova:extraSpecs>{specs}</nova:extraSpecs>", "</nova:flavor>",
            f"<nova:image name={quoteattr(inp.image_name)}>", f"<nova:properties>{props}</nova:properties>",
            "</nova:image>", "</nova:instance>", "</metadata>"]


def _named(tag: str, name: str, value: object) -> str:
    """_el(tag, value, name=name) without the keyword mapping: an extra spec or image property."""
    if value is None:
        return f"<{tag} name={_attr(name)}/>"
    return f"<{tag} name={_attr(name)}>{_body(value)}</{tag}>"


def _os(inp: Inputs) -> list[str]:
    firmware = inp.prop("hw_firmware_type")
    out = []
    mtype = machine_type(inp)
    if firmware == "uefi":
        secure = inp.spec("os:secure_boot") or inp.prop("os_secure_boot")
        out.append("<os firmware='efi'>")
        loader_secure = "yes" if secure == "required" else "no"
        out.append(f"<firmware><feature name='secure-boot' enabled='{loader_secure}'/></firmware>")
        out.append(f"<type arch={_attr(inp.host.arch)} machine={_attr(mtype)}>hvm</type>")
        out.append(_el("loader", secure=loader_secure))
    else:
        out.append("<os>")
        out.append(f"<type arch={_attr(inp.host.arch)} machine={_attr(mtype)}>hvm</type>")
    out.append('<boot dev="hd"/>')
    out.append("<smbios mode='sysinfo'/>")
    boot_menu = inp.prop("hw_boot_menu")
    if (bool_from_string(boot_menu) if boot_menu is not None else bool_from_string(inp.spec("hw:boot_menu", "no"))):
        out.append("<bootmenu enable='yes'/>")
    out.append("</os>")
    return out


def _pmu(inp: Inputs) -> bool | None:
    flavor_value = inp.spec("hw:pmu")
    f = bool_from_string(flavor_value) if flavor_value is not None else None
    i = _prop_bool(inp.prop("hw_pmu"))
    if f is not None and i is not None and f != i:
        raise Refused(f"the flavor's hw:pmu={flavor_value} conflicts with the image's hw_pmu (FlavorImageConflict)")
    return f if f is not None else i


def _features(inp: Inputs, windows: bool) -> list[str]:
    hide = (bool_from_string(inp.spec("hide_hypervisor_id", ""))
            or bool_from_string(inp.spec("hw:hide_hypervisor_id", ""))
            or bool(_prop_bool(inp.prop("img_hide_hypervisor_id"))))
    out = ["<features>", "<acpi/>", "<apic/>"]
    if windows:
        out += ["<hyperv>", "<relaxed state='on'/>", "<vapic state='on'/>", "<spinlocks state='on' retries='8191'/>",
                "<vpindex state='on'/>", "<runtime state='on'/>", "<synic state='on'/>", "<reset state='on'/>",
                "<frequencies state='on'/>", "<tlbflush state='on'/>", "<ipi state='on'/>"]
        if hide:
            out.append("<vendor_id state='on' value='1234567890ab'/>")
        out.append("</hyperv>")
    out.append("<vmcoreinfo/>")
    if hide:
        out.append("<kvm><hidden state='on'/></kvm>")
    pmu = _attempt(inp, "hw:pmu", None, lambda: _pmu(inp))
    if pmu is not None:
        out.append(_el("pmu", state="on" if pmu else "off"))
    out.append("</features>")
    return out


def _cputune(inp: Inputs, cells: list[Cell] | None, emu: str | None, rt: set[int],
             shared_cpus: set[int] | None) -> list[str]:
    quota = [(name, inp.spec("quota:cpu_" + name)) for name in ("shares", "period", "quota")]
    quota_elements = []
    for name, value in quota:
        if value is not None:
            try:
                quota_elements.append(_el(name, int(value)))
            except ValueError:
                inp.notes.append(f"nova refuses quota:cpu_{name}={value!r}: not an integer")
    if not cells:
        return ["<cputune>", *quota_elements, "</cputune>"] if quota_elements else []
    emulator: set[int] = set()
    pins: list[tuple[int, str]] = []  # (vCPU, its host CPUs as a CPU spec)
    shared_pool = host_pools(inp)[1]
    for cell in cells:
        floating = set(inp.host.cells[cell.host]) & shared_pool
        floating_spec = ""  # the cell's floating CPUs written once for all its unpinned vCPUs
        for vcpu in cell.cpus:
            host_cpu = cell.pinning.get(vcpu)
            if host_cpu is not None:
                pin = {host_cpu}
                pins.append((vcpu, str(host_cpu)))  # format_cpu_spec of one CPU
            else:
                pin = floating
                floating_spec = floating_spec or format_cpu_spec(floating)
                pins.append((vcpu, floating_spec))
            if emu == "isolate":
                emulator |= cell.reserved
            elif emu == "share" and shared_cpus:
                emulator |= shared_cpus
            elif not rt or vcpu not in rt:
                emulator |= pin
    out = ["<cputune>", *quota_elements]
    if emulator:
        spec = format_cpu_spec(emulator)
        out.append(f"<emulatorpin cpuset='{spec}'/><iothreadpin iothread='1' cpuset='{spec}'/>")
    for vcpu, spec in sorted(pins, key=lambda p: p[0]):
        out.append(f"<vcpupin vcpu='{vcpu}' cpuset='{spec}'/>")
    if rt:
        priority = inp.int_opt("libvirt", "realtime_scheduler_priority", 1)
        out.append(_el("vcpusched", vcpus=format_cpu_spec(rt), scheduler="fifo", priority=priority))
    out.append("</cputune>")
    return out


def _clock(inp: Inputs, windows: bool) -> list[str]:
    out = ["<clock offset='localtime'>" if windows else "<clock offset='utc'>"]
    if inp.opt("libvirt", "virt_type", "kvm") != "kvm":  # nova sets its timers for KVM only
        return [*out, "</clock>"]
    out += ["<timer name='pit' tickpolicy='delay'/>", "<timer name='rtc' tickpolicy='catchup'/>",
            f'<timer name="hpet" present="{"yes" if _prop_bool(inp.prop("hw_time_hpet")) else "no"}"/>']
    if windows:
        out.append("<timer name='hypervclock' present='yes'/>")
    out.append("</clock>")
    return out


def _cpu(inp: Inputs, topology: tuple[int, int, int], cells: list[Cell] | None, hugepages: bool) -> list[str]:
    mode = inp.opt("libvirt", "cpu_mode") or "host-model"
    models = [m.strip() for m in (inp.opt("libvirt", "cpu_models") or "").split(",") if m.strip()]
    if mode == "none":
        return ["<cpu/>"] if not cells else ["<cpu>", *_cpu_numa(cells, hugepages), "</cpu>"]
    out = [f"<cpu mode={quoteattr(mode)} match='exact'>"]
    if models:
        out.append(_el("model", models[0]))
    sockets, cores, threads = topology
    out.append(f"<topology sockets={_attr(sockets)} cores={_attr(cores)} threads={_attr(threads)}/>")
    flags = sorted({f.strip().lower() for f in (inp.opt("libvirt", "cpu_model_extra_flags") or "").split(",")
                    if f.strip()})
    for flag in sorted(flags, key=lambda f: f.lstrip("+-")):
        policy = "disable" if flag.startswith("-") else "require"
        out.append(_el("feature", name=flag.lstrip("+-"), policy=policy))
    if cells:
        out += _cpu_numa(cells, hugepages)
    out.append("</cpu>")
    return out


def _cpu_numa(cells: list[Cell], hugepages: bool) -> list[str]:
    return ["<numa>", *(_el("cell", id=i, cpus=format_cpu_spec(c.cpus), memory=c.memory * 1024,
                            memAccess="shared" if hugepages else None) for i, c in enumerate(cells)), "</numa>"]


def _cachemodes(inp: Inputs) -> dict[str, str]:
    modes = {}
    for item in (inp.opt("libvirt", "disk_cachemodes") or "").split(","):
        kind, sep, mode = item.strip().partition("=")
        if sep and kind.strip() and mode.strip():
            modes[kind.strip()] = mode.strip()
    return modes


def _disks(inp: Inputs) -> list[str]:
    flavor = inp.flavor
    bus = disk_bus(inp)
    cache = _cachemodes(inp).get("file", "none")
    discard = inp.opt("libvirt", "hw_disk_discard")
    prefix = _DEV_PREFIX.get(bus, "sd")
    names = ["disk"] + (["disk.local"] if flavor.ephemeral else []) + (["disk.swap"] if flavor.swap else [])
    images_type = inp.opt("libvirt", "images_type", "default")
    out = []
    for index, name in enumerate(names):
        dev = prefix + "abcdefghijklmnopqrstuvwxyz"[index]
        if images_type == "lvm":  # imagebackend.Lvm: a raw logical volume, io='native'
            block_cache = _cachemodes(inp).get("block", "none")
            io = "native" if block_cache in ("none", "directsync") else "threads"
            out += ["<disk type='block' device='disk'>", _el("driver", name="qemu", type="raw", cache=block_cache,
                                                             io=io, discard=discard),
                    _el("source", dev=f"/dev/nova-vg/instance-00000001_{name.replace('.', '_')}"),
                    _el("target", dev=dev, bus=bus), "</disk>"]
            continue
        fmt = "raw" if images_type in ("flat", "raw") else "qcow2"
        out += ["<disk type='file' device='disk'>", _el("driver", name="qemu", type=fmt, cache=cache,
                                                            discard=discard),
                f'<source file="/var/lib/nova/instances/instance-00000001/{name}"/>',
                f"<target dev={_attr(dev)} bus={_attr(bus)}/>", "</disk>"]
    scsi_model = inp.prop("hw_scsi_model")
    if bus == "scsi" and scsi_model == "virtio-scsi":
        out.append(_el("controller", type="scsi", index=0, model="virtio-scsi"))
    return out


def _multiqueue(inp: Inputs) -> bool:
    if inp.flavor.vcpus < 2:
        return False
    flavor_value = inp.spec("hw:vif_multiqueue_enabled")
    f = bool_from_string(flavor_value) if flavor_value is not None else None
    i = _prop_bool(inp.prop("hw_vif_multiqueue_enabled"))
    if f is not None and i is not None and f != i:
        raise Refused(f"the flavor's hw:vif_multiqueue_enabled={flavor_value} conflicts with the image's "
                      "hw_vif_multiqueue_enabled (FlavorImageConflict)")
    return bool(f if f is not None else i)


def _interface(inp: Inputs) -> list[str]:
    model = inp.prop("hw_vif_model")
    model = str(model) if model else "virtio"
    driver = None
    queues = None
    rx = inp.int_opt("libvirt", "rx_queue_size", None, (256, 512, 1024))
    if model == "virtio" and inp.opt("libvirt", "virt_type", "kvm") == "qemu":
        driver = "qemu"  # vif.py: libvirt would enable vhost for TCG guests otherwise
        rx = rx if rx else None
    elif model == "virtio":
        if _attempt(inp, "hw:vif_multiqueue_enabled", False, lambda: _multiqueue(inp)):
            driver = "vhost"
            limit = inp.int_opt("libvirt", "max_queues", None)
            queues = min(inp.flavor.vcpus, limit) if limit else inp.flavor.vcpus
        if rx and driver is None:
            driver = "vhost"
    else:
        rx = None
    packed = (bool_from_string(inp.spec("hw:virtio_packed_ring", ""))
              or bool(_prop_bool(inp.prop("hw_virtio_packed_ring"))))
    out = ["<interface type='bridge'>", "<mac address='fa:16:3e:00:00:01'/>", f"<model type={_attr(model)}/>"]
    if driver or packed:
        out.append(_el("driver", name=driver, packed="on" if packed else None, queues=queues, rx_queue_size=rx))
    out += ["<source bridge='br-int'/>", "<target dev='tap00000000-01'/>",
            "<virtualport type='openvswitch'><parameters interfaceid='00000000-0000-0000-0000-000000000001'/>"
            "</virtualport>", "</interface>"]
    return out


def _conf_bool(inp: Inputs, section: str, option: str, default: bool) -> bool:
    value = inp.opt(section, option)
    return default if value is None else bool_from_string(value)


def _graphics(inp: Inputs) -> tuple[bool, bool, bool]:
    """[vnc] enabled (default on), [spice] enabled (off), [spice] agent_enabled (on)."""
    if inp.graphics is None:
        inp.graphics = (_conf_bool(inp, "vnc", "enabled", True), _conf_bool(inp, "spice", "enabled", False),
                        _conf_bool(inp, "spice", "agent_enabled", True))
    return inp.graphics


def pointer(inp: Inputs) -> tuple[str, str] | None:
    """driver._get_pointer_bus_and_model: (type, bus) of the pointer nova adds, if any."""
    vnc, spice, agent = _graphics(inp)
    if not (vnc or spice):
        return None  # no graphics device: nova adds no video, pointer or keyboard
    input_bus = inp.prop("hw_input_bus")
    if input_bus:
        result = ("tablet", str(input_bus))
    elif inp.prop("hw_pointer_model") or inp.opt("DEFAULT", "pointer_model", "usbtablet") == "usbtablet":
        result = ("tablet", "usb")
    else:
        return None
    if spice and agent and not vnc:
        return None  # the SPICE agent's paravirtual mouse instead
    return result


def _graphics_and_input(inp: Inputs) -> list[str]:
    vnc, spice, agent = _graphics(inp)
    out = []
    if spice and agent:
        out.append("<channel type='spicevmc'><target type='virtio' name='com.redhat.spice.0'/></channel>")
    if vnc:
        out.append("<graphics type='vnc' autoport='yes' listen='127.0.0.1'/>")
    if spice:
        out.append("<graphics type='spice' autoport='yes' listen='127.0.0.1'/>")
    if not (vnc or spice):
        return out
    video = inp.prop("hw_video_model")
    out.append(f"<video><model type={_attr(str(video) if video else 'virtio')}/></video>")
    found = pointer(inp)
    if found:
        out.append(f"<input type={_attr(found[0])} bus={_attr(found[1])}/>")
    input_bus = inp.prop("hw_input_bus")
    if input_bus:
        out.append(_el("input", type="keyboard", bus=input_bus))
    return out


def _other_devices(inp: Inputs) -> list[str]:
    out = []
    if bool_from_string(inp.spec("hw_rng:allowed", "True")):
        rate = inp.spec("hw_rng:rate_bytes")
        rate_el = _el("rate", bytes=rate, period=inp.spec("hw_rng:rate_period", "0")) if rate and rate != "0" else ""
        path = inp.opt("libvirt", "rng_dev_path", "/dev/urandom")
        out.append(f"<rng model='virtio'>{rate_el}<backend model='random'>{escape(str(path))}</backend></rng>")
    if _prop_bool(inp.prop("hw_qemu_guest_agent")):
        out.append("<channel type='unix'><source mode='bind' path='/var/lib/libvirt/qemu/org.qemu.guest_agent.0."
                   "instance-00000001.sock'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>")
    if "q35" in machine_type(inp):
        ports = inp.int_opt("libvirt", "num_pcie_ports", 0) or 0
        if ports:
            out.append("<controller type='pci' model='pcie-root'/>")
            out += ["<controller type='pci' model='pcie-root-port'/>"] * min(ports, 28)
    # USB root controller: nova leaves the model unset (libvirt's default) when a USB device is
    # attached, else writes hw_usb_model / hw:usb_model or 'none'.
    found = pointer(inp)
    usb_needed = disk_bus(inp) == "usb" or (found is not None and found[1] == "usb") or (
        inp.prop("hw_input_bus") == "usb" and any(_graphics(inp)[:2]))
    specified = inp.spec("hw:usb_model") or inp.prop("hw_usb_model")
    model = None if usb_needed else (str(specified) if specified else "none")
    out.append(_el("controller", type="usb", index=0, model=model))
    action = inp.prop("hw_watchdog_action") or inp.spec("hw:watchdog_action") or "disabled"
    if action != "disabled":
        out.append(_el("watchdog", model="i6300esb", action=action))
    period = inp.int_opt("libvirt", "mem_stats_period_seconds", 10) or 0
    if period > 0:
        out.append(f"<memballoon model='virtio' autodeflate='on' freePageReporting='on'><stats period='{period}'/>"
                   "</memballoon>")
    else:
        out.append("<memballoon model='none' autodeflate='on' freePageReporting='on'/>")
    return out
