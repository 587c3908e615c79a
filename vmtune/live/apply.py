"""`vmtune apply`, `vmtune plan --write` and `vmtune rollback`: redefine a live domain as safely as `virsh edit`.

Order of operations: read the persistent secure XML -> compute the patch -> show the diff ->
confirm -> back up the exact previous XML (fsync'd, checksummed) -> re-read and abort if it
changed -> define -> re-read and verify that the definition is the one vmtune wrote (its edits
there, nothing else changed) -> say when it takes effect.

What this guarantees, and what it cannot (SECURITY.md, "libvirt faults"):
- a definition is never lost: the backup is on disk before the define, and it is kept whenever
  the define may have happened (an error after defineXML leaves the outcome unknown);
- a change another client made before vmtune's last re-read aborts the apply; one landing
  after vmtune's define is reported by the verification, with the backup to restore;
- libvirt has no compare-and-swap: a define by another client that lands between vmtune's
  last re-read and its own define (one round trip) is overwritten, and only that client's
  own record has it. vmtune cannot close that window; it reports a define it overwrote when
  libvirt announces it (DefineWatch).
Every libvirtError becomes one line naming the domain (exit 2).
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from vmtune.engine import CheckOptions
from vmtune.errors import ManagedDomainError, VmtuneError
from vmtune.facts.domain import Domain
from vmtune.fixer import diff_text, fix_document, not_applied
from vmtune.host.planner import Placement, apply_placement
from vmtune.live import backups
from vmtune.live.check import HostFactsCache
from vmtune.live.connection import (
    DomainGoneError,
    LookupBy,
    host_name,
    libvirt_error,
    libvirt_faults,
    libvirt_module,
    lookup_domain,
    open_connection,
    persistent_xml,
)
from vmtune.xml.safe import parse_domain

Confirm = Callable[[str], bool]
Out = Callable[[str], None]
Hook = Callable[[], None] | None
REREAD_ATTEMPTS = 4  # after a failed define: fresh connections tried to learn whether it landed
REREAD_PAUSE = 0.5  # seconds between them


@dataclass
class LiveTarget:
    conn: Any
    dom: Any
    uri: str
    name: str
    uuid: str

    @classmethod
    def find(cls, conn: Any, key: str, by: LookupBy = "any") -> LiveTarget:
        dom = lookup_domain(conn, key, by)
        with libvirt_faults(f"{host_name(conn)}/{key}", "cannot read the domain"):
            return cls(conn, dom, host_name(conn), dom.name(), dom.UUIDString())

    def read(self, doing: str = "cannot read the definition") -> str:
        with libvirt_faults(self.label(), doing):
            return persistent_xml(self.dom, secure=True)

    def label(self) -> str:
        return f"{self.uri}/{self.name}"

    def restore_hint(self, backup: backups.Backup) -> str:
        # Quoted: a name with surrounding spaces, typed unquoted, would be another domain's name
        # (or UUID) by the time the shell hands it to vmtune.
        return f"vmtune rollback --domain {shlex.quote(self.name)} --to {backup.id}"


def _reread_elsewhere(target: LiveTarget) -> str | None:
    """The definition through the same connection, else through a fresh one to the same URI (a
    restarted daemon); None when libvirt cannot say."""
    import time

    try:
        return target.read()
    except VmtuneError:
        pass
    for attempt in range(REREAD_ATTEMPTS):  # a daemon systemd restarts is back within a second or two
        if attempt:
            time.sleep(REREAD_PAUSE)
        try:
            conn = open_connection(target.uri)
        except VmtuneError:
            continue
        try:
            return LiveTarget.find(conn, target.uuid, by="uuid").read()
        except DomainGoneError:
            return None
        except VmtuneError:
            continue
        finally:
            conn.close()
    return None


def _define(target: LiveTarget, current: str, new_xml: str, backup: backups.Backup) -> None:
    """defineXML; on an error, find out whether it landed. Rejected (the definition is still
    `current`): the backup goes, nothing applied. Otherwise the backup stays and the message
    says what to check."""
    libvirt = libvirt_module()
    try:
        target.conn.defineXML(new_xml)
        return
    except libvirt.libvirtError as exc:
        reason = libvirt_error(exc)
    now = _reread_elsewhere(target)
    if now == current:
        backups.discard(backup)
        raise VmtuneError(f"libvirt did not take the new definition: {reason}; it still has the previous one, "
                          "nothing applied", target.label())
    keep = f"the previous definition is kept in {backup.path} ({target.restore_hint(backup)})"
    if now is None:
        raise VmtuneError(f"libvirt failed during the define ({reason}) and the definition cannot be re-read: the "
                          f"outcome is unknown; check it with `virsh dumpxml --inactive {target.name}`; {keep}",
                          target.label())
    raise VmtuneError(f"libvirt failed during the define ({reason}) but the definition changed: check it with "
                      f"`virsh dumpxml --inactive {target.name}`; {keep}", target.label())


def _backup_and_define(target: LiveTarget, current: str, new: str, state_root: Path, action: str,
                       changes: list[str], before_define: Hook, after_guard: Hook = None) -> backups.Backup:
    """Save the exact current definition, then define `new` only if the definition is still
    `current`. If nothing was defined, the backup goes too: there is nothing to roll back."""
    backup = backups.save(state_root, target.uri, target.uuid, target.name, current, action, changes)
    try:
        if before_define is not None:
            before_define()  # tests use this to change the definition, or kill libvirt, concurrently
        if target.read("cannot re-read the definition before the define") != current:
            raise VmtuneError("the definition changed since it was read; nothing applied (run again)",
                              target.label())
    except VmtuneError:
        backups.discard(backup)
        raise
    if after_guard is not None:
        after_guard()  # tests: another client's define in the window libvirt cannot close
    _define(target, current, new, backup)
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


class DefineWatch:
    """Counts the defines libvirt announces for one domain while vmtune defines it.

    libvirt has no compare-and-swap, but it emits a lifecycle event for every define. The watch
    starts before the guard re-read: a define the re-read did not see but whose event arrives
    is one that landed between that re-read and vmtune's own define (overwritten by it) or
    after it. Drivers without events (or a connection without an event loop) give no count."""

    QUIET = 0.15  # seconds without a new event after the first: the defines around ours are in
    TIMEOUT = 2.0  # seconds to wait for vmtune's own define to be announced

    def __init__(self, target: LiveTarget) -> None:
        import time

        self.clock = time.monotonic
        self.count = 0
        self.last = 0.0
        self.conn = target.conn
        self.callback: int | None = None
        libvirt = libvirt_module()
        try:
            self.callback = target.conn.domainEventRegisterAny(target.dom, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                               self._event, None)
        except libvirt.libvirtError:
            self.callback = None
        self.defined = libvirt.VIR_DOMAIN_EVENT_DEFINED

    def _event(self, _conn: Any, _dom: Any, event: int, _detail: int, _opaque: Any) -> None:
        if event == self.defined:
            self.count += 1
            self.last = self.clock()

    def others(self) -> int | None:
        """Defines other than vmtune's one (None: unknown). Ends the watch."""
        import time

        if self.callback is None:
            return None
        # Called after vmtune's define returned and its re-read: libvirt has emitted every event
        # that counts by now; wait for them to arrive and go quiet.
        start = self.clock()
        deadline = start + self.TIMEOUT
        while self.clock() < deadline and not (self.count and self.clock() - max(self.last, start) >= self.QUIET):
            time.sleep(0.01)
        self.close()
        return self.count - 1 if self.count else None

    def close(self) -> None:
        if self.callback is not None:
            with contextlib.suppress(Exception):
                self.conn.domainEventDeregisterAny(self.callback)
            self.callback = None


