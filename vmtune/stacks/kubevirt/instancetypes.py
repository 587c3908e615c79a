"""Instancetypes and preferences applied to a VMI spec, as KubeVirt's virt-controller does when
it creates the VMI of a VirtualMachine (kubevirt d923fdb: pkg/instancetype/apply/vmi.go and
pkg/instancetype/preference/apply/*.go).

An instancetype sets what it names (the VM may not set the same fields: KubeVirt refuses the VM,
vmtune reports it as a note and keeps the VM's value). A preference only fills what the VM left
unset. Every field they set is recorded with where it came from, so a finding on it can say
which object to change, and that a field on the VM overrides a preference.

A preference that is not among the files still tells the guest's OS family by its name
(`windows.2k22.virtio`, `rhel.9`, …): common-instancetypes names them so.
"""

from __future__ import annotations

from typing import Any

from vmtune.stacks.kubevirt.render import volume_disks

Path = tuple[str | int, ...]
Origin = dict[Path, str]  # path below the VMI spec -> "instancetype" | "preference"

_WINDOWS = ("windows", "win")
_LINUX = ("rhel", "centos", "fedora", "ubuntu", "debian", "opensuse", "sles", "suse", "alpine", "cirros", "oraclelinux",
          "almalinux", "rocky", "linux")


def os_family_of(name: str | None) -> str | None:
    """The OS family a preference's name tells: common-instancetypes' `windows.11`, `rhel.9`, …"""
    if not name:
        return None
    head = name.lower().split(".")[0].split("-")[0]
    if head.startswith(_WINDOWS):
        return "windows"
    if head.startswith(_LINUX):
        return "linux"
    return None


def copy_plain(value: Any) -> Any:
    """A copy of plain YAML values: dicts and lists are new, scalars shared (they are immutable)."""
    if isinstance(value, dict):
        return {k: copy_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_plain(v) for v in value]
    return value


def _dict(holder: dict[str, Any], key: str) -> dict[str, Any]:
    value = holder.get(key)
    if not isinstance(value, dict):
        value = {}
        holder[key] = value
    return value


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []  # `networks: 5` is not iterable


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# (the note's code, the path below the VMI spec, what KubeVirt refuses and what was checked)
Conflicts = list[tuple[str, Path, str]]

_PASSTHROUGH = ("domain", "features", "hypervPassthrough")
_BOTH_REFUSED = ("virt-api refuses the VMI with both (webhooks/hyperv.go: \"Cannot explicitly set hyperV features "
                 "if HypervPassthrough is being used\"): the VM does not start")


def apply(spec: dict[str, Any], instancetype: dict[str, Any] | None, preference: dict[str, Any] | None
          ) -> tuple[dict[str, Any], Origin, Conflicts]:
    """The VMI spec with the instancetype's and preference's specs applied, the origin of each
    field they set, and the conflicts: what KubeVirt refuses (fields both the VM and the
    instancetype set, STK001 as before; Hyper-V features beside hypervPassthrough, STK004: no
    VM runs), each with the path it is at."""
    if instancetype is None and preference is None:
        return spec, {}, _hyperv_both(spec)
    out = copy_plain(spec)
    origin: Origin = {}
    conflicts: Conflicts = []
    if preference is not None:
        _default_interface(out, _d(preference))
        _default_volume_disks(out)
    if instancetype is not None:
        clashes: list[str] = []
        _apply_instancetype(_d(instancetype), preference, out, origin, clashes)
        conflicts += [("STK001", (), f"{field} is set on the VM and by its instancetype: KubeVirt refuses the VM; "
                                     "the VM's value was checked") for field in clashes]
    if preference is not None:
        _apply_preference(_d(preference), out, origin, conflicts)
    return out, origin, conflicts + _hyperv_both(out)


def _hyperv_both(spec: dict[str, Any]) -> Conflicts:
    """A VMI spec with `features.hyperv` and `features.hypervPassthrough` (enabled or not): the
    VMI create admitter refuses it; the converter would write the Hyper-V set."""
    features = _d(_d(spec.get("domain")).get("features"))
    if isinstance(features.get("hyperv"), dict) and features.get("hypervPassthrough") is not None:
        return [("STK004", _PASSTHROUGH, f"features.hyperv and features.hypervPassthrough are both set: "
                                         f"{_BOTH_REFUSED}")]
    return []


