"""Recognise and read OpenStack compute definitions from parsed YAML/JSON documents and nova.conf.

Forms read (shapes from python-openstackclient's compute/v2/flavor.py and image/v2/image.py,
see fixtures/stacks/openstack/README.md):
- `openstack flavor show -f json|yaml`: one mapping with name, vcpus, ram, disk, swap,
  `OS-FLV-EXT-DATA:ephemeral` and `properties` (the extra specs);
- `openstack flavor list --long -f json|yaml`: a list of mappings with ID, Name, RAM, Disk,
  Ephemeral, VCPUs, Swap and Properties;
- `openstack image show -f json|yaml`: a mapping with disk_format/container_format and
  `properties` (newer clients flatten every property into it; older ones also print hw_* keys
  at the top level);
- Ansible tasks `openstack.cloud.compute_flavor` (`compute_flavor`, `os_nova_flavor`) and
  `openstack.cloud.image` (`os_image`), in plays (tasks, pre_tasks, post_tasks, handlers, blocks)
  or task lists;
- nova.conf (INI), read by a bounded line parser that keeps the line of every option.

`properties` may be a mapping or the older string form `key='value', key2='value2'` (OSC's
format_dict before cliff's DictColumn): parsed by `parse_property_string`, which refuses what is
not that form instead of guessing.
"""

from __future__ import annotations

import re
from typing import Any

from vmtune.errors import VmtuneError
from vmtune.stacks.openstack.model import ANSIBLE, CLI, REPO, Flavor, Image, NovaConf

FLAVOR_MODULES = frozenset({"openstack.cloud.compute_flavor", "compute_flavor", "os_nova_flavor",
                            "openstack.cloud.os_nova_flavor"})
IMAGE_MODULES = frozenset({"openstack.cloud.image", "os_image", "openstack.cloud.os_image"})
TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")
MAX_INI_LINES = 100_000
MAX_PROPERTIES = 10_000

# Extra spec namespaces nova's validator knows (nova/api/validation/extra_specs/*.py).
KNOWN_NAMESPACES = frozenset({"accel", "aggregate_instance_extra_specs", "capabilities", "hw", "hw_rng", "hw_video",
                              "os", "pci_passthrough", "powervm", "quota", "resources", "trait", "vmware", "traits",
                              "group_policy", "hide_hypervisor_id", "hw_watchdog_action", "sev"})


class Found:
    """What one file holds."""

    def __init__(self) -> None:
        self.flavors: list[Flavor] = []
        self.images: list[Image] = []
        self.confs: list[NovaConf] = []


# -- the string form of properties --------------------------------------------------------------------

def parse_property_string(text: str, source: str, line: int | None) -> dict[str, str]:
    """`key='value', key2='value2'` (osc_lib format_dict): values quoted with ' (a ' inside a
    value is doubled by nobody, so the value ends at the quote followed by ", " or the end);
    unquoted values run to the next ", key=". Anything else is an error naming the file and line."""
    result: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        eq = text.find("=", i)
        if eq < 0:
            raise VmtuneError(f"properties: no '=' after {text[i:i + 30]!r} (expected key='value', ...)", source, line)
        key = text[i:eq].strip()
        if not key or "," in key or "'" in key:
            raise VmtuneError(f"properties: malformed key {key[:30]!r} (expected key='value', ...)", source, line)
        j = eq + 1
        if j < n and text[j] == "'":
            end = _closing_quote(text, j + 1)
            if end < 0:
                raise VmtuneError(f"properties: the value of {key!r} has no closing quote", source, line)
            value = text[j + 1:end]
            j = end + 1
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] != ",":
                raise VmtuneError(f"properties: unexpected text after the value of {key!r}", source, line)
        else:
            end = _next_entry(text, j)
            value = text[j:end].strip()
            j = end
        if key in result:
            raise VmtuneError(f"properties: {key!r} given twice", source, line)
        result[key] = value
        if len(result) > MAX_PROPERTIES:
            raise VmtuneError(f"properties: more than {MAX_PROPERTIES} entries", source, line)
        i = j + 1 if j < n and text[j] == "," else j
    return result


_AFTER_VALUE = re.compile(r"[ \t]*(?:,|$)")
_ENTRY = re.compile(r"[ \t]*[^,'\s=][^,'\s=]*=")


def _closing_quote(text: str, start: int) -> int:
    """The quote that ends a value: followed by optional blanks and then the end of the text or
    a ',' that starts another `key=` (so "a='x, y', b='it's'" keeps commas and quotes inside
    values). Each test looks a bounded way ahead (regexes from a position, no slices): linear
    in the text."""
    k = text.find("'", start)
    while k >= 0:
        after = _AFTER_VALUE.match(text, k + 1)
        if after is not None:
            end = after.end()
            if end == len(text) and not text[k + 1:end].strip(" \t,"):
                return k
            if text[end - 1:end] == "," and _ENTRY.match(text, end):
                return k
        k = text.find("'", k + 1)
    return -1