@dataclass
class Defined:
    """A definition vmtune wrote: the domain as libvirt now has it, the backup of the one it
    replaced, and how many other defines libvirt announced meanwhile (None: unknown)."""

    target: LiveTarget
    backup: backups.Backup
    after: str
    other_defines: int | None = None


def _define_approved(target: LiveTarget, old_xml: str, new_xml: str, *, action: str, changes: list[str],
                     done: str, dry_run: bool, yes: bool, confirm: Confirm, out: Out, state_root: Path,
                     before_define: Hook, after_define: Hook = None, question: str | None = None,
                     after_guard: Hook = None, precheck: Hook = None) -> Defined | None:
    """Confirm, run `precheck` (it raises to stop before anything is saved or defined), back up,
    define under the concurrency guard, re-read; None when the user (or --dry-run) said no."""
    if not _approved(question or f"Redefine {target.name} on {target.uri}?", done, dry_run, yes, confirm, out):
        return None
    if precheck is not None:
        precheck()
    watch = DefineWatch(target)
    try:
        backup = _backup_and_define(target, old_xml, new_xml, state_root, action, changes, before_define,
                                    after_guard)
        out(f"backup: {backup.path} ({target.restore_hint(backup)})")
        if after_define is not None:
            after_define()  # tests: another client's define, or libvirt killed, after vmtune's
        try:  # the same handle: libvirt identifies it by name and UUID, which the define kept
            after = target.read("defined, but cannot re-read the definition to verify it")
        except VmtuneError as exc:
            raise VmtuneError(f"{exc.message}; check it with `virsh dumpxml --inactive {target.name}`; the previous "
                              f"definition is kept in {backup.path} ({target.restore_hint(backup)})",
                              target.label()) from None
        return Defined(target, backup, after, watch.others())
    finally:
        watch.close()


