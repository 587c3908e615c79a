"""Terraform `libvirt_domain` resources (dmacvicar/terraform-provider-libvirt) in `vmtune check`.

New schema (provider >= 0.9): the resource is the domain XML written as HCL, one attribute per
libvirtxml field; vmtune renders it as the provider does (vmtune.stacks.terraform.render),
checks it with the same rules, places each finding on the attribute's line, and writes the fix
as that attribute: the XML edit of the rule's own fix, turned into the attribute path that
writes the same element (every knob of vmtune's XML fixes has one).

Old schema (0.7/0.8: `disk {}` and `network_interface {}` blocks, `xml { xslt }`): recognised and
said; it has no attribute for Hyper-V, timers, pinning, NUMA, queues, cache modes or I/O
threads, so nothing is rendered or fixed: the note names `xml { xslt }` and the new schema.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from vmtune.errors import VmtuneError
from vmtune.patch.edits import Ensure, Remove, SetAttrs, SetText
from vmtune.stacks.frontend import Note, Placement, Rendered, SourceEdit, StackFile
from vmtune.stacks.terraform import FRONTEND, Settings, hcl
from vmtune.stacks.terraform.hcledit import APPEND, REMOVE
from vmtune.stacks.terraform.render import Line
from vmtune.stacks.terraform.render import render as render_domain
from vmtune.stacks.terraform.schema import Field, Struct, struct

if TYPE_CHECKING:
    from lxml import etree

    from vmtune.facts.domain import Domain
    from vmtune.rules.base import Fix
    from vmtune.stacks.terraform.workspace import Instance

STACK = FRONTEND.name  # as findings and knob tables name the stack
RELEASE = "terraform-provider-libvirt 0.9 schema (6bd1e073, libvirtxml v1.11007.0)"
RESOURCE = "libvirt_domain"
# Blocks of the old schema's libvirt_domain (0.7/0.8); the new schema has nested attributes only.
_OLD_BLOCKS = frozenset({"disk", "network_interface", "console", "graphics", "cpu", "xml", "boot_device",
                         "filesystem", "video", "tpm", "nvram", "firmware", "timeouts_old"})
_OLD_ATTRS = frozenset({"cloudinit", "qemu_agent", "coreos_ignition", "fw_cfg_name", "machine", "arch", "emulator",
                        "kernel", "initrd", "cmdline"})
XSLT = ("the provider 0.7/0.8 schema has no attribute for it: add an `xml { xslt = file(\"fix.xsl\") }` block "
        "that writes it into the domain XML, or move the resource to the provider's new schema (>= 0.9), "
        "where every domain XML element has an attribute")


def render(files: list[StackFile], settings: Settings | None = None) -> tuple[list[Rendered], set[str]]:
    """`settings`: the values of --tf-var-file and --tf-var (vmtune.stacks.terraform.Settings)."""
    from vmtune.stacks.terraform.workspace import Workspace

    plans = [f for f in files if not f.name.lower().endswith(".tf")]  # detect.wants: JSON plans
    files = [f for f in files if f.name.lower().endswith(".tf")]
    planned, recognised = _render_plans(plans)
    parsed: dict[str, list[hcl.Block]] = {}
    refused: set[str] = set()  # directories (modules) with a file that does not parse or a value refused
    for stack_file in files:
        try:
            parsed[stack_file.name] = hcl.parse(stack_file.data, stack_file.name)
        except hcl.HclError as exc:
            error = VmtuneError(exc.message, stack_file.name, exc.line)
            _refuse_module(settings, error, stack_file.name, files, refused)
    if refused:
        # As `terraform plan` refuses a module with a file it cannot parse, the whole directory:
        # its files claimed (the broken one's error said), the run's other files checked
        recognised.update(f.name for f in files if os.path.dirname(f.name) in refused)
        files = [f for f in files if os.path.dirname(f.name) not in refused]
    for stack_file in files:
        blocks = parsed[stack_file.name]
        if any(b.type in ("variable", "locals", "terraform", "provider", "module") or
               (b.type == "resource" and b.labels[:1] and b.labels[0].startswith("libvirt_")) for b in blocks):
            recognised.add(stack_file.name)
    # variables, tfvars, --tf-var(-file) and modules: the values each directory gets
    workspace = Workspace(files, parsed, settings.given if settings is not None else None)
    try:
        instances = workspace.plan()
    except hcl.HclError as exc:
        # a tfvars file or a called module that cannot be read: no rendering of Terraform's is
        # sound, while the run's other front ends go on
        _problem(settings, VmtuneError(exc.message, exc.source, exc.line))
        return planned, recognised | {f.name for f in files}
    # one definition rendered for several module calls: its bodies, to see whether the calls differ
    bodies: dict[tuple[str, int], list[dict[str, Any]]] = {}
    work = []
    for instance in instances:
        for stack_file in workspace.stack_files(instance.directory):
            domains = [b for b in workspace.parsed[stack_file.name]
                       if b.type == "resource" and b.labels[:1] == (RESOURCE,)]
            for index, block in enumerate(domains):
                body = {key: instance.scope.resolve(item.value) for key, item in block.attrs.items()}
                bodies.setdefault((stack_file.name, index), []).append(body)
                work.append((instance, stack_file, index, block, body))
    rendered = []
    for instance, stack_file, index, block, body in work:
        if os.path.dirname(stack_file.name) in refused:
            continue
        try:
            rendered.append(_render_one(stack_file, index, block, body, instance,
                                        len(bodies[(stack_file.name, index)]) > 1 and
                                        any(b != body for b in bodies[(stack_file.name, index)])))
        except VmtuneError as exc:  # a value Terraform refuses: `terraform plan` stops there
            _refuse_module(settings, exc, stack_file.name, files, refused)
            rendered = [r for r in rendered if os.path.dirname(r.source) not in refused]
    notes = list(dict.fromkeys((n.code, n.source, n.line, n.message) for n in workspace.notes))
    if rendered and notes:
        first = rendered[0]
        first.notes = (*first.notes, *(Note(*n) for n in notes))
    return planned + rendered, recognised


def _refuse_module(settings: Settings | None, error: VmtuneError, name: str, files: list[StackFile],
                   refused: set[str]) -> None:
    """The module (directory) of file `name` refused, as `terraform plan` refuses it whole; the
    error says how many other files of it go unchecked, the first time."""
    directory = os.path.dirname(name)
    others = sum(1 for f in files if f.name != name and os.path.dirname(f.name) == directory)
    if others and directory not in refused:
        error = VmtuneError(f"{error.message} ({others} other .tf file{'s' if others > 1 else ''} of its module not "
                            "checked: Terraform refuses the whole module)", error.source, error.line)
    refused.add(directory)
    _problem(settings, error)


def _problem(settings: Settings | None, error: VmtuneError) -> None:
    """A file or module refused while the others are rendered: kept in the settings' problems
    (the shared layer says them), or raised when the caller passed no settings to keep it in."""
    if settings is None:
        raise error
    settings.problems.append(error)


def _render_plans(plans: list[StackFile]) -> tuple[list[Rendered], set[str]]:
    """`terraform show -json` plans (vmtune.stacks.terraform.plan): each planned libvirt_domain
    rendered from its values, its findings on the line of its address, nothing fixed."""
    if not plans:
        return [], set()
    from vmtune.stacks.terraform import plan

    rendered: list[Rendered] = []
    recognised: set[str] = set()
    for stack_file in plans:
        for planned in plan.domains(stack_file):
            recognised.add(stack_file.name)
            rendered.append(_render_planned(stack_file, planned))
    return rendered, recognised


def _render_planned(stack_file: StackFile, planned: Any) -> Rendered:
    name, line = planned.address, planned.line
    notes: list[Note] = []
    if _is_old_values(planned.values):
        notes.append(Note("STK002", stack_file.name, line,
                          f"{name} uses the provider's 0.7/0.8 schema: rendered with that provider's own additions "
                          "(pae, acpi, apic, a virtio disk per disk block, a virtio NIC per network_interface); the "
                          "host's machine type, emulator and any `xml { xslt }` are not applied"))
        block = _old_block(planned.values, name, line)
        xml, where = _old_schema(block, planned.values)
        return Rendered(name, xml, stack_file.name, line, STACK, RELEASE, _OldPlacer(stack_file.name, block, where),
                        tuple(notes))
    rendering = render_domain(planned.values, name)
    if rendering.refused:
        path, why = rendering.refused[0]
        raise VmtuneError(f"{name}: {_dotted(path) + ': ' if path else ''}{why} (Terraform refuses it)",
                          stack_file.name, line)
    for path, _holder in rendering.unknown_keys:  # Terraform planned it: a provider newer than vmtune's table
        notes.append(Note("STK002", stack_file.name, line,
                          f"{name}: {_dotted(path)} is not in the schema vmtune renders ({RELEASE}): not rendered, "
                          "not checked"))
    for path, unknown in rendering.unknown_values:
        notes.append(Note("STK002", stack_file.name, line,
                          f"{name}: {_dotted(path)} is not known before apply ({unknown.why}): not checked"))
    block = hcl.Block("resource", (RESOURCE, name), line or 0, 0, 0, 0)  # no HCL: every path is on the address
    placer = _Placer(stack_file.name, 0, block, planned.values, rendering.where, False,
                     f"a plan is not fixed: write it in the HCL of {name}", owner=name)
    return Rendered(name, rendering.xml, stack_file.name, line, STACK, RELEASE, placer, tuple(notes))


def _is_old_values(values: dict[str, Any]) -> bool:
    """A plan's values of the 0.7/0.8 schema: its blocks (`disk`, `network_interface`) as lists."""
    return any(isinstance(values.get(k), list) and values.get(k) for k in _OLD_BLOCKS - {"cpu"}) or \
        ("type" not in values and any(values.get(k) is not None for k in _OLD_ATTRS))


