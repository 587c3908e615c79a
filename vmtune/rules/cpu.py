"""CPU model, pinning and NUMA placement rules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vmtune.facts.domain import Domain
from vmtune.facts.units import MAX_VCPUS, format_cpuset, human_kib, uint_or_none
from vmtune.patch.edits import Edit, Remove, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import housekeeping_cpus, kvm_feature_on, thread_pin_cpus, vcpu_host_cpus

if TYPE_CHECKING:
    from vmtune.facts.host import Host  # annotations only: host facts load with --host

GENERIC_MODELS = frozenset({None, "qemu64", "qemu32", "kvm64", "kvm32", "pentium", "486"})


class CpuModelGeneric(Rule):
    """
    ## What it checks
    A KVM guest whose CPU is libvirt's default custom model or a generic one (`qemu64`,
    `kvm64`...): no `<cpu>`, or `mode='custom'` with no or a generic `<model>`. A generic
    model that requires AVX2 and AES-NI (`<feature policy='require'>`: the x86-64-v3 level
    CPU035 offers) is a portable level, not reported.

    ## Why it matters
    Generic models hide AVX, AES-NI, PCID, invariant TSC and more; crypto, compression and
    anything vectorised run several times slower, and without PCID every context switch
    flushes the TLB. virt-install uses host-passthrough when the host allows it.

    ## Example
    ```xml
    <cpu mode='custom' match='exact'><model>qemu64</model></cpu>
    ```

    ## Fix
    Sets `mode='host-passthrough'` (removing the generic model). Unsafe: the guest can then
    live-migrate only to hosts with the same CPU and microcode, and the fix says so.
    Where migration matters it sets `mode='host-model'` instead (the host's CPU as a named
    model plus its features, which libvirt can check against a destination): when the
    policy parameter `migrating_fleet` is true, or when every disk of the guest is on shared
    network storage (`type='network'`: RBD, iSCSI, Gluster, NBD), which is what live migration
    without copying disks needs. A named model from `virsh domcapabilities` common to the
    fleet is the choice for hosts of different generations.

    ## Calibration
    Warning: the hidden CPU features are a documented cost for any workload that uses
    them. Unsafe: the guest sees another CPU, and migration needs identical hosts.
    Versions: libvirt 9.0 defines host-passthrough and host-model on any KVM host (QEMU 7.2
    `-cpu host`); migration of host-passthrough needs identical hosts per libvirt's
    formatdomain.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology
    - virt-manager `virtinst/domain/cpu.py`
    """

    code = "CPU001"
    name = "cpu-model-generic"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True
    params = {"migrating_fleet": False}
    param_docs = {"migrating_fleet": "guests live-migrate between hosts: the fix uses host-model, not "
                                     "host-passthrough"}

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.cpu_mode != "custom" or domain.cpu_model not in GENERIC_MODELS or _requires_v3(domain):
            return
        offered = ctx.host.cpu_modes if ctx.host else None
        migrates = bool(ctx.params.get("migrating_fleet")) or _on_shared_storage(domain)
        mode = "host-model" if migrates else "host-passthrough"
        if offered is not None and mode not in offered:
            mode = next((m for m in ("host-passthrough", "host-model") if m in offered), "")
            if not mode:
                return
        label = domain.cpu_model or "libvirt's default model"
        edits: list[Edit]
        if domain.cpu is None:
            # No migratable='on' (virt-install writes it): QEMU defaults to it where it exists, and
            # libvirt rejects the attribute where the binary lacks it (qemu-system-i386 on Debian 12).
            edits = [ensure(domain.root, path("cpu"), {"mode": mode, "check": "none"})]
        else:
            edits = [set_attrs(domain.cpu, {"mode": mode, "match": None, "check": "none"})]
            edits += [Remove(m) for m in domain.cpu.iterfind("model")]
        # What the fix costs for live migration is said with the fix (--show-fixes, --diff, JSON), not
        # as a note on every finding: most guests never migrate.
        cost = ("live migration then needs hosts with the same CPU; policy parameter migrating_fleet for "
                "host-model") if mode == "host-passthrough" else \
            "live migration to hosts with at least these CPU features; a named model across host generations"
        yield self.finding(domain, domain.cpu if domain.cpu is not None else domain.root,
                           f"guest CPU is {label}: host CPU features hidden",
                           Fix(f"use {mode} ({cost})", tuple(edits), FixSafety.UNSAFE))


# What makes a generic model a portable level rather than a bare one: Proxmox's x86-64-v3 (CPU035's
# fix) is qemu64 with these required.
LEVEL_V3 = frozenset({"avx2", "aes"})


def _requires_v3(domain: Domain) -> bool:
    cpu = domain.cpu
    required = {f.get("name") for f in domain.children(cpu, "feature") if f.get("policy") in ("require", None)} \
        if cpu is not None else set()
    return required >= LEVEL_V3


def _on_shared_storage(domain: Domain) -> bool:
    """Every disk on network storage: the guest can live-migrate without copying its disks,
    the usual reason to keep it portable."""
    disks = [d for d in domain.disks if d.get("device", "disk") in ("disk", "lun")]
    return bool(disks) and all(d.get("type") == "network" for d in disks)


class VcpuPinningPartial(Rule):
    """
    ## What it checks
    Some online vCPUs pinned with `<vcpupin>` and others not, with neither `<vcpu cpuset>`
    nor `placement='auto'` to confine the others. vCPUs a `<vcpus>` list marks
    `enabled='no'` (hot-plug slots, as oVirt and KubeVirt write) do not run and are not
    counted.

    ## Why it matters
    The unpinned vCPUs float over every host CPU, including the ones the pinned vCPUs
    were meant to have alone, so the pinning buys neither isolation nor locality.

    ## Example
    ```xml
    <vcpu>4</vcpu>
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    None automatic: pin the rest (see `vmtune plan` when available) or remove the pins.

    ## Calibration
    Warning: the unpinned vCPUs defeat the pinning the user wrote (documented in
    libvirt's CPU tuning, which lets unpinned vCPUs run on any host CPU, or on
    `<vcpu cpuset>`). No fix: which CPUs is a placement decision.
    Versions: libvirt 9.0's cgroup placement of unpinned vCPUs (all host CPUs, or `<vcpu
    cpuset>`), as formatdomain documents it.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    """

    code = "CPU002"
    needs = "cputune"
    name = "vcpu-pinning-partial"
    severity = Severity.WARNING

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not domain.vcpu_pins or domain.vcpu_cpuset is not None or domain.vcpu_placement_auto:
            return  # the others follow <vcpu cpuset> or numad's placement, not every host CPU
        missing = [v for v in domain.online_vcpu_ids if v not in domain.vcpu_pins]
        if missing:
            yield self.finding(domain, domain.cputune,
                               f"vCPUs {format_cpuset(set(missing))} of {domain.vcpus} are not pinned")


class VcpuPinInvalid(Rule):
    """
    ## What it checks
    `<vcpupin>` for a vCPU id the domain does not have, or (with host facts) to host CPUs
    the host does not have.

    ## Why it matters
    libvirt 9.0 silently drops a vcpupin beyond the vCPU count when it defines the
    domain, so the pin does nothing; a pin to a host CPU that does not exist (or is offline)
    makes the guest fail to start with "Invalid argument" from sched_setaffinity or cgroups.

    ## Example
    ```xml
    <vcpu>2</vcpu>
    <cputune><vcpupin vcpu='2' cpuset='64'/></cputune>
    ```

    ## Fix
    A pin for a vCPU id that does not exist is removed (unsafe). Pins to missing host CPUs
    need a new placement: not patched.

    ## Calibration
    Error when a pin names host CPUs the host lacks (the guest does not start); info for
    a pin of a vCPU id the domain does not have, which libvirt drops at define time.
    Removing a pin the user wrote is unsafe.
    Versions: libvirt 9.0 drops a vcpupin beyond the vCPU count at define time and refuses to
    start a pin to a missing host CPU.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    """

    code = "CPU003"
    needs = "cputune"
    name = "vcpu-pin-invalid"
    severity = Severity.ERROR
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.cputune is None:
            return
        known = ctx.host.known_cpus if ctx.host else frozenset()
        for pin in domain.children(domain.cputune, "vcpupin"):
            vcpu_id = uint_or_none(pin.get("vcpu"), MAX_VCPUS)
            vcpu = pin.get("vcpu", "")
            if vcpu_id is not None and vcpu_id >= domain.max_vcpus:
                yield self.finding(domain, pin, f"vcpupin for vCPU {vcpu}, but the domain has {domain.max_vcpus}: "
                                   "libvirt drops the pin", Fix("remove the pin", (Remove(pin),), FixSafety.UNSAFE),
                                   severity=Severity.INFO)
                continue
            cpus = domain.vcpu_pins.get(vcpu_id) if vcpu_id is not None else None
            if known and cpus and not cpus <= known:
                yield self.finding(domain, pin, f"vCPU {vcpu} pinned to host CPUs "
                                   f"{format_cpuset(cpus - known)} that this host does not have")


def _threads_overlap_message(kind: str, cpus: frozenset[int] | None) -> str:
    if cpus is None:
        return f"{kind} threads float over the CPUs the vCPUs are pinned to"
    return f"{kind} threads are pinned to {format_cpuset(cpus)}, overlapping the vCPU pins"


class EmulatorNotIsolated(Rule):
    """
    ## What it checks
    All vCPUs pinned, some of them each to a host CPU of its own, and no `<emulatorpin>` or
    one that overlaps those CPUs. A vCPU pinned to a set of CPUs, or to a CPU another vCPU
    also names, is placement, not a CPU of its own: it already competes there with the other
    vCPUs, and the emulator threads beside it take nothing it was promised (nova pins every
    vCPU of a shared-CPU flavor with `hw:numa_nodes` or `hw:mem_page_size` to its whole
    NUMA cell, and the emulator threads to the same CPUs).

    ## Why it matters
    QEMU's main loop, device emulation and vhost-less I/O run in emulator threads. Left
    unpinned they preempt the pinned vCPUs; in one e-commerce load test on OpenStack, moving QEMU and vhost
    threads off the vCPU cores took an overcommitted host from 300 MB/s to line rate.
    nova's `hw:emulator_threads_policy=isolate` does the same.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    Adds `<emulatorpin cpuset='...'>` on the housekeeping CPUs: the policy parameter
    `housekeeping_cpus`, or the first core of each NUMA node when the host is known,
    minus the pinned CPUs; with host facts, only those on the guest's NUMA node when its
    vCPUs (and its `<numatune>` memory) are on one node, never a set spanning nodes for a
    guest bound to one (no fix, and a note, when that node has none free). Unsafe (pinning is
    host-specific). No fix without either.

    ## Calibration
    Warning: vCPUs have CPUs of their own, so the user wants isolation, and the preemption is
    measured. Not reported when `<vcpu cpuset>` (which libvirt applies to the emulator
    threads when there is no `<emulatorpin>`, formatdomain "CPU Allocation") already keeps
    them off the pinned CPUs. Unsafe: choosing the housekeeping CPUs is a placement decision
    that depends on the host. libvirt 9.0 defines `<emulatorpin>` on any guest.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    - nova `hw:emulator_threads_policy`
    - nova 34.0.0 `nova/virt/libvirt/driver.py` `_get_guest_numa_config`, `_get_emulatorpin_cpuset`
      (a shared-CPU NUMA cell's vCPUs, emulator and I/O threads all pinned to the cell's CPUs)
    - https://specs.openstack.org/openstack/nova-specs/specs/liberty/implemented/libvirt-virtiomq.html
    """

    code = "CPU004"
    needs = "cputune"
    name = "emulator-threads-not-isolated"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    params = {"housekeeping_cpus": ""}
    param_docs = {"housekeeping_cpus": "cpuset for emulator and I/O threads (default: first core of each node)"}

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        own = domain.exclusive_vcpu_cpus
        if not own or not domain.all_vcpus_pinned:
            return
        # Without <emulatorpin> libvirt confines the emulator threads to <vcpu cpuset>.
        pin = domain.emulator_pin if domain.emulator_pin is not None else domain.vcpu_cpuset
        if pin is not None and not (pin & own):
            return
        target, why_not = thread_pin_cpus(domain, ctx.params, ctx.host)
        fix = None
        if target:
            fix = Fix(f"pin emulator threads to {format_cpuset(target)}",
                      (ensure(domain.root, path("cputune", "emulatorpin"), {"cpuset": format_cpuset(target)}),),
                      FixSafety.UNSAFE)
        yield self.finding(domain, domain.cputune, _threads_overlap_message("emulator", pin), fix, note=why_not)


class IothreadsNotIsolated(Rule):
    """
    ## What it checks
    All vCPUs pinned, some each to a host CPU of its own (as CPU004), and the domain has
    `<iothreads>`, but some I/O thread has no `<iothreadpin>` or one that overlaps those CPUs.

    ## Why it matters
    An I/O thread does the virtqueue processing for its disks; on a vCPU's core it steals
    exactly the cycles the guest is waiting on, and the disk latency grows with guest load.

    ## Example
    ```xml
    <iothreads>1</iothreads>
    <cputune><vcpupin vcpu='0' cpuset='2'/></cputune>
    ```

    ## Fix
    Adds `<iothreadpin>` for each unpinned or overlapping I/O thread on the housekeeping
    CPUs, on the guest's NUMA node when it lives on one (see CPU004). Unsafe.

    ## Calibration
    Warning: as CPU004, for I/O threads. Unsafe for the same reason.
    Versions: libvirt 9.0 defines `<iothreadpin>`.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    """

    code = "CPU005"
    needs = "cputune"
    name = "iothreads-not-isolated"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    params = {"housekeeping_cpus": ""}
    param_docs = EmulatorNotIsolated.param_docs

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        own = domain.exclusive_vcpu_cpus
        if not domain.iothread_ids or not own or not domain.all_vcpus_pinned:
            return
        bad = [t for t in domain.iothread_ids if t not in domain.iothread_pins or domain.iothread_pins[t] & own]
        if not bad:
            return
        target, why_not = thread_pin_cpus(domain, ctx.params, ctx.host)
        fix = None
        if target:
            cpuset = format_cpuset(target)
            edits: list[Edit] = []
            pins = {p.get("iothread"): p for p in domain.cputune.iterfind("iothreadpin")} \
                if domain.cputune is not None else {}
            for tid in bad:
                existing = pins.get(str(tid))
                edits.append(set_attrs(existing, {"cpuset": cpuset}) if existing is not None else
                             ensure(domain.root, path("cputune", "iothreadpin"),
                                    {"iothread": str(tid), "cpuset": cpuset}, new=True))
            fix = Fix(f"pin I/O threads to {cpuset}", tuple(edits), FixSafety.UNSAFE)
        yield self.finding(domain, domain.cputune,
                           f"I/O threads {', '.join(map(str, bad))} float over or share the vCPUs' CPUs", fix,
                           note=why_not)


class HintDedicatedMissing(Rule):
    """
    ## What it checks
    Every vCPU pinned to its own host CPU and no `<kvm><hint-dedicated state='on'/>`, on a
    guest that is not Windows and does not hide KVM (`<kvm><hidden state='on'/>`).

    ## Why it matters
    The hint (KVM_HINTS_REALTIME) tells a Linux guest its vCPUs are never preempted, so it
    uses native spinlocks instead of paravirtual ones and can idle-poll; it is also the
    prerequisite for the guest haltpoll driver (see LAT001). Windows does not read KVM's
    paravirtual CPUID leaf, and a guest with KVM hidden cannot see it.

    ## Example
    ```xml
    <cpu mode='host-passthrough'/>
    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>
    ```

    ## Fix
    Adds `<features><kvm><hint-dedicated state='on'/></kvm></features>`. Unsafe: wrong if
    the CPUs are later shared.

    ## Calibration
    Info: a gain for some guest workloads only; adding a guest-visible CPU hint is
    unsafe and a workload decision. Any CPU mode: libvirt 9.0 defines and starts
    `host-model` and custom-model guests with the hint (QEMU gets `kvm-hint-dedicated=on`);
    the "only applicable for cpu host-passthrough" refusal exists only in older libvirt
    (`qemu_validate.c` before the kvm_features rework). KubeVirt sets it on every dedicated
    guest whatever its CPU model (`vcpu.go`).

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - KubeVirt `dedicatedCpuPlacement` (`pkg/virt-launcher/virtwrap/converter/vcpu/vcpu.go`)
    - Linux `Documentation/virt/kvm/x86/cpuid.rst` (KVM_HINTS_REALTIME)
    """

    code = "CPU006"
    needs = "cputune"
    name = "hint-dedicated-missing"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True

    reads_os = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        hint = domain.kvm_features.get("hint-dedicated")
        hidden = domain.kvm_features.get("hidden")
        if not domain.dedicated_pinning or hint is not None or domain.is_windows:
            return
        if hidden is not None and hidden.on:
            return  # the guest cannot see KVM's CPUID leaves, the hint among them
        yield self.finding(domain, domain.cputune, "vCPUs have dedicated host CPUs but the guest is not told",
                           Fix("add kvm hint-dedicated", (kvm_feature_on(domain, "hint-dedicated"),),
                               FixSafety.UNSAFE))


class VcpusNotPinned(Rule):
    """
    ## What it checks
    A KVM guest with no vCPU pinning at all. Selected by the `latency` policy (dedicated
    CPUs), not by `default`.

    ## Why it matters
    Floating vCPUs migrate between host CPUs and NUMA nodes, lose their caches and share
    cores with other guests: on an overcommitted OpenStack host (Li, Cui, Li 2016) pinning
    removed most VM exits and cross-node memory traffic.

    ## Example
    ```xml
    <vcpu placement='static'>8</vcpu>
    ```

    ## Fix
    With host facts, the placement planner's: whole free cores of one NUMA node (never a
    housekeeping core or one another domain is pinned to), emulator and I/O threads on the
    node's housekeeping CPUs, memory bound to the node. Unsafe: pinning ties the guest to
    this host's topology. Without host facts: none.

    ## Calibration
    Warning where a policy selects it (the `latency` policy declares the guests
    dedicated); the `default` policy does not, because pinning is a choice. Pinning is a
    workload and placement decision, so its fix is unsafe and never applied by default.
    Versions: the placement fix uses only `<vcpupin>`, `<emulatorpin>`, `<iothreadpin>` and
    `<numatune>`, all defined by libvirt 9.0.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning
    - nova `hw:cpu_policy=dedicated`
    - Li Guilin, Cui Guangzhang, Li Yongbao, "KVM virtual machine performance testing and
      optimisation in an OpenStack cloud", Internet of Things Technologies, 2016 (2)
    """

    code = "CPU007"
    name = "vcpus-not-pinned"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    params = {"housekeeping_cpus": ""}
    param_docs = EmulatorNotIsolated.param_docs

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.vcpu_pins or domain.vcpu_cpuset is not None or domain.vcpu_placement_auto:
            return  # <vcpu cpuset> confines them; placement='auto' lets numad place them
        message = f"none of the {domain.vcpus} vCPUs is pinned"
        if ctx.host is None or not ctx.host.cells:
            yield self.finding(domain, domain.vcpu_element, message, note="give --host to get a placement")
            return
        from vmtune.host.planner import placement_edits, plan

        result = plan(ctx.host, [domain], ctx.inventory.reserved_by_others(domain) if ctx.inventory else [],
                      housekeeping_cpus(ctx.params, ctx.host))
        placement = result.for_domain(domain.name)
        if placement is None:
            yield self.finding(domain, domain.vcpu_element, message,
                               note=f"no placement: {result.misfits.get(domain.name, 'does not fit')}")
            return
        yield self.finding(domain, domain.vcpu_element, message,
                           Fix(f"pin to node {placement.node} CPUs {format_cpuset(placement.cpus)}",
                               tuple(placement_edits(domain, placement)), FixSafety.UNSAFE))


class VcpusSpanNumaNodes(Rule):
    """
    ## What it checks
    vCPUs pinned to host CPUs in more than one NUMA node while the guest has no NUMA
    topology (`<cpu><numa>`). Needs host facts.

    ## Why it matters
    The guest believes all memory is equally close; half its vCPUs then reach their memory
    across the interconnect, at higher latency and lower bandwidth.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='0'/><vcpupin vcpu='1' cpuset='8'/></cputune>
    ```

    ## Fix
    None automatic: pin within one node, or give the guest a matching NUMA topology.

    ## Calibration
    Warning: remote-memory latency applies to this pinning as written. No fix: a guest
    NUMA topology or a new placement is the user's choice.
    Versions: none matter; the latency is the host's NUMA hardware (libvirt 9.0 reports it in
    `virsh capabilities`).

    ## References
    - https://libvirt.org/formatdomain.html#numa-node-tuning
    """

    code = "CPU008"
    needs = "cputune"
    name = "vcpus-span-numa-nodes"
    severity = Severity.WARNING
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if ctx.host is None or not domain.vcpu_pins or domain.guest_numa_cells:
            return
        nodes = ctx.host.nodes_of(domain.pinned_cpus)
        if len(nodes) > 1:
            yield self.finding(domain, domain.cputune,
                               f"vCPUs are pinned across NUMA nodes {sorted(nodes)} without a guest NUMA topology")


class KvmUnavailable(Rule):
    """
    ## What it checks
    `<domain type='kvm'>` on a host whose capabilities offer no KVM for the guest's
    architecture, or no emulator for that architecture at all (virt-lint's "KVM on node"
    check: an aarch64 `type='kvm'` guest on an x86_64 host). Needs host facts.

    ## Why it matters
    The guest cannot start there ("domain type kvm is not supported", "No suitable
    emulator found").

    ## Example
    ```xml
    <domain type='kvm'>...<os><type arch='aarch64' machine='virt'>hvm</type></os>
    ```

    ## Fix
    None: enable KVM on the host (BIOS virtualisation, kvm_intel/kvm_amd module), or run
    the guest on a host of its architecture.

    ## Calibration
    Error: libvirt refuses to start the guest on this host.
    Versions: libvirt 9.0 refuses `type='kvm'` where the capabilities list no kvm domain type.

    ## References
    - https://gitlab.com/libvirt/virt-lint
    - https://libvirt.org/formatcaps.html
    """

    code = "CPU009"
    name = "kvm-unavailable"
    severity = Severity.ERROR
    needs_host = True
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        arch = domain.arch or (host.arch if host else None)
        # Only a QEMU host can lack KVM; other drivers (xen, test) report their own domain types.
        if host is None or not _offers_qemu(host):
            return
        guest = host.guests.get(arch or "") if host.guests else None
        if host.guests and guest is None:
            yield self.finding(domain, domain.os_type_element, f"the host offers no emulator for {arch} guests")
        elif (guest.domain_types if guest else host.guest_domain_types).isdisjoint({"kvm"}):
            yield self.finding(domain, domain.root, f"the host offers no KVM acceleration for {arch or 'this'} guests")


def _offers_qemu(host: Host) -> bool:
    """Whether the capabilities list a qemu domain type for any guest architecture. CPU009 asks
    for every domain of a batch: the host arch's types first (a QEMU host's answer), not a set of
    every arch's types built each time (a microsecond)."""
    return "qemu" in host.guest_domain_types or any("qemu" in g.domain_types for g in host.guests.values())


