"""The libvirt domain XML virt-launcher writes for a VMI spec, as KubeVirt d923fdb does it.

Followed, for amd64 and KubeVirt's default cluster configuration (vmRolloutStrategy Stage, as
the oracle fixtures use: fixtures/stacks/kubevirt/dump/main.go):
- virt-api's defaulting (pkg/defaults, the v1 API's SetDefaults_*): machine type q35, guest
  memory from requests/limits, the CPU topology from resources, disk bus sata, a disk for each
  volume, input bus usb, Hyper-V dependencies (synictimer → synic → vpindex, ipi/tlbflush →
  vpindex, evmcs → vapic), spinlocks retries 4096, acpi on, vmport off;
- the converter's configurators (pkg/virt-launcher/virtwrap/converter): interfaces (model,
  vhost queues for networkInterfaceMultiqueue), disks (bus, names, iothreads, blockMultiQueue
  queues, discard, error policy), controllers (usb none unless a USB device, scsi, virtio-serial),
  graphics and video (bochs for EFI), memballoon (stats 10 s, free page reporting unless
  high-performance), serial console with log, rng, tpm, inputs, watchdog, sound, clock and
  timers, features, CPU model/topology/features, dedicated CPUs (vcpupin from pod CPU 2 on, as
  the oracle's fixed CPU set, hint-dedicated, emulatorpin, iothreadpin), NUMA passthrough,
  hugepages with memfd and the synthetic NUMA cell, iothreads, EFI loader and nvram;
- preStartHook's disk step: cache none where O_DIRECT works (assumed, as on KubeVirt's usual
  storage), io native only where the volume is a block device (not knowable from a manifest:
  file system volumes are assumed, as the oracle does);
- virt-controller's TSC frequency topology hint: a VMI with Hyper-V reenlightenment or a
  required invtsc gets `<timer name="tsc" frequency=...>` (the converter's clock step), on the
  assumption that the nodes report their TSC frequency (NODE_TSC_HZ; None renders nodes that
  do not, where KubeVirt writes no timer: fixtures/stacks/kubevirt/oracle/node-tsc/).

Not rendered (no rule reads them, or they need the node): host devices and GPUs, SR-IOV,
virtiofs filesystems, hot-plug vCPUs/memory (LiveUpdate), launch security, PCI addresses.

Pure: a dict in, bytes out. Built as text (no XML library at render time: a one-manifest check
starts fast); every value from the manifest is escaped.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

COMMIT = "d923fdb815cd2016ddaebdaaa51db04133576d72"
RELEASE = "KubeVirt d923fdb (main, after v1.9.0-beta.0)"
API_RELEASE = "d923fdb, after v1.9.0-beta.0"  # whose API fields STK003 knows: a later release may add some
UID = "5f3d4a52-9a41-4f6c-8b0e-6c1a2e7d9b10"  # the oracle's fixed UID (the API server assigns one)
FIRST_POD_CPU = 2  # the oracle's first dedicated host CPU
OVMF = "/usr/share/edk2/ovmf"
PRIVATE = "/var/run/kubevirt-private"
# The TSC frequency the nodes are assumed to report (Hz), as the oracle's node-tsc/ cases: libvirt
# probes it on every host CPU with an invariant TSC (every x86 server CPU of the last fifteen
# years; not a VM without invtsc, as a nested node), virt-handler's node labeller publishes it.
NODE_TSC_HZ: int | None = 2_400_000_000  # None: nodes that report none (KubeVirt writes no TSC timer)

# The most vCPUs (and supplemental I/O threads) a domain is rendered with: QEMU's q35 machine
# starts at most 4,096 vCPUs. The renderer writes a <vcpupin> (and a pod CPU) for each dedicated
# vCPU, so `cores: 100000000` cost 4 GB and minutes before it was refused; 4,096 render in ms.
MAX_VCPUS = 4096


class RenderRefused(ValueError):
    """A spec the renderer will not render: `path` (below the VMI spec) names the field."""

    def __init__(self, message: str, path: tuple[str, ...]) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "m": 0.001}
# Matched against the stripped text: `^\s*…\s*([a-zA-Z]*)\s*$` backtracked over both runs of
# blanks around the suffix, quadratic (`guest: "1<30,000 spaces>!"` took 10 s).
_QUANTITY = re.compile(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)")


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity ("2Gi", "500m", 4) as a number, None when it is not one."""
    if value is None or isinstance(value, bool):  # None: most calls (a field not written)
        return None
    if isinstance(value, (int, float)):  # a tuple: `int | float` would make a union at every call
        # 1e308, .inf and 10**400 are YAML numbers too: None, as for any other non-quantity
        finite = math.isfinite(value) if isinstance(value, float) else abs(value) < 2**63
        return float(value) if finite else None
    if not isinstance(value, str):
        return None
    # A few texts ("4Gi", "128Mi") make most of a run's ~2.6 quantities a domain: each one's number
    # is remembered (the table emptied when full: the texts come from the manifests)
    number = _QUANTITIES.get(value, _UNREAD)
    if number is _UNREAD:
        number = _read_quantity(value)
        if len(value) <= 64:
            if len(_QUANTITIES) >= 4096:
                _QUANTITIES.clear()
            _QUANTITIES[value] = number
    return number  # type: ignore[return-value]


_QUANTITIES: dict[str, float | None] = {}
_UNREAD = object()


def _read_quantity(value: str) -> float | None:
    match = _QUANTITY.fullmatch(value.strip())
    if not match or match.group(2) not in _SUFFIX:
        return None
    try:
        number = float(match.group(1)) * _SUFFIX[match.group(2)]
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _d(value: Any) -> dict[str, Any]:
    if value is None:  # a field not written: most calls
        return {}
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    """A list's mappings: the list itself when all its items are (nearly always; no caller changes
    it), without the comprehension's function object and copy (~9 calls a domain)."""
    if not isinstance(value, list):
        return []
    for item in value:
        if not isinstance(item, dict):
            return [v for v in value if isinstance(v, dict)]
    return value


