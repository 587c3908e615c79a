"""Memory rules: hugepages, balloon, EPT/NPT, locking, KSM."""

from __future__ import annotations

from collections.abc import Iterator

from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.facts.memory import shared_memory
from vmtune.facts.units import human_kib, parse_size
from vmtune.patch.edits import Edit, Remove, SetText, ensure, path, set_attrs
from vmtune.rules.base import Context, Finding, Fix, FixSafety, Rule, Severity
from vmtune.rules.helpers import share_memory_fix


def balloon_off(domain: Domain) -> Fix:
    """<memballoon model='none'/>: an address or stats child would make libvirt complain.
    Unsafe: it removes a device the user declared, with its settings (autodeflate, stats)."""
    balloon = domain.memballoon
    assert balloon is not None
    edits: list[Edit] = [set_attrs(balloon, {"model": "none", "autodeflate": None, "freePageReporting": None})]
    edits += [Remove(child) for child in balloon if isinstance(child.tag, str)]
    return Fix("set memballoon model='none'", tuple(edits), FixSafety.UNSAFE)


def _min_memory(params: dict[str, object]) -> int:
    return parse_size(str(params.get("min_memory", "8GiB")))


class HugepagesOpportunity(Rule):
    """
    ## What it checks
    A guest with at least `min_memory` of RAM (default 8 GiB) backed by normal 4 KiB pages.

    ## Why it matters
    With 4 KiB pages a guest TLB miss walks two page tables (guest and EPT/NPT) of up to
    24 memory references; 2 MiB or 1 GiB pages cut the walk and the TLB pressure.
    The gain depends on the workload; memory-bound ones (databases, JVMs, DPDK) gain
    most. Hugepages are reserved up front: a guest asking for more than the host pool holds does not start.

    ## Example
    ```xml
    <memory unit='GiB'>32</memory>
    ```

    ## Fix
    Adds `<memoryBacking><hugepages/></memoryBacking>` only when host facts show enough
    2 MiB pages (free pages on a live host, the pool size from a capabilities file);
    unsafe (the pool is shared with other guests).

    ## Calibration
    Info in the rule (the `latency` policy raises it): the gain depends on the workload,
    and a fix that reserves host memory is a workload and capacity decision, never
    applied by default. With host facts a fix the host's pool cannot hold is withheld
    (MEM008 would call the guest unstartable).
    Versions: libvirt 9.0 defines `<hugepages/>` and refuses to start a guest the pool cannot
    hold.

    ## References
    - https://libvirt.org/formatdomain.html#memory-backing
    - nova `hw:mem_page_size`
    """

    code = "MEM001"
    name = "hugepages-opportunity"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm"})
    params = {"min_memory": "8GiB"}
    param_docs = {"min_memory": "smallest guest memory that should use hugepages"}

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        threshold = ctx.derive(_min_memory)
        if domain.hugepages is not None or domain.memory_kib < max(threshold, 1):
            return
        fix = None
        note = "give --host to size the fix against the host's hugepage pool"
        if ctx.host is not None and ctx.host.cells:
            pool = ctx.host.hugepages_available_kib()
            if pool >= domain.memory_kib:
                fix = Fix("back memory with hugepages",
                          (ensure(domain.root, path("memoryBacking", "hugepages")),), FixSafety.UNSAFE)
                note = ""
            else:
                note = f"host has {human_kib(pool)} of 2 MiB hugepages, the guest needs {human_kib(domain.memory_kib)}"
        yield self.finding(domain, domain.top("memory"),
                           f"{human_kib(domain.memory_kib)} of guest memory on 4 KiB pages", fix, note=note or None)