class MachineTypeUnavailable(Rule):
    """
    ## What it checks
    A machine type (`<os><type machine='pc-q35-7.2'>`) or `<emulator>` that the host's
    capabilities do not list for the guest's architecture. Needs host facts (a
    `virsh capabilities` dump or a live connection).

    ## Why it matters
    libvirt refuses to define or start the guest: a definition written on a newer host
    (`pc-q35-7.2`) does not run on one whose QEMU stops at `pc-q35-6.1`, and a migration to
    it fails the same way.

    ## Example
    ```xml
    <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>   <!-- host: up to 6.1 -->
    ```

    ## Fix
    None: use a machine type the host lists (its newest is named in the finding), or
    upgrade the host's QEMU. Changing the machine type changes guest-visible hardware.

    ## Calibration
    Error: libvirt refuses the guest on this host.
    Versions: libvirt 9.0 refuses a machine type or emulator its capabilities do not list.

    ## References
    - https://libvirt.org/formatcaps.html
    - https://gitlab.com/libvirt/virt-lint
    """

    code = "CPU015"
    name = "machine-type-unavailable"
    severity = Severity.ERROR
    needs_host = True
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        guest = host.guests.get(domain.arch or host.arch or "") if host else None
        if guest is None:
            return  # no capabilities for this arch: CPU009 speaks
        machine = domain.machine
        if machine and guest.machines and machine not in guest.machines:
            newest = max(guest.machines, key=_machine_version)
            yield self.finding(domain, domain.os_type_element, f"machine type {machine} is not offered by this "
                               f"host's QEMU (newest of its kind: {_newest_like(machine, guest.machines) or newest})")
        if domain.emulator and guest.emulators and domain.emulator not in guest.emulators:
            yield self.finding(domain, domain.root.find("devices/emulator"), f"emulator {domain.emulator} is not "
                               f"on this host (it has {', '.join(sorted(guest.emulators))})")