def _on(value: Any, default: bool = True) -> bool:
    """A feature's `enabled`: absent means on (the API defaults Enabled to true)."""
    return default if value is None else value is True


def _int(value: Any, default: int = 0) -> int:
    if value is None or isinstance(value, bool):  # None: most calls (a field not written)
        return default
    if isinstance(value, int):
        return value
    number = quantity(value)
    return int(number) if number is not None else default


def _attr(value: object) -> str:
    """An attribute value in double quotes (xml.sax.saxutils would import urllib: 30 ms a start).

    Called ~35 times a domain, mostly with the same few values ("virtio", "on", "native"): an
    int needs no escaping, and a short text's quoted form is remembered (the table is emptied
    when full, so names from the manifests cannot make it grow without bound)."""
    if value.__class__ is str:  # looked up first: nearly every call, and nearly always there
        quoted = _QUOTED.get(value)  # type: ignore[arg-type]
        if quoted is not None:
            return quoted
        text: str = value  # type: ignore[assignment]
    elif value.__class__ is int:
        return f'"{value}"'
    else:
        text = str(value)
        quoted = _QUOTED.get(text)
        if quoted is not None:
            return quoted
    if _plain(text):  # most values (numbers, names): nothing to escape
        quoted = f'"{text}"'
    else:
        escaped = _text(text).replace('"', "&quot;")
        quoted = '"' + escaped.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;") + '"'
    if len(text) <= 64:
        if len(_QUOTED) >= 4096:
            _QUOTED.clear()
        _QUOTED[text] = quoted  # type: ignore[index]
    return quoted


def _plain(text: str) -> bool:
    """Whether an attribute value needs no escaping: none of &<>" and nothing XML cannot hold.
    Printable ASCII (nearly every value) holds nothing XML refuses, so only the four are looked
    for; the expression for the rest is compiled at the first other text (see _not_xml)."""
    if text.isascii() and text.isprintable():
        return "&" not in text and "<" not in text and ">" not in text and '"' not in text
    return re.fullmatch(r"[^&<>\"\x00-\x1f\ud800-\udfff\ufffe\uffff]*", text) is not None


_QUOTED: dict[str, str] = {}


@functools.cache
def _not_xml() -> re.Pattern[str]:
    """Characters XML 1.0 cannot hold, even as a character reference: a manifest may hold them
    (`name: "a\\0b"`, an ESC), libxml2 refuses the whole domain. Each becomes U+FFFD (the name in
    reports is the manifest's, escaped there). Compiled at the first text that may hold one (not
    printable ASCII): with the surrogates' range, compiling it cost ~4 M instructions at every
    start, more than rendering 10 manifests."""
    return re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _attrs(**attrs: Any) -> str:
    """Attributes written in order, those whose value is None left out. Where every value is
    known to be there, the renderers write `name={_attr(value)}` themselves: ~17 elements a
    domain, and building the keyword mapping cost more than quoting."""
    out = ""
    for key, value in attrs.items():
        if value is not None:
            out += f" {key}={_attr(value)}"
    return out


def _state(on: bool) -> str:
    return "on" if on else "off"


