"""The OpenStack front end of `vmtune check`: flavors, images and nova.conf in, the domains nova
34.0.0 would write out (vmtune.stacks.frontend's interface), each finding placed on the extra
spec, image property or nova.conf option that cures it.

Pairing: flavors and images given together are checked as every pair (or the pairs named with
`--pair FLAVOR:IMAGE`); a flavor alone with an image that sets nothing; an image alone with the
smallest flavor it fits (1 vCPU, max(min_ram, 512) MiB, max(min_disk, 1) GiB: said as STK002);
nova.conf alone with that smallest flavor and an empty image. Several nova.conf files are read
in the order given, later options winning (oslo.config's --config-file order).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError
from vmtune.stacks.frontend import Note, Placement, Rendered, SourceEdit
from vmtune.stacks.knob_table import rows, said_on
from vmtune.stacks.openstack import FRONTEND, Settings, inputs, validators
from vmtune.stacks.openstack.model import ANSIBLE, CLI, REPO, SYNTHETIC, Flavor, Image, NovaConf, empty_image
from vmtune.stacks.openstack.render import RELEASE, NodeHost
from vmtune.stacks.openstack.render import render as render_xml

if TYPE_CHECKING:
    from vmtune.stacks.frontend import StackFile

STACK = FRONTEND.name  # as findings and knob tables name the stack


class Sources:
    """Everything the files hold, nova.conf merged."""

    def __init__(self) -> None:
        self.flavors: list[Flavor] = []
        self.images: list[Image] = []
        self.conf: NovaConf | None = None
        self.conf_files: list[NovaConf] = []
        self.host: NodeHost | None = None  # --host's compute node; None: the assumed one
        # Placer._knob's answers by (knob, flavor or image): an image's knob is placed alike for
        # every flavor it pairs with (~1,500 findings of 1,000 pairs)
        self.placed: dict[tuple[int, int], Placement] = {}


def read(files: list[StackFile]) -> tuple[Sources, set[str]]:
    sources = Sources()
    recognised: set[str] = set()
    for stack_file in files:
        if stack_file.name.lower().endswith(".conf"):
            conf = inputs.read_nova_conf(stack_file.data, stack_file.name)
            sources.conf_files.append(conf)
            recognised.add(stack_file.name)
            continue
        found = inputs.read_docs(stack_file.docs, stack_file.name)
        if found.flavors or found.images:
            recognised.add(stack_file.name)
        sources.flavors += found.flavors
        sources.images += found.images
    if sources.conf_files:
        merged = NovaConf(source=sources.conf_files[-1].source)
        for conf in sources.conf_files:
            merged.values.update(conf.values)
        sources.conf = merged
    return sources, recognised


# Every flavor with every image grows as a product: a 2,000-flavor listing with 50 images would
# be 100,000 domains (minutes). Beyond this, the pairs must be named.
MAX_PAIRS = 20_000


def smallest_flavor(image: Image) -> Flavor:
    """The smallest flavor an image fits: 1 vCPU, its min_ram (at least 512 MiB), its min_disk."""
    return Flavor(f"smallest({image.name})", 1, max(image.min_ram, 512), max(image.min_disk, 1), form=SYNTHETIC,
                  source=image.source, line=image.line)


def pairs(flavors: list[Flavor], images: list[Image], named: list[tuple[str, str]] | None = None
          ) -> list[tuple[Flavor, Image, list[tuple[str, str]]]]:
    """The (flavor, image, notes) combinations to check; notes are (code, message)."""
    out: list[tuple[Flavor, Image, list[tuple[str, str]]]] = []
    if named:
        by_flavor = {f.name: f for f in flavors}
        by_image = {i.name: i for i in images}
        for flavor_name, image_name in named:
            flavor = by_flavor.get(flavor_name)
            image = by_image.get(image_name)
            notes: list[tuple[str, str]] = []
            if image is None and flavor is None:
                raise VmtuneError(f"--pair {flavor_name}:{image_name}: neither the flavor nor the image is in the "
                                  "files given")
            if image is None:
                notes.append(("STK001", f"--pair names image {image_name!r}, which is not in the files given: "
                                        "checked with an image that sets no property"))
                image = empty_image()
            if flavor is None:
                assert image is not None
                flavor = smallest_flavor(image)
                notes.append(("STK001", f"--pair names flavor {flavor_name!r}, which is not in the files given: "
                                        f"checked with the smallest flavor {_size(flavor)}"))
            out.append((flavor, image, notes))
        return out
    if flavors and images:
        if len(flavors) * len(images) > MAX_PAIRS:
            raise VmtuneError(f"{len(flavors)} flavors × {len(images)} images are more than {MAX_PAIRS:,} pairs: "
                              "name the pairs to check with --pair FLAVOR:IMAGE")
        return [(f, i, []) for f in flavors for i in images]
    if flavors:
        return [(f, empty_image(), []) for f in flavors]
    return [(smallest_flavor(i), i, [("STK002", f"image {i.name} checked with the smallest flavor it fits: "
                                                f"{_size(smallest_flavor(i))} (min_ram {i.min_ram} MiB, min_disk "
                                                f"{i.min_disk} GiB); name a flavor with --pair FLAVOR:IMAGE")])
            for i in images]


def _size(flavor: Flavor) -> str:
    return f"{flavor.vcpus} vCPU, {flavor.ram} MiB RAM, {flavor.disk} GiB disk"


def display_name(flavor: Flavor, image: Image) -> str:
    if image.form == SYNTHETIC:
        return flavor.name
    if flavor.form == SYNTHETIC:
        return image.name
    return f"{flavor.name} × {image.name}"


def render(files: list[StackFile], settings: Settings | None = None) -> tuple[list[Rendered], set[str]]:
    """`settings`: the flavor × image pairs named (--pair; none: every pair) and the compute node
    (--host; none: the assumed one)."""
    given = settings
    settings = settings or Settings()
    try:
        sources, recognised = read(files)
        combos = pairs(sources.flavors, sources.images, settings.pairs or None)
    except VmtuneError as exc:
        if given is None:
            raise
        # Every pair is a product of all the files (and nova.conf shapes each domain): none is
        # rendered when one cannot be read, while the run's other front ends go on.
        settings.problems.append(exc)
        return [], {f.name for f in files}
    sources.host = settings.host
    if not combos and sources.conf is not None:
        default = Flavor("smallest", 1, 512, 1, form=SYNTHETIC, source=sources.conf.source, line=1)
        combos = [(default, empty_image(), [("STK002", "nova.conf checked with the smallest flavor (1 vCPU, 512 MiB) "
                                                       "and an image that sets no property; give flavors and images "
                                                       "to check them")])]
    said: set[int] = set()  # objects whose unknown keys were reported: once, not once per pair
    guests: dict[int, tuple[str | None, str | None]] = {}  # the guest each image states, read once per image
    rendered = []
    for flavor, image, notes in combos:
        if settings.not_placed is not None:
            notes = [*notes, ("STK002", settings.not_placed)]
        guest = guests.get(id(image))
        if guest is None:
            guest = guests[id(image)] = (image_os_family(image), image_os_id(image))
        rendered.append(render_pair(flavor, image, sources, notes, said, guest))
    return rendered, recognised


def render_pair(flavor: Flavor, image: Image, sources: Sources | None = None,
                pair_notes: list[tuple[str, str]] | None = None, said: set[int] | None = None,
                guest: tuple[str | None, str | None] | None = None) -> Rendered:
    """`guest`: the image's (image_os_family, image_os_id), when the caller read them already."""
    sources = sources or Sources()
    name = display_name(flavor, image)
    xml, refused = render_xml(flavor, image, sources.conf, name, sources.host)
    primary: Flavor | Image = flavor if flavor.form != SYNTHETIC else image
    source, line = primary.source, primary.line
    if not source and sources.conf is not None:
        source, line = sources.conf.source, 1
    notes = [Note(code, source, line, message) for code, message in pair_notes or []]
    notes += [Note("STK004", *refusal_place(message, flavor, image, sources, (source, line)), message)
              for message in refused]
    said = set() if said is None else said
    notes += key_notes(flavor if id(flavor) not in said else None, image if id(image) not in said else None)
    said |= {id(flavor), id(image)}
    os_family, os_id = guest or (image_os_family(image), image_os_id(image))
    placer = Placer(flavor, image, sources, os_family)
    return Rendered(name, xml, source, line, STACK, RELEASE, placer.place, tuple(notes), os_family, os_id)