def _default_interface(spec: dict[str, Any], preference: dict[str, Any]) -> None:
    """virt-controller adds the pod interface (vmispec.SetDefaultNetworkInterface) before it
    applies the preference, so the preference's interface model reaches it: a Windows
    preference's e1000 does."""
    devices = _dict(_dict(spec, "domain"), "devices")
    attach = devices.get("autoattachPodInterface")
    if attach is None:
        attach = _d(preference.get("devices")).get("preferredAutoattachPodInterface")
    if attach is False or spec.get("networks") or devices.get("interfaces"):
        return
    devices["interfaces"] = [{"name": "default", "bridge": {}}]
    spec["networks"] = [{"name": "default", "pod": {}}]


def _default_volume_disks(spec: dict[str, Any]) -> None:
    """SetupVMIFromVM adds a disk for each volume without one before the preference applies, so
    the preference's preferredDiskBus reaches it (a fedora preference's virtio, not sata)."""
    listed = [d for d in _items(_d(_d(spec.get("domain")).get("devices")).get("disks")) if isinstance(d, dict)]
    added = volume_disks(spec)[len(listed):]
    if added:
        devices = _dict(_dict(spec, "domain"), "devices")
        devices["disks"] = [*_items(devices.get("disks")), *added]


# -- instancetype -----------------------------------------------------------------------------------

def _apply_instancetype(it: dict[str, Any], preference: dict[str, Any] | None, spec: dict[str, Any], origin: Origin,
                        conflicts: list[str]) -> None:
    domain = _dict(spec, "domain")
    cpu = _dict(domain, "cpu")
    it_cpu = _d(it.get("cpu"))
    resources = _d(domain.get("resources"))
    clash = [f"domain.cpu.{k}" for k in ("sockets", "cores", "threads") if cpu.get(k)]
    clash += [f"domain.resources.{k}.cpu" for k in ("requests", "limits") if "cpu" in _d(resources.get(k))]
    for key, vm_key in (("model", "model"), ("dedicatedCPUPlacement", "dedicatedCpuPlacement"),
                        ("isolateEmulatorThread", "isolateEmulatorThread"), ("numa", "numa"), ("realtime", "realtime"),
                        ("maxSockets", "maxSockets")):
        if it_cpu.get(key) is not None and cpu.get(vm_key):
            clash.append(f"domain.cpu.{vm_key}")
    conflicts += clash
    if not clash:
        for key, vm_key in (("model", "model"), ("dedicatedCPUPlacement", "dedicatedCpuPlacement"),
                            ("isolateEmulatorThread", "isolateEmulatorThread"), ("numa", "numa"),
                            ("realtime", "realtime"), ("maxSockets", "maxSockets")):
            if it_cpu.get(key) is not None:
                cpu[vm_key] = copy_plain(it_cpu[key])
                origin["domain", "cpu", vm_key] = "instancetype"
        guest = it_cpu.get("guest")
        if isinstance(guest, int) and guest > 0:
            cpu.update(_topology(guest, preference))
            for key in ("sockets", "cores", "threads"):
                origin["domain", "cpu", key] = "instancetype"
    memory = _dict(domain, "memory")
    it_memory = _d(it.get("memory"))
    clash = []
    if memory.get("guest") is not None:
        clash.append("domain.memory.guest")
    if memory.get("hugepages") is not None and it_memory.get("hugepages") is not None:
        clash.append("domain.memory.hugepages")
    clash += [f"domain.resources.{k}.memory" for k in ("requests", "limits") if "memory" in _d(resources.get(k))]
    conflicts += clash
    if not clash and it_memory.get("guest") is not None:
        memory["guest"] = it_memory["guest"]
        origin["domain", "memory", "guest"] = "instancetype"
        for key in ("hugepages", "maxGuest"):
            if it_memory.get(key) is not None:
                memory[key] = copy_plain(it_memory[key])
                origin["domain", "memory", key] = "instancetype"
    if it.get("ioThreadsPolicy") is not None:
        if domain.get("ioThreadsPolicy") is not None:
            conflicts.append("domain.ioThreadsPolicy")
        else:
            domain["ioThreadsPolicy"] = it["ioThreadsPolicy"]
            origin["domain", "ioThreadsPolicy"] = "instancetype"
    count = _d(it.get("ioThreads")).get("supplementalPoolThreadCount")
    if count is not None:
        if _d(domain.get("ioThreads")).get("supplementalPoolThreadCount") is not None:
            conflicts.append("domain.ioThreads.supplementalPoolThreadCount")
        else:
            _dict(domain, "ioThreads")["supplementalPoolThreadCount"] = count
            origin["domain", "ioThreads", "supplementalPoolThreadCount"] = "instancetype"