class _Ctx:
    """What several configurators share: the defaulted spec's derived values."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.domain = _d(spec.get("domain"))
        self.devices = _d(self.domain.get("devices"))
        self.cpu = _d(self.domain.get("cpu"))
        self.resources = _d(self.domain.get("resources"))
        self.memory = _d(self.domain.get("memory"))
        self.sockets, self.cores, self.threads = self._topology()
        self.vcpus = max(1, self.sockets * self.cores * self.threads)
        if self.vcpus > MAX_VCPUS:
            count = f"{self.vcpus:,}" if self.vcpus < 10**12 else "over 10^12"
            raise RenderRefused(f"{count} vCPUs (sockets × cores × threads, or the CPU request): more than "
                                f"{MAX_VCPUS:,}, the most QEMU's q35 machine starts", ("domain", "cpu"))
        self.dedicated = self.cpu.get("dedicatedCpuPlacement") is True
        self.isolate = self.dedicated and self.cpu.get("isolateEmulatorThread") is True
        self.transitional = self.devices.get("useVirtioTransitional") is True
        self.virtio_model = "virtio-transitional" if self.transitional else "virtio-non-transitional"
        self.hugepages = isinstance(self.memory.get("hugepages"), dict)
        self.policy = self.domain.get("ioThreadsPolicy")
        threads = _d(self.domain.get("ioThreads")).get("supplementalPoolThreadCount")
        if _int(threads) > MAX_VCPUS:
            raise RenderRefused(f"supplementalPoolThreadCount {_int(threads)}: more than {MAX_VCPUS:,} I/O threads",
                                ("domain", "ioThreads", "supplementalPoolThreadCount"))
        self.disks = self._disks()
        # the target, the controllers and the names read the buses; the I/O threads, the controllers
        # and the disks how many disks have a dedicated I/O thread (one loop, not a generator each)
        self.buses: list[str] = []
        self.dedicated_disks = 0
        for disk in self.disks:
            self.buses.append(bus_of(disk))
            if disk.get("dedicatedIOThread") is True:
                self.dedicated_disks += 1
        self.firmware = _d(self.domain.get("firmware"))
        self.bootloader = _d(self.firmware.get("bootloader"))
        self.efi = "efi" in self.bootloader
        self.secure_boot = self.efi and _d(self.bootloader.get("efi")).get("secureBoot") is not False
        self.guest_bytes = guest_memory(self)
        # read by more than one configurator
        self.interfaces = _l(self.devices.get("interfaces"))
        self.inputs = _l(self.devices.get("inputs"))
        self.features = _d(self.domain.get("features"))

    def _topology(self) -> tuple[int, int, int]:
        cpu = self.cpu
        sockets, cores, threads = _int(cpu.get("sockets")), _int(cpu.get("cores")), _int(cpu.get("threads"))
        if sockets == cores == threads == 0:
            limits, requests = _d(self.resources.get("limits")), _d(self.resources.get("requests"))
            count = quantity(limits.get("cpu")) if "cpu" in limits else quantity(requests.get("cpu"))
            # resource.Quantity.Value() rounds up ("500m" is 1)
            return max(1, -int(-(count or 1) // 1)), 1, 1
        return sockets or 1, cores or 1, threads or 1

    def _disks(self) -> list[dict[str, Any]]:
        """devices.disks after the defaults: a disk for each volume without one, a `disk` target
        when none is given, bus sata on amd64 (util.SetDefaultVolumeDisk, SetDefaults_DiskDevice,
        setDefaultAmd64DisksBus)."""
        listed = _l(self.devices.get("disks"))
        added = _volumes_without_disk(self.spec, self.devices, listed)  # most VMs: none
        return listed + [{**disk, "disk": {}} for disk in added] if added else listed

    def high_performance(self) -> bool:
        return self.dedicated or self.hugepages  # vmi.IsHighPerformanceVMI

    def numa_passthrough(self) -> bool:
        return self.dedicated and isinstance(_d(self.cpu.get("numa")).get("guestMappingPassthrough"), dict)

    def realtime(self) -> bool:
        return self.dedicated and isinstance(self.cpu.get("realtime"), dict)


def volume_disks(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """devices.disks and a disk for each volume that no disk nor filesystem names (a virtiofs
    volume is a filesystem), as util.SetDefaultVolumeDisk adds them: virt-controller's
    SetupVMIFromVM for a VM, before the preference applies; the VMI webhook for a VMI."""
    devices = _d(_d(spec.get("domain")).get("devices"))
    disks = _l(devices.get("disks"))
    return [*disks, *_volumes_without_disk(spec, devices, disks)]


def _volumes_without_disk(spec: dict[str, Any], devices: dict[str, Any], disks: list[dict[str, Any]]
                          ) -> list[dict[str, Any]]:
    """The disks volume_disks adds to `disks` (the spec's devices.disks), in the volumes' order."""
    # a name may be any YAML value: compared as text
    named = {str(item.get("name")) for item in [*disks, *_l(devices.get("filesystems"))]}
    added = []
    for volume in _l(spec.get("volumes")):
        if str(volume.get("name")) not in named:
            named.add(str(volume.get("name")))
            added.append({"name": volume.get("name")})
    return added


def bus_of(disk: dict[str, Any]) -> str:
    for key in ("disk", "lun", "cdrom"):
        if isinstance(disk.get(key), dict):
            return str(disk[key].get("bus") or "sata")
    return "sata"  # the amd64 default (setDefaultAmd64DisksBus)


def _target_kind(disk: dict[str, Any]) -> str:
    for key in ("lun", "cdrom"):
        if isinstance(disk.get(key), dict):
            return key
    return "disk"


def device_names(buses: list[str]) -> list[str]:
    """Target names for disks on these buses, as the converter's deviceNamer gives them: vda.. for
    virtio, sda.. for the rest."""
    counters: dict[str, int] = {}
    names = []
    for bus in buses:
        prefix = "vd" if bus == "virtio" else "sd"
        index = counters.get(prefix, 0)
        counters[prefix] = index + 1
        names.append(prefix + (_LETTERS[index] if index < 26 else _letters(index)))
    return names


_LETTERS = "abcdefghijklmnopqrstuvwxyz"  # the first 26 names' letters: _letters(i) is _LETTERS[i]


def _letters(index: int) -> str:
    name = ""
    while index >= 0:
        name = chr(ord("a") + index % 26) + name
        index = index // 26 - 1
    return name


def render(spec: dict[str, Any], name: str, namespace: str | None = None, version: str | None = None, *,
           tsc_frequency: int | None = NODE_TSC_HZ) -> bytes:
    """The domain XML for a VMI spec (instancetypes and preferences already applied).

    `tsc_frequency`: the lowest TSC frequency the cluster's nodes report (virt-controller's
    topology hint), written for a VMI that needs one (`tsc_requirement`); None renders a cluster
    whose nodes report none, where KubeVirt writes no TSC timer."""
    ctx = _Ctx(spec)
    namespace = namespace or "default"
    out: list[str] = ["<domain type=\"kvm\" xmlns:qemu=\"http://libvirt.org/schemas/domain/qemu/1.0\">",
                      f"<name>{_text(namespace + '_' + name)}</name>"]
    out += _memory(ctx)
    out += _os(ctx, name)
    out += _sysinfo(ctx)
    out.append("<devices>")
    out += _interfaces(ctx)
    out.append("<channel type=\"unix\"><target name=\"org.qemu.guest_agent.0\" type=\"virtio\"/></channel>")
    iothreads, auto_threads = _iothread_counts(ctx)
    out += _controllers(ctx, auto_threads)
    out += _graphics(ctx)
    out += _balloon(ctx)
    out += _disks(ctx, auto_threads, namespace, name)
    out += _console(ctx)
    out += _inputs(ctx)
    out += _misc_devices(ctx)
    out.append("</devices>")
    # without a frequency (a caller that asked tsc_requirement already, NODE_TSC_HZ None) none is written
    out += _clock(ctx, tsc_frequency if tsc_frequency and tsc_requirement(spec) else None)
    out.append(f"<metadata><kubevirt xmlns=\"http://kubevirt.io\"><uid>{UID}</uid></kubevirt></metadata>")
    out += _features(ctx)
    out += _cpu(ctx)
    if iothreads:
        out.append(f"<iothreads>{iothreads}</iothreads>")
    out.append("</domain>")
    return "\n".join(out).encode()


def _text(value: str) -> str:
    if not (value.isascii() and value.isprintable()):  # printable ASCII holds nothing _not_xml() matches
        value = _not_xml().sub("\ufffd", value)
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- memory -----------------------------------------------------------------------------------------

def guest_memory(ctx: _Ctx) -> int:
    """setGuestMemory and vcpu.GetVirtualMemory: memory.guest, else requests, else limits, else the
    hugepage size."""
    memory, resources = ctx.memory, ctx.resources
    for value in (memory.get("guest"), _d(resources.get("requests")).get("memory"),
                  _d(resources.get("limits")).get("memory"), _d(memory.get("hugepages")).get("pageSize")):
        number = quantity(value)
        if number:
            return int(number)
    return 0


def _memory(ctx: _Ctx) -> list[str]:
    out = []
    memory = ctx.guest_bytes
    max_guest = quantity(ctx.memory.get("maxGuest"))
    if max_guest and int(max_guest) != memory:
        out.append(f"<maxMemory unit=\"b\">{int(max_guest)}</maxMemory>")
    out.append(f"<memory unit=\"b\">{memory}</memory>")
    passt = False
    for interface in ctx.interfaces:  # a loop: a generator per domain cost more
        if "passtBinding" in interface:
            passt = True
            break
    shared = passt or bool(_l(ctx.devices.get("filesystems")))
    if ctx.hugepages or shared:
        backing = ["<memoryBacking>"]
        if ctx.hugepages:
            backing.append(_hugepages(ctx))
        if ctx.realtime() and ctx.numa_passthrough():
            backing.append("<nosharepages/>")
        if (ctx.hugepages and _d(_d(ctx.spec.get("metadata")).get("annotations")).get(
                "kubevirt.io/memfd") != "false") or shared:
            backing.append("<source type=\"memfd\"/>")
        if shared:
            backing.append("<access mode=\"shared\"/>")
        if ctx.numa_passthrough():
            backing.append("<allocation mode=\"immediate\"/>")
        backing.append("</memoryBacking>")
        out += backing
    return out


def _hugepages(ctx: _Ctx) -> str:
    if ctx.numa_passthrough():
        size = int(quantity(_d(ctx.memory.get("hugepages")).get("pageSize")) or 2**21)
        return f"<hugepages><page size=\"{size}\" unit=\"b\" nodeset=\"0\"/></hugepages>"
    return "<hugepages/>"


# -- os, sysinfo ------------------------------------------------------------------------------------

def _os(ctx: _Ctx, name: str) -> list[str]:
    machine = _d(ctx.domain.get("machine")).get("type") or "q35"
    out = ["<os>", f"<type arch=\"x86_64\" machine={_attr(machine)}>hvm</type>", "<smbios mode=\"sysinfo\"/>"]
    loader = ctx.bootloader
    if ctx.efi:
        secure = "yes" if ctx.secure_boot else "no"
        vars_file = "OVMF_VARS.secboot.fd" if ctx.secure_boot else "OVMF_VARS.fd"
        out.append(f"<loader readonly=\"yes\" secure=\"{secure}\" type=\"pflash\">{OVMF}/OVMF_CODE.secboot.fd</loader>")
        out.append(f"<nvram template=\"{OVMF}/{vars_file}\">{_text(f'{PRIVATE}/libvirt/qemu/nvram/{name}_VARS.fd')}"
                   "</nvram>")
    elif _d(loader.get("bios")).get("useSerial") is True:
        out.append("<bios useserial=\"yes\"/>")
    out.append("</os>")
    return out


def _sysinfo(ctx: _Ctx) -> list[str]:
    uuid = ctx.firmware.get("uuid") or "00000000-0000-4000-8000-000000000000"
    return ["<sysinfo type=\"smbios\"><system>",
            f"<entry name=\"uuid\">{_text(str(uuid))}</entry>",
            "<entry name=\"manufacturer\">KubeVirt</entry><entry name=\"family\">KubeVirt</entry>"
            "<entry name=\"product\">None</entry>",
            "</system></sysinfo>"]


# -- devices ----------------------------------------------------------------------------------------

_TAP_BINDINGS = ("bridge", "masquerade", "slirp", "deprecatedSlirp", "macvtap")


def interfaces_of(ctx: _Ctx) -> list[dict[str, Any]]:
    """The interfaces after vmispec.SetDefaultNetworkInterface: one on the pod network when the
    spec names neither interfaces nor networks (unless autoattachPodInterface is false)."""
    interfaces = ctx.interfaces
    if not interfaces and not _l(ctx.spec.get("networks")) and ctx.devices.get("autoattachPodInterface") is not False:
        return [{"name": "default", "masquerade": {}}]
    return [i for i in interfaces if i.get("state") != "absent"]


def _interfaces(ctx: _Ctx) -> list[str]:
    out = []
    multiqueue = ctx.devices.get("networkInterfaceMultiqueue") is True
    queues = min(ctx.vcpus, 256) if multiqueue else 0
    for iface in interfaces_of(ctx):
        if "sriov" in iface:
            continue
        binding = _d(iface.get("binding")).get("name")
        passt = "passtBinding" in iface  # the core passt binding: a vhost-user NIC
        if binding and not passt:
            continue  # a network binding plugin (its own sidecar writes the device)
        model = iface.get("model") or "virtio"
        parts = ["<interface type=\"vhostuser\">" if passt else "<interface type=\"ethernet\">"]
        parts.append("<source device=\"eth0\"/>" if passt else "<source/>")
        parts.append(f"<model type={_attr(ctx.virtio_model if model == 'virtio' else model)}/>")
        if model == "virtio" and queues:
            parts.append(f"<driver name=\"vhost\" queues=\"{queues}\"/>")
        if iface.get("macAddress"):
            parts.append(f"<mac address={_attr(iface['macAddress'])}/>")
        parts.append(f"<alias name={_attr('ua-' + str(iface.get('name')))}/>")
        if iface.get("bootOrder") is not None:
            parts.append(f"<boot order={_attr(iface['bootOrder'])}/>")
        elif not passt:
            parts.append("<rom enabled=\"no\"/>")
        if passt:
            parts.append("<backend type=\"passt\" logFile=\"/var/run/kubevirt/passt.log\"/>")
        parts.append("</interface>")
        out.append("".join(parts))
    return out


def _iothread_counts(ctx: _Ctx) -> tuple[int, int]:
    """iothreads.GetIOThreadsCountType: (total I/O threads, threads of the shared/auto pool)."""
    disks = ctx.disks
    if ctx.policy is None and not ctx.dedicated_disks:
        return 0, 0
    supplemental = _d(ctx.domain.get("ioThreads")).get("supplementalPoolThreadCount")
    if ctx.policy == "supplementalPool" and isinstance(supplemental, int):
        return supplemental, 0
    dedicated = ctx.dedicated_disks
    auto = len(disks) - dedicated
    if ctx.policy is None or ctx.policy == "shared":
        limit = 1
    elif ctx.policy == "auto":
        if ctx.isolate:
            limit = 1
        else:
            requests, limits = _d(ctx.resources.get("requests")), _d(ctx.resources.get("limits"))
            cpus = quantity(requests.get("cpu")) if "cpu" in requests else quantity(limits.get("cpu"))
            limit = (-int(-(cpus or 1) // 1)) * 2
    else:
        limit = 0
    if auto + dedicated > limit:
        auto = max(1, limit - dedicated)
    return auto + dedicated, auto


def _controllers(ctx: _Ctx, auto_threads: int) -> list[str]:
    # a disk's bus "usb" is among the buses (bus_of reads `disk` first): most domains have none, and
    # no scsi disk, and skip those generators
    usb = any(i.get("bus") in ("usb", None, "") for i in ctx.inputs) if ctx.inputs else False
    usb = usb or ("usb" in ctx.buses and any(_d(d.get("disk")).get("bus") == "usb" for d in ctx.disks)) or \
        "clientPassthrough" in ctx.devices
    out = [f"<controller type=\"usb\" index=\"0\" model=\"{'qemu-xhci' if usb else 'none'}\"/>"]
    scsi_disks = [d for d, bus in zip(ctx.disks, ctx.buses, strict=True) if bus == "scsi"] \
        if "scsi" in ctx.buses else []
    if not ctx.devices.get("disableHotplug") or scsi_disks:
        driver = ""
        if auto_threads and any(d.get("dedicatedIOThread") is True for d in scsi_disks):
            thread = 1
            for disk, bus in zip(ctx.disks, ctx.buses, strict=True):
                if bus == "virtio" and disk.get("dedicatedIOThread") is not True:
                    thread = thread % auto_threads + 1
            driver = f"<driver iothread=\"{thread}\" queues=\"{ctx.vcpus}\"/>"
        out.append(f"<controller type=\"scsi\" index=\"0\" model=\"{ctx.virtio_model}\">{driver}</controller>")
    if ctx.devices.get("autoattachSerialConsole") is not False:
        out.append(f"<controller type=\"virtio-serial\" index=\"0\" model=\"{ctx.virtio_model}\"/>")
    return out


def _graphics(ctx: _Ctx) -> list[str]:
    if ctx.devices.get("autoattachGraphicsDevice") is False:
        return []
    video = _d(ctx.devices.get("video")).get("type")
    if video:
        model = f"<model{_attrs(type=video, heads=1, vram=16384)}/>"
    elif ctx.efi:
        model = "<model type=\"bochs\" heads=\"1\"/>"
    else:
        model = "<model type=\"vga\" heads=\"1\" vram=\"16384\"/>"
    return [f"<video>{model}</video>",
            f"<graphics type=\"vnc\"><listen type=\"socket\" socket=\"{PRIVATE}/{UID}/virt-vnc\"/></graphics>"]


def _balloon(ctx: _Ctx) -> list[str]:
    if ctx.devices.get("autoattachMemBalloon") is False:
        return ["<memballoon model=\"none\"/>"]
    annotations = _d(_d(ctx.spec.get("metadata")).get("annotations"))
    reporting = not ctx.high_performance() and annotations.get("kubevirt.io/free-page-reporting-disabled") != "true"
    return [f"<memballoon model=\"{ctx.virtio_model}\" freePageReporting=\"{_state(reporting)}\">"
            "<stats period=\"10\"/></memballoon>"]


def _volume_source(volume: dict[str, Any], name: str, namespace: str, vmi_name: str) -> tuple[str, str, str, str]:
    """(disk type, source element, driver type, backing store) for a volume, as volume.go writes
    them; PVCs and DataVolumes on a file system (a block volume is not knowable from a manifest)."""
    if "containerDisk" in volume:
        backing = ("<backingStore type=\"file\"><format type=\"raw\"/>"
                   "<source file=\"/var/run/kubevirt/container-disks/disk_0.img\"/></backingStore>")
        return "file", f"<source file={_attr(f'/var/run/kubevirt-ephemeral-disks/disk-data/{name}/disk.qcow2')}/>", \
            "qcow2", backing
    if "cloudInitNoCloud" in volume or "cloudInitConfigDrive" in volume:
        kind = "noCloud" if "cloudInitNoCloud" in volume else "configdrive"
        iso = f"/var/run/libvirt/cloud-init-dir/{namespace}/{vmi_name}/{kind}.iso"
        return "file", f"<source file={_attr(iso)}/>", "raw", ""
    if "emptyDisk" in volume:
        return "file", f"<source file={_attr(f'/var/run/kubevirt-ephemeral-disks/empty-disks/{name}.qcow2')}/>", \
            "qcow2", ""
    if "hostDisk" in volume:
        return "file", f"<source file={_attr(_d(volume['hostDisk']).get('path') or '')}/>", "raw", ""
    for kind in ("configMap", "secret", "serviceAccount", "downwardAPI", "sysprep"):
        if kind in volume:
            return "file", f"<source file={_attr(f'/var/run/kubevirt-private/{kind.lower()}-disks/{name}.iso')}/>", \
                "raw", ""
    return "file", f"<source file={_attr(f'{PRIVATE}/vmi-disks/{name}/disk.img')}/>", "raw", ""


def _disks(ctx: _Ctx, auto_threads: int, namespace: str, vmi_name: str) -> list[str]:
    volumes = {str(v.get("name")): v for v in _l(ctx.spec.get("volumes"))}
    names = device_names(ctx.buses)
    multiqueue = ctx.devices.get("blockMultiQueue") is True
    supplemental = _d(ctx.domain.get("ioThreads")).get("supplementalPoolThreadCount") \
        if ctx.policy == "supplementalPool" else None
    has_threads = ctx.policy is not None or ctx.dedicated_disks > 0
    dedicated_thread, auto_thread = auto_threads + 1, 1
    out = []
    for disk, dev, bus in zip(ctx.disks, names, ctx.buses, strict=True):
        kind = _target_kind(disk)
        name = str(disk.get("name"))
        volume = volumes.get(name)
        if volume is None and kind != "cdrom":
            continue  # KubeVirt refuses it
        disk_type, source, driver_type, backing = ("file", "", "", "") if volume is None else \
            _volume_source(volume, name, namespace, vmi_name)
        model = f" model=\"{ctx.virtio_model}\"" if bus == "virtio" and kind == "disk" else ""
        # the element written as one text (not a list of parts joined: ~1,800 disks a run); an
        # empty source or backing adds nothing
        head = f"<disk device=\"{kind}\" type=\"{disk_type}\"{model}>{source}{backing}" \
            f"<target bus={_attr(bus)} dev=\"{dev}\"/>"
        # the driver's attributes in the order libvirt's struct writes them (cache, error_policy,
        # name, type, io, queues, iothread, discard); the manifest's values quoted
        cache = disk.get("cache") or ("none" if source else None)
        driver = f"<driver cache={_attr(cache)}" if cache is not None else "<driver"
        driver += f" error_policy={_attr(disk.get('errorPolicy') or 'stop')} name=\"qemu\""
        if driver_type:
            driver += f" type=\"{driver_type}\""
        if disk.get("io"):
            driver += f" io={_attr(disk['io'])}"
        if bus == "virtio" and multiqueue:
            driver += f" queues=\"{ctx.vcpus}\""
        if has_threads and bus == "virtio" and supplemental is None:  # storage/disk.go assignDiskIOThread
            if disk.get("dedicatedIOThread") is True:
                driver += f" iothread=\"{dedicated_thread}\""
                dedicated_thread += 1
            else:
                driver += f" iothread=\"{auto_thread}\""
                auto_thread = auto_thread % max(auto_threads, 1) + 1
        if kind in ("disk", "lun") and volume is not None:
            driver += " discard=\"unmap\""
        iothreads = ""
        if has_threads and bus == "virtio" and supplemental is not None:
            iothreads = "<iothreads>" + "".join(f"<iothread id=\"{i}\"/>" for i in range(1, _int(supplemental) + 1)) \
                + "</iothreads>"
        driver += f">{iothreads}</driver>" if iothreads else "/>"
        readonly = _d(disk.get(kind)).get("readonly")
        # a cdrom is read-only by default
        flags = "<readonly/>" if readonly is True or (kind == "cdrom" and readonly is not False) else ""
        if disk.get("shareable") is True:
            flags += "<shareable/>"
        if disk.get("serial"):
            flags += f"<serial>{_text(str(disk['serial']))}</serial>"
        boot = f"<boot order={_attr(disk['bootOrder'])}/>" if disk.get("bootOrder") is not None else ""
        out.append(f"{head}{driver}{flags}<alias name={_attr('ua-' + name)}/>{boot}</disk>")
    return out


def _console(ctx: _Ctx) -> list[str]:
    if ctx.devices.get("autoattachSerialConsole") is False:
        return []
    socket = f"{PRIVATE}/{UID}/virt-serial0"
    log = f"<log file=\"{socket}-log\" append=\"on\"/>" if ctx.devices.get("logSerialConsole") is not False else ""
    return [f"<serial type=\"unix\"><target port=\"0\"/><source mode=\"bind\" path=\"{socket}\"/>{log}</serial>",
            "<console type=\"pty\"><target type=\"serial\" port=\"0\"/></console>"]


def _inputs(ctx: _Ctx) -> list[str]:
    out = []
    for item in ctx.inputs:
        bus = item.get("bus") or "usb"
        model = " model=\"virtio\"" if bus == "virtio" else ""
        out.append(f"<input type={_attr(item.get('type') or 'tablet')} bus={_attr(bus)}{model}>"
                   f"<alias name={_attr('ua-' + str(item.get('name')))}/></input>")
    return out


def _misc_devices(ctx: _Ctx) -> list[str]:
    out = []
    devices = ctx.devices
    if isinstance(devices.get("rng"), dict):
        out.append(f"<rng model=\"{ctx.virtio_model}\"><backend model=\"random\">/dev/urandom</backend></rng>")
    tpm = devices.get("tpm")
    if isinstance(tpm, dict) and tpm.get("enabled") is not False:
        persistent = tpm.get("persistent") is True
        state = " persistent_state=\"yes\"" if persistent else ""
        out.append(f"<tpm model=\"{'tpm-crb' if persistent else 'tpm-tis'}\">"
                   f"<backend type=\"emulator\" version=\"2.0\"{state}/></tpm>")
    watchdog = devices.get("watchdog")
    if isinstance(watchdog, dict):
        action = _d(watchdog.get("i6300esb")).get("action") or "reset"
        out.append(f"<watchdog{_attrs(model='i6300esb', action=action)}>"
                   f"<alias{_attrs(name='ua-' + str(watchdog.get('name')))}/></watchdog>")
    sound = devices.get("sound")
    if isinstance(sound, dict):
        out.append(f"<sound{_attrs(model=sound.get('model') or 'ich9')}>"
                   f"<alias{_attrs(name='ua-' + str(sound.get('name')))}/></sound>")
    if devices.get("downwardMetrics") is not None:
        out.append("<channel type=\"unix\"><source mode=\"bind\" path=\"/var/run/kubevirt-private/downwardapi-disks/"
                   "vhostmd0\"/><target type=\"virtio\" name=\"org.github.vhostmd.1\"/></channel>")
    return out


# -- clock, features, cpu ---------------------------------------------------------------------------

def tsc_requirement(spec: dict[str, Any]) -> str | None:
    """Why virt-controller gives this VMI the cluster's TSC frequency, None when it does not
    (topology.GetTscFrequencyRequirement: a CPU feature invtsc with policy require or force, or
    Hyper-V reenlightenment enabled; amd64 only, as the topology hinter)."""
    if spec.get("architecture", "amd64") != "amd64":
        return None
    domain = _d(spec.get("domain"))
    for feature in _l(_d(domain.get("cpu")).get("features")):
        if feature.get("name") == "invtsc" and feature.get("policy") in ("require", "force"):
            return "invtsc"
    reenlightenment = _d(_d(domain.get("features")).get("hyperv")).get("reenlightenment")
    if isinstance(reenlightenment, dict) and _on(reenlightenment.get("enabled")):
        return "reenlightenment"
    return None


def _clock(ctx: _Ctx, tsc_frequency: int | None) -> list[str]:
    clock = ctx.domain.get("clock")
    # the converter's ClockDomainConfigurator appends the hint's TSC timer, making a <clock> if none
    tsc = [f"<timer name=\"tsc\" frequency=\"{tsc_frequency}\"/>"] if tsc_frequency else []
    if not isinstance(clock, dict):
        return ["<clock>", *tsc, "</clock>"] if tsc else []
    attrs: dict[str, Any] = {}
    if isinstance(clock.get("utc"), dict):
        attrs["offset"] = "utc"
        seconds = clock["utc"].get("offsetSeconds")
        attrs["adjustment"] = str(seconds) if isinstance(seconds, int) else "reset"
    elif clock.get("timezone") is not None:
        attrs["offset"] = "timezone"
        attrs["timezone"] = clock["timezone"]
    timers = _d(clock.get("timer"))
    out = [f"<clock{_attrs(**attrs)}>"]
    for key, name in (("rtc", "rtc"), ("pit", "pit"), ("kvm", "kvmclock"), ("hpet", "hpet"), ("hyperv", "hypervclock")):
        timer = timers.get(key)
        if not isinstance(timer, dict):
            continue
        present = "yes" if _on(timer.get("present")) else "no"
        # the name and presence are constants; the manifest's two values quoted when there
        tick, track = timer.get("tickPolicy") or None, timer.get("track")
        given = _attrs(tickpolicy=tick, track=track) if tick is not None or track is not None else ""
        out.append(f"<timer name=\"{name}\"{given} present=\"{present}\"/>")
    out += tsc
    out.append("</clock>")
    return out


# the VMI's hyperv keys in the order the libvirt API struct writes them, and libvirt's names
_HYPERV = (("relaxed", "relaxed"), ("vapic", "vapic"), ("spinlocks", "spinlocks"), ("vpindex", "vpindex"),
           ("runtime", "runtime"), ("synic", "synic"), ("synictimer", "stimer"), ("reset", "reset"),
           ("vendorid", "vendor_id"), ("frequencies", "frequencies"), ("reenlightenment", "reenlightenment"),
           ("tlbflush", "tlbflush"), ("ipi", "ipi"), ("evmcs", "evmcs"))


def hyperv_after_webhook(hyperv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Hyper-V features after virt-api's SetHypervFeatureDependencies: an enabled feature's
    missing requirement is turned on (synictimer → synic → vpindex; ipi, tlbflush → vpindex;
    evmcs → vapic)."""
    features = {k: dict(v) if isinstance(v, dict) else {} for k, v in hyperv.items() if v is not None}
    for key, needed in _HYPERV_NEEDS:  # in this order: synictimer turns synic on, whose vpindex follows
        if key in features and needed not in features and _on(features[key].get("enabled")):
            features[needed] = {}
    return features


