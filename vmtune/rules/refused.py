"""Definitions libvirt refuses to define, whatever their values: combinations, not numbers
(VAL001 judges the numbers)."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.rules.base import Context, Finding, Rule, Severity

MIGRATABLE_MODES = frozenset({"host-passthrough", "maximum"})
VNC_PASSWORD_LIMIT = 8  # VNC's DES challenge uses 8 bytes of the password; libvirt refuses longer ones


class DefinitionRefused(Rule):
    """
    ## What it checks
    Combinations libvirt 9.0 refuses when the domain is defined (`virsh define` fails):
    - an IDE disk or controller on a q35 guest ("IDE controllers are unsupported for this
      QEMU binary or machine type");
    - `<cpu migratable=...>` with a mode other than `host-passthrough` or `maximum`
      ("Attribute migratable is only allowed for 'host-passthrough' / 'maximum' CPU mode");
    - a VNC `passwd` longer than 8 characters ("VNC password is 9 characters long, only 8
      permitted").

    ## Why it matters
    A file that libvirt refuses is no VM at all: the define fails, and a tool that
    generates such XML (a template, a script copying an i440fx guest to q35) fails on every
    host. Each message above is the one libvirt 9.0's embedded QEMU driver gave for it here.

    ## Example
    ```xml
    <os><type arch='x86_64' machine='q35'>hvm</type></os>
    <disk type='file' device='cdrom'><target dev='hda' bus='ide'/></disk>
    ```

    ## Fix
    None automatic: use `bus='sata'` on q35 (DSK004 offers virtio for data disks), drop
    `migratable` or use `host-passthrough`, and shorten the VNC password (VNC authentication
    uses 8 characters at most; use TLS or a socket for real protection).

    ## Calibration
    Error: the definition does not define. Verified with libvirt 9.0's embedded QEMU driver
    (`tests/test_embed_define.py`).

    ## References
    - libvirt `src/qemu/qemu_validate.c` (IDE on q35, VNC password length) and
      `src/conf/domain_validate.c` / `cpu_conf.c` (`migratable`)
    - https://libvirt.org/formatdomain.html#cpu-model-and-topology (`migratable`)
    """

    code = "VAL002"

    since = "0.2.0"
    name = "definition-refused"
    severity = Severity.ERROR
    hypervisors = frozenset({"kvm", "qemu"})

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        if domain.is_x86 and domain.is_q35:
            ide = [t for d in domain.disks_on("ide") if (t := domain.child(d, "target")) is not None]
            ide += [c for c in domain.controllers_of("ide")]
            if ide:
                yield self.finding(domain, ide[0], "IDE on a q35 guest: libvirt refuses the definition (IDE "
                                   "controllers are unsupported for this machine type)")
        cpu = domain.cpu
        if cpu is not None and cpu.get("migratable") is not None and domain.cpu_mode not in MIGRATABLE_MODES:
            yield self.finding(domain, cpu, f"migratable on a {domain.cpu_mode} CPU: libvirt refuses the definition "
                               "(only host-passthrough and maximum take it)")
        for graphics in domain.graphics:
            password = graphics.get("passwd")
            if graphics.get("type") == "vnc" and password is not None and len(password) > VNC_PASSWORD_LIMIT:
                yield self.finding(domain, graphics, f"VNC password of {len(password)} characters: libvirt refuses "
                                   f"the definition (only {VNC_PASSWORD_LIMIT} permitted)")


RULES: list[Rule] = [DefinitionRefused()]