def preferred_topology(preference: dict[str, Any] | None) -> str:
    cpu = _d(_d(preference).get("cpu"))
    value = cpu.get("preferredCPUTopology")
    return value if isinstance(value, str) else "sockets"


def _topology(vcpus: int, preference: dict[str, Any] | None) -> dict[str, int]:
    """apply/cpu.go applyGuestCPUTopology: the instancetype's vCPUs spread as the preference says
    (sockets when it says nothing: the default that left Windows on 2 of N vCPUs)."""
    topo = {"sockets": 1, "cores": 1, "threads": 1}
    if vcpus == 1:
        return topo
    preferred = preferred_topology(preference)
    if preferred in ("preferCores", "cores"):
        topo["cores"] = vcpus
    elif preferred in ("preferThreads", "threads"):
        topo["threads"] = vcpus
    elif preferred in ("preferSpread", "spread"):
        pref = _d(preference)
        ratio = pref.get("preferSpreadSocketToCoreRatio") or 2
        options = _d(_d(pref.get("cpu")).get("spreadOptions"))
        across = options.get("across") or "SocketsCores"
        ratio = options.get("ratio") or ratio
        if not isinstance(ratio, int) or ratio <= 0:
            ratio = 2
        if across == "CoresThreads":
            topo["threads"], topo["cores"] = ratio, vcpus // ratio
        elif across == "SocketsCoresThreads":
            topo["threads"], topo["cores"], topo["sockets"] = 2, ratio, vcpus // 2 // ratio
        else:
            topo["cores"], topo["sockets"] = ratio, vcpus // ratio
    else:  # preferSockets, sockets, preferAny, any
        topo["sockets"] = vcpus
    return topo


# -- preference -------------------------------------------------------------------------------------

def _fill(holder: dict[str, Any], key: str, value: Any, origin: Origin, path: Path) -> None:
    if value is not None and holder.get(key) is None:
        holder[key] = copy_plain(value)
        origin[path] = "preference"