# (feature, the feature it requires), as SetHypervFeatureDependencies applies them
_HYPERV_NEEDS = (("evmcs", "vapic"), ("ipi", "vpindex"), ("tlbflush", "vpindex"), ("synictimer", "synic"),
                 ("synic", "vpindex"))


def _features(ctx: _Ctx) -> list[str]:
    features = ctx.features
    out = ["<features>"]
    if _on(_d(features.get("acpi")).get("enabled")):
        out.append("<acpi/>")
    if isinstance(features.get("apic"), dict) and _on(features["apic"].get("enabled")):
        out.append("<apic/>")
    hyperv = features.get("hyperv")
    if isinstance(hyperv, dict):
        after = hyperv_after_webhook(hyperv)
        parts = ["<hyperv>"]
        for key, name in _HYPERV:
            feature = after.get(key)
            if feature is None:
                continue
            state = _state(_on(feature.get("enabled")))
            if key == "spinlocks":
                retries = feature.get("spinlocks", 4096 if state == "on" else None)
                parts.append(f"<spinlocks{_attrs(state=state, retries=retries)}/>")
            elif key == "vendorid":
                parts.append(f"<vendor_id{_attrs(state=state, value=feature.get('vendorid'))}/>")
            elif key in ("synictimer", "tlbflush") and any(isinstance(feature.get(k), dict)
                                                         for k in ("direct", "extended")):
                inner = "".join(f"<{k}{_attrs(state=_state(_on(_d(feature[k]).get('enabled'))))}/>"
                                for k in ("direct", "extended") if isinstance(feature.get(k), dict))
                parts.append(f"<{name} state=\"{state}\">{inner}</{name}>")
            else:
                parts.append(f"<{name} state=\"{state}\"/>")
        parts.append("</hyperv>")
        out.append("".join(parts))
    elif _d(features.get("hypervPassthrough")).get("enabled") is True:
        out.append("<hyperv mode=\"passthrough\"/>")
    kvm: list[str] = []
    if isinstance(features.get("kvm"), dict):
        kvm.append(f"<hidden state=\"{_state(features['kvm'].get('hidden') is True)}\"/>")
    if ctx.dedicated and ctx.spec.get("architecture", "amd64") == "amd64":
        kvm.append("<hint-dedicated state=\"on\"/>")
    if kvm:
        out.append("<kvm>" + "".join(kvm) + "</kvm>")
    if isinstance(features.get("pvspinlock"), dict):
        out.append(f"<pvspinlock state=\"{_state(_on(features['pvspinlock'].get('enabled')))}\"/>")
    if isinstance(features.get("smm"), dict) and _on(features["smm"].get("enabled")):
        out.append("<smm/>")
    out.append("<vmport state=\"off\"/>")
    if ctx.realtime():
        out.append("<pmu state=\"off\"/>")
    out.append("</features>")
    return out