# The keys a refusal names, in the order it names them: extra specs, image properties, nova.conf
# options written `[section] option`. A name ending in `_` (`hw_cpu_*`) stands for those it starts.
_NAMED_KEY = re.compile(r"\[(\w+)\] (\w+)|((?:hw|hw_rng|hw_video|quota|os):[\w.-]+|hw_\w+|img_\w+|os_type)")


def refusal_place(message: str, flavor: Flavor, image: Image, sources: Sources,
                  home: tuple[str, int]) -> tuple[str, int]:
    """Where a refusal belongs: the first key it names that the flavor, the image or a nova.conf
    given sets (the key that makes nova refuse), else the flavor (or the image of an image alone)."""
    for match in _NAMED_KEY.finditer(message):
        section, option, key = match.groups()
        if key is None:
            conf = next((c for c in reversed(sources.conf_files) if (section, option) in c.lines), None)
            if conf is not None:
                return conf.source, conf.lines[(section, option)]
            continue
        for obj, values in ((flavor, flavor.specs), (image, image.props)):
            if obj.form == SYNTHETIC:
                continue
            found = key if key in values else next((k for k in values if key.endswith("_") and k.startswith(key)),
                                                   None)
            if found is not None:
                return obj.source, obj.key_lines.get(found) or obj.line
    primary: Flavor | Image = flavor if flavor.form != SYNTHETIC else image
    return (primary.source, primary.line) if primary.source else home


