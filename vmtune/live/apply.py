"""`vmtune apply`, `vmtune plan --write` and `vmtune rollback`: redefine a live domain as safely as `virsh edit`.

Order of operations (never lose a definition, never clobber a concurrent change):
read the persistent secure XML -> compute the patch -> show the diff -> confirm ->
back up the exact previous XML -> re-read and abort if it changed -> define ->
re-read and verify every fix persisted -> say when it takes effect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from vmtune.engine import CheckOptions, check_domain
from vmtune.errors import ManagedDomainError, VmtuneError
from vmtune.facts.domain import Domain
from vmtune.host.planner import Placement, apply_placement
from vmtune.live import backups
from vmtune.live.check import HostFactsCache
from vmtune.live.connection import host_name, libvirt_error, libvirt_module, lookup_domain, persistent_xml
from vmtune.patch.fixer import diff_text, fix_document
from vmtune.xml.safe import parse_domain

Confirm = Callable[[str], bool]
Out = Callable[[str], None]


@dataclass
class LiveTarget:
    conn: Any
    dom: Any
    uri: str
    name: str
    uuid: str

    @classmethod
    def find(cls, conn: Any, key: str) -> LiveTarget:
        dom = lookup_domain(conn, key)
        return cls(conn, dom, host_name(conn), dom.name(), dom.UUIDString())

    def read(self) -> str:
        return persistent_xml(self.dom, secure=True)

    def label(self) -> str:
        return f"{self.uri}/{self.name}"


def _guarded_define(target: LiveTarget, expected_xml: str, new_xml: str,
                    before_define: Callable[[], None] | None) -> None:
    """Define new_xml only if the definition is still expected_xml."""
    if before_define is not None:
        before_define()  # tests use this to change the definition concurrently
    if target.read() != expected_xml:
        raise VmtuneError("the definition changed since it was read; nothing applied (run again)", target.label())
    libvirt = libvirt_module()
    try:
        target.conn.defineXML(new_xml)
    except libvirt.libvirtError as exc:
        raise VmtuneError(f"libvirt rejected the new definition: {libvirt_error(exc)}; nothing applied",
                          target.label()) from None


def _backup_and_define(target: LiveTarget, current: str, new: str, state_root: Path, action: str,
                       changes: list[str], before_define: Callable[[], None] | None) -> backups.Backup:
    """Save the exact current definition, then define `new` under the concurrency guard.
    If nothing was defined, the backup goes too: there is nothing to roll back."""
    backup = backups.save(state_root, target.uri, target.uuid, target.name, current, action, changes)
    try:
        _guarded_define(target, current, new, before_define)
    except VmtuneError:
        backups.discard(backup)
        raise
    return backup


def _approved(question: str, done: str, dry_run: bool, yes: bool, confirm: Confirm, out: Out) -> bool:
    """The gate before a redefinition: --dry-run stops, --yes skips the question."""
    if dry_run:
        out(f"dry run: nothing {done}")
        return False
    if not yes and not confirm(question):
        out(f"not {done}")
        return False
    return True


def _define_approved(target: LiveTarget, old_xml: str, new_xml: str, *, action: str, changes: list[str],
                     done: str, dry_run: bool, yes: bool, confirm: Confirm, out: Out, state_root: Path,
                     before_define: Callable[[], None] | None) -> LiveTarget | None:
    """Confirm, back up, define under the concurrency guard; the domain as libvirt now has it,
    or None when the user (or --dry-run) said no."""
    if not _approved(f"Redefine {target.name} on {target.uri}?", done, dry_run, yes, confirm, out):
        return None
    backup = _backup_and_define(target, old_xml, new_xml, state_root, action, changes, before_define)
    out(f"backup: {backup.path} (vmtune rollback --domain {target.name} --to {backup.id})")
    return LiveTarget.find(target.conn, target.uuid)


def _takes_effect(target: LiveTarget, out: Out) -> None:
    if target.dom.isActive():
        out(f"{target.name} is running: the new definition takes effect after a full shutdown and start "
            "(a reboot from inside the guest is not enough).")
    else:
        out(f"{target.name} is shut off: the new definition takes effect at its next start.")


def _pin_live(target: LiveTarget, old_xml: str, new_xml: str, out: Out) -> None:
    """Apply changed emulator and I/O thread pins to the running domain too (libvirt allows it)."""
    libvirt = libvirt_module()
    old = Domain(parse_domain(old_xml.encode(), "old"), "old")
    new = Domain(parse_domain(new_xml.encode(), "new"), "new")
    ncpus = target.conn.getCPUMap()[0]

    def cpumap(cpus: frozenset[int]) -> tuple[bool, ...]:
        return tuple(i in cpus for i in range(ncpus))

    flags = libvirt.VIR_DOMAIN_AFFECT_LIVE
    changes: list[tuple[str, Callable[[], object]]] = []
    if new.emulator_pin is not None and new.emulator_pin != old.emulator_pin:
        changes.append((f"emulator threads to {sorted(new.emulator_pin)}",
                        partial(target.dom.pinEmulator, cpumap(new.emulator_pin), flags)))
    for vcpu, cpus in new.vcpu_pins.items():
        if old.vcpu_pins.get(vcpu) != cpus:
            changes.append((f"vCPU {vcpu} to {sorted(cpus)}",
                            partial(target.dom.pinVcpuFlags, vcpu, cpumap(cpus), flags)))
    for tid, cpus in new.iothread_pins.items():
        if old.iothread_pins.get(tid) != cpus:
            changes.append((f"I/O thread {tid} to {sorted(cpus)}",
                            partial(target.dom.pinIOThread, tid, cpumap(cpus), flags)))
    for label, pin_now in changes:
        try:
            pin_now()
            out(f"pinned live: {label}")
        except libvirt.libvirtError as exc:  # the definition is already saved; say what did not happen live
            out(f"warning: could not pin {label} live ({libvirt_error(exc)}); it applies at the next start")


def apply_domain(conn: Any, key: str, options: CheckOptions, *, unsafe: bool = False, dry_run: bool = False,
                 yes: bool = False, force: bool = False, live: bool = False, state_root: Path,
                 confirm: Confirm, out: Out, before_define: Callable[[], None] | None = None) -> int:
    """Returns the exit code: 0 applied, nothing to do or a dry run; 1 declined, or findings remain that
    were not fixed."""
    target = LiveTarget.find(conn, key)
    old_xml = target.read()
    domain = Domain(parse_domain(old_xml.encode(), target.label()), target.label(), options.os_override)
    if domain.manager and not force:
        raise ManagedDomainError(domain.manager, target.label())
    opts = replace(options, host=HostFactsCache(conn, options.host).for_domain(domain))
    outcome = fix_document(old_xml.encode(), target.label(), opts, unsafe)
    for finding in outcome.findings:
        out(f"{target.label()}:{finding.line or 0}: {finding.rule.code} {finding.severity} {finding.message}"
            + (f" [{finding.fix.safety} fix not applied]" if finding.fix else ""))
    if not outcome.changed:
        out(f"{target.name}: nothing to fix")
        return 1 if any(f.severity >= opts.fix_severity for f in outcome.findings) else 0
    new_xml = outcome.fixed.decode("utf-8")
    out(diff_text(old_xml, new_xml, target.label()).rstrip("\n"))
    for fix in outcome.applied:
        out(f"  {fix.code}: {fix.description} [{fix.safety}]")
    defined = _define_approved(target, old_xml, new_xml, action="apply",
                               changes=sorted({a.code for a in outcome.applied}), done="applied", dry_run=dry_run,
                               yes=yes, confirm=confirm, out=out, state_root=state_root, before_define=before_define)
    if defined is None:
        return 0 if dry_run else 1  # declined: the findings stay, as `check` would exit
    target = defined
    after = target.read()
    remaining = check_domain(Domain(parse_domain(after.encode(), target.label()), target.label(),
                                    options.os_override), opts)
    dropped = sorted({a.code for a in outcome.applied} & {f.rule.code for f in remaining})
    if dropped:
        out(f"warning: libvirt dropped or normalised the fixes for {', '.join(dropped)}")
    else:
        out(f"verified: all {len(outcome.applied)} fix(es) persisted in the new definition")
    if live and target.dom.isActive():
        _pin_live(target, old_xml, after, out)
    _takes_effect(target, out)
    return 1 if dropped else 0


def _realises(domain: Domain, placement: Placement) -> bool:
    """Whether a definition carries the placement's pins and memory binding."""
    return ({v: frozenset({c}) for v, c in placement.vcpu_pins.items()} == dict(domain.vcpu_pins)
            and domain.emulator_pin == placement.housekeeping
            and all(domain.iothread_pins.get(t) == placement.housekeeping for t in range(1, domain.iothreads + 1))
            and domain.memory_nodeset == frozenset({placement.node}))