def _starts_entry(text: str, pos: int) -> bool:
    return _ENTRY.match(text, pos) is not None


def _next_entry(text: str, start: int) -> int:
    k = text.find(",", start)
    while k >= 0:
        if _starts_entry(text, k + 1):
            return k
        k = text.find(",", k + 1)
    return len(text)


# -- values -------------------------------------------------------------------------------------------

def _int_field(node: Any, field: str, what: str, source: str, default: int | None = None) -> int:
    value = None if node is None else node.value
    line = None if node is None else node.line
    if value is None or value == "":
        if default is None:
            raise VmtuneError(f"{what}: {field} is missing", source, line)
        return default
    if isinstance(value, bool):
        raise VmtuneError(f"{what}: {field} must be an integer, not {value!r}", source, line)
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("+").isdigit():
        number = int(value.strip())
    else:
        hint = " (a Jinja expression: render the playbook's variables first)" if "{{" in str(value) else ""
        raise VmtuneError(f"{what}: {field} must be an integer, not {str(value)[:40]!r}{hint}", source, line)
    if number < 0 or number > 1_000_000_000:
        raise VmtuneError(f"{what}: {field}={number} is out of range", source, line)
    return number


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _mapping(node: Any, what: str, source: str) -> tuple[dict[str, str], dict[str, int]]:
    """A properties/extra_specs value: a mapping, or the string form. Values as strings."""
    if node is None or node.value is None or node.value == "":
        return {}, {}
    if isinstance(node.value, dict):
        values = {str(k): _text(v) for k, v in node.value.items()}
        lines = {str(k): child.key_line for k, child in node.items()}
        return values, lines
    if isinstance(node.value, str):
        values = parse_property_string(node.value, source, node.line)
        return values, {k: node.line for k in values}
    raise VmtuneError(f"{what}: properties must be a mapping or key='value' text", source, node.line)


# -- recognising documents ------------------------------------------------------------------------

def read_docs(docs: list[Any], source: str) -> Found:
    found = Found()
    for doc in docs:
        root = doc.root
        value = root.value
        before = len(found.flavors) + len(found.images)
        if isinstance(value, dict):
            _read_mapping(root, doc.index, (), source, found)
        elif isinstance(value, list):
            _read_list(root, doc.index, (), source, found)
        if len(found.flavors) + len(found.images) == before:
            _read_nested(root, doc.index, source, found)
    return found