# glance's os_distro values (the metadata definitions' operating_system.json) of Linux guests
LINUX_DISTROS = frozenset({"arch", "centos", "debian", "fedora", "gentoo", "mandrake", "mandriva", "mes", "opensuse",
                           "rhel", "sled", "ubuntu", "rocky", "almalinux", "alma", "oraclelinux", "ol", "sles",
                           "suse", "coreos", "fedora-coreos", "rhcos", "cirros", "alpine", "linux"})


def image_os_family(image: Image) -> str | None:
    """What the image says its guest is: os_type (what nova reads), else os_distro (glance's
    catalogue), so OS-dependent rules judge the guest the image boots."""
    os_type = str(image.props.get("os_type") or "").lower()
    if os_type in ("windows", "linux"):
        return os_type
    distro = str(image.props.get("os_distro") or "").lower()
    if distro.startswith(("windows", "win")):
        return "windows"
    return "linux" if distro in LINUX_DISTROS else None


# glance's os_version of Windows images (the metadata definitions' operating_system.json leaves it
# free text: "10", "11", "2019", "2012 R2", "Server 2022") -> libosinfo's Windows version
_WINDOWS_VERSION = re.compile(r"(?:server\s*)?(7|8|8\.1|10|11|2008|2012|2016|2019|2022|2025)(\s*r2)?")


def image_os_id(image: Image) -> str | None:
    """The libosinfo id an image states: os_distro as a libosinfo short id (`win10`, `win2k22`:
    what virt-install names), or os_distro `windows` with os_version (glance's catalogue), so the
    rules that depend on the Windows edition (CPU016) judge the guest the image boots."""
    from vmtune.facts.guestos import libosinfo_id_from_short

    distro = str(image.props.get("os_distro") or "").strip().lower()
    version = str(image.props.get("os_version") or "").strip().lower()
    if distro == "windows":
        match = _WINDOWS_VERSION.fullmatch(version)
        if match is None:
            return None
        number, r2 = match.group(1), "r2" if match.group(2) else ""
        short = f"win2k{number[2:]}{r2}" if len(number) == 4 else f"win{number}"
        return libosinfo_id_from_short(short)
    return libosinfo_id_from_short(distro) if distro else None


def key_notes(flavor: Flavor | None, image: Image | None) -> list[Note]:
    """Keys nova does not know, as its extra-spec validator would report them (info)."""
    notes = []
    if flavor is not None and flavor.form != SYNTHETIC:
        for key, line in inputs.unknown_namespaces(flavor):
            if not validators.SPEC_KEY.fullmatch(key):
                continue  # the API refuses the key itself (STK004, render.Inputs)
            namespace = key.split(":", 1)[0]
            notes.append(Note("STK003", flavor.source, line,
                              f"flavor {flavor.name}: extra spec {key!r} is in namespace {namespace!r}, which nova's "
                              "extra spec validator does not register: nova ignores it"))
        for key in flavor.specs:
            if key.startswith("hw:") and not _known_hw_spec(key) and validators.SPEC_KEY.fullmatch(key):
                notes.append(Note("STK003", flavor.source, flavor.key_lines.get(key, flavor.line),
                                  f"flavor {flavor.name}: extra spec {key!r} is not one nova knows (its API refuses "
                                  "it from microversion 2.86; older microversions store it and nova ignores it)"))
    if image is not None and image.form != SYNTHETIC:
        for key in image.props:
            if key.startswith(("hw_", "img_")) and key not in KNOWN_IMAGE_PROPERTIES:
                notes.append(Note("STK003", image.source, image.key_lines.get(key, image.line),
                                  f"image {image.name}: property {key!r} is not one nova's ImageMetaProps defines: "
                                  "nova ignores it"))
    return notes