def place_domain(conn: Any, key: str, placement: Placement, *, dry_run: bool = False, yes: bool = False,
                 live: bool = False, state_root: Path, confirm: Confirm, out: Out,
                 before_define: Callable[[], None] | None = None) -> int:
    """Write a planned placement into a live domain's definition, the way `apply` writes fixes;
    `live` also re-pins a running domain's threads now (its memory binding waits for a restart).
    Returns 0 when defined and verified (or not approved), 1 when libvirt did not keep it."""
    target = LiveTarget.find(conn, key)
    old_xml = target.read()
    domain = Domain(parse_domain(old_xml.encode(), target.label()), target.label())
    new_xml = apply_placement(old_xml.encode(), domain, placement, target.label()).decode("utf-8")
    if new_xml == old_xml:
        out(f"{target.name}: already placed")
        return 0
    parse_domain(new_xml.encode(), target.label())
    out(diff_text(old_xml, new_xml, target.label()).rstrip("\n"))
    defined = _define_approved(target, old_xml, new_xml, action="plan", changes=[f"node {placement.node}"],
                               done="placed", dry_run=dry_run, yes=yes, confirm=confirm, out=out,
                               state_root=state_root, before_define=before_define)
    if defined is None:
        return 0
    target = defined
    after = target.read()
    if not _realises(Domain(parse_domain(after.encode(), target.label()), target.label()), placement):
        out(f"warning: libvirt dropped or normalised the placement of {target.name}")
        return 1
    out(f"verified: {target.name} is pinned to node {placement.node}")
    if live and target.dom.isActive():
        _pin_live(target, old_xml, after, out)
    _takes_effect(target, out)
    return 0


