"""Which tool wrote a domain once (not a manager that keeps rewriting it: vmtune.manager_advice), and
the OS that tool implies, from what each tool's own code writes.

Read in each tool's source (fixtures/tools/README.md has the commits and the rendered XML):
- kcli (`kvirt/providers/kvm/__init__.py`, `Kvirt.create`): `<metadata><kvirt:info
  xmlns:kvirt="kvirt">` with `<kvirt:image>` and `<kvirt:profile>`, the image or profile
  the guest was made from;
- virt-lightning (`virt_lightning.py`, `LibvirtDomain.record_metadata`): one metadata element
  per key, each in a namespace named after the key, `<vl:distro xmlns:vl="distro"
  name="ubuntu-24.04"/>`;
- minikube's kvm2 driver (`pkg/drivers/kvm/domain_definition_x86.go`,
  `registry/drvs/kvm2/kvm2.go`): the ISO `boot2docker.iso` and disk `<name>.rawdisk` under
  `$MINIKUBE_HOME/.minikube/machines/<name>/`: the minikube ISO, Buildroot Linux;
- CRC (`crc-org/machine-driver-libvirt`, `pkg/libvirt/domain.go`): the fixed MAC
  52:fd:fc:07:21:82 and a disk under `~/.crc/machines/`: the OpenShift (RHCOS) VM;
- multipass's libvirt backend (`libvirt_virtual_machine.cpp`, removed from multipass in
  2026): disks under multipassd's data directory (`.../multipassd/vault/instances/<name>/`):
  Ubuntu cloud images.

- WebVirtCloud (`vrtManager/create.py`, `wvmCreate.create_instance`): a literal
  `<description>None</description>` (the Python None its template prints); no OS.

Not recognised, because they leave no mark of their own: virt-install writes libosinfo
metadata, which vmtune already reads (cockpit-machines runs virt-install);
terraform-provider-libvirt 0.9 mirrors domain XML attribute for attribute and adds no
metadata; Foreman's fog-libvirt (`Server#to_xml`) writes a plain template (with the HPET
already off).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lxml import etree

if TYPE_CHECKING:
    from vmtune.facts.guestos import OsFamily

KCLI_INFO = "{kvirt}info"
_KCLI_IMAGE, _KCLI_PROFILE = "{kvirt}image", "{kvirt}profile"
VIRT_LIGHTNING_DISTRO = "{distro}distro"
CRC_MAC = "52:fd:fc:07:21:82"  # machine-driver-libvirt pkg/libvirt/domain.go: macAddress

NAMES = {"kcli": "kcli", "virt-lightning": "virt-lightning", "minikube": "minikube", "crc": "CRC",
         "multipass": "multipass", "webvirtcloud": "WebVirtCloud"}

# What each path-recognised tool runs: said in the provenance note.
_LINUX_BECAUSE = {
    "minikube": "minikube's kvm2 driver, whose ISO is Linux",
    "crc": "CRC, whose VM runs Red Hat CoreOS",
    "multipass": "multipass, which launches Ubuntu images",
}

# Image and distro names: Windows first (`win2k22`, `windows-11`, `win10`, `w2k19`), then Linux
# distributions and BSDs. Anything else stays unknown: a name is only a name.
# Compiled at first use, by re's cache (see vmtune.facts.units): _LINUX alone cost ~3 M
# instructions of every start, and most checks never ask a name.
_WINDOWS = r"(?:^|[^a-z])(?:windows|win(?:2k|\d|-?server|-?srv)|w2k\d)"
_LINUX = (r"(?:^|[^a-z])(?:ubuntu|debian|centos|rhel|rhcos|fcos|fedora|rocky|alma|opensuse|sles|suse|"
          r"archlinux|arch-|alpine|cirros|gentoo|oraclelinux|ol\d|amazonlinux|amzn|coreos|flatcar|"
          r"talos|k3os|photon|mageia|clearlinux|cloudimg|linux)")
_BSD = r"(?:^|[^a-z])(?:freebsd|openbsd|netbsd|dragonfly)"


def family_from_name(name: str) -> OsFamily | None:
    """windows, linux, other (a BSD) or None, from an image, profile or distro name."""
    lowered = name.lower()
    if re.search(_WINDOWS, lowered):
        return "windows"
    if re.search(_BSD, lowered):
        return "other"
    if re.search(_LINUX, lowered):
        return "linux"
    return None


_MAX_NAME = 80  # a recorded name is quoted in notes: a long one is cut, not repeated per finding


def _text(el: etree._Element | None) -> str:
    return (el.text or "").strip() if el is not None else ""


def _short(name: str) -> str:
    return name if len(name) <= _MAX_NAME else name[:_MAX_NAME] + "..."


def recognise(metadata: dict[str, etree._Element], disk_sources: list[str], macs: list[str],
              description: str) -> tuple[str, str] | None:
    """(tool, the name it recorded or '') for a domain a tool wrote, or None.

    `metadata`: the children of <metadata> by tag; `disk_sources`: the file paths of its disks;
    `macs`: its interfaces' MAC addresses; `description`: the text of <description>."""
    info = metadata.get(KCLI_INFO)
    if info is not None:
        image = next((_text(c) for c in info.iterchildren(_KCLI_IMAGE, _KCLI_PROFILE) if _text(c)), "")
        return "kcli", _short(image)
    distro = metadata.get(VIRT_LIGHTNING_DISTRO)
    if distro is not None:
        return "virt-lightning", _short((distro.get("name") or "").strip())
    for source in disk_sources:
        if "/.minikube/machines/" in source and source.endswith(("/boot2docker.iso", ".rawdisk")):
            return "minikube", ""
        if "/.crc/machines/" in source:
            return "crc", ""
        if "/multipassd/" in source:
            return "multipass", ""
    if CRC_MAC in (m.lower() for m in macs):
        return "crc", ""
    if description == "None":  # until someone writes a description in WebVirtCloud's instance page
        return "webvirtcloud", ""
    return None


def implied_os(tool: str, recorded: str) -> tuple[OsFamily | None, str]:
    """The OS a tool's domain implies and why, or (None, '') when it does not say."""
    if tool in _LINUX_BECAUSE:
        return "linux", _LINUX_BECAUSE[tool]
    if recorded:
        family = family_from_name(recorded)
        if family is not None:
            field = "image" if tool == "kcli" else "distro"
            return family, f"{NAMES[tool]}'s {field} '{recorded}'"
    return None, ""