class BalloonWithDedicatedMemory(Rule):
    """
    ## What it checks
    A virtio memory balloon on a guest whose memory is backed by hugepages.

    ## Why it matters
    Hugepage memory cannot be returned to the host through the balloon: inflating it frees
    nothing, so the device only adds a stats poller and a way to take memory from the
    guest without giving the host any. Pinned vCPUs alone are no reason to drop it (the
    balloon is how the host reads guest memory statistics; nova and KubeVirt attach one
    by default).

    ## Example
    ```xml
    <memoryBacking><hugepages/></memoryBacking>
    <memballoon model='virtio'/>
    ```

    ## Fix
    Sets `<memballoon model='none'/>` (deleting the element makes libvirt add one back).
    Unsafe: it removes a device the user declared, with its explicit `autodeflate`,
    `freePageReporting` and `<stats>`.

    ## Calibration
    Info: an idle balloon has no measured cost; the finding says the device is pointless
    here. Removing a declared device is unsafe.
    Versions: libvirt 9.0 defines `model='none'`; a hugepage-backed balloon frees nothing on
    any version.

    ## References
    - https://libvirt.org/formatdomain.html#memory-balloon-device
    - https://libvirt.org/formatdomain.html#memory-backing
    """

    code = "MEM002"
    needs = "memoryBacking"
    name = "balloon-with-dedicated-memory"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if not domain.has_active_balloon or domain.hugepages is None:
            return
        yield self.finding(domain, domain.memballoon, "memory balloon on a guest with hugepages",
                           balloon_off(domain))


class BalloonBelowMaximum(Rule):
    """
    ## What it checks
    `<currentMemory>` below `<memory>`: the balloon holds part of the guest's memory from
    boot.

    ## Why it matters
    The guest sees the full size but the balloon driver has pinned the difference. Under
    memory pressure the guest swaps and reclaims while the host has memory to give: in
    one report a Xen HVM guest ballooned below its maximum copied a page in about a second
    ("slow memory access on Xen guest", www.wufei.org).

    ## Example
    ```xml
    <memory unit='KiB'>8388608</memory>
    <currentMemory unit='KiB'>2097152</currentMemory>
    ```

    ## Fix
    Sets `<currentMemory>` to the maximum. Unsafe: the host must then back the full size.

    ## Calibration
    Warning on Xen, where the cost was measured (memory access crawled in the field), and
    on KVM guests whose balloon gives nothing back under pressure. Info on KVM guests whose
    balloon has `autodeflate='on'` (QEMU's `deflate-on-oom`: the balloon deflates when the
    guest runs out of memory) or `freePageReporting='on'` (the guest reports free pages,
    so the host reclaims them without holding memory back with the balloon): the Xen
    measurement does not describe them, and nova and CloudStack write both by default.
    Unsafe: the host must then back the full size. Not reported with
    `<memballoon model='none'>`: without a balloon QEMU gives the guest all of `<memory>`.
    libvirt 9.0 defines `currentMemory` equal to `memory` on any guest.

    ## References
    - https://libvirt.org/formatdomain.html#memory-allocation
    - http://www.wufei.org ("slow memory access on Xen guest")
    """

    code = "MEM003"
    name = "balloon-below-maximum"
    severity = Severity.WARNING
    other_severities = (Severity.INFO,)
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        current = domain.current_memory_kib
        if current is None or current >= domain.memory_kib or not domain.memory_kib:
            return
        if domain.memballoon is not None and domain.memballoon.get("model") == "none":
            return  # no balloon: QEMU gives the guest all of <memory>
        element = domain.top("currentMemory")  # root.find() without lxml's path engine
        memory = domain.top("memory")
        assert element is not None and memory is not None
        edits: list[Edit] = [SetText(element, (memory.text or "").strip())]
        if element.get("unit") != memory.get("unit"):
            edits.append(set_attrs(element, {"unit": memory.get("unit")}))
        balloon = domain.memballoon
        gives_back = [a for a in ("autodeflate", "freePageReporting")
                      if balloon is not None and balloon.get(a) == "on"] if domain.hypervisor != "xen" else []
        yield self.finding(domain, element, f"balloon holds the guest at {human_kib(current)} of "
                           f"{human_kib(domain.memory_kib)}", Fix("boot with full memory", tuple(edits),
                                                                  FixSafety.UNSAFE),
                           note=f"the balloon has {' and '.join(gives_back)} on: it gives memory back under "
                                "pressure" if gives_back else None,
                           severity=Severity.INFO if gives_back else None)