def rollback_domain(conn: Any, key: str, *, backup_id: str | None, state_root: Path, dry_run: bool = False,
                    yes: bool = False, confirm: Confirm, out: Out,
                    before_define: Callable[[], None] | None = None) -> int:
    target = LiveTarget.find(conn, key)
    found = backups.listing(state_root, target.uri, target.uuid)
    for path, why in found.skipped:
        out(f"skipped {path}: {why}")
    saved = found.backups
    unusable = {path.stem: why for path, why in found.skipped}
    if backup_id in unusable:
        raise VmtuneError(f"backup '{backup_id}' cannot be restored: {unusable[backup_id]}", target.label())
    if not saved:
        raise VmtuneError("no backups for this domain", target.label())
    chosen = saved[-1] if backup_id is None else next((b for b in saved if b.id == backup_id), None)
    if chosen is None:
        raise VmtuneError(f"no backup '{backup_id}' (see `vmtune history --domain {target.name}`)", target.label())
    current = target.read()
    wanted = chosen.xml
    if current == wanted:
        out(f"{target.name} already has the definition of backup {chosen.id}")
        return 0
    out(diff_text(current, wanted, target.label()).rstrip("\n"))
    if not _approved(f"Restore {target.name} on {target.uri} to backup {chosen.id}?", "restored", dry_run, yes,
                     confirm, out):
        return 0
    undo = _backup_and_define(target, current, wanted, state_root, "rollback", [f"to {chosen.id}"], before_define)
    restored = LiveTarget.find(conn, target.uuid).read()
    if restored != wanted:
        out("warning: libvirt normalised the restored definition; see `virsh dumpxml --inactive`")
    out(f"restored backup {chosen.id}; the replaced definition was saved as {undo.id}")
    _takes_effect(target, out)
    return 0

