"""What the OpenStack front end reads, as plain objects: flavors, images and nova.conf options,
each remembering where it was written (file, document, line of the object and of each key), so
a finding can point at the extra spec or property to change, or at the mapping it belongs in.
"""

from __future__ import annotations

# How an object was given: its form decides how a cure is applied. Files kept in a repository
# (Ansible tasks, flavor YAML) are edited in place; printed CLI output is not a source, so the
# cure is the `openstack ... set` command instead.
ANSIBLE = "ansible"  # an openstack.cloud.compute_flavor / image task
CLI = "cli"  # `openstack flavor show/list`, `openstack image show` output (-f json|yaml)
REPO = "repo"  # a flavor/image definition kept in a repository (plain YAML/JSON, deployment values)
SYNTHETIC = "synthetic"  # not in the input: the empty image or the smallest flavor of a lone object


class Flavor:
    """A nova flavor: sizes and extra specs (strings, as nova stores them)."""

    __slots__ = ("disk", "doc", "ephemeral", "form", "key_lines", "line", "name", "ram", "source", "spec_path",
                 "specs", "specs_line", "swap", "vcpus")

    def __init__(self, name: str, vcpus: int, ram: int, disk: int = 0, ephemeral: int = 0, swap: int = 0,
                 specs: dict[str, str] | None = None, source: str = "", line: int = 1, form: str = CLI,
                 doc: int = 0, spec_path: tuple[str | int, ...] | None = None, specs_line: int | None = None,
                 key_lines: dict[str, int] | None = None) -> None:
        self.name = name
        self.vcpus = vcpus
        self.ram = ram  # MiB
        self.disk = disk  # GiB
        self.ephemeral = ephemeral
        self.swap = swap  # MiB
        self.specs = specs or {}
        self.source = source
        self.line = line  # the object's first line
        self.form = form
        self.doc = doc  # document index in the source
        self.spec_path = spec_path  # path of the extra specs mapping from the document root (edits)
        self.specs_line = specs_line  # line of that mapping's key, when written
        self.key_lines = key_lines or {}  # extra spec -> line


class Image:
    """A glance image: its properties (hw_*, os_type, ...) as written."""

    __slots__ = ("doc", "form", "key_lines", "line", "min_disk", "min_ram", "name", "prop_path", "props",
                 "props_line", "source")

    def __init__(self, name: str, props: dict[str, object] | None = None, source: str = "", line: int = 1,
                 form: str = CLI, doc: int = 0, prop_path: tuple[str | int, ...] | None = None,
                 props_line: int | None = None, key_lines: dict[str, int] | None = None, min_ram: int = 0,
                 min_disk: int = 0) -> None:
        self.name = name
        self.props = props or {}
        self.source = source
        self.line = line
        self.form = form
        self.doc = doc
        self.prop_path = prop_path  # path of the properties mapping, or of the image object itself
        self.props_line = props_line
        self.key_lines = key_lines or {}
        self.min_ram = min_ram
        self.min_disk = min_disk


EMPTY_IMAGE_NAME = "(no image properties)"


def empty_image() -> Image:
    return Image(EMPTY_IMAGE_NAME, {}, form=SYNTHETIC)


class NovaConf:
    """Options of a nova.conf: (section, option) -> value (sections lower-case, [DEFAULT] as given),
    with the line of each option and of each section header."""

    __slots__ = ("lines", "section_lines", "source", "values")

    def __init__(self, values: dict[tuple[str, str], str] | None = None, source: str = "",
                 lines: dict[tuple[str, str], int] | None = None, section_lines: dict[str, int] | None = None) -> None:
        self.values = values or {}
        self.source = source
        self.lines = lines or {}
        self.section_lines = section_lines or {}

    def get(self, section: str, option: str, default: str | None = None) -> str | None:
        return self.values.get((section, option), default)