def _machine_version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", name)[:3]) or (0,)


def _newest_like(machine: str, offered: frozenset[str]) -> str | None:
    """pc-q35-7.2 -> the newest pc-q35-* the host has."""
    family = re.sub(r"-[0-9.]+$", "", machine)
    same = [m for m in offered if m.startswith(family + "-")]
    return max(same, key=_machine_version) if same else None


class TcgOnKvmHost(Rule):
    """
    ## What it checks
    `<domain type='qemu'>` (TCG, pure emulation) on a host that offers KVM. Needs host facts.

    ## Why it matters
    TCG translates every guest instruction: CPU-bound work runs 5-20x slower than under KVM.

    ## Example
    ```xml
    <domain type='qemu'>
    ```

    ## Fix
    Sets `type='kvm'`. Unsafe: some settings valid under TCG (CPU models, features) may not
    be under KVM, and libvirt's capabilities list KVM wherever `/dev/kvm` opens, also where it
    runs only special guests (kvm-pvm): there the guest defines but fails to start (QEMU: failed
    to set MSR). `vmtune apply` starts a throwaway copy of the new definition paused first and
    applies nothing if it fails (SECURITY.md); `check --fix` on files cannot: start a copy of
    the guest before relying on it.

    ## Calibration
    Warning: the slowdown of TCG is documented and applies whenever the host offers KVM.
    Unsafe: the guest then runs with another CPU and timing.
    Versions: libvirt 9.0 defines `type='kvm'` wherever the host's capabilities list it; QEMU
    7.2's TCG is the slow path.

    ## References
    - https://libvirt.org/formatdomain.html#element-and-attribute-overview
    """

    code = "CPU010"
    name = "tcg-on-kvm-host"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    needs_host = True
    hypervisors = frozenset({"qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        if host and "kvm" in host.guest_domain_types and (not domain.arch or domain.arch == host.arch):
            yield self.finding(domain, domain.root, "guest uses TCG emulation although libvirt lists KVM "
                               "for this host (its capabilities only: not proof that KVM can run this guest)",
                               Fix("use KVM", (set_attrs(domain.root, {"type": "kvm"}),), FixSafety.UNSAFE))


class NumaMemoryNotBound(Rule):
    """
    ## What it checks
    All vCPUs pinned inside one host NUMA node, or confined to one by `<vcpu cpuset>`, but
    no `<numatune><memory>` binding the guest's memory there. Needs host facts.

    ## Why it matters
    Without a binding the kernel allocates on whichever node the faulting thread ran
    first, often the emulator's; the vCPUs then read remote memory for their lifetime.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='8'/><vcpupin vcpu='1' cpuset='9'/></cputune>
    ```

    ## Fix
    Adds `<numatune><memory mode='strict' nodeset='N'/></numatune>`. Unsafe: the guest
    fails to start if the node cannot hold its memory.

    ## Calibration
    Warning: the pinning says the guest is meant to be node-local; remote memory is a
    documented cost. Unsafe: a strict binding can stop the guest from starting when the
    node is short of memory; a fix that vmtune's own checks reject (MEM008) is withheld.
    Versions: libvirt 9.0 defines `<numatune><memory mode='strict'>` and refuses to start it
    when the node lacks memory.

    ## References
    - https://libvirt.org/formatdomain.html#numa-node-tuning
    """

    code = "CPU011"
    name = "numa-memory-not-bound"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        if host is None or len(host.cells) < 2:
            return
        confined = vcpu_host_cpus(domain)
        if not confined:
            return
        if domain.numatune_memory is not None or domain.guest_numa_cells:
            return
        cells = {c.id: c for cpu in confined if (c := host.cell_of_cpu(cpu)) is not None}
        if len(cells) != 1:
            return
        (node, cell), = cells.items()
        fix = None
        if domain.memory_kib <= cell.memory_kib:
            fix = Fix(f"bind memory to node {node}",
                      (ensure(domain.root, path("numatune", "memory"), {"mode": "strict", "nodeset": str(node)}),),
                      FixSafety.UNSAFE)
        by_pins = domain.all_vcpus_pinned and bool(domain.vcpu_pins)
        yield self.finding(domain, domain.cputune if by_pins else domain.vcpu_element,
                           f"vCPUs run on NUMA node {node}{'' if by_pins else ' (vcpu cpuset)'} but memory is not "
                           "bound to it", fix)


class MemoryExceedsNumaNode(Rule):
    """
    ## What it checks
    Guest memory larger than the whole host (error, also on one-node hosts and live hosts
    whose capabilities list no NUMA cells), larger than the host NUMA node it is bound to
    (error), or, without a binding or guest NUMA topology, larger than the largest node
    (warning). virt-lint's
    "memory fits one NUMA node" check. Needs host facts.

    ## Why it matters
    With a strict binding the guest cannot start (or is OOM-killed); without one, a guest
    that spans nodes without knowing it pays remote-access latency on part of its memory.

    ## Example
    ```xml
    <memory unit='GiB'>96</memory>
    <numatune><memory mode='strict' nodeset='0'/></numatune>
    ```

    ## Fix
    None automatic: shrink the guest, bind more nodes, or give it a NUMA topology.

    ## Calibration
    Error when a strict binding makes the guest unstartable; warning when part of its
    memory is remote, a documented cost.
    Versions: libvirt 9.0 with a strict `<numatune>` fails the start (QEMU cannot allocate);
    no version changes the remote-memory cost.

    ## References
    - https://gitlab.com/libvirt/virt-lint
    - https://libvirt.org/formatdomain.html#numa-node-tuning
    """

    code = "CPU012"
    name = "memory-exceeds-numa-node"
    severity = Severity.WARNING
    other_severities = (Severity.ERROR,)
    needs_host = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        host = ctx.host
        if host is None:
            return
        memory, total = domain.memory_kib, host.total_memory_kib
        if total and memory > total:
            yield self.finding(domain, domain.top("memory"), f"memory {human_kib(memory)} exceeds "
                               f"the host's {human_kib(total)}", severity=Severity.ERROR)
            return
        cells = host.cells
        if not cells:
            return
        binding = domain.numatune_memory
        # Without a binding only the largest-node warning below can apply. Asked first, it settles
        # most domains of a batch without reading their guest NUMA cells (a child index of <cpu>).
        if binding is None and (len(cells) < 2 or memory <= host.largest_cell_kib):
            return
        if domain.guest_numa_cells:
            return
        nodes = domain.memory_nodeset
        if nodes and binding is not None and binding.get("mode", "strict") == "strict":
            capacity = sum(c.memory_kib for c in host.cells if c.id in nodes)
            if domain.memory_kib > capacity:
                yield self.finding(domain, binding, f"memory {human_kib(domain.memory_kib)} exceeds bound node(s) "
                                   f"{format_cpuset(nodes)} ({human_kib(capacity)})", severity=Severity.ERROR)
            return
        largest = host.largest_cell_kib
        if len(host.cells) > 1 and domain.memory_kib > largest:
            yield self.finding(domain, domain.top("memory"),
                               f"memory {human_kib(domain.memory_kib)} exceeds the largest NUMA node "
                               f"({human_kib(largest)}) and the guest has no NUMA topology")


RULES: list[Rule] = [CpuModelGeneric(), VcpuPinningPartial(), VcpuPinInvalid(), EmulatorNotIsolated(),
                     IothreadsNotIsolated(), HintDedicatedMissing(), VcpusNotPinned(), VcpusSpanNumaNodes(),
                     KvmUnavailable(), TcgOnKvmHost(), NumaMemoryNotBound(), MemoryExceedsNumaNode(),
                     MachineTypeUnavailable()]