def _cpu(ctx: _Ctx) -> list[str]:
    model = ctx.cpu.get("model") or "host-model"
    if model in ("host-model", "host-passthrough"):
        head = f"<cpu mode={_attr(model)}>"
    else:
        head = f"<cpu mode=\"custom\"><model>{_text(str(model))}</model>"
    out = [head, f"<topology sockets=\"{ctx.sockets}\" cores=\"{ctx.cores}\" threads=\"{ctx.threads}\"/>"]
    features = _l(ctx.cpu.get("features"))
    hyperv = _d(ctx.features.get("hyperv"))
    names = {str(f.get("name")) for f in features}
    for feature in features:
        out.append(f"<feature{_attrs(name=feature.get('name'), policy=feature.get('policy') or 'require')}/>")
    if isinstance(hyperv.get("evmcs"), dict) and _on(hyperv["evmcs"].get("enabled")) and "vmx" not in names:
        out.append("<feature name=\"vmx\" policy=\"require\"/>")
    if model not in ("host-model", "host-passthrough") and "mpx" not in names:
        out.append("<feature name=\"mpx\" policy=\"disable\"/>")
    memory_kib = ctx.guest_bytes // 1024
    pod_cpus = _pod_cpus(ctx)
    if ctx.numa_passthrough():
        out.append(f"<numa><cell id=\"0\" cpus=\"{','.join(str(i) for i in range(ctx.vcpus))}\" "
                   f"memory=\"{ctx.guest_bytes}\" unit=\"b\"/></numa>")
    elif ctx.hugepages and not isinstance(ctx.cpu.get("numa"), dict):
        out.append(f"<numa><cell id=\"0\" cpus=\"0-{ctx.vcpus - 1}\" memory=\"{memory_kib}\" unit=\"KiB\"/></numa>")
    out.append("</cpu>")
    out.append(f"<vcpu placement=\"static\">{ctx.vcpus}</vcpu>")
    if ctx.dedicated:
        out += _cputune(ctx, pod_cpus)
    if ctx.numa_passthrough():
        out.append("<numatune><memory mode=\"strict\" nodeset=\"0\"/><memnode cellid=\"0\" mode=\"strict\" "
                   "nodeset=\"0\"/></numatune>")
    return out


