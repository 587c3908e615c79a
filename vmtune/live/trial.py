"""Whether a new definition starts: a throwaway copy of it, started paused and destroyed at once.

libvirt accepting a definition says nothing about whether QEMU can run it: libvirt's
capabilities list KVM wherever `/dev/kvm` opens, also where it runs only special guests
(kvm-pvm), and there a guest switched to `type='kvm'` defines, then fails at its next start
(QEMU: failed to set MSR). So when `apply` changes the accelerator or the CPU, it first starts
a copy of the new definition, paused (QEMU creates the vCPUs and sets their registers and MSRs
before the first instruction), then destroys it.

The copy must not touch anything the guest owns, running or not. It is built from a
whitelist, so that what is not named here is left out:
- a new name and UUID (transient: createXML, never defined; libvirt destroys it with the
  connection where the driver can, and vmtune destroys it at once);
- the accelerator, machine type, CPU (without its NUMA cells), features, clock, vCPUs and
  their pinning: what decides whether the vCPUs can be created;
- 256 MiB of memory without its backing (no hugepages taken, no file, nothing preallocated);
- no device but the emulator: no disk (never opened, so never written, locked or relabelled),
  no interface (no MAC or tap clash), no host device, socket, serial log, TPM state, shared
  memory or firmware variables (the original's NVRAM file), and no balloon;
- no kernel, initrd, ACPI table or SMBIOS file to read, no <qemu:commandline> pass-through.

What it cannot say: that the guest's devices, disks and firmware start (they are not in the
copy), nor anything about the guest's own kernel. It says what it checked.
"""

from __future__ import annotations

import contextlib
import re
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lxml import etree

from vmtune.xml.safe import parse_xml

# Children of <domain> the copy keeps (name, uuid, memory and devices are written anew).
KEPT = frozenset({"vcpu", "vcpus", "iothreads", "cputune", "os", "features", "cpu", "clock", "pm",
                  "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "seclabel"})
# Inside those: what could reach a file, a host resource or another guest's state.
DROPPED = ("os/loader", "os/nvram", "os/kernel", "os/initrd", "os/dtb", "os/cmdline", "os/acpi", "os/smbios",
           "os/firmware", "cpu/numa", "cputune/cachetune", "cputune/memorytune")
MEMORY_MIB = 256  # a paused guest touches next to nothing of it; enough for any machine type's ROMs
REASON_CHARS = 400  # QEMU's reason, on one line
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z\s*")


def _text(root: etree._Element, where: str, attr: str | None = None) -> str | None:
    element = root.find(where) if where else root
    if element is None:
        return None
    return element.get(attr) if attr else (element.text or "").strip() or None


def _features(root: etree._Element) -> list[tuple[str, str]]:
    return sorted((str(f.get("name")), str(f.get("policy", "require"))) for f in root.iterfind("cpu/feature"))


def start_relevant(old_xml: str, new_xml: str) -> list[str]:
    """What the new definition changes that decides whether QEMU can create its vCPUs: the
    accelerator (domain type), the CPU mode, model or features. [] when none of them changed."""
    old, new = parse_xml(old_xml.encode(), "old"), parse_xml(new_xml.encode(), "new")
    changes = []
    for label, where, attr in (("the accelerator", "", "type"), ("the CPU mode", "cpu", "mode"),
                               ("the CPU model", "cpu/model", None)):
        before, after = _text(old, where, attr), _text(new, where, attr)
        if before != after:
            changes.append(f"{label} ({before or 'none'} -> {after or 'none'})")
    if _features(old) != _features(new):
        changes.append("the CPU features")
    return changes


def throwaway_copy(xml: str, name: str, uuid: str) -> str:
    """The copy that is started: see the module's docstring for what it keeps and why."""
    root = parse_xml(xml.encode(), "definition")
    copy = etree.Element("domain")
    if root.get("type") is not None:
        copy.set("type", str(root.get("type")))
    etree.SubElement(copy, "name").text = name
    etree.SubElement(copy, "uuid").text = uuid
    etree.SubElement(copy, "memory", unit="MiB").text = str(MEMORY_MIB)
    for child in root:
        if isinstance(child.tag, str) and child.tag in KEPT:
            copy.append(_clean(child))
    for where in DROPPED:
        for element in copy.findall(where):
            element.getparent().remove(element)  # type: ignore[union-attr]
    os_element = copy.find("os")
    if os_element is not None and "firmware" in os_element.attrib:
        del os_element.attrib["firmware"]  # the loader and its NVRAM are left out
    devices = etree.SubElement(copy, "devices")
    emulator = root.find("devices/emulator")
    if emulator is not None and emulator.text:
        etree.SubElement(devices, "emulator").text = emulator.text.strip()
    etree.SubElement(devices, "memballoon", model="none")  # else libvirt adds one
    etree.cleanup_namespaces(copy)  # the copied children's declarations of namespaces they do not use
    return etree.tostring(copy, encoding="unicode")


def _clean(element: etree._Element) -> etree._Element:
    """A deep copy without comments (what libvirt would drop anyway)."""
    copied = etree.fromstring(etree.tostring(element))
    for comment in [c for c in copied.iter() if not isinstance(c.tag, str)]:
        parent = comment.getparent()
        if parent is not None:
            parent.remove(comment)
    return copied


def one_line(reason: str) -> str:
    """libvirt's report of a failed start on one line: QEMU's stderr lines joined, their
    timestamps dropped, bounded."""
    lines = [_TIMESTAMP.sub("", line).strip() for line in reason.splitlines()]
    text = "; ".join(line for line in lines if line)
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


@dataclass(frozen=True)
class Started:
    """started: the copy ran (paused); could_try: False when the driver cannot start a paused
    copy at all (the reason then says why), so nothing is known."""

    started: bool
    could_try: bool
    reason: str = ""


def _flags_refused(reason: str) -> bool:
    """The driver refused a start flag, not the guest: autodestroy (the embedded driver) or a
    paused start at all (the test driver)."""
    lowered = reason.lower()
    return "autodestroy" in lowered or "unsupported flags" in lowered


def start_paused(conn: Any, xml: str, libvirt: Any, error_text: Callable[[Exception], str]) -> Started:
    """Start a throwaway copy of `xml` paused, destroy it; what happened."""
    copy = throwaway_copy(xml, f"vmtune-trial-{uuidlib.uuid4().hex[:12]}", str(uuidlib.uuid4()))
    paused = libvirt.VIR_DOMAIN_START_PAUSED
    try:
        # Autodestroy: a vmtune killed mid-check leaves no guest behind.
        dom = conn.createXML(copy, paused | libvirt.VIR_DOMAIN_START_AUTODESTROY)
    except libvirt.libvirtError as exc:
        if not _flags_refused(error_text(exc)):
            return _failed(exc, libvirt, error_text)
        try:  # the embedded driver has no autodestroy: vmtune destroys the copy itself
            dom = conn.createXML(copy, paused)
        except libvirt.libvirtError as again:
            return _failed(again, libvirt, error_text)
    with contextlib.suppress(libvirt.libvirtError):  # gone already: a transient domain leaves nothing behind
        dom.destroy()
    return Started(True, True)


def _failed(exc: Any, libvirt: Any, error_text: Callable[[Exception], str]) -> Started:
    reason = one_line(error_text(exc))
    cannot = (libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_ERR_OPERATION_DENIED, libvirt.VIR_ERR_AUTH_FAILED)
    if _flags_refused(reason) or exc.get_error_code() in cannot:
        return Started(False, False, reason)  # the driver cannot (or may not) start a copy: unknown
    return Started(False, True, reason)