def _read_nested(root: Any, doc: int, source: str, found: Found) -> None:
    """Flavors written inside other YAML (deployment values such as openstack-helm's
    `bootstrap.structured.flavors.options.m1_tiny: {name, vcpus, ram, disk}`): a mapping with a
    name, vcpus and ram below a key that says `flavors`, read as a flavor definition kept in a
    repository (edited in place). Other YAML with such keys is left alone."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        children = node.children
        if isinstance(children, dict):
            under_flavors = any(isinstance(k, str) and "flavors" in k.lower() for k in path)
            if under_flavors and all(k in children for k in ("name", "vcpus", "ram")):
                found.flavors.append(_flavor_show(node, doc, path, source))
                continue
            stack.extend((child, (*path, key)) for key, child in reversed(list(children.items())))
        elif isinstance(children, list):
            stack.extend((child, (*path, index)) for index, child in reversed(list(enumerate(children))))


def _read_mapping(node: Any, doc: int, path: tuple[str | int, ...], source: str, found: Found) -> None:
    value = node.value
    if "vcpus" in value and "ram" in value and "name" in value:
        found.flavors.append(_flavor_show(node, doc, path, source))
    elif ("disk_format" in value or "container_format" in value) and "name" in value:
        found.images.append(_image_show(node, doc, path, source))
    elif any(k in value for k in TASK_LISTS) or any(k in value for k in FLAVOR_MODULES | IMAGE_MODULES):
        _read_task(node, doc, path, source, found)


def _read_list(node: Any, doc: int, path: tuple[str | int, ...], source: str, found: Found) -> None:
    children = node.children or []
    for index, child in enumerate(children):
        value = child.value
        if not isinstance(value, dict):
            continue
        if "VCPUs" in value and "RAM" in value and "Name" in value:
            found.flavors.append(_flavor_row(child, doc, (*path, index), source))
        else:
            _read_mapping(child, doc, (*path, index), source, found)


def _read_task(node: Any, doc: int, path: tuple[str | int, ...], source: str, found: Found) -> None:
    for key, child in node.items():
        if key in TASK_LISTS and isinstance(child.value, list):
            for index, task in enumerate(child.children or []):
                if isinstance(task.value, dict):
                    _read_task(task, doc, (*path, key, index), source, found)
        elif key in FLAVOR_MODULES:
            if not _absent(child):  # a task that deletes the flavor defines nothing to check
                found.flavors.append(_flavor_task(child, doc, (*path, key), source, key))
        elif key in IMAGE_MODULES and not _absent(child):
            found.images.append(_image_task(child, doc, (*path, key), source, key))


def _name(node: Any, what: str, source: str, line: int, key: str = "name") -> str:
    name_node = node.get(key)
    if name_node is None or not isinstance(name_node.value, (str, int)) or name_node.value == "":
        raise VmtuneError(f"{what} without a {key}", source, line)
    return str(name_node.value)


def _flavor_show(node: Any, doc: int, path: tuple[str | int, ...], source: str) -> Flavor:
    name = _name(node, "flavor", source, node.line)
    what = f"flavor {name}"
    specs_node = node.get("properties") or node.get("extra_specs")
    specs, lines = _mapping(specs_node, what, source)
    form = CLI if any(k in node.value for k in _CLI_FLAVOR_KEYS) else REPO
    written_as_properties = node.get("properties") is not None and node.get("extra_specs") is None
    specs_key = "properties" if form == CLI or written_as_properties else "extra_specs"
    return Flavor(name, _positive(node.get("vcpus"), "vcpus", what, source),
                  _int_field(node.get("ram"), "ram", what, source),
                  _int_field(node.get("disk"), "disk", what, source, 0),
                  _int_field(node.get("OS-FLV-EXT-DATA:ephemeral") or node.get("ephemeral"), "ephemeral", what,
                             source, 0),
                  _int_field(node.get("swap"), "swap", what, source, 0), specs, source, node.line, form, doc,
                  (*path, specs_key), specs_node.key_line if specs_node is not None else None, lines)


# Keys only the client prints: a mapping with one is printed output, not a definition in a repository.
_CLI_FLAVOR_KEYS = ("OS-FLV-EXT-DATA:ephemeral", "OS-FLV-DISABLED:disabled", "os-flavor-access:is_public",
                    "rxtx_factor", "id")
_CLI_IMAGE_KEYS = ("checksum", "status", "created_at", "updated_at", "file", "schema", "id")


def _flavor_row(node: Any, doc: int, path: tuple[str | int, ...], source: str) -> Flavor:
    name = _name(node, "flavor", source, node.line, "Name")
    return _flavor(node, name, _LIST_KEYS, CLI, doc, path, source)


# The keys of a flavor's fields where it is written: vcpus, ram, disk, ephemeral, swap, extra specs.
_LIST_KEYS = ("VCPUs", "RAM", "Disk", "Ephemeral", "Swap", "Properties")  # `openstack flavor list --long`
_TASK_KEYS = ("vcpus", "ram", "disk", "ephemeral", "swap", "extra_specs")  # Ansible compute_flavor


def _flavor(node: Any, name: str, keys: tuple[str, ...], form: str, doc: int, path: tuple[str | int, ...],
            source: str) -> Flavor:
    """A flavor from the mapping that holds its fields under `keys` (each form spells them its way)."""
    vcpus, ram, disk, ephemeral, swap, extra = keys
    what = f"flavor {name}"
    specs_node = node.get(extra)
    specs, lines = _mapping(specs_node, what, source)
    return Flavor(name, _positive(node.get(vcpus), vcpus, what, source),
                  _int_field(node.get(ram), ram, what, source),
                  _int_field(node.get(disk), disk, what, source, 0),
                  _int_field(node.get(ephemeral), ephemeral, what, source, 0),
                  _int_field(node.get(swap), swap, what, source, 0), specs, source, node.line, form, doc,
                  (*path, extra), specs_node.key_line if specs_node is not None else None, lines)


MAX_VCPUS = 4096  # KVM's and QEMU's limit: a flavor beyond it boots nowhere


def _positive(node: Any, field: str, what: str, source: str) -> int:
    number = _int_field(node, field, what, source)
    line = node.line if node is not None else None
    if number < 1:
        raise VmtuneError(f"{what}: {field} must be at least 1", source, line)
    if number > MAX_VCPUS:
        raise VmtuneError(f"{what}: {field}={number} is more than {MAX_VCPUS} (KVM's limit): no host boots it",
                          source, line)
    return number


def _flavor_task(node: Any, doc: int, path: tuple[str | int, ...], source: str, module: str) -> Flavor:
    if not isinstance(node.value, dict):
        raise VmtuneError(f"{module}: write the task's arguments as a mapping (name:, vcpus:, ram:, extra_specs:)",
                          source, node.line)
    name = _name(node, module + " task", source, node.line)
    return _flavor(node, name, _TASK_KEYS, ANSIBLE, doc, path, source)


def _absent(node: Any) -> bool:
    state = node.get("state") if isinstance(node.value, dict) else None
    return state is not None and state.value == "absent"


def _image_show(node: Any, doc: int, path: tuple[str | int, ...], source: str) -> Image:
    name = _name(node, "image", source, node.line)
    what = f"image {name}"
    props_node = node.get("properties")
    props, lines = _mapping(props_node, what, source)
    for key, child in node.items():  # properties some clients print at the top level
        if key.startswith(("hw_", "os_", "img_")) and key not in props:
            props[key] = _text(child.value)
            lines[key] = child.key_line
    form = CLI if any(k in node.value for k in _CLI_IMAGE_KEYS) else REPO
    return Image(name, dict(props), source, node.line, form, doc, (*path, "properties"),
                 props_node.key_line if props_node is not None else None, lines,
                 _int_field(node.get("min_ram"), "min_ram", what, source, 0),
                 _int_field(node.get("min_disk"), "min_disk", what, source, 0))


def _image_task(node: Any, doc: int, path: tuple[str | int, ...], source: str, module: str) -> Image:
    if not isinstance(node.value, dict):
        raise VmtuneError(f"{module}: write the task's arguments as a mapping (name:, properties:)", source, node.line)
    name = _name(node, module + " task", source, node.line)
    what = f"image {name}"
    props_node = node.get("properties")
    props, lines = _mapping(props_node, what, source)
    return Image(name, dict(props), source, node.line, ANSIBLE, doc, (*path, "properties"),
                 props_node.key_line if props_node is not None else None, lines,
                 _int_field(node.get("min_ram"), "min_ram", what, source, 0),
                 _int_field(node.get("min_disk"), "min_disk", what, source, 0))


def unknown_namespaces(flavor: Flavor) -> list[tuple[str, int]]:
    """Extra specs whose namespace nova's validator does not know (it reports them; unknown
    keys in known namespaces it refuses, which vmtune leaves to nova)."""
    out = []
    for key in flavor.specs:
        namespace = key.split(":", 1)[0] if ":" in key else key
        numbered = namespace.startswith(("resources", "trait", "group_policy"))  # resources1:, trait2: ...
        base = namespace.rstrip("0123456789") if numbered else namespace
        if base not in KNOWN_NAMESPACES:
            out.append((key, flavor.key_lines.get(key, flavor.specs_line or flavor.line)))
    return out


# -- nova.conf ----------------------------------------------------------------------------------------

def ini_lines(text: str, keepends: bool = False) -> list[str]:
    """The lines oslo.config reads: split at LF, CR and CRLF only, as Python's universal newlines
    split the file it opens. str.splitlines also splits at VT, FF, FS-RS, NEL, U+2028 and U+2029:
    `#<VT>cpu_mode = host-passthrough` was a comment to nova and a setting to vmtune, which then
    judged (and fixed) a nova.conf nova does not read."""
    import io

    lines = io.StringIO(text, newline="").readlines()
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


def read_nova_conf(data: bytes, source: str) -> NovaConf:
    """oslo.config's INI dialect, bounded: `[section]`, `key = value` or `key: value`, comments
    with # or ;, continuation lines indented under an option. Sections are matched without case
    for [libvirt]/[compute] (oslo.config group names are lower-case); [DEFAULT] as written."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise VmtuneError("not UTF-8", source, data[:exc.start].count(b"\n") + 1) from None
    lines = ini_lines(text)
    if len(lines) > MAX_INI_LINES:
        raise VmtuneError(f"more than {MAX_INI_LINES:,} lines: not a nova.conf vmtune reads", source)
    conf = NovaConf(source=source)
    section: str | None = None
    last: tuple[str, str] | None = None
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if raw[0] in " \t" and last is not None:  # a continuation of the previous value
            conf.values[last] = (conf.values[last] + "\n" + stripped).strip()
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]") or len(stripped) < 3:
                raise VmtuneError(f"malformed section header {stripped[:40]!r}", source, number)
            name = stripped[1:-1].strip()
            section = name if name == "DEFAULT" else name.lower()
            conf.section_lines.setdefault(section, number)
            last = None
            continue
        sep = min((i for i in (stripped.find("="), stripped.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise VmtuneError(f"not 'option = value': {stripped[:40]!r}", source, number)
        if section is None:
            raise VmtuneError("option before any [section]", source, number)
        key = stripped[:sep].strip()
        value = stripped[sep + 1:].strip()
        conf.values[(section, key)] = value  # oslo.config: the last one wins for a plain option
        conf.lines[(section, key)] = number
        last = (section, key)
    return conf