def _old_block(values: dict[str, Any], name: str, line: int) -> hcl.Block:
    """A planned old-schema resource as the HCL block _old_schema reads: its scalars as literal
    attributes, its blocks (lists of objects) as nested blocks, every line the address's."""
    def literal(key: str, value: Any) -> hcl.Item:
        found = hcl.Value("lit", 0, 0, line, line)
        found.value = value
        return hcl.Item(key, line, 0, 0, found)

    block = hcl.Block("resource", (RESOURCE, name), line, 0, 0, 0)
    for key, value in values.items():
        if key in _OLD_BLOCKS and isinstance(value, list):
            for item in value:
                nested = hcl.Block(key, (), line, 0, 0, 0)
                if isinstance(item, dict):
                    nested.attrs = {k: literal(k, v) for k, v in item.items() if not isinstance(v, (dict, list))}
                block.blocks.append(nested)
        elif value is not None and not isinstance(value, (dict, list)):
            block.attrs[key] = literal(key, value)
    return block


def _is_old(block: hcl.Block) -> bool:
    return any(b.type in _OLD_BLOCKS for b in block.blocks) or \
        ("type" not in block.attrs and any(k in _OLD_ATTRS for k in block.attrs))


def _render_one(stack_file: StackFile, index: int, block: hcl.Block, body: dict[str, Any], instance: Instance,
                calls_differ: bool) -> Rendered:
    label = block.labels[1] if len(block.labels) > 1 else "?"
    name = f"{instance.prefix}{RESOURCE}.{label}"
    notes: list[Note] = []
    if instance.prefix:
        notes.append(Note("STK002", stack_file.name, block.line,
                          f"{name} is rendered with the arguments of {', '.join(instance.calls)}"
                          + ("; one definition for every call: a fix changes them all"
                             if len(instance.calls) > 1 else "")))
    if _is_old(block):
        notes.append(Note("STK002", stack_file.name, block.line,
                          f"{name} uses the provider's 0.7/0.8 schema: rendered with that provider's own additions "
                          "(pae, acpi, apic, a virtio disk per disk block, a virtio NIC per network_interface); the "
                          "host's machine type, emulator and any `xml { xslt }` are not applied"))
        xml, where = _old_schema(block, body)
        return Rendered(name, xml, stack_file.name, block.line, STACK, RELEASE,
                        _OldPlacer(stack_file.name, block, where), tuple(notes))
    rendering = render_domain(body, name)
    if rendering.refused:  # Terraform stops at the plan: nothing is defined
        path, why = rendering.refused[0]
        raise VmtuneError(f"{name}: {_dotted(path) + ': ' if path else ''}{why} (Terraform refuses it)",
                          stack_file.name, _line(block, path))
    for path, holder in rendering.unknown_keys:
        notes.append(Note("STK003", stack_file.name, _line(block, path),
                          f"{_dotted(path)} is not an attribute of {RESOURCE} (provider's new schema): Terraform drops "
                          f"it without a word (hashicorp/terraform#33570), so it has no effect"
                          + _spelling(holder, str(path[-1]))))
    for path, unknown in rendering.unknown_values:
        notes.append(Note("STK002", stack_file.name, _line(block, path),
                          f"{_dotted(path)} is not known before apply ({unknown.why}): not checked"))
    for meta in ("count", "for_each"):
        if meta in block.attrs:
            notes.append(Note("STK002", stack_file.name, block.attrs[meta].line,
                              f"{name} is one definition for each instance of its {meta}: the instances were checked "
                              "as one (values that depend on count.index or each are not checked), and a fix of "
                              "this definition changes every instance"))
    withheld = None
    if not instance.editable:
        withheld = "the module's files were not among the files checked: check its directory too to fix it"
    elif calls_differ:
        withheld = "the module's calls give this definition different values: change it for each call by hand"
    placer = _Placer(stack_file.name, index, block, body, rendering.where, bool(
        {"count", "for_each"} & set(block.attrs)) or len(instance.calls) > 1, withheld)
    return Rendered(name, rendering.xml, stack_file.name, block.line, STACK, RELEASE, placer, tuple(notes))