def _known_hw_spec(key: str) -> bool:
    if key.startswith(("hw:numa_cpus.", "hw:numa_mem.")):
        return key.rsplit(".", 1)[1].isdigit()
    return key in KNOWN_HW_SPECS


# nova 34.0.0 nova/api/validation/extra_specs/hw.py (registered names).
KNOWN_HW_SPECS = frozenset({
    "hw:boot_menu", "hw:cpu_cores", "hw:cpu_dedicated_mask", "hw:cpu_max_cores", "hw:cpu_max_sockets",
    "hw:cpu_max_threads", "hw:cpu_policy", "hw:cpu_realtime", "hw:cpu_realtime_mask", "hw:cpu_sockets",
    "hw:cpu_thread_policy", "hw:cpu_threads", "hw:emulator_threads_policy", "hw:ephemeral_encryption",
    "hw:ephemeral_encryption_format", "hw:hide_hypervisor_id", "hw:locked_memory", "hw:mem_encryption",
    "hw:mem_encryption_model", "hw:mem_page_size", "hw:numa_nodes", "hw:pci_numa_affinity_policy", "hw:pmem",
    "hw:pmu", "hw:redirected_usb_ports", "hw:serial_port_count", "hw:sound_model", "hw:tpm_model",
    "hw:tpm_secret_security", "hw:tpm_version", "hw:usb_model", "hw:vif_multiqueue_enabled", "hw:viommu_model",
    "hw:virtio_packed_ring", "hw:watchdog_action", "hw:maxphysaddr_mode", "hw:maxphysaddr_bits"})

# nova 34.0.0 nova/objects/image_meta.py ImageMetaProps.fields, hw_* and img_*.
KNOWN_IMAGE_PROPERTIES = frozenset({
    "hw_architecture", "hw_auto_disk_config", "hw_boot_menu", "hw_cdrom_bus", "hw_cpu_cores", "hw_cpu_max_cores",
    "hw_cpu_max_sockets", "hw_cpu_max_threads", "hw_cpu_policy", "hw_cpu_realtime_mask", "hw_cpu_sockets",
    "hw_cpu_thread_policy", "hw_cpu_threads", "hw_device_id", "hw_disk_bus", "hw_disk_type",
    "hw_emulation_architecture", "hw_ephemeral_encryption", "hw_ephemeral_encryption_format",
    "hw_ephemeral_encryption_secret_uuid", "hw_firmware_stateless", "hw_firmware_type", "hw_floppy_bus",
    "hw_input_bus", "hw_ipxe_boot", "hw_locked_memory", "hw_machine_type", "hw_maxphysaddr_bits",
    "hw_maxphysaddr_mode", "hw_mem_encryption", "hw_mem_encryption_model", "hw_mem_page_size", "hw_numa_cpus",
    "hw_numa_mem", "hw_numa_nodes", "hw_pci_numa_affinity_policy", "hw_pmu", "hw_pointer_model",
    "hw_qemu_guest_agent", "hw_redirected_usb_ports", "hw_rescue_bus", "hw_rescue_device", "hw_rng_model",
    "hw_scsi_model", "hw_serial_port_count", "hw_sound_model", "hw_time_hpet", "hw_tpm_model", "hw_tpm_version",
    "hw_usb_model", "hw_video_model", "hw_video_ram", "hw_vif_model", "hw_vif_multiqueue_enabled",
    "hw_viommu_model", "hw_virtio_packed_ring", "hw_vm_mode", "hw_watchdog_action", "img_bdm_v2",
    "img_bittorrent", "img_block_device_mapping", "img_cache_in_nova", "img_compression_level",
    "img_config_drive", "img_hide_hypervisor_id", "img_hv_requested_version", "img_hv_type", "img_linked_clone",
    "img_mappings", "img_owner_id", "img_root_device_name", "img_signature", "img_signature_certificate_uuid",
    "img_signature_hash_method", "img_signature_key_type", "img_use_agent", "img_version"})