def _apply_preference(pref: dict[str, Any], spec: dict[str, Any], origin: Origin, conflicts: Conflicts) -> None:
    domain = _dict(spec, "domain")
    cpu_pref = _d(pref.get("cpu"))
    if cpu_pref.get("preferredCPUFeatures"):
        cpu = _dict(domain, "cpu")
        cpu_features: list[Any] = cpu["features"] if isinstance(cpu.get("features"), list) else []
        names = {str(f.get("name")) for f in cpu_features if isinstance(f, dict)}
        added = [copy_plain(f) for f in cpu_pref["preferredCPUFeatures"] if isinstance(f, dict) and str(f.get("name")) not in names]  # noqa: E501
        if added:
            cpu["features"] = [*cpu_features, *added]
            origin["domain", "cpu", "features"] = "preference"
    devices_pref = _d(pref.get("devices"))
    if devices_pref:
        _apply_devices(devices_pref, _dict(domain, "devices"), spec, origin)
    features_pref = _d(pref.get("features"))
    if features_pref:
        features = _dict(domain, "features")
        if features_pref.get("preferredAcpi") is not None:
            features["acpi"] = copy_plain(features_pref["preferredAcpi"])
            origin["domain", "features", "acpi"] = "preference"
        for key, vm_key in (("preferredApic", "apic"), ("preferredKvm", "kvm"), ("preferredPvspinlock", "pvspinlock"),
                            ("preferredSmm", "smm")):
            _fill(features, vm_key, features_pref.get(key), origin, ("domain", "features", vm_key))
        hyperv_pref = features_pref.get("preferredHyperv")
        if isinstance(hyperv_pref, dict) and features.get("hypervPassthrough") is not None:
            # applyHyperVFeaturePreferences fills features.hyperv whatever hypervPassthrough says
            # (a preference has no passthrough of its own): the VMI then has both, which virt-api
            # refuses. The VM's choice is rendered, the preference's set is not merged into it.
            conflicts.append(("STK004", _PASSTHROUGH, "features.hypervPassthrough is set on the VM and its preference "
                              "sets features.preferredHyperv, which KubeVirt applies all the same: "
                              f"{_BOTH_REFUSED}"))
        elif isinstance(hyperv_pref, dict):
            hyperv = _dict(features, "hyperv")
            for key, value in hyperv_pref.items():
                _fill(hyperv, key, value, origin, ("domain", "features", "hyperv", key))
    firmware_pref = _d(pref.get("firmware"))
    if firmware_pref:
        _apply_firmware(firmware_pref, _dict(domain, "firmware"), origin)
    machine = _d(pref.get("machine")).get("preferredMachineType")
    if machine:
        _fill(_dict(domain, "machine"), "type", machine, origin, ("domain", "machine", "type"))
    clock_pref = _d(pref.get("clock"))
    if clock_pref:
        clock = _dict(domain, "clock")
        offset = clock_pref.get("preferredClockOffset")
        if isinstance(offset, dict) and clock.get("utc") is None and clock.get("timezone") is None:
            for key, value in offset.items():
                clock[key] = copy_plain(value)
                origin["domain", "clock", key] = "preference"
        _fill(clock, "timer", clock_pref.get("preferredTimer"), origin, ("domain", "clock", "timer"))
    if pref.get("preferredTerminationGracePeriodSeconds") is not None:
        _fill(spec, "terminationGracePeriodSeconds", pref["preferredTerminationGracePeriodSeconds"], origin,
              ("terminationGracePeriodSeconds",))
    if pref.get("preferredSubdomain"):
        _fill(spec, "subdomain", pref["preferredSubdomain"], origin, ("subdomain",))
    if pref.get("preferredArchitecture"):
        _fill(spec, "architecture", pref["preferredArchitecture"], origin, ("architecture",))


_DEVICE_FLAGS = (
    ("preferredUseVirtioTransitional", "useVirtioTransitional"),
    ("preferredBlockMultiQueue", "blockMultiQueue"),
    ("preferredNetworkInterfaceMultiQueue", "networkInterfaceMultiqueue"),
    ("preferredAutoattachGraphicsDevice", "autoattachGraphicsDevice"),
    ("preferredAutoattachMemBalloon", "autoattachMemBalloon"),
    ("preferredAutoattachPodInterface", "autoattachPodInterface"),
    ("preferredAutoattachSerialConsole", "autoattachSerialConsole"),
    ("preferredAutoattachInputDevice", "autoattachInputDevice"),
    ("preferredRng", "rng"),
    ("preferredTPM", "tpm"),
)