def _old_schema(block: hcl.Block, body: dict[str, Any]) -> tuple[bytes, dict[int, int]]:
    """An old-schema resource as the 0.8 provider's newDomainDefForConnection builds it, the parts
    that do not need the host (docs: ../shared/docs/terraform-libvirt.md, "Old schema"): `memory`
    in MiB, `vcpu`, <pae/><acpi/><apic/>, an empty <cpu/> unless `cpu { mode }`, a virtio disk per
    `disk` block (a virtio-scsi `sdX` with `scsi = true`), a virtio NIC per `network_interface`."""
    from vmtune.stacks.xmltext import escape, quoteattr

    def number(key: str, default: int) -> int:
        value = body.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    name = body.get("name")
    lines = ["<domain type='kvm'>", f"  <name>{escape(name) if isinstance(name, str) else 'unnamed'}</name>",
             f"  <memory unit='MiB'>{number('memory', 512)}</memory>", f"  <vcpu>{number('vcpu', 1)}</vcpu>",
             "  <os><type>hvm</type></os>", "  <features><pae/><acpi/><apic/></features>"]
    cpu = next((b for b in block.blocks if b.type == "cpu"), None)
    mode = cpu.attrs.get("mode") if cpu else None
    mode_value = mode.value.value if mode is not None and mode.value.kind == "lit" else None
    lines.append(f"  <cpu mode={quoteattr(mode_value)}/>" if isinstance(mode_value, str) else "  <cpu/>")
    where: dict[int, int] = {3: block.attrs["memory"].line} if "memory" in block.attrs else {}
    if "vcpu" in block.attrs:
        where[4] = block.attrs["vcpu"].line
    if cpu is not None:
        where[len(lines)] = cpu.line
    lines.append("  <devices>")
    scsi = False
    for number_, disk in enumerate(b for b in block.blocks if b.type == "disk"):
        flag = disk.attrs.get("scsi")
        on_scsi = flag is not None and flag.value.kind == "lit" and flag.value.value is True
        scsi = scsi or on_scsi
        dev = ("sd" if on_scsi else "vd") + chr(ord("a") + number_ % 26)
        where[len(lines) + 1] = disk.line
        lines.append(f"    <disk type='volume' device='disk'><driver name='qemu' type='qcow2'/>"
                     f"<target dev='{dev}' bus='{'scsi' if on_scsi else 'virtio'}'/></disk>")
    if scsi:
        lines.append("    <controller type='scsi' model='virtio-scsi'/>")
    for nic in (b for b in block.blocks if b.type == "network_interface"):
        where[len(lines) + 1] = nic.line
        lines.append("    <interface type='network'><source network='default'/><model type='virtio'/></interface>")
    lines += ["    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>",
              "    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>",
              "  </devices>", "</domain>"]
    return "\n".join(lines).encode("utf-8"), where