# -- placing findings ---------------------------------------------------------------------------------

# CPU004/CPU005 reach a shared-CPU flavor only when a NUMA cell's CPUs are so few that a vCPU has
# one to itself; the isolate knob is then refused (hardware.py: BadRequirementEmulatorThreadsPolicy).
NOVA_SHARED_CPUS = ("no knob for a shared-CPU flavor: nova refuses hw:emulator_threads_policy=isolate without "
                    "hw:cpu_policy=dedicated or mixed (BadRequirementEmulatorThreadsPolicy); isolation needs a "
                    "dedicated or mixed flavor")


class Placer:
    """Places a rendered pair's findings on the flavor, the image or nova.conf."""

    def __init__(self, flavor: Flavor, image: Image, sources: Sources, os_family: str | None) -> None:
        self.flavor = flavor
        self.image = image
        self.sources = sources
        self.os_family = os_family  # image_os_family(image), read once per image by render()
        self.home = self._home()  # where a finding without a better place goes, made once per pair

    def _home(self) -> tuple[str, int]:
        primary: Flavor | Image = self.flavor if self.flavor.form != SYNTHETIC else self.image
        if primary.source:
            return primary.source, primary.line
        if self.sources.conf is not None:
            return self.sources.conf.source, 1
        return "", 1

    def place(self, code: str, element: Any, domain: Any) -> Placement:
        table, no_knob = rows(STACK)
        source, line = self.home
        if code in ("CPU004", "CPU005") and not _pins_cpus(self.flavor, self.image):
            return Placement(self.flavor.source or source, self.flavor.line if self.flavor.source else line,
                             "hw:cpu_policy", f"on the flavor {self.flavor.name}: {NOVA_SHARED_CPUS}", knob=False)
        knobs = table.get(code, ())
        if code == "MEM001":
            stated = self._stated_page_size()
            if stated is not None:
                return stated
        if code in ("USB001", "USB002") and self.os_family == "windows" and self.image.form != SYNTHETIC:
            # hw_input_bus=virtio gives Windows a virtio tablet and keyboard: without virtio-win's
            # vioinput driver it has neither, so this is advice, never a fix written for it
            placed = self._knob(knobs[0], code)
            if placed is not None:
                return Placement(placed.source, placed.line, placed.field,
                                 f"{placed.advice} once virtio-win's vioinput driver is installed in the image")
        if not knobs:  # the report adds "(no nova knob)": the reason alone here
            reason = no_knob.get(code, "nova offers no setting for this")
            on, key = said_on(STACK).get(code, ("flavor", ""))
            if on == "image" and self.image.form != SYNTHETIC:  # about the guest the image boots (SAID_ON)
                image = self.image
                source, line = image.source, image.key_lines.get(key) or image.props_line or image.line
            return Placement(source, line, "", reason.removeprefix("no knob: "), knob=False)
        for knob in knobs:
            placed = self._knob(knob, code)
            if placed is not None:
                return placed
        knob = knobs[0]
        return Placement(source, line, _field(knob), f"{_said(knob, self._owner(knob))} ({knob.text})")

    def _stated_page_size(self) -> Placement | None:
        """A flavor (or image) that states its page size (hw:mem_page_size=small) chose the 4 KiB
        pages MEM001 reports: said at that key, with no suggestion to change it."""
        for obj, key in ((self.flavor, "hw:mem_page_size"), (self.image, "hw_mem_page_size")):
            values = obj.specs if isinstance(obj, Flavor) else obj.props
            if obj.form != SYNTHETIC and key in values:
                line = obj.key_lines.get(key) or obj.line
                owner = f"the flavor {obj.name}" if isinstance(obj, Flavor) else f"the image {obj.name}"
                return Placement(obj.source, line, key, f"on {owner}: {key}={values[key]} states the page size "
                                 "(nova backs the guest with it as asked): the flavor's choice, not vmtune's")
        return None

    def _owner(self, knob: Any) -> str:
        if knob.on == "flavor":
            return f"the flavor {self.flavor.name}" if self.flavor.form != SYNTHETIC else "the flavor"
        if knob.on == "image":
            return f"the image {self.image.name}" if self.image.form != SYNTHETIC else "the image"
        return "nova.conf"

    def _companions(self, code: str, obj: Flavor | Image) -> list[tuple[str, str]]:
        """Settings a cure needs beside its own so that it raises no new finding: a virtio NIC
        on a multi-vCPU flavor is single-queue unless multiqueue is asked for (NET004 -> NET001)."""
        if code == "NET004" and isinstance(obj, Image) and self.flavor.vcpus > 1 and \
                "hw_vif_multiqueue_enabled" not in obj.props and "hw:vif_multiqueue_enabled" not in self.flavor.specs:
            return [("hw_vif_multiqueue_enabled", "true")]
        return []

    def _knob(self, knob: Any, code: str = "") -> Placement | None:
        if knob.on == "nova.conf":
            return self._conf(knob)
        obj: Flavor | Image = self.flavor if knob.on == "flavor" else self.image
        if obj.form == SYNTHETIC:
            return None  # not in the input: the next alternative, or advice without a place
        if code == "NET004":  # its companion setting depends on the flavor too
            return self._placed(knob, obj, code)
        placed = self.sources.placed.get((id(knob), id(obj)))  # both live as long as the sources
        if placed is None:
            placed = self.sources.placed[id(knob), id(obj)] = self._placed(knob, obj, code)
        return placed

    def _placed(self, knob: Any, obj: Flavor | Image, code: str) -> Placement:
        key = knob.path[0]
        value = knob.value
        owner = self._owner(knob)
        line = obj.key_lines.get(key) or (obj.specs_line if isinstance(obj, Flavor) else obj.props_line) or obj.line
        advice = f"{_said(knob, owner)}"
        if value is None:
            return Placement(obj.source, line, key, f"{advice} ({knob.text})")
        settings = [(key, value), *self._companions(code, obj)]
        if len(settings) > 1:
            advice += "".join(f" and {k}={v}" for k, v in settings[1:])
        edits = None
        command = None
        if obj.form in (ANSIBLE, REPO):
            path = (obj.spec_path if isinstance(obj, Flavor) else obj.prop_path) or ()
            edits = tuple(SourceEdit(obj.source, obj.doc, (*path, k), v) for k, v in settings)
        elif obj.form == CLI:
            kind = "flavor" if isinstance(obj, Flavor) else "image"
            properties = " ".join(f"--property {shlex.quote(f'{k}={v}')}" for k, v in settings)
            # `--` ends the options: quoting keeps a name `-rf` or `--public` one word, but openstack's
            # argparse would still read it as an option (`image set --public` makes an image public)
            end = "-- " if obj.name.startswith("-") else ""
            command = f"openstack {kind} set {properties} {end}{shlex.quote(obj.name)}"
        return Placement(obj.source, line, key, advice, edits, command)

    def _conf(self, knob: Any) -> Placement:
        section, option = knob.path
        conf_files = self.sources.conf_files
        advice = _said(knob, "nova.conf")
        if not conf_files:
            source, line = self.home
            return Placement(source, line, f"[{section}] {option}",
                             f"{advice} (in nova.conf on the compute hosts: the cure is host-wide, not in this file)")
        target = next((c for c in reversed(conf_files) if (section, option) in c.lines), conf_files[-1])
        line = target.lines.get((section, option)) or target.section_lines.get(section) or 1
        edits = None if knob.value is None else (SourceEdit(target.source, 0, (section, option), knob.value),)
        if knob.value is None:
            advice = f"{advice} ({knob.text})"
        return Placement(target.source, line, f"[{section}] {option}", advice, edits)


def _said(knob: Any, owner: str) -> str:
    if knob.on == "nova.conf":
        section, option = knob.path
        value = "…" if knob.value is None else knob.value
        return f"in nova.conf [{section}]: {option}={value}"
    value = "…" if knob.value is None else knob.value
    return f"on {owner}: {knob.path[0]}={value}"


def _field(knob: Any) -> str:
    if knob.on == "nova.conf":
        return f"[{knob.path[0]}] {knob.path[1]}"
    return str(knob.path[0])


def _pins_cpus(flavor: Flavor, image: Image) -> bool:
    """A dedicated or mixed CPU policy (hardware.get_cpu_policy_constraint: the flavor's, else the
    image's): the policies nova accepts hw:emulator_threads_policy=isolate with."""
    policy = flavor.specs.get("hw:cpu_policy") or image.props.get("hw_cpu_policy")
    return policy in ("dedicated", "mixed")