class LockedWithoutHardLimit(Rule):
    """
    ## What it checks
    `<memoryBacking><locked/>` without `<memtune><hard_limit>`.

    ## Why it matters
    Locked guest memory cannot be swapped or reclaimed. Without a hard limit QEMU's own
    allocations are locked too and unbounded: one guest can pin the host out of memory.
    libvirt recommends a hard limit whenever memory is locked.

    ## Example
    ```xml
    <memoryBacking><locked/></memoryBacking>
    ```

    ## Fix
    None automatic: set `<memtune><hard_limit>` to guest memory plus QEMU's overhead.

    ## Calibration
    Warning: the risk (one guest pinning the host out of memory) is documented by
    libvirt for this configuration. No fix: the right limit depends on the guest's
    devices.
    Versions: libvirt 9.0's formatdomain gives the hard_limit advice for `<locked/>`.

    ## References
    - https://libvirt.org/formatdomain.html#memory-tuning
    """

    code = "MEM004"
    needs = "memoryBacking"
    name = "locked-without-hard-limit"
    severity = Severity.WARNING

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        mb = domain.memory_backing
        locked = domain.child(mb, "locked") if mb is not None else None
        if locked is not None and not domain.find_all(("memtune", "hard_limit")):
            yield self.finding(domain, locked, "memory is locked but memtune has no hard_limit")


class KsmSharing(Rule):
    """
    ## What it checks
    A KVM guest without `<memoryBacking><nosharepages/>` whose memory KSM can merge: not
    backed by hugepages and not shared (`<access mode='shared'/>`, or every guest NUMA cell
    with `memAccess='shared'`). Selected by the `latency` policy.

    ## Why it matters
    KSM merges identical pages and breaks them apart again on write (copy-on-write
    faults); ksmd scanning costs host CPU (among the busiest processes on an overcommitted host) and merged pages may
    live on a remote NUMA node.

    ## Example
    ```xml
    <memory unit='GiB'>16</memory>   <!-- no <memoryBacking> -->
    ```

    ## Fix
    Adds `<nosharepages/>`. Safe: it adds an element and changes no value.

    ## Calibration
    Info in the rule (the `latency` policy raises it): KSM's cost depends on how busy
    ksmd is and its saving on how alike the guests are, so opting out is a density
    trade-off. Hugepage-backed and shared guest memory is never merged (Linux `mm/ksm.c`
    `ksm_madvise()` leaves VM_HUGETLB and VM_SHARED mappings unmergeable), so those guests
    are not reported and a tuned hugepage guest is not changed. libvirt 9.0 defines
    `<nosharepages/>` on any KVM guest.

    ## References
    - https://libvirt.org/formatdomain.html#memory-backing
    - Linux `mm/ksm.c` (`ksm_madvise`), `Documentation/admin-guide/mm/ksm.rst`
    """

    code = "MEM005"
    name = "ksm-sharing-enabled"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.SAFE
    hypervisors = frozenset({"kvm"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        mb = domain.memory_backing
        if mb is not None and domain.child(mb, "nosharepages") is not None:
            return
        if domain.hugepages is not None or shared_memory(domain):
            return  # ksm_madvise() never marks hugetlb or shared mappings mergeable
        yield self.finding(domain, mb if mb is not None else domain.top("memory"),
                           "guest memory may be merged by KSM",
                           Fix("add nosharepages", (ensure(domain.root, path("memoryBacking", "nosharepages")),)))


class HapDisabled(Rule):
    """
    ## What it checks
    `<features><hap state='off'/>` on a Xen guest.

    ## Why it matters
    On Xen it turns off hardware-assisted paging (EPT/NPT) for the guest: the hypervisor
    falls back to shadow page tables and every guest page-table write traps; process
    creation and memory-intensive workloads slow down badly. libvirt's QEMU driver ignores
    `<hap>` (no command-line change: a KVM guest starts with EPT/NPT whatever it says), so
    KVM guests are not judged; `vmtune host` (HOST001) checks the KVM module instead.

    ## Example
    ```xml
    <domain type='xen'>...<features><hap state='off'/></features>
    ```

    ## Fix
    Sets `state='on'`. Unsafe, since it changes an explicit value (a few nested setups
    disable it on purpose).

    ## Calibration
    Error: shadow paging's cost is documented by Xen and applies to this guest as
    configured. Changing an explicit value is unsafe.
    Versions: libvirt 9.0's QEMU driver ignores `<hap>`; the cost is Xen's (all versions with
    HAP).

    ## References
    - https://libvirt.org/formatdomain.html#hypervisor-features
    - https://wiki.xenproject.org/wiki/Xen_Common_Problems (HAP and shadow paging)
    """

    code = "MEM006"
    name = "hap-disabled"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"xen"})  # libvirt's QEMU driver ignores <hap>: KVM guests keep EPT/NPT

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        hap = domain.feature("hap")
        if hap is not None and hap.get("state") == "off":
            yield self.finding(domain, hap, "EPT/NPT (hap) is disabled: shadow paging",
                               Fix("enable hap", (set_attrs(hap, {"state": "on"}),), FixSafety.UNSAFE))