def _spelling(holder: str, key: str) -> str:
    """The attribute the key was probably meant to be: the field whose XML name it is (`vpindex`
    is `vp_index`), or whose name differs by separators or case only."""
    try:
        st = struct(holder)
    except KeyError:
        return ""
    folded = key.replace("_", "").replace("-", "").lower()
    for field in st.fields:
        if field.xml == key or field.tf.replace("_", "") == folded or \
                field.xml.replace("-", "").replace("_", "").lower() == folded:
            return f"; write {field.tf}"
    import difflib

    close = difflib.get_close_matches(key, [f.tf for f in st.fields], n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""


def _dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


def _line(block: hcl.Block, path: tuple[str | int, ...]) -> int:
    """The line of the deepest attribute, object or list item on `path` that the file has."""
    line = block.line
    items: dict[str, hcl.Item] | None = block.attrs
    value: hcl.Value | None = None
    for key in path:
        if isinstance(key, int):
            if value is None or value.kind != "tup" or not 0 <= key < len(value.elems):
                break
            value = value.elems[key]
            line = value.line
            items = value.items if value.kind == "obj" else None
            continue
        if items is None or key not in items:
            break
        item = items[key]
        line = item.line
        value = item.value
        items = value.items if value.kind == "obj" else None
    return line


class _OldPlacer:
    """An old-schema finding goes on the attribute or block that wrote its element (`memory`, the
    `disk {}` block of that disk), else on the resource; its advice is always the XSLT."""

    def __init__(self, source: str, block: hcl.Block, where: dict[int, int]) -> None:
        self.source = source
        self.block = block
        self.where = where

    def __call__(self, code: str, element: Any, domain: Any, fix: Any = None) -> Placement:
        node = element
        while node is not None:
            line = self.where.get(_line_of(node))
            if line is not None:
                return Placement(self.source, line, "xml.xslt", XSLT)
            node = node.getparent()
        return Placement(self.source, self.block.line, "xml.xslt", XSLT)

    takes_fix = True


class _Placer:
    """Places a finding of the rendered domain on the resource: the attribute that writes the
    element (or the deepest object on its path the file has), and the rule's XML fix as the
    attribute paths that write the same XML."""

    takes_fix = True

    def __init__(self, source: str, index: int, block: hcl.Block, body: dict[str, Any], where: dict[int, Line],
                 shared: bool, withheld: str | None = None, owner: str | None = None) -> None:
        # the resource as advice names it: its address in a plan, `libvirt_domain.label` in HCL
        self.owner = owner or f"{RESOURCE}.{block.labels[1] if len(block.labels) > 1 else '?'}"
        self.withheld = withheld  # why no fix of this definition is written (a module's, see workspace)
        self.source = source
        self.index = index
        self.block = block
        self.body = body
        self.where = where
        self.shared = shared

    def _at(self, element: etree._Element | None) -> Line:
        node = element
        while node is not None:
            found = self.where.get(_line_of(node))
            if found is not None:
                return found
            node = node.getparent()
        return Line((), "Domain")

    def __call__(self, code: str, element: etree._Element | None, domain: Domain, fix: Fix | None = None) -> Placement:
        at = self._at(element)
        path = (*at.path, at.flat) if at.flat else at.path
        edits: list[SourceEdit] = []
        why = None
        if fix is not None and fix.edits:
            try:
                for path_, value in self._translate(fix.edits):
                    edits.append(SourceEdit(self.source, self.index, path_, value))
            except _NoAttribute as exc:
                edits, why = [], str(exc)
            if edits and self.withheld:
                field = _dotted(edits[0].path).replace(f".{APPEND}", "[+]")
                line = _line(self.block, edits[0].path)
                return Placement(self.source, line, field, f"{_advice(edits)} ({self.withheld})")
        field = _dotted(edits[0].path if edits else path) or RESOURCE
        field = field.replace(f".{APPEND}", "[+]")
        advice = f"set {field} in {self.owner}"
        if edits:
            advice = _advice(edits)
            if self.shared:
                advice += " (one definition for every instance: the fix changes them all)"
        elif why:
            advice += f" ({why})"
        line = _line(self.block, edits[0].path if edits else path)
        return Placement(self.source, line, field, advice, tuple(edits) or None)

    # -- the rule's XML edits as attribute paths ------------------------------------------------------

    def _translate(self, xml_edits: tuple[Any, ...]) -> list[tuple[tuple[str | int, ...], object]]:
        out: list[tuple[tuple[str | int, ...], object]] = []
        for edit in xml_edits:
            if isinstance(edit, SetAttrs):
                at = self._at_exact(edit.element)
                for attr, value in edit.attrs:
                    path, converted = self._attr_path(at, attr, value)
                    if value is not None:
                        out.append((path, converted))
                    elif _get(self.body, path) is not None:  # an attribute the file does not set: nothing to do
                        out.append((path, REMOVE))
            elif isinstance(edit, Ensure):
                out += self._ensure(edit)
            elif isinstance(edit, SetText):
                at = self._at_exact(edit.element)
                if not at.flat:
                    raise _NoAttribute("no attribute writes that text")
                out.append(((*at.path, at.flat), _convert(struct(at.struct or "Domain").by_tf[at.flat], edit.text)))
            elif isinstance(edit, Remove):
                at = self._at_exact(edit.element)
                if not at.path and not at.flat:
                    raise _NoAttribute("no single attribute writes that element")
                if at.flat:  # <model fallback=…>qemu64</model>: cpu.model and the attributes flattened beside it
                    flat = [f.tf for f in struct(at.struct or "Domain").fields if f.flat_of == at.flat]
                    out += [((*at.path, tf), REMOVE) for tf in (at.flat, *flat)
                            if _get(self.body, (*at.path, tf)) is not None]
                else:
                    out.append((at.path, REMOVE))
        return out

    def _at_exact(self, element: etree._Element) -> Line:
        found = self.where.get(_line_of(element))
        if found is None:
            raise _NoAttribute("the element was not written by an attribute")
        return found

    def _attr_path(self, at: Line, attr: str, value: str | None) -> tuple[tuple[str | int, ...], object]:
        st = struct(at.struct) if at.struct else None
        if st is None:
            raise _NoAttribute("no attribute writes that XML attribute")
        if at.flat:
            for flat in st.fields:
                if flat.flat_of == at.flat and flat.flat_attr == attr:
                    return (*at.path, flat.tf), _convert(flat, value)
            raise _NoAttribute(f"no attribute writes {attr}")
        field = _attr_field(st, attr)
        if field is not None:
            return (*at.path, field.tf), _convert(field, value)
        if at.branch is not None:
            branch_field = _attr_field(struct(at.branch[1]), attr)
            if branch_field is not None:
                return (*at.path, at.branch[0], branch_field.tf), _convert(branch_field, value)
        raise _NoAttribute(f"no attribute writes {attr}")

    def _ensure(self, edit: Ensure) -> list[tuple[tuple[str | int, ...], object]]:
        at = self._at_exact(edit.parent)
        if at.struct is None or at.flat:
            raise _NoAttribute("no attribute holds that element")
        st: Struct = struct(at.struct)
        path: tuple[str | int, ...] = at.path
        current: Any = _get(self.body, path)
        steps = edit.steps
        for number, step in enumerate(steps):
            last = number == len(steps) - 1
            field = _element_field(st, step.tag)
            if field is None:
                raise _NoAttribute(f"no attribute writes <{step.tag}>")
            if field.presence:
                if not last or edit.attrs or edit.text is not None:
                    raise _NoAttribute(f"<{step.tag}> takes no content in the schema")
                return [((*path, field.tf), True)]
            if field.value:
                if not last:
                    raise _NoAttribute(f"<{step.tag}> holds no element")
                found = [((*path, field.tf), _convert(field, edit.text))] if edit.text is not None else []
                for attr, value in edit.attrs:
                    flat = next((f for f in st.fields if f.flat_of == field.tf and f.flat_attr == attr), None)
                    if flat is None:
                        raise _NoAttribute(f"no attribute writes {step.tag}/@{attr}")
                    found.append(((*path, flat.tf), _convert(flat, value)))
                return found
            if field.struct is None:
                if not last or edit.attrs:
                    raise _NoAttribute(f"<{step.tag}> holds no element")
                return [((*path, field.tf), _convert(field, edit.text))]
            sub = struct(field.struct)
            key = {a: v for a, v in step.key}
            if field.list:
                items = current.get(field.tf) if isinstance(current, dict) else None
                index = None
                if isinstance(items, list) and not (edit.new and last):
                    index = next((i for i, item in enumerate(items) if isinstance(item, dict) and
                                  all(_xml_of(sub, item, a) == v for a, v in key.items())), None)
                if index is None:  # a new item: its key attributes and, when last, the edit's content
                    new = {_attr_field_or_fail(sub, a).tf: _convert(_attr_field_or_fail(sub, a), v)
                           for a, v in key.items()}
                    rest = steps[number + 1:]
                    if rest:
                        raise _NoAttribute("a new list item with nested content")
                    for attr, value in edit.attrs:
                        af = _attr_field_or_fail(sub, attr)
                        new[af.tf] = _convert(af, value)
                    return [((*path, field.tf, APPEND), new)]
                path = (*path, field.tf, index)
                current = items[index] if isinstance(items, list) else None
            else:
                path = (*path, field.tf)
                current = current.get(field.tf) if isinstance(current, dict) else None
                for attr, value in key.items():  # a step's key on a single element: its attributes
                    af = _attr_field_or_fail(sub, attr)
                    if not isinstance(current, dict) or _xml_of(sub, current, attr) != value:
                        raise _NoAttribute(f"<{step.tag} {attr}='{value}'> is not the element there")
                    del af
            st = sub
        leaves: list[tuple[tuple[str | int, ...], object]] = []
        for attr, value in edit.attrs:
            af = _attr_field_or_fail(st, attr)
            leaves.append(((*path, af.tf), _convert(af, value)))
        if edit.text is not None:
            raise _NoAttribute("no attribute writes that text")
        if not leaves:
            leaves.append((path, {}))
        return leaves


def _advice(edits: list[SourceEdit]) -> str:
    return ", ".join(f"remove {_dotted(e.path)}" if e.value is REMOVE else
                     f"set {_dotted(e.path).replace('.' + APPEND, '[+]')} = {_said(e.value)}" for e in edits)


class _NoAttribute(Exception):
    pass


def _attr_field(st: Struct, attr: str) -> Field | None:
    return next((f for f in st.fields if f.attr and f.xml == attr and f.flat_of is None), None)


def _attr_field_or_fail(st: Struct, attr: str) -> Field:
    field = _attr_field(st, attr)
    if field is None:
        raise _NoAttribute(f"no attribute writes @{attr}")
    return field


def _element_field(st: Struct, tag: str) -> Field | None:
    return next((f for f in st.fields if not f.attr and f.xml == tag and f.flat_of is None), None)


def _xml_of(st: Struct, item: dict[str, Any], attr: str) -> str | None:
    field = _attr_field(st, attr)
    if field is None:
        return None
    from vmtune.stacks.terraform.render import _scalar

    value = item.get(field.tf)
    return None if value is None or isinstance(value, hcl.Unknown) else _scalar(field, value)


def _convert(field: Field, text: str | None) -> object:
    if text is None:
        return None
    if field.bool is not None:
        return text == field.bool[0]
    if field.type == "Int64":
        try:
            return int(text)
        except ValueError:
            raise _NoAttribute(f"{field.tf} takes a number") from None
    return text


def _get(body: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    current: Any = body
    for key in path:
        if isinstance(key, int):
            current = current[key] if isinstance(current, list) and 0 <= key < len(current) else None
        else:
            current = current.get(key) if isinstance(current, dict) else None
    return current


def _said(value: object) -> str:
    from vmtune.stacks.terraform.hcledit import _hcl

    return _hcl(value, "")


def _line_of(element: Any) -> int:
    line = getattr(element, "sourceline", None)
    return line if isinstance(line, int) else 0