def _verified(defined: Defined, old_xml: str, new_xml: str, codes: dict[str, str], what: str, out: Out) -> bool:
    """Whether libvirt has what vmtune defined: each edit there, nothing else changed. Warns
    (with the backup to restore) otherwise."""
    from vmtune.live.verify import verify

    verdict = verify(old_xml, new_xml, defined.after, codes)
    restore = f"the previous definition is backup {defined.backup.id} ({defined.target.restore_hint(defined.backup)})"
    if defined.other_defines and not verdict.foreign:
        out(f"warning: another client defined {defined.target.name} while vmtune did (libvirt announced "
            f"{defined.other_defines} other define(s) after vmtune's last re-read): a change of theirs may have been "
            f"overwritten; compare `virsh dumpxml --inactive {defined.target.name}` with what they meant; "
            f"{restore} (the definition vmtune read, not theirs)")
    for owner, edits in sorted(verdict.missing.items()):
        shown = "; ".join(edits[:4]) + (f"; +{len(edits) - 4} more" if len(edits) > 4 else "")
        whose = f"the fixes for {owner}" if owner != "?" else "edits"
        out(f"warning: libvirt dropped or normalised {whose}: {shown}")
    if verdict.foreign:
        shown = ", ".join(verdict.foreign[:5]) + (f", +{len(verdict.foreign) - 5} more"
                                                  if len(verdict.foreign) > 5 else "")
        out(f"warning: the definition is not the one vmtune wrote: {shown} changed too (another client's define "
            f"after vmtune's, or libvirt's normalisation); check it with `virsh dumpxml --inactive "
            f"{defined.target.name}`; {restore}")
    if verdict.kept and not defined.other_defines:
        out(f"verified: {what}")
    return verdict.kept and not defined.other_defines


def _starts(target: LiveTarget, old_xml: str, new_xml: str, changed: list[str], out: Out) -> bool:
    """Before the define: whether a throwaway copy of the new definition starts paused (see
    live.trial). True: it started. False: nothing is known (the driver cannot start a paused copy,
    or a copy of the previous definition fails too), warned. A copy that fails where the
    previous definition's copy starts stops the apply: VmtuneError, nothing saved or defined."""
    from vmtune.live.trial import start_paused

    libvirt = libvirt_module()
    what = " and ".join(changed)
    new = start_paused(target.conn, new_xml, libvirt, libvirt_error)
    if new.started:
        return True
    if not new.could_try:
        out(f"warning: not verified that it starts: the new definition changes {what}, and this connection cannot "
            f"start a paused copy to check it ({new.reason})")
        return False
    old = start_paused(target.conn, old_xml, libvirt, libvirt_error)
    if not old.started:
        out(f"warning: not verified that it starts: a throwaway copy of the new definition does not start here, nor "
            f"does one of the previous definition, so the failure is not this change's ({new.reason})")
        return False
    raise VmtuneError(f"not applied: the new definition changes {what}, and a throwaway copy of it does not start "
                      f"(paused) where one of the previous definition does; the guest would not start after its next "
                      f"shutdown; --ignore the fix that changes it to apply the others; QEMU: {new.reason}",
                      target.label())


def _running(target: LiveTarget) -> bool:
    try:
        return bool(target.dom.isActive())
    except libvirt_module().libvirtError:
        return False  # _takes_effect says so