def _apply_devices(pref: dict[str, Any], devices: dict[str, Any], spec: dict[str, Any], origin: Origin) -> None:
    base = ("domain", "devices")
    for key, vm_key in _DEVICE_FLAGS:
        value = pref.get(key)
        if value is not None:  # most are not set: no path made for them
            _fill(devices, vm_key, value, origin, (*base, vm_key))
    if pref.get("preferredDisableHotplug") is not None:
        devices["disableHotplug"] = pref["preferredDisableHotplug"]
        origin[(*base, "disableHotplug")] = "preference"
    if pref.get("preferredSoundModel") and isinstance(devices.get("sound"), dict):
        _fill(devices["sound"], "model", pref["preferredSoundModel"], origin, (*base, "sound", "model"))
    if pref.get("preferredVideoType"):
        _fill(_dict(devices, "video"), "type", pref["preferredVideoType"], origin, (*base, "video", "type"))
    disks: list[Any] = devices["disks"] if isinstance(devices.get("disks"), list) else []
    for i, disk in enumerate(disks):
        if not isinstance(disk, dict):
            continue
        at = (*base, "disks", i)
        if not any(isinstance(disk.get(k), dict) for k in ("disk", "cdrom", "lun")):
            disk["disk"] = {}
        if isinstance(disk.get("disk"), dict):
            _fill(disk["disk"], "bus", pref.get("preferredDiskBus") or None, origin, (*at, "disk", "bus"))
            _fill(disk, "blockSize", pref.get("preferredDiskBlockSize"), origin, (*at, "blockSize"))
            _fill(disk, "cache", pref.get("preferredDiskCache") or None, origin, (*at, "cache"))
            _fill(disk, "io", pref.get("preferredDiskIO") or None, origin, (*at, "io"))
            if disk["disk"].get("bus") == "virtio":
                _fill(disk, "dedicatedIOThread", pref.get("preferredDiskDedicatedIoThread"), origin,
                      (*at, "dedicatedIOThread"))
        elif isinstance(disk.get("cdrom"), dict):
            _fill(disk["cdrom"], "bus", pref.get("preferredCdromBus") or None, origin, (*at, "cdrom", "bus"))
        elif isinstance(disk.get("lun"), dict):
            _fill(disk["lun"], "bus", pref.get("preferredLunBus") or None, origin, (*at, "lun", "bus"))
    pod_networks = {str(n.get("name")) for n in _items(spec.get("networks")) if isinstance(n, dict) and "pod" in n}
    interfaces: list[Any] = devices["interfaces"] if isinstance(devices.get("interfaces"), list) else []
    for i, iface in enumerate(interfaces):
        if not isinstance(iface, dict):
            continue
        _fill(iface, "model", pref.get("preferredInterfaceModel") or None, origin, (*base, "interfaces", i, "model"))
        bindings = ("bridge", "masquerade", "sriov", "slirp", "macvtap", "passt", "passtBinding", "binding")
        if pref.get("preferredInterfaceMasquerade") is not None and not any(k in iface for k in bindings) \
                and str(iface.get("name")) in pod_networks:
            iface["masquerade"] = copy_plain(pref["preferredInterfaceMasquerade"])
            origin[(*base, "interfaces", i, "masquerade")] = "preference"
    inputs: list[Any] = devices["inputs"] if isinstance(devices.get("inputs"), list) else []
    for i, item in enumerate(inputs):
        if isinstance(item, dict):
            _fill(item, "bus", pref.get("preferredInputBus") or None, origin, (*base, "inputs", i, "bus"))
            _fill(item, "type", pref.get("preferredInputType") or None, origin, (*base, "inputs", i, "type"))


def _apply_firmware(pref: dict[str, Any], firmware: dict[str, Any], origin: Origin) -> None:
    loader = _dict(firmware, "bootloader")
    at = ("domain", "firmware", "bootloader")
    if pref.get("preferredUseBios") and loader.get("bios") is None and loader.get("efi") is None:
        loader["bios"] = {}
        origin[(*at, "bios")] = "preference"
    if pref.get("preferredUseBiosSerial") is not None and isinstance(loader.get("bios"), dict):
        _fill(loader["bios"], "useSerial", pref["preferredUseBiosSerial"], origin, (*at, "bios", "useSerial"))
    if loader.get("efi") is None and loader.get("bios") is None and isinstance(pref.get("preferredEfi"), dict):
        loader["efi"] = copy_plain(pref["preferredEfi"])
        origin[(*at, "efi")] = "preference"
        return
    if pref.get("preferredUseEfi") and loader.get("efi") is None and loader.get("bios") is None:
        loader["efi"] = {}
        origin[(*at, "efi")] = "preference"
    if pref.get("preferredUseSecureBoot") is not None and isinstance(loader.get("efi"), dict):
        _fill(loader["efi"], "secureBoot", pref["preferredUseSecureBoot"], origin, (*at, "efi", "secureBoot"))
