"""What the guest's CPU is made to lack or to share: vCPUs of one domain on one host CPU, CPU
features and cache information switched off, CPU models older than the guest's software, and
an idle loop that never halts."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.units import format_cpuset
from vmtune.patch.edits import Edit, Remove, SetText, ensure, path, set_attrs, step
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import EXPLICIT


def crowded_vcpus(domain: Domain) -> list[tuple[frozenset[int], list[int]]]:
    """Host CPU sets that more online vCPUs of this domain are confined to than the set has
    CPUs: (the set, its vCPUs). A set's vCPUs are those pinned (`<vcpupin>`) to exactly it and
    those pinned to one CPU of it: two vCPUs on one CPU, three on the same pair, a pair's range
    plus a vCPU on each of its CPUs. Linear in the pins (sets nested otherwise are not combined:
    that would be a matching problem, quadratic on a guest of thousands of vCPUs)."""
    by_set: dict[frozenset[int], list[int]] = {}
    for vcpu in domain.online_vcpu_ids:
        pin = domain.vcpu_pins.get(vcpu)
        if pin:
            by_set.setdefault(pin, []).append(vcpu)
    single = {min(pin): vcpus for pin, vcpus in by_set.items() if len(pin) == 1}
    crowded: list[tuple[frozenset[int], list[int]]] = []
    for cpus, vcpus in by_set.items():
        if len(cpus) == 1:
            inside = vcpus
        else:  # walk the shorter of the set and the single-CPU pins
            ones = [c for c in single if c in cpus] if len(single) < len(cpus) else [c for c in cpus if c in single]
            inside = vcpus + [v for cpu in ones for v in single[cpu]]
        if len(inside) > len(cpus):
            crowded.append((cpus, sorted(inside)))
    return sorted(crowded, key=lambda c: c[1])


class VcpusPinnedTogether(Rule):
    """
    ## What it checks
    vCPUs of one domain pinned (`<vcpupin>`) so that more of them share a set of host CPUs
    than the set has CPUs: two vCPUs pinned to the same host CPU, three to the same pair, or
    a pair's range plus a vCPU pinned to each of its CPUs. (CPU013 compares the pins of
    different domains; this rule looks inside one.) Partly overlapping ranges are not
    combined: that is a matching problem, quadratic on guests of thousands of vCPUs.

    ## Why it matters
    Pinned vCPUs can only run where they are pinned: two vCPUs on one host CPU take turns on
    it, so each gets half a CPU while the guest schedules as if it had two. A guest spinning
    on a lock held by the other vCPU of the pair burns the holder's time slice (lock-holder
    preemption), and an IPI between them waits for the host scheduler. It is the classic
    slip of a hand-written `<cputune>` (a copied line whose `cpuset` was not changed), and
    libvirt accepts it without a word.

    ## Example
    ```xml
    <cputune><vcpupin vcpu='0' cpuset='4'/><vcpupin vcpu='1' cpuset='4'/></cputune>
    ```

    ## Fix
    None automatic: which host CPU each vCPU should have is a placement decision (`vmtune
    plan` assigns one CPU per vCPU on a known host).

    ## Calibration
    Warning: the vCPUs time-share the CPUs they are confined to, at the cost libvirt's CPU
    tuning section describes for pinning (the vCPU runs only on those CPUs), with no benefit
    over giving the guest fewer vCPUs. Pins over more CPUs than the vCPUs they hold (a
    floating pin) and `<vcpu cpuset>` confinement are not reported: the host scheduler then
    balances. Versions: none matter; libvirt 9.0 defines and starts such pins.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-tuning (`vcpupin`)
    - Linux `Documentation/virt/kvm/x86/cpuid.rst` (KVM_HINTS_REALTIME: why a guest assumes
      its vCPUs are not preempted only when each has a CPU of its own)
    """

    code = "CPU032"
    needs = "cputune"
    since = "unreleased"
    name = "vcpus-pinned-together"
    severity = Severity.WARNING
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.cputune is None or not domain.vcpu_pins:
            return
        for cpus, vcpus in crowded_vcpus(domain):
            pin = next((p for p in domain.cputune.iterchildren("vcpupin")
                        if p.get("vcpu", "").strip() == str(vcpus[-1])), domain.cputune)
            host = "host CPU" if len(cpus) == 1 else "host CPUs"
            yield self.finding(domain, pin, f"vCPUs {format_cpuset(frozenset(vcpus))} are pinned to {host} "
                               f"{format_cpuset(cpus)}: {len(vcpus)} vCPUs take turns on {len(cpus)}")


def _feature_disabled(domain: Domain, names: frozenset[str]) -> list[etree._Element]:
    cpu = domain.cpu
    if cpu is None:
        return []
    return [f for f in domain.children(cpu, "feature")
            if f.get("name") in names and f.get("policy") in ("disable", "forbid")]


class PcidDisabled(Rule):
    """
    ## What it checks
    `<cpu><feature policy='disable' name='pcid'/>` (or `forbid`, or the same for `invpcid`)
    on an x86 KVM guest: what nova's `cpu_model_extra_flags = -pcid` writes.

    ## Why it matters
    Process-context identifiers let the guest kernel keep TLB entries of several address
    spaces. Linux's page table isolation (the Meltdown mitigation, on by default on affected
    Intel CPUs) switches address spaces on every system call, interrupt and exception; the
    kernel documents PCID as what keeps those switches from flushing the whole TLB, and
    without it "the TLB is flushed on every kernel entry and exit" (`arch/x86/pti.html`):
    system-call and interrupt heavy workloads (databases, network services) slow down by
    tens of percent. INVPCID lets the kernel flush one context instead of all.

    ## Example
    ```xml
    <cpu mode='host-model'><feature policy='disable' name='pcid'/></cpu>
    ```

    ## Fix
    Removes the `<feature>` element, so the guest gets PCID whenever its CPU model and the
    host have it. Unsafe: it changes a value the user wrote and the CPUID the guest sees
    (live migration then needs a destination with PCID).

    ## Calibration
    Warning: the kernel documents the cost for every guest that runs page table isolation,
    and disabling the feature has no benefit for the guest. The one reason documented for
    it, migration to hosts whose CPUs lack PCID, is the user's to state with a suppression.
    Versions: libvirt 9.0 passes `pcid=off` to QEMU 7.2 for `policy='disable'`.

    ## References
    - https://docs.kernel.org/arch/x86/pti.html (PCID and INVPCID under PTI)
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology (feature `policy`)
    - nova `[libvirt] cpu_model_extra_flags` (`nova/conf/libvirt.py`)
    """

    code = "CPU033"
    since = "unreleased"
    name = "pcid-disabled"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        for feature in _feature_disabled(domain, frozenset({"pcid", "invpcid"})):
            name = feature.get("name")
            yield self.finding(domain, feature, f"CPU feature {name} is disabled: the guest kernel's page table "
                               "isolation flushes the TLB on every kernel entry and exit",
                               Fix(f"remove the {name} policy", (Remove(feature),), FixSafety.UNSAFE), note=EXPLICIT)


class CpuCacheDisabled(Rule):
    """
    ## What it checks
    `<cpu><cache mode='disable'/>` on an x86 guest with several vCPUs.

    ## Why it matters
    libvirt turns it into QEMU's `l3-cache=off` (and `host-cache-info=off`), so the guest
    sees no shared last-level cache. QEMU describes a virtual L3 by default (`l3-cache`
    defaults to on) because Linux decides by it how to wake a task on another CPU: for a
    CPU that shares its cache it queues the task directly, for one that does not it sends a
    reschedule IPI (`kernel/sched/core.c`, `cpus_share_cache` and `ttwu_queue_wakelist`).
    Without the L3, every cross-vCPU wake-up is an IPI, each a VM exit on the sender and
    an interrupt on the receiver.

    ## Example
    ```xml
    <cpu mode='host-model'><cache mode='disable'/></cpu>
    ```

    ## Fix
    Removes the `<cache>` element (QEMU's default, the emulated L3). Unsafe: it changes a
    value the user wrote and the cache topology the guest sees.

    ## Calibration
    Warning: the reschedule IPIs are the cost the default was introduced to avoid, and
    hiding the cache has no benefit the definition shows. One vCPU has nobody to wake, so
    single-vCPU guests are not reported. Versions: libvirt 9.0 accepts `mode='disable'`
    only without a `level`; QEMU has emulated an L3 by default since 2.8.

    ## References
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology (`cache`)
    - libvirt `src/qemu/qemu_command.c` (`l3-cache=off` for `mode='disable'`); QEMU
      `target/i386/cpu.c` (`l3-cache` property, default on)
    - Linux `kernel/sched/core.c` (`ttwu_queue_wakelist`)
    """

    code = "CPU034"
    since = "unreleased"
    name = "cpu-cache-disabled"
    severity = Severity.WARNING
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        cpu = domain.cpu
        cache = domain.child(cpu, "cache") if cpu is not None else None
        if cache is None or cache.get("mode") != "disable" or len(domain.online_vcpu_ids) < 2:
            return
        yield self.finding(domain, cache, "CPU cache information disabled: the guest wakes tasks on other vCPUs "
                           "with reschedule IPIs", Fix("remove the cache mode", (Remove(cache),), FixSafety.UNSAFE),
                           note=EXPLICIT)


# Named x86 models older than AVX2 (libvirt's cpu_map: x86_*.xml list no avx2), and those also
# without AES-NI. Generic models (qemu64, kvm64...) are CPU001's.
NO_AES = frozenset({"486", "pentium", "pentium2", "pentium3", "pentiumpro", "coreduo", "core2duo", "n270", "Conroe",
                    "Penryn", "Nehalem", "Nehalem-IBRS", "athlon", "phenom", "Opteron_G1", "Opteron_G2",
                    "Opteron_G3", "cpu64-rhel5", "cpu64-rhel6"})
NO_AVX2 = NO_AES | frozenset({"Westmere", "Westmere-IBRS", "SandyBridge", "SandyBridge-IBRS", "IvyBridge",
                              "IvyBridge-IBRS", "Opteron_G4", "Opteron_G5"})
# Proxmox VE's x86-64-v3 (qemu-server `CPUConfig.pm`): qemu64 with the psABI v3 level's features,
# a model any x86 host since Haswell and AMD Excavator runs, so it migrates across generations.
X86_64_V3 = ("aes", "popcnt", "pni", "sse4.1", "sse4.2", "ssse3", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm",
             "movbe", "xsave")


def _model_name(model: str) -> str:
    """A versioned alias (Nehalem-v2) is the same generation as its base."""
    base, _, version = model.rpartition("-v")
    return base if base and version.isdigit() else model


class CpuModelOld(Rule):
    """
    ## What it checks
    A KVM guest with a named CPU model older than AVX2: Intel before Haswell (`Nehalem`,
    `Westmere`, `SandyBridge`, `IvyBridge`, `Penryn`, `Conroe`...) and AMD before Zen
    (`Opteron_G1` to `Opteron_G5`, `phenom`, `athlon`). Generic models (`qemu64`, `kvm64`)
    are CPU001's.

    ## Why it matters
    The guest gets only the features of that model, whatever the host has. Software built
    for today's x86 uses AVX2 (glibc's string functions, compression, databases, media and
    machine-learning code) and AES-NI (TLS, disk encryption): without them it falls back to
    scalar code, several times slower for those operations; RHEL 9 requires the
    x86-64-v2 level, and the models before Westmere lack even AES-NI. libvirt's own
    model definitions (`cpu_map/x86_*.xml`) list what each model has.

    ## Example
    ```xml
    <cpu mode='custom' match='exact'><model fallback='allow'>Nehalem</model></cpu>
    ```

    ## Fix
    Replaces the model by the portable x86-64-v3 level as Proxmox VE defines it: `qemu64`
    plus AVX, AVX2, AES-NI, BMI, FMA and the SSE4 set, required (`policy='require'`), which
    every x86 host since Intel Haswell (2013) and AMD Excavator runs. Unsafe: the guest
    sees another CPU, and it trades migration reach for speed: a fleet with hosts older than
    Haswell needs x86-64-v2 (the SSE4 set and AES-NI) instead, and `host-model` gives the
    most where every host is the same generation (CPU001's fix).

    ## Calibration
    Warning: the hidden instructions are a documented cost for any software that uses them.
    The model is usually a choice made for migration across an old fleet: the finding says
    so, and a fleet that still has such hosts suppresses it with that reason. Info on a
    guest a stack manages (oVirt, nova, KubeVirt, CloudStack): there the model is the
    cluster's CPU baseline, which every host the guest may migrate to must run, and whether
    a newer one is possible depends on the oldest of those hosts, which vmtune cannot see;
    the note names the stack's setting where vmtune knows it. Versions:
    libvirt 9.0's cpu_map and QEMU 7.2 define these models; the fix's features exist in
    both (TCG in QEMU 7.2 emulates AVX2, so the fixed guest starts under TCG too).

    ## References
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology
    - libvirt `src/cpu_map/x86_Nehalem.xml` and siblings (the features of each model)
    - Proxmox VE qemu-server `src/PVE/QemuServer/CPUConfig.pm` (x86-64-v2-AES, x86-64-v3)
    - x86-64 psABI microarchitecture levels (https://gitlab.com/x86-psABIs/x86-64-ABI)
    """

    code = "CPU035"
    since = "unreleased"
    name = "cpu-model-old"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    x86_only = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        cpu, model = domain.cpu, domain.cpu_model
        if cpu is None or domain.cpu_mode != "custom" or model is None or _model_name(model) not in NO_AVX2:
            return
        hidden = "AVX2 and AES-NI" if _model_name(model) in NO_AES else "AVX2"
        model_el = domain.child(cpu, "model")
        if model_el is None:
            return
        edits: list[Edit] = [SetText(model_el, "qemu64"), set_attrs(model_el, {"fallback": "forbid"})]
        have = {f.get("name") for f in domain.children(cpu, "feature")}
        edits += [set_attrs(f, {"policy": "require"}) for f in domain.children(cpu, "feature")
                  if f.get("name") in X86_64_V3 and f.get("policy") != "require"]
        edits += [ensure(cpu, path(step("feature", name=name)), {"policy": "require"}, new=True)
                  for name in X86_64_V3 if name not in have]
        # A stack's model is its fleet's migration baseline (the stack's own setting is named by
        # vmtune.managers, which adds it to the finding).
        baseline = domain.manager is not None
        note = "the fleet's CPU baseline: raise it once every host the guest may migrate to runs a newer model" \
            if baseline else "an old model keeps live migration open to hosts of its generation: if that is why " \
                             "it was chosen, suppress it with that reason"
        yield self.finding(domain, model_el, f"guest CPU model {model} hides {hidden} from the guest",
                           Fix("use the x86-64-v3 level (qemu64 with AVX2, AES-NI, FMA, BMI: hosts since Haswell; "
                               "x86-64-v2 for older fleets)", tuple(edits), FixSafety.UNSAFE),
                           note=note, severity=Severity.INFO if baseline else None)


IDLE_POLL = "idle=poll"


class IdlePollCmdline(Rule):
    """
    ## What it checks
    `idle=poll` on the kernel command line of a directly booted guest (`<os><cmdline>`).

    ## Why it matters
    With `idle=poll` the guest's idle loop never halts: it spins waiting for work (the
    kernel's own documentation: "will make the CPUs eat a lot more power"; no gain over the
    normal idle loop where MONITOR/MWAIT exist). In a guest every idle vCPU then stays a
    busy host thread: an idle guest takes a full host CPU per vCPU, which other guests and
    the host's own threads on those CPUs lose. The haltpoll cpuidle driver (LAT001) gives
    the same fast wake-up with a bounded poll.

    ## Example
    ```xml
    <os><type arch='x86_64' machine='q35'>hvm</type><kernel>/boot/vmlinuz</kernel>
      <cmdline>console=ttyS0 idle=poll</cmdline></os>
    ```

    ## Fix
    Removes the `idle=poll` word from the command line. Unsafe: it changes a value the user
    wrote and how the guest idles.

    ## Calibration
    Warning where the vCPUs do not each have a host CPU of their own: the spinning vCPUs
    take CPU time other threads need. Info where every vCPU is pinned to a host CPU of its
    own: the burned CPU is the guest's own (power and SMT siblings are the cost), a
    real-time guest may choose it. Versions: Linux 2.6 and later take `idle=poll`; libvirt
    9.0 passes `<cmdline>` as QEMU's `-append` (defined on its test driver with the fix).

    ## References
    - https://docs.kernel.org/admin-guide/kernel-parameters.html (`idle=poll`)
    - https://libvirt.org/formatdomain.html#direct-kernel-boot (`cmdline`)
    - Linux `Documentation/virt/guest-halt-polling.rst`
    """

    code = "LAT002"
    since = "unreleased"
    name = "idle-poll-cmdline"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        os_el = domain.top("os")
        cmdline = domain.child(os_el, "cmdline") if os_el is not None else None
        words = (cmdline.text or "").split() if cmdline is not None else []
        if cmdline is None or IDLE_POLL not in words:
            return
        kept = " ".join(w for w in words if w != IDLE_POLL)
        fix = Fix("remove idle=poll from the command line",
                  (SetText(cmdline, kept) if kept else Remove(cmdline),), FixSafety.UNSAFE)
        dedicated = domain.dedicated_pinning
        yield self.finding(domain, cmdline, "guest kernel booted with idle=poll: idle vCPUs spin "
                           + ("on their dedicated host CPUs" if dedicated else "and burn host CPU other threads need"),
                           fix, note=EXPLICIT, severity=Severity.INFO if dedicated else None)


RULES: list[Rule] = [VcpusPinnedTogether(), PcidDisabled(), CpuCacheDisabled(), CpuModelOld(), IdlePollCmdline()]