def _takes_effect(target: LiveTarget, out: Out) -> None:
    try:
        with libvirt_faults(target.label(), "cannot tell whether it is running"):
            active = target.dom.isActive()
    except VmtuneError as exc:  # the definition is saved and verified by now: say so, do not fail
        out(f"warning: {exc.message}; the new definition takes effect at its next full shutdown and start")
        return
    if active:
        out(f"{target.name} is running: the new definition takes effect after a full shutdown and start "
            "(a reboot from inside the guest is not enough).")
    else:
        out(f"{target.name} is shut off: the new definition takes effect at its next start.")


def _pin_live(target: LiveTarget, old_xml: str, new_xml: str, out: Out) -> None:
    """Apply changed emulator and I/O thread pins to the running domain too (libvirt allows it)."""
    libvirt = libvirt_module()
    old = Domain(parse_domain(old_xml.encode(), "old"), "old")
    new = Domain(parse_domain(new_xml.encode(), "new"), "new")
    try:
        ncpus = target.conn.getCPUMap()[0]
    except libvirt.libvirtError as exc:
        out(f"warning: cannot read the host's CPUs to pin live ({libvirt_error(exc)}); the pins apply at the next "
            "start")
        return

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
                 confirm: Confirm, out: Out, before_define: Hook = None, after_define: Hook = None,
                 after_guard: Hook = None, by: LookupBy = "any") -> int:
    """Returns the exit code: 0 applied and verified (the definition is what vmtune wrote; a rule
    may still fire, as CLK002 does after its HPET fallback), or nothing to do; 1 pending changes
    (a dry run, as `check --diff`), declined, findings remain that were not fixed, or libvirt's
    definition is not what vmtune wrote (warned, with the backup to restore).
    VmtuneError (exit 2) for libvirt faults; DomainGoneError when the domain is not defined."""
    target = LiveTarget.find(conn, key, by)
    old_xml = target.read()
    domain = Domain(parse_domain(old_xml.encode(), target.label()), target.label(), options.os_override)
    if domain.manager and not force:
        raise ManagedDomainError(domain.manager, target.label())
    opts = options.replace(host=HostFactsCache(conn, options.host).for_domain(domain))
    outcome = fix_document(old_xml.encode(), target.label(), opts, unsafe)
    for finding in outcome.findings:
        label = not_applied(finding, unsafe, opts)
        out(f"{target.label()}:{finding.line or 0}: {finding.rule.code} {finding.severity} {finding.message}"
            + (f" {label}" if label else ""))
    if not outcome.changed:
        out(f"{target.name}: nothing to fix")
        return 1 if any(f.severity >= opts.fix_severity for f in outcome.findings) else 0
    new_xml = outcome.fixed.decode("utf-8")
    out(diff_text(old_xml, new_xml, target.label()).rstrip("\n"))
    for fix in outcome.applied:
        out(f"  {fix.code}: {fix.description} [{fix.safety}]")
    from vmtune.live.trial import start_relevant

    changed = start_relevant(old_xml, new_xml)
    started: list[bool] = []

    def precheck() -> None:
        if changed:  # the accelerator or the CPU: libvirt accepting it says nothing of QEMU running it
            started.append(_starts(target, old_xml, new_xml, changed, out))

    defined = _define_approved(target, old_xml, new_xml, action="apply",
                               changes=sorted({a.code for a in outcome.applied}), done="applied", dry_run=dry_run,
                               yes=yes, confirm=confirm, out=out, state_root=state_root, before_define=before_define,
                               after_define=after_define, after_guard=after_guard, precheck=precheck)
    if defined is None:
        return 1  # a dry run (changes pending, as `check --diff`) or declined: the findings stay
    codes = {a.code: a.xpath for a in reversed(outcome.applied)}
    persisted = f"all {len(outcome.applied)} fix(es) persisted in the new definition libvirt accepted"
    if started == [True]:
        what = (f"{persisted}; starts (paused): a throwaway copy of it with {' and '.join(changed)}, without the "
                "guest's disks and devices, started paused and was destroyed")
    else:
        what = f"{persisted} (not verified: that the guest starts with it)"
    kept = _verified(defined, old_xml, new_xml, codes, what, out)
    target = defined.target
    if live and _running(target):
        _pin_live(target, old_xml, defined.after, out)
    _takes_effect(target, out)
    return 0 if kept else 1