class BalloonPresent(Rule):
    """
    ## What it checks
    Any active memory balloon. Selected by the `latency` policy.

    ## Why it matters
    Latency-sensitive guests should own their memory outright: an inflating balloon
    reclaims guest memory exactly when the guest is busy, and the stats poll adds periodic
    work.

    ## Example
    ```xml
    <memballoon model='virtio'/>
    ```

    ## Fix
    Sets `<memballoon model='none'/>`. Unsafe: it removes a device the user declared, with
    its settings (autodeflate, stats).

    ## Calibration
    Info in the rule: an idle balloon has no measured cost; the `latency` policy selects
    it because dedicated guests should own their memory (libvirt's real-time kbase, oVirt's
    high-performance VMs). Removing a declared device is unsafe. libvirt 9.0 defines
    `model='none'` on any guest.

    ## References
    - https://libvirt.org/formatdomain.html#memory-balloon-device
    """

    code = "MEM007"
    name = "balloon-present"
    severity = Severity.INFO
    fixable = True
    fix_safety = FixSafety.UNSAFE

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.has_active_balloon:
            yield self.finding(domain, domain.memballoon, "latency-sensitive guest has a memory balloon",
                               balloon_off(domain))


def _vhost_user_devices(domain: Domain) -> list[tuple[etree._Element, str]]:
    """Devices whose backend is another process mapping guest RAM, with libvirt's name for them."""
    found = [(fs, "virtiofs") for fs in domain.find_all(("devices", "filesystem"))
             if (d := domain.child(fs, "driver")) is not None and d.get("type") == "virtiofs"]
    found += [(disk, "vhost-user disk") for disk in domain.disks if disk.get("type") == "vhostuser"]
    return found


class VhostUserDeviceWithoutSharedMemory(Rule):
    """
    ## What it checks
    A virtiofs filesystem (`<filesystem><driver type='virtiofs'/>`) or a vhost-user disk
    (`<disk type='vhostuser'>`) on a guest whose memory is not shared (no
    `<memoryBacking><access mode='shared'/>` and no guest NUMA cells with
    `memAccess='shared'`). vhost-user interfaces are NET005's.

    ## Why it matters
    virtiofsd and vhost-user block backends read and write guest memory directly, so they
    must be able to map it. libvirt 9.0 refuses to define such a domain ("unsupported
    configuration: 'virtiofs' requires shared memory", "'vhostuser' requires shared
    memory"; checked with its QEMU driver).

    ## Example
    ```xml
    <filesystem type='mount' accessmode='passthrough'><driver type='virtiofs'/>
      <source dir='/srv/share'/><target dir='share'/></filesystem>
    ```

    ## Fix
    Adds `<memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>`
    (only the `access` element when the memory already has a source or uses hugepages),
    as NET005 does and libvirt's virtiofs guide recommends. Unsafe: it changes how all
    guest memory is allocated.

    ## Calibration
    Error: libvirt refuses the definition.
    Versions: libvirt 9.0 (checked with its QEMU driver) refuses the definition.

    ## References
    - https://libvirt.org/kbase/virtiofs.html
    - https://libvirt.org/formatdomain.html#filesystems
    - libvirt `src/qemu/qemu_validate.c` (the shared-memory checks for virtiofs and vhost-user disks)
    """

    code = "MEM010"
    name = "vhost-user-device-without-shared-memory"
    severity = Severity.ERROR
    fixable = True
    fix_safety = FixSafety.UNSAFE
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        devices = _vhost_user_devices(domain)
        if not devices or shared_memory(domain):
            return
        kinds = ", ".join(dict.fromkeys(kind for _, kind in devices))
        yield self.finding(domain, devices[0][0], f"{kinds} on a guest whose memory is not shared: libvirt refuses "
                           "the definition", share_memory_fix(domain))


RULES: list[Rule] = [HugepagesOpportunity(), BalloonWithDedicatedMemory(), BalloonBelowMaximum(),
                     LockedWithoutHardLimit(), KsmSharing(), HapDisabled(), BalloonPresent(),
                     VhostUserDeviceWithoutSharedMemory()]