def _pod_cpus(ctx: _Ctx) -> list[int]:
    if not ctx.dedicated:
        return []
    count = ctx.vcpus + (1 if ctx.isolate else 0)
    if ctx.policy == "supplementalPool":
        count += _int(_d(ctx.domain.get("ioThreads")).get("supplementalPoolThreadCount"))
    return list(range(FIRST_POD_CPU, FIRST_POD_CPU + count))


def _cputune(ctx: _Ctx, cpus: list[int]) -> list[str]:
    """vcpu.AdjustDomainForTopologyAndCPUSet on the oracle's pod: vCPUs pinned one to one, then
    supplemental I/O threads, then the emulator thread, each on the next CPU of the pod."""
    out = ["<cputune>"]
    out += [f"<vcpupin vcpu=\"{i}\" cpuset=\"{cpus[i]}\"/>" for i in range(ctx.vcpus)]
    nxt = ctx.vcpus
    supplemental = _int(_d(ctx.domain.get("ioThreads")).get("supplementalPoolThreadCount")) \
        if ctx.policy == "supplementalPool" else 0
    for thread in range(1, supplemental + 1):
        out.append(f"<iothreadpin iothread=\"{thread}\" cpuset=\"{cpus[nxt]}\"/>")
        nxt += 1
    emulator = None
    if ctx.isolate:
        emulator = str(cpus[nxt])
    iothreads, _auto = _iothread_counts(ctx)
    if iothreads and not supplemental:
        if emulator is not None:
            out.append(f"<iothreadpin iothread=\"1\" cpuset=\"{emulator}\"/>")
        elif iothreads >= ctx.vcpus:
            for thread in range(1, iothreads + 1):
                out.append(f"<iothreadpin iothread=\"{thread}\" cpuset=\"{cpus[thread % ctx.vcpus]}\"/>")
        else:
            series, current = ctx.vcpus % iothreads, 0
            for thread in range(1, iothreads + 1):
                size = ctx.vcpus // iothreads + (1 if thread <= series else 0)
                chunk = ",".join(str(c) for c in cpus[current:current + size])
                out.append(f"<iothreadpin iothread=\"{thread}\" cpuset=\"{chunk}\"/>")
                current += size
    if emulator is not None:
        out.append(f"<emulatorpin cpuset=\"{emulator}\"/>")
    out.append("</cputune>")
    return out