def _realises(domain: Domain, placement: Placement) -> bool:
    """Whether a definition carries the placement's pins and memory binding."""
    return ({v: frozenset({c}) for v, c in placement.vcpu_pins.items()} == dict(domain.vcpu_pins)
            and domain.emulator_pin == placement.housekeeping
            and all(domain.iothread_pins.get(t) == placement.housekeeping for t in range(1, domain.iothreads + 1))
            and domain.memory_nodeset == frozenset({placement.node}))


def place_domain(conn: Any, key: str, placement: Placement, *, dry_run: bool = False, yes: bool = False,
                 live: bool = False, state_root: Path, confirm: Confirm, out: Out,
                 before_define: Hook = None, after_define: Hook = None, after_guard: Hook = None,
                 by: LookupBy = "any") -> int:
    """Write a planned placement into a live domain's definition, the way `apply` writes fixes;
    `live` also re-pins a running domain's threads now (its memory binding waits for a restart).
    Returns 0 when defined and verified (or already placed), 1 when it is pending (a dry run,
    declined) or libvirt did not keep it."""
    target = LiveTarget.find(conn, key, by)
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
                               state_root=state_root, before_define=before_define, after_define=after_define,
                               after_guard=after_guard)
    if defined is None:
        return 1  # pending: a dry run or declined
    target = defined.target
    if not _realises(Domain(parse_domain(defined.after.encode(), target.label()), target.label()), placement):
        out(f"warning: libvirt dropped or normalised the placement of {target.name}")
        return 1
    if not _verified(defined, old_xml, new_xml, {}, f"{target.name} is pinned to node {placement.node}", out):
        return 1
    if live and _running(target):
        _pin_live(target, old_xml, defined.after, out)
    _takes_effect(target, out)
    return 0


def rollback_domain(conn: Any, key: str, *, backup_id: str | None, state_root: Path, dry_run: bool = False,
                    yes: bool = False, confirm: Confirm, out: Out, before_define: Hook = None,
                    after_define: Hook = None, after_guard: Hook = None, by: LookupBy = "any") -> int:
    """Restore a backup (backup_id, else the newest a change rather than a rollback made, so
    that a second rollback is a no-op instead of re-applying the change); 0 restored and verified,
    or nothing to restore; 1 pending (a dry run, declined) or libvirt's definition is not the backup's."""
    target = LiveTarget.find(conn, key, by)
    found = backups.listing(state_root, target.uri, target.uuid)
    for path, why in found.skipped:
        out(f"skipped {path}: {why}")
    saved = found.backups
    unusable = {path.stem: why for path, why in found.skipped}
    if backup_id in unusable:
        raise VmtuneError(f"backup '{backup_id}' cannot be restored: {unusable[backup_id]}", target.label())
    if not saved:
        raise VmtuneError("no backups for this domain", target.label())
    see = f"see `vmtune history --domain {shlex.quote(target.name)}`"
    if backup_id is None:
        chosen = backups.newest_change(saved)
        if chosen is None:
            raise VmtuneError(f"only backups made by rollbacks: --to ID restores one of them ({see})", target.label())
    else:
        chosen = next((b for b in saved if b.id == backup_id), None)
    if chosen is None:
        raise VmtuneError(f"no backup '{backup_id}' ({see})", target.label())
    current = target.read()
    wanted = chosen.xml
    if current == wanted and backup_id is None:  # rolled back already: never re-apply the change
        out(f"{target.name} already has the definition from before vmtune's last change (backup {chosen.id}): "
            f"nothing to roll back; --to ID restores another backup ({see})")
        return 0
    if current == wanted:
        out(f"{target.name} already has the definition of backup {chosen.id}")
        return 0
    out(diff_text(current, wanted, target.label()).rstrip("\n"))
    defined = _define_approved(target, current, wanted, action="rollback", changes=[f"to {chosen.id}"],
                               done="restored", dry_run=dry_run, yes=yes, confirm=confirm, out=out,
                               state_root=state_root, before_define=before_define, after_define=after_define,
                               after_guard=after_guard,
                               question=f"Restore {target.name} on {target.uri} to backup {chosen.id}?")
    if defined is None:
        return 1  # pending: a dry run or declined
    kept = _verified(defined, current, wanted, {}, f"{target.name} has the definition of backup {chosen.id}", out)
    out(f"restored backup {chosen.id}; the replaced definition was saved as {defined.backup.id}")
    _takes_effect(defined.target, out)
    return 0 if kept else 1
