"""The OpenStack front end (vmtune/stacks/openstack): every input form read with the lines a
finding points at, flavor × image pairing, the domain nova 34.0.0 writes for them (agreeing
with nova's own XML on the oracle cases), findings placed on the extra spec / image property /
nova.conf option that cures them, and each row of nova's knob table proven by rendering."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from vmtune.errors import VmtuneError
from vmtune.facts.domain import Domain
from vmtune.rules.base import Severity
from vmtune.stacks.frontend import StackFile, check_rendered, read_file
from vmtune.stacks.knob_table import Knob, rows
from vmtune.stacks.openstack import Settings
from vmtune.stacks.openstack import frontend as nova
from vmtune.stacks.openstack.inputs import parse_property_string, read_nova_conf
from vmtune.stacks.openstack.model import CLI, Flavor, Image, NovaConf, empty_image
from vmtune.stacks.openstack.novaconf import set_option, set_options
from vmtune.stacks.openstack.render import render as render_xml

from conftest import FIXTURES
from helpers import findings, options

HERE = FIXTURES / "stacks" / "openstack"
ORACLE = FIXTURES / "stacks" / "nova" / "oracle"


def _file(name: str, data: bytes | None = None) -> StackFile:
    return read_file(name, data if data is not None else (HERE / name).read_bytes())


def _render(*names: str, pairs: list[tuple[str, str]] | None = None) -> list[Any]:
    files = [_file(str(HERE / n)) if not n.startswith("/") else _file(n) for n in names]
    rendered, _claimed = nova.render(files, Settings(pairs))
    return rendered


def _placed(item: Any, opts: Any = None) -> dict[str, Any]:
    _domain, placed = check_rendered(item, opts or options())
    return {p.finding.rule.code: p for p in placed}


# -- every input form -----------------------------------------------------------------------------

def test_flavor_show_json_and_yaml_are_read_with_the_line_of_each_extra_spec() -> None:
    sources, claimed = nova.read([_file(str(HERE / "flavor-show.json")), _file(str(HERE / "flavor-show.yaml"))])
    xlarge, pinned = sources.flavors
    assert (xlarge.name, xlarge.vcpus, xlarge.ram, xlarge.disk, xlarge.specs) == (
        "m1.xlarge", 16, 16384, 80, {"hw:cpu_sockets": "1"})
    assert xlarge.key_lines == {"hw:cpu_sockets": 10} and xlarge.specs_line == 9 and xlarge.form == CLI
    assert (pinned.name, pinned.vcpus, pinned.specs) == ("c1.pinned", 4, {"hw:cpu_policy": "dedicated",
                                                                         "hw:numa_nodes": "1"})
    assert pinned.key_lines == {"hw:cpu_policy": 9, "hw:numa_nodes": 10}
    assert len(claimed) == 2


def test_flavor_list_long_in_both_property_forms() -> None:
    sources, _ = nova.read([_file(str(HERE / "flavor-list-long.json")), _file(str(HERE / "flavor-list-long-old.yaml"))])
    by_name = {f.name: f for f in sources.flavors}
    assert set(by_name) == {"m1.tiny", "m1.xlarge", "c1.rt", "m1.medium"}
    assert by_name["m1.xlarge"].specs == {"hw:cpu_sockets": "1", "hw:vif_multiqueue_enabled": "true"}
    assert by_name["m1.xlarge"].key_lines["hw:vif_multiqueue_enabled"] == 26
    assert by_name["c1.rt"].specs == {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes",
                                      "hw:cpu_realtime_mask": "^0", "hw:mem_page_size": "large"}
    assert by_name["c1.rt"].key_lines["hw:cpu_realtime"] == 6  # the string's line
    assert by_name["m1.medium"].specs == {} and by_name["m1.medium"].swap == 0  # Swap: '' (older clients)


def test_image_show_reads_properties_and_top_level_hw_keys() -> None:
    sources, _ = nova.read([_file(str(HERE / "image-show.json")), _file(str(HERE / "image-show.yaml"))])
    win, ubuntu = sources.images
    assert (win.name, win.min_ram, win.min_disk) == ("win2k22", 2048, 40)
    assert win.props["os_type"] == "windows" and win.props["hw_qemu_guest_agent"] == "yes"
    assert win.key_lines["os_type"] == 17 and win.props_line == 12
    assert ubuntu.props == {"hw_disk_bus": "virtio", "os_distro": "ubuntu", "os_hash_algo": "sha512",
                            "hw_vif_multiqueue_enabled": "true"}
    assert ubuntu.key_lines["hw_vif_multiqueue_enabled"] == 6


def test_ansible_plays_and_task_lists_with_every_module_name() -> None:
    sources, _ = nova.read([_file(str(HERE / "flavors-playbook.yaml")), _file(str(HERE / "tasks.yaml"))])
    assert [(f.name, f.form, f.spec_path) for f in sources.flavors] == [
        ("m1.nginx", "ansible", (0, "tasks", 0, "openstack.cloud.compute_flavor", "extra_specs")),
        ("c2.pinned", "ansible", (0, "compute_flavor", "extra_specs")),
        ("m1.legacy", "ansible", (2, "os_nova_flavor", "extra_specs"))]
    assert [(i.name, i.props) for i in sources.images] == [
        ("win2k22", {"os_type": "windows", "hw_disk_bus": "virtio"}), ("centos9", {"hw_vif_model": "e1000"})]
    assert sources.flavors[0].line == 7 and sources.flavors[0].specs_line == 12


def test_an_ansible_task_that_deletes_a_flavor_defines_none() -> None:
    data = b"- openstack.cloud.compute_flavor:\n    name: old\n    state: absent\n"
    sources, claimed = nova.read([_file("gone.yaml", data)])
    assert sources.flavors == [] and claimed == set()


def test_flavor_definitions_kept_in_a_repository_are_edited_not_commanded() -> None:
    plain = b"name: m1.nginx\nvcpus: 16\nram: 16384\ndisk: 40\nextra_specs:\n  hw:cpu_sockets: '1'\n"
    helm = (b"bootstrap:\n  structured:\n    flavors:\n      enabled: true\n      options:\n        m1_nginx:\n"
            b"          name: m1.nginx\n          ram: 16384\n          disk: 40\n          vcpus: 16\n")
    for name, data, path, line in (("flavor.yaml", plain, ("extra_specs", "hw:vif_multiqueue_enabled"), 5),
                                   ("values.yaml", helm, ("bootstrap", "structured", "flavors", "options", "m1_nginx",
                                                          "extra_specs", "hw:vif_multiqueue_enabled"), 7)):
        (item,) = nova.render([_file(name, data)])[0]
        placed = _placed(item)["NET001"]
        assert placed.finding.line == line and placed.edits[0].path == path and placed.edits[0].value == "true"
        assert "run:" not in (placed.finding.note or "")


def test_nova_conf_options_keep_their_lines() -> None:
    conf = read_nova_conf((HERE / "nova.conf").read_bytes(), "nova.conf")
    assert conf.values[("libvirt", "cpu_mode")] == "host-passthrough"
    assert conf.lines[("libvirt", "cpu_mode")] == 7 and conf.section_lines["compute"] == 9
    assert ("DEFAULT", "pointer_model") not in conf.values  # a comment


# -- the string form of properties ----------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("hw:cpu_policy='dedicated', hw:numa_nodes='2'", {"hw:cpu_policy": "dedicated", "hw:numa_nodes": "2"}),
    ("a='x, y', b='1'", {"a": "x, y", "b": "1"}),
    ("pci_passthrough:alias='gpu:1,nic:2'", {"pci_passthrough:alias": "gpu:1,nic:2"}),
    ("note='it's', b='2'", {"note": "it's", "b": "2"}),
    ("a=1, b=two", {"a": "1", "b": "two"}),
    ("", {}),
])
def test_the_older_string_form_of_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_property_string(text, "f.yaml", 3) == expected


@pytest.mark.parametrize("text, message", [
    ("hw:cpu_policy", "f.yaml:3: properties: no '=' after 'hw:cpu_policy' (expected key='value', ...)"),
    ("a='open", "f.yaml:3: properties: the value of 'a' has no closing quote"),
    ("=x", "f.yaml:3: properties: malformed key '' (expected key='value', ...)"),
    ("a='1', a='2'", "f.yaml:3: properties: 'a' given twice"),
])
def test_malformed_string_properties_are_one_line_with_file_and_line(text: str, message: str) -> None:
    with pytest.raises(VmtuneError) as caught:
        parse_property_string(text, "f.yaml", 3)
    assert str(caught.value) == message


@pytest.mark.parametrize("text", ["a='" + "x', " * 200_000 + "'", "a=" + "," * 200_000, "a='" + "'," * 200_000],
                         ids=["quotes-and-commas", "commas", "quote-comma"])
def test_string_properties_parse_in_linear_time(text: str) -> None:
    start = time.process_time()
    with contextlib.suppress(VmtuneError):
        parse_property_string(text, "f.yaml", 1)
    assert time.process_time() - start < 2.0  # 320 KB took 5.7 s when each quote sliced the rest of the text


# -- pairing --------------------------------------------------------------------------------------

def test_flavors_and_images_together_are_every_pair_named_flavor_times_image() -> None:
    rendered = _render("flavor-list-long.json", "image-show.json", "image-show.yaml")
    assert [r.name for r in rendered] == ["m1.tiny × win2k22", "m1.tiny × ubuntu-24.04", "m1.xlarge × win2k22",
                                          "m1.xlarge × ubuntu-24.04"]
    assert all(r.stack == "openstack" and r.release == "nova 34.0.0" for r in rendered)
    from vmtune.facts.domain import Domain

    assert {Domain.parse(r.xml, r.name).manager for r in rendered} == {"nova"}  # nova's metadata element


def test_named_pairs_only_and_unknown_names_are_said() -> None:
    rendered = _render("flavor-list-long.json", "image-show.json",
                       pairs=[("m1.xlarge", "win2k22"), ("m9.huge", "win2k22")])
    assert [r.name for r in rendered] == ["m1.xlarge × win2k22", "win2k22"]
    note = rendered[1].notes[0]
    assert note.code == "STK001" and "m9.huge" in note.message and "1 vCPU, 2048 MiB RAM, 40 GiB disk" in note.message


def test_an_image_alone_is_checked_with_the_smallest_flavor_it_fits_and_says_so() -> None:
    (item,) = _render("image-show.json")
    assert item.name == "win2k22" and item.os_family == "windows"
    assert [n.code for n in item.notes] == ["STK002"]
    assert item.notes[0].message == ("image win2k22 checked with the smallest flavor it fits: 1 vCPU, 2048 MiB RAM, "
                                     "40 GiB disk (min_ram 2048 MiB, min_disk 40 GiB); name a flavor with "
                                     "--pair FLAVOR:IMAGE")
    assert b"<memory>2097152</memory>" in item.xml and b"<vcpu>1</vcpu>" in item.xml


def test_a_product_beyond_the_pair_limit_asks_for_named_pairs() -> None:
    flavors = [Flavor(f"f{i}", 1, 512) for i in range(200)]
    images = [Image(f"i{i}") for i in range(101)]
    with pytest.raises(VmtuneError) as caught:
        nova.pairs(flavors, images)
    assert str(caught.value) == ("200 flavors × 101 images are more than 20,000 pairs: name the pairs to check with "
                                 "--pair FLAVOR:IMAGE")
    assert len(nova.pairs(flavors, images, [("f1", "i1")])) == 1


def test_pairs_function_without_images_uses_an_empty_image() -> None:
    flavor = Flavor("f", 2, 2048)
    ((f, image, notes),) = nova.pairs([flavor], [])
    assert f is flavor and image.props == {} and notes == []


# -- the seed incident ----------------------------------------------------------------------------

SEED_FLAVOR = b"""- name: nginx flavor
  openstack.cloud.compute_flavor:
    name: m1.nginx
    vcpus: 16
    ram: 16384
    disk: 40
"""
SEED_IMAGE = """- name: nginx image
  openstack.cloud.image:
    name: nginx
    filename: nginx.qcow2
    properties:
      os_distro: ubuntu
{extra}"""


def test_seed_incident_16_vcpus_single_queue_is_placed_on_the_image_property() -> None:
    files = [_file("flavors.yaml", SEED_FLAVOR), _file("images.yaml", SEED_IMAGE.format(extra="").encode())]
    (item,) = nova.render(files)[0]
    placed = _placed(item)["NET001"]
    assert placed.finding.severity is Severity.WARNING
    assert (placed.source, placed.finding.line) == ("images.yaml", 5)  # the properties mapping
    assert placed.finding.note.startswith("on the image nginx: hw_vif_multiqueue_enabled=true")
    (edit,) = placed.edits
    assert (edit.source, edit.doc, edit.path, edit.value) == (
        "images.yaml", 0, (0, "openstack.cloud.image", "properties", "hw_vif_multiqueue_enabled"), "true")
    cured = SEED_IMAGE.format(extra="      hw_vif_multiqueue_enabled: true\n").encode()
    (item,) = nova.render([files[0], _file("images.yaml", cured)])[0]
    assert "NET001" not in _placed(item)
    assert b'<driver name="vhost" queues="16"/>' in item.xml


def test_a_wrong_value_is_placed_on_its_own_line_and_a_missing_key_on_the_mapping() -> None:
    rendered = _render("tasks.yaml")
    item = next(r for r in rendered if r.name == "c2.pinned × centos9")
    placed = _placed(item)
    assert (placed["NET004"].source.endswith("tasks.yaml"), placed["NET004"].finding.line) == (True, 14)
    assert placed["NET004"].edits[0].path == (1, "os_image", "properties", "hw_vif_model")
    assert placed["NET004"].edits[0].value == "virtio"
    # a virtio NIC for 8 vCPUs would be single-queue (NET001): the cure asks for multiqueue too
    assert placed["NET004"].edits[1].path == (1, "os_image", "properties", "hw_vif_multiqueue_enabled")
    assert placed["NET004"].finding.note.startswith(
        "on the image centos9: hw_vif_model=virtio and hw_vif_multiqueue_enabled=true")
    assert placed["CPU004"].finding.line == 7  # extra_specs: hw:emulator_threads_policy is added there
    assert placed["CPU004"].edits[0].path == (0, "compute_flavor", "extra_specs", "hw:emulator_threads_policy")


@pytest.mark.parametrize("props, family", [({"os_type": "windows"}, "windows"), ({"os_distro": "win2k22"}, "windows"),
                                           ({"os_distro": "ubuntu"}, "linux"), ({"os_distro": "freebsd"}, None),
                                           ({}, None)])
def test_the_image_says_the_guest_os(props: dict[str, str], family: str | None) -> None:
    assert nova.image_os_family(Image("i", props)) == family


def test_printed_cli_output_gets_the_openstack_command_not_an_edit() -> None:
    (item,) = _render("flavor-show.json", str(HERE / "image-show.yaml").replace("image-show.yaml", "image-show.json"))
    placed = _placed(item)["NET001"]
    assert placed.edits == () and placed.source.endswith("image-show.json")
    assert placed.finding.note.startswith(
        "on the image win2k22: hw_vif_multiqueue_enabled=true; run: openstack image set --property "
        "hw_vif_multiqueue_enabled=true win2k22")


def test_command_quotes_names_for_the_shell() -> None:
    flavor = Flavor("gold; rm -rf ~", 16, 16384, source="f.json", form=CLI)
    item = nova.render_pair(flavor, empty_image())
    where = item.place("NET001", None, Domain.parse(item.xml, "x"))
    assert where.command == "openstack flavor set --property hw:vif_multiqueue_enabled=true 'gold; rm -rf ~'"


def test_nova_conf_cures_are_edits_of_the_given_nova_conf() -> None:
    files = [_file(str(HERE / "flavor-show.json")), _file(str(HERE / "nova.conf"))]
    (item,) = nova.render(files)[0]
    where = item.place("DSK005", None, Domain.parse(item.xml, "x"))
    assert where.source.endswith("nova.conf") and where.line == 5  # [libvirt]: hw_disk_discard is added there
    assert where.advice == "in nova.conf [libvirt]: hw_disk_discard=unmap"
    assert where.edits[0].path == ("libvirt", "hw_disk_discard")


def test_nova_conf_cures_without_a_nova_conf_say_where_the_cure_is() -> None:
    (item,) = _render("flavor-show.json")
    where = item.place("DSK005", None, Domain.parse(item.xml, "x"))
    assert where.edits is None and where.command is None and where.line == 1
    assert where.advice == ("in nova.conf [libvirt]: hw_disk_discard=unmap (in nova.conf on the compute hosts: the "
                            "cure is host-wide, not in this file)")


def test_findings_nova_has_no_knob_for_keep_their_severity_saying_so_on_the_object_concerned() -> None:
    """Issue 48: the cost is that of the XML nova generates; the note says nova has no knob."""
    (item,) = _render("flavor-show.yaml", "image-show.json")
    placed = _placed(item)
    assert placed["CLK002"].finding.severity is Severity.WARNING and placed["CLK002"].edits == ()
    assert str(placed["CLK002"].finding.note).endswith("(no nova knob)")
    assert placed["CLK002"].source.endswith("image-show.json") and placed["CLK002"].finding.line == 17  # os_type
    assert placed["CLK002"].finding.note.startswith("nova never writes Hyper-V stimer")
    assert placed["DSK003"].source.endswith("flavor-show.yaml") and placed["DSK003"].finding.line == 1


def test_windows_images_get_the_virtio_input_bus_as_advice_not_a_fix() -> None:
    (item,) = _render("flavor-show.yaml", "image-show.json")
    placed = _placed(item)["USB001"]
    assert placed.edits == () and "run:" not in placed.finding.note
    assert placed.finding.note.startswith("on the image win2k22: hw_input_bus=virtio once virtio-win's vioinput "
                                          "driver is installed in the image")


@pytest.mark.parametrize("specs", [{"hw:numa_nodes": "1"}, {"hw:numa_nodes": "2"}, {"hw:mem_page_size": "large"},
                                   {"hw:numa_nodes": "2", "hw:mem_page_size": "2048"}], ids=str)
def test_shared_cpu_flavors_placed_on_numa_cells_get_no_isolation_finding(specs: dict[str, str]) -> None:
    """nova pins such a flavor's vCPUs to their whole NUMA cell, the emulator and I/O thread to the
    same CPUs: placement, no CPU of a vCPU's own (as on nova's XML, tests/test_stacks.py)."""
    flavor = Flavor("numa", 4, 4096, specs=specs, source="f.json", form=CLI)
    item = nova.render_pair(flavor, empty_image())
    assert b"<vcpupin" in item.xml
    assert not {"CPU004", "CPU005"} & set(_placed(item))


def test_a_mixed_policy_flavor_gets_the_isolate_fix_nova_accepts_for_it() -> None:
    """hardware.numa_get_constraints refuses emulator isolation only for shared CPUs: a mixed flavor's
    dedicated vCPUs share their CPUs with the emulator threads until it is set."""
    data = (b"name: m1.mixed\nvcpus: 4\nram: 4096\ndisk: 10\nextra_specs:\n  hw:cpu_policy: mixed\n"
            b"  hw:cpu_dedicated_mask: ^0-1\n")
    conf = _file("nova.conf", b"[compute]\ncpu_dedicated_set = 2-15,18-31\ncpu_shared_set = 0-1,16-17\n")
    (item,) = nova.render([_file("mixed.yaml", data), conf])[0]
    assert b"<vcpupin vcpu='2' cpuset='2'/>" in item.xml and b"<vcpupin vcpu='0' cpuset='0-1'/>" in item.xml
    placed = _placed(item)
    assert placed["CPU004"].finding.severity is Severity.WARNING
    assert placed["CPU004"].edits[0].path == ("extra_specs", "hw:emulator_threads_policy")
    assert placed["CPU004"].edits[0].value == "isolate"
    cured = data + b"  hw:emulator_threads_policy: isolate\n"
    (item,) = nova.render([_file("mixed.yaml", cured), conf])[0]
    assert item.notes == () and not {"CPU004", "CPU005"} & set(_placed(item))


# -- every knob row, proven by rendering -----------------------------------------------------------

# code -> (flavor specs, image props, nova.conf, vcpus, ram MiB, options) that make nova's domain
# carry the finding on FAKE_HOST.
SCENARIOS: dict[str, tuple[dict[str, str], dict[str, str], dict[tuple[str, str], str], int, int, Any]] = {
    "CPU001": ({}, {}, {("libvirt", "cpu_mode"): "custom", ("libvirt", "cpu_models"): "qemu64"}, 4, 4096, None),
    "CPU004": ({"hw:cpu_policy": "dedicated"}, {}, {}, 4, 4096, None),
    "CPU005": ({"hw:cpu_policy": "dedicated"}, {}, {}, 4, 4096, None),
    "CPU007": ({}, {}, {}, 4, 4096, ("latency",)),
    "CPU021": ({"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes", "hw:cpu_realtime_mask": "^0"}, {}, {}, 4,
               4096, None),
    "MEM001": ({}, {}, {}, 4, 16384, None),
    "MEM002": ({"hw:mem_page_size": "large"}, {}, {}, 4, 4096, None),
    "MEM007": ({}, {}, {}, 4, 4096, ("latency",)),
    "NET001": ({}, {}, {}, 16, 16384, None),
    "NET004": ({}, {"hw_vif_model": "e1000"}, {}, 4, 4096, None),
    "NET007": ({}, {"hw_vif_multiqueue_enabled": "true"}, {}, 16, 16384, None),
    "DSK002": ({}, {}, {("libvirt", "images_type"): "lvm", ("libvirt", "disk_cachemodes"): "block=writeback"}, 4,
               4096, None),
    "DSK004": ({}, {"hw_disk_bus": "ide"}, {}, 4, 4096, None),
    "DSK005": ({}, {}, {}, 4, 4096, None),
    "DSK006": ({}, {}, {("libvirt", "hw_machine_type"): "x86_64=pc-i440fx-5.1"}, 8, 8192, None),
    "DSK007": ({}, {"hw_disk_bus": "scsi"}, {}, 4, 4096, None),
    "DSK008": ({}, {}, {("libvirt", "disk_cachemodes"): "file=writeback"}, 4, 4096, None),
    "CPU016": ({}, {"os_type": "windows", "os_distro": "windows", "os_version": "10"}, {}, 8, 8192, None),
    "CLK001": ({}, {}, {}, 4, 4096, "windows"),
    "CLK003": ({}, {"hw_time_hpet": "true"}, {}, 4, 4096, "linux"),
    "HV001": ({}, {}, {}, 4, 4096, "windows"),
    "USB001": ({}, {}, {}, 4, 4096, None),
    "CPU035": ({}, {}, {("libvirt", "cpu_mode"): "custom", ("libvirt", "cpu_models"): "Nehalem"}, 4, 4096, None),
}
# Rows whose finding nova's domain on FAKE_HOST cannot carry, so there is nothing to cure there:
UNREACHABLE = {
    "CPU008": "needs host facts (pins across host NUMA nodes): the rendered domain is checked without a host",
    "CPU011": "needs host facts", "CPU012": "needs host facts", "CPU019": "needs host facts",
    "CPU020": "nova pins each realtime vCPU to its own host CPU and the emulator off them",
    "NET002": "nova writes queues = vCPUs (at most [libvirt] max_queues); the tap limit needs host facts",
    "USB002": "nova writes its USB tablet only with a graphics device",
}


def _scenario_codes(specs: dict[str, str], props: dict[str, str], conf: dict[tuple[str, str], str], vcpus: int,
                    ram: int, extra: Any) -> set[str]:
    sources = nova.Sources()
    if conf:
        sources.conf = NovaConf(dict(conf), "nova.conf")
        sources.conf_files = [sources.conf]
    flavor = Flavor("f", vcpus, ram, 10, specs=dict(specs), source="f.json", form=CLI)
    item = nova.render_pair(flavor, Image("i", dict(props), source="i.json", form=CLI), sources)
    opts = options(policies=extra) if isinstance(extra, tuple) else options(os=extra)
    _domain, placed = check_rendered(item, opts)
    return {p.finding.rule.code for p in placed}


def _rows() -> list[tuple[str, Knob]]:
    table, _no = rows("openstack")
    return [(code, knob) for code, knobs in table.items() for knob in knobs]


def test_every_row_is_proven_or_says_why_it_cannot_be() -> None:
    table, no_knob = rows("openstack")
    assert set(table) <= set(SCENARIOS) | set(UNREACHABLE)
    assert not set(table) & set(no_knob)
    assert no_knob["CLK002"].startswith("no knob: nova never writes Hyper-V stimer")
    assert table["USB001"][0].path == ("hw_input_bus",) and table["USB001"][1].value == "ps2mouse"
    from vmtune.manager_advice import NOVA

    said = {code: knobs[0].text for code, knobs in table.items()} | no_knob
    assert said == NOVA  # the advice on nova's XML says what the table says


@pytest.mark.parametrize("code, knob", [(c, k) for c, k in _rows() if c in SCENARIOS],
                         ids=lambda v: v if isinstance(v, str) else f"{v.on}:{'/'.join(v.path)}")
def test_knob_cures_its_finding(code: str, knob: Knob) -> None:
    specs, props, conf, vcpus, ram, extra = SCENARIOS[code]
    assert code in _scenario_codes(specs, props, conf, vcpus, ram, extra)
    if knob.value is None:
        return  # advice only: the cure depends on the guest or host, never a fix
    specs, props, conf = dict(specs), dict(props), dict(conf)
    if knob.on == "flavor":
        specs[knob.path[0]] = str(knob.value)
    elif knob.on == "image":
        props[knob.path[0]] = str(knob.value)
    else:
        conf[(knob.path[0], knob.path[1])] = str(knob.value)
    assert code not in _scenario_codes(specs, props, conf, vcpus, ram, extra)


# -- agreement with nova's own XML (fixtures/stacks/nova/oracle, written by nova's code) ----------

ORACLE_CASES = sorted(ORACLE.glob("*.yaml")) if ORACLE.is_dir() else []


def _as_glance(value: object) -> str:
    """Glance and nova store properties and extra specs as strings (the oracle's generator does too)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _oracle_inputs(case: Path) -> tuple[Flavor, Image, NovaConf | None]:
    spec = yaml.safe_load(case.read_text())
    flavor_in = spec.get("flavor") or {}
    image_in = spec.get("image") or {}
    def number(*keys: str, default: int = 0) -> int:
        return int(next((flavor_in[k] for k in keys if flavor_in.get(k) not in (None, "")), default))

    flavor = Flavor(str(flavor_in.get("name", "flavor")), number("vcpus", default=1),
                    number("memory_mb", "ram", default=512), number("root_gb", "disk", default=1),
                    number("ephemeral_gb", "ephemeral"), number("swap"),
                    {str(k): _as_glance(v) for k, v in (flavor_in.get("extra_specs") or {}).items()}, case.name,
                    form=CLI)
    props = image_in.get("properties", image_in) or {}
    image = Image(str(image_in.get("name", "image")), {str(k): _as_glance(v) for k, v in props.items() if k != "name"},
                  case.name, form=CLI)
    conf_in = spec.get("nova_conf") or {}
    conf = None
    if conf_in:
        values = {}
        for section, options_in in conf_in.items():
            for key, value in (options_in or {}).items():
                text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
                values[(section if section == "DEFAULT" else section.lower(), str(key))] = text
        conf = NovaConf(values, "nova.conf")
    return flavor, image, conf


def _warning_codes(xml: bytes, os: str | None) -> set[tuple[str, str | None]]:
    """The warning and error rules reached, with the element each points at (its tag)."""
    return {(f.rule.code, f.element.tag if f.element is not None else None)
            for f in findings(xml, options(os=os)) if f.severity >= Severity.WARNING}


def test_every_oracle_case_has_nova_xml_or_nova_refusal() -> None:
    """The two tests below split the cases by what nova made of them: none is left to neither."""
    assert ORACLE_CASES
    assert [c.name for c in ORACLE_CASES if c.with_suffix(".xml").exists() == c.with_suffix(".error").exists()] == []


@pytest.mark.parametrize("case", [c for c in ORACLE_CASES if c.with_suffix(".xml").exists()], ids=lambda p: p.stem)
def test_rendering_reaches_the_rules_nova_own_xml_reaches(case: Path) -> None:
    nova_xml = case.with_suffix(".xml")
    flavor, image, conf = _oracle_inputs(case)
    ours, _notes = render_xml(flavor, image, conf)
    os_type = str(image.props.get("os_type") or "").lower() or None
    assert _warning_codes(ours, os_type) == _warning_codes(nova_xml.read_bytes(), os_type)


@pytest.mark.parametrize("case", [c for c in ORACLE_CASES if c.with_suffix(".error").exists()], ids=lambda p: p.stem)
def test_what_nova_refuses_is_an_error_in_novas_terms_and_nothing_else(case: Path) -> None:
    """nova wrote no domain for these (the oracle's CASE.error): the pair's verdict is the refusal,
    an error naming nova's reason, and no finding about a domain that never runs."""
    refusal = dict(line.split(": ", 1) for line in case.with_suffix(".error").read_text().splitlines())
    flavor, image, conf = _oracle_inputs(case)
    sources = nova.Sources()
    if conf is not None:
        sources.conf, sources.conf_files = conf, [conf]
    placed = list(_placed(nova.render_pair(flavor, image, sources)).values())
    assert {p.finding.rule.code for p in placed} <= {"STK004", "STK003"}
    (error,) = [p.finding for p in placed if p.finding.rule.code == "STK004"]
    assert error.severity is Severity.ERROR and error.message.startswith("nova refuses ")
    if refusal["stage"] == "flavor-validator":  # nova's validator message, word for word
        assert refusal["message"] in error.message
    else:
        assert f"({refusal['exception'].rsplit('.', 1)[-1]}" in error.message


REFUSED_FLAVOR = """- openstack.cloud.compute_flavor:
    name: c1.bad
    vcpus: 4
    ram: 4096
    disk: 10
    extra_specs:
      hw:cpu_policy: dedicated
      {key}: {value}
"""


@pytest.mark.parametrize("key, value, message", [
    ("hw:emulator_threads_policy", "isolated", "Validation failed; 'isolated' is not one of: isolate, share."),
    ("hw:pci_numa_affinity_policy", "prefered",
     "Validation failed; 'prefered' is not one of: required, preferred, legacy, socket."),
    ("hw:numa_nodes", "0", "Validation failed; '0' is less than the min value of '1'."),
    ("hw:cpu_realtime", "maybe", "Validation failed; 'maybe' is not a valid boolean-like value."),
    ("hw:cpu_realtime_mask", "'^0;1'", "Validation failed; the value is not of the format "
                                       "'(\\^)?\\d+((-\\d+)?(,\\^?\\d+(-\\d+)?)?)*'."),
    ("hw:mem_page_size", "huge", "Validation failed; the value is not of the format "
                                 "'(large|small|any|\\d+([kKMGT]i?)?(b|bit|B)?)'."),
    ("hw:redirected_usb_ports", "16", "Validation failed; '16' is greater than the max value of '15'."),
    ("quota:disk_read_iops_sec", "fast", "Validation failed; 'fast' is not a valid integer value."),
    ("hw:numa_cpus.0", "0-1;2", "Validation failed; the value is not of the format "),
    ("hw:watchdog_action", "x" * 65, "Validation failed; a value of 65 characters is not one of: none, pause, "),
])
def test_an_extra_spec_value_novas_validator_refuses_is_an_error_at_its_line(key: str, value: str,
                                                                            message: str) -> None:
    data = REFUSED_FLAVOR.format(key=key, value=value).encode()
    (item,) = nova.render([_file("flavors.yaml", data)])[0]
    placed = _placed(item)
    assert set(placed) == {"STK004"}  # nothing judged of a flavor nova never stores
    error = placed["STK004"].finding
    assert (error.severity, error.line) == (Severity.ERROR, 8)
    assert error.message.startswith(f"nova refuses the extra spec {key}: {message}")


@pytest.mark.parametrize("specs, line, reason", [
    ({"hw:cpu_policy": "shared", "hw:cpu_realtime": "yes", "hw:cpu_realtime_mask": "^0"}, 8,
     "(RealtimeConfigurationInvalid)"),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}, 8, "(NoValidHost)"),
    ({"hw:mem_page_size": "1GB", "hw:numa_nodes": "1"}, 7,
     "a guest NUMA node of 24576 MiB is more than the stated host's cell holds (1 GiB pages for 8 GiB)"),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes"}, 8, "(RealtimeMaskNotFoundOrInvalid)"),
])
def test_a_flavor_nova_refuses_is_an_error_at_the_key_that_makes_it_refuse(specs: dict[str, str], line: int,
                                                                          reason: str) -> None:
    text = "".join(f"      {k}: '{v}'\n" for k, v in specs.items())
    data = (b"- openstack.cloud.compute_flavor:\n    name: c1.bad\n    vcpus: 4\n    ram: 24576\n    disk: 10\n"
            b"    extra_specs:\n" + text.encode())
    (item,) = nova.render([_file("flavors.yaml", data)])[0]
    placed = _placed(item)
    assert set(placed) == {"STK004"}
    assert placed["STK004"].finding.line == line and reason in placed["STK004"].finding.message


def test_a_fix_that_would_make_nova_refuse_the_flavor_is_withheld() -> None:
    """hw:emulator_threads_policy=isolate on 16 dedicated vCPUs needs a 17th CPU in their host
    cell of 16: nova's scheduler then finds no host. The fix is proven by rendering again, which
    says STK004, so it is not written."""
    data = (b"name: c1.big\nvcpus: 16\nram: 16384\ndisk: 10\nextra_specs:\n  hw:cpu_policy: dedicated\n"
            b"  hw:vif_multiqueue_enabled: 'true'\n")
    (item,) = nova.render([_file("big.yaml", data)])[0]
    assert _placed(item)["CPU004"].edits[0].value == "isolate"
    cured = data + b"  hw:emulator_threads_policy: isolate\n"
    (item,) = nova.render([_file("big.yaml", cured)])[0]
    assert set(_placed(item)) == {"STK004"}  # so the fix run withholds it: tests/test_openstack_cli.py


# -- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    (b'{"name": "m1", "vcpus": "four", "ram": 1024}', "flavor.json:1: flavor m1: vcpus must be an integer, not 'four'"),
    (b'[{"Name": "m1", "VCPUs": 2.5, "RAM": 1024}]', "flavor.json:1: flavor m1: VCPUs must be an integer, not '2.5'"),
    (b'{"name": "m1", "vcpus": 0, "ram": 1024}', "flavor.json:1: flavor m1: vcpus must be at least 1"),
    (b'{"name": "m1", "vcpus": true, "ram": 1024}', "flavor.json:1: flavor m1: vcpus must be an integer, not True"),
    (b'{"name": "m1", "vcpus": 2, "ram": 1024, "properties": 7}',
     "flavor.json:1: flavor m1: properties must be a mapping or key='value' text"),
])
def test_unusable_flavors_are_one_line_naming_the_field(text: bytes, message: str) -> None:
    with pytest.raises(VmtuneError) as caught:
        nova.read([_file("flavor.json", text)])
    assert str(caught.value) == message


def test_a_jinja_value_says_render_first() -> None:
    data = b"- compute_flavor:\n    name: f\n    vcpus: '{{ cpus }}'\n    ram: 1024\n"
    with pytest.raises(VmtuneError) as caught:
        nova.read([_file("t.yaml", data)])
    assert str(caught.value) == ("t.yaml:3: flavor f: vcpus must be an integer, not '{{ cpus }}' "
                                 "(a Jinja expression: render the playbook's variables first)")


def test_unknown_namespaces_and_keys_are_info_as_novas_validator_says() -> None:
    data = (b'{"name": "m1", "vcpus": 2, "ram": 1024, "properties": {"hw:cpu_polcy": "dedicated",\n'
            b'"frobnicate:level": "3", "aggregate_instance_extra_specs:ssd": "true"}}')
    (item,) = nova.render([_file("f.json", data)])[0]
    notes = {(n.code, n.line): n.message for n in item.notes}
    assert notes == {
        ("STK003", 2): "flavor m1: extra spec 'frobnicate:level' is in namespace 'frobnicate', which nova's extra "
                       "spec validator does not register: nova ignores it",
        ("STK003", 1): "flavor m1: extra spec 'hw:cpu_polcy' is not one nova knows (its API refuses it from "
                       "microversion 2.86; older microversions store it and nova ignores it)"}


def test_unknown_keys_are_said_once_not_once_per_pair() -> None:
    flavors = (b'[{"Name": "a", "VCPUs": 2, "RAM": 1024, "Properties": {"frobnicate:x": "1"}},\n'
               b' {"Name": "b", "VCPUs": 2, "RAM": 1024}]')
    rendered, _ = nova.render([_file("f.json", flavors), _file(str(HERE / "image-show.json")),
                               _file(str(HERE / "image-show.yaml"))])
    assert [(r.name, [n.code for n in r.notes]) for r in rendered] == [
        ("a × win2k22", ["STK003"]), ("a × ubuntu-24.04", []), ("b × win2k22", []), ("b × ubuntu-24.04", [])]


def test_requests_nova_refuses_are_said_in_novas_terms() -> None:
    flavor = Flavor("bad", 4, 4096, specs={"hw:emulator_threads_policy": "isolate"}, source="f.json", form=CLI)
    item = nova.render_pair(flavor, empty_image())
    assert [(n.code, n.message) for n in item.notes] == [
        ("STK004", "nova refuses the flavor's NUMA/CPU pinning request: hw:emulator_threads_policy=isolate needs "
                   "hw:cpu_policy=dedicated (BadRequirementEmulatorThreadsPolicy)")]


def test_a_2000_flavor_listing_renders_in_bounded_time() -> None:
    rows_ = [{"ID": str(i), "Name": f"f{i}", "RAM": 1024 * (1 + i % 64), "Disk": 20, "Ephemeral": 0,
              "VCPUs": 1 + i % 64, "Is Public": True, "Swap": 0, "RXTX Factor": 1.0,
              "Properties": {"hw:cpu_policy": "dedicated"} if i % 3 == 0 else {}} for i in range(2000)]
    import json

    data = json.dumps(rows_, indent=2).encode()
    start = time.process_time()
    rendered, _ = nova.render([_file("flavors.json", data)])
    elapsed = time.process_time() - start
    assert len(rendered) == 2000 and elapsed < 5.0, elapsed


def test_more_vcpus_than_kvm_boots_is_one_line() -> None:
    with pytest.raises(VmtuneError) as caught:
        nova.read([_file("f.json", b'{"name": "huge", "vcpus": 1000000000, "ram": 1024}')])
    assert str(caught.value) == ("f.json:1: flavor huge: vcpus=1000000000 is more than 4096 (KVM's limit): "
                                 "no host boots it")


@pytest.mark.parametrize("option, value", [("num_pcie_ports", "x"), ("rx_queue_size", "300"),
                                           ("mem_stats_period_seconds", "ten")])
def test_nova_conf_values_nova_compute_refuses_are_said(option: str, value: str) -> None:
    conf = NovaConf({("libvirt", option): value}, "nova.conf")
    xml, notes = render_xml(Flavor("f", 2, 2048), Image("i", {"hw_machine_type": "q35"}), conf)
    assert notes and notes[0].startswith(f"nova refuses [libvirt] {option}={value!r}: not ")
    assert xml.startswith(b"<domain")


def test_malformed_nova_conf_is_one_line() -> None:
    with pytest.raises(VmtuneError) as caught:
        read_nova_conf(b"[libvirt]\ncpu_mode host-model\n", "nova.conf")
    assert str(caught.value) == "nova.conf:2: not 'option = value': 'cpu_mode host-model'"


# -- nova.conf edits keep every other byte --------------------------------------------------------

CONF = (b"# nova\r\n[DEFAULT]\r\ndebug = true\r\n\r\n[libvirt]\r\ncpu_mode=host-model\r\n# end\r\n\r\n"
        b"[vnc]\r\nenabled = true\r\n")


@pytest.mark.parametrize("section, option, value, expected", [
    ("libvirt", "cpu_mode", "host-passthrough", CONF.replace(b"cpu_mode=host-model", b"cpu_mode=host-passthrough")),
    ("libvirt", "rx_queue_size", 1024, CONF.replace(b"cpu_mode=host-model\r\n",
                                                    b"cpu_mode=host-model\r\nrx_queue_size = 1024\r\n")),
    ("compute", "cpu_shared_set", "0-3", CONF + b"\r\n[compute]\r\ncpu_shared_set = 0-3\r\n"),
    ("DEFAULT", "pointer_model", "ps2mouse", CONF.replace(b"debug = true\r\n",
                                                          b"debug = true\r\npointer_model = ps2mouse\r\n")),
])
def test_set_option_changes_only_the_option(section: str, option: str, value: object, expected: bytes) -> None:
    assert set_option(CONF, section, option, value) == expected


def test_set_options_applies_the_frontends_edit_paths_and_refuses_line_breaks() -> None:
    assert set_options(b"[libvirt]\n", [(("libvirt", "hw_disk_discard"), "unmap")]) == (
        b"[libvirt]\nhw_disk_discard = unmap\n")
    with pytest.raises(VmtuneError):
        set_option(b"[libvirt]\n", "libvirt", "cpu_mode", "a\n[x]")


# -- the CPU topology search against a transcription of nova's ------------------------------------

def _nova_best_topology(vcpus: int, want: list[int], maxima: list[int]) -> tuple[int, int, int] | None:
    """hardware._get_possible_cpu_topologies + _sort_possible_cpu_topologies, as written in nova
    34.0.0 (the triple loop vmtune replaces by a walk over divisors)."""
    ms, mc, mt = (min(vcpus, m) for m in maxima)
    possible = [(s, c, t) for s in range(1, ms + 1) for c in range(1, mc + 1) for t in range(1, mt + 1)
                if s * c * t == vcpus]
    possible.sort(reverse=True, key=lambda x: (x[0] * x[1], x[0], x[2]))
    if not possible:
        return None
    scored: dict[int, list[tuple[int, int, int]]] = {3: [], 2: [], 1: [], 0: []}
    for top in possible:
        scored[sum(1 for have, wanted in zip(top, want, strict=True) if wanted and have == wanted)].append(top)
    return (scored[3] + scored[2] + scored[1] + scored[0])[0]


def test_cpu_topology_is_novas_on_random_flavors() -> None:
    import random

    from vmtune.stacks.openstack.render import Inputs, Refused, cpu_topology

    rng = random.Random(37)
    for _ in range(300):
        vcpus = rng.randint(1, 48)
        specs = {}
        for part in ("sockets", "cores", "threads"):
            if rng.random() < 0.3:
                specs[f"hw:cpu_{part}"] = str(rng.randint(1, 8))
            if rng.random() < 0.2:
                specs[f"hw:cpu_max_{part}"] = str(rng.randint(1, 16))
        maxima = [int(specs.get(f"hw:cpu_max_{p}", 0)) or 65536 for p in ("sockets", "cores", "threads")]
        want = [int(specs.get(f"hw:cpu_{p}", 0)) for p in ("sockets", "cores", "threads")]
        if any(w > m for w, m in zip(want, maxima, strict=True)):
            want = [0, 0, 0]
        try:
            ours: tuple[int, int, int] | None = cpu_topology(Inputs(Flavor("f", vcpus, 1024, specs=specs), Image("i"),
                                                                     None))
        except Refused:
            ours = None
        assert ours == _nova_best_topology(vcpus, want, maxima), (vcpus, specs)


def test_validator_patterns_match_novas_language_in_linear_time() -> None:
    """nova's CPU-mask and pmem patterns backtrack exponentially on a value that fails late (a
    62-character mask took 4 s); vmtune matches each by an unambiguous pattern of the same
    language: the same answer as nova's on random short strings, and bounded on long ones."""
    import random
    import re

    from vmtune.stacks.openstack.validators import LINEAR, MAX_VALUE_CHARS, refusal

    rng = random.Random(50)
    for nova_pattern, linear in LINEAR.items():
        alphabet = "0123456789-,^x" if "d" in nova_pattern else "ab_9,!"
        for _ in range(5000):
            value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
            assert bool(re.fullmatch(nova_pattern, value)) == bool(linear.fullmatch(value)), (nova_pattern, value)
    start = time.process_time()
    for key, value in (("hw:cpu_dedicated_mask", "1" + ",1-2" * 60 + "x"), ("hw:pmem", "a" * 250 + "!"),
                       ("hw:cpu_realtime_mask", "^1" + "-1" * 120 + "x")):
        assert refusal(key, value[:MAX_VALUE_CHARS]) is not None
    assert time.process_time() - start < 0.5
    assert refusal("hw:cpu_policy", "x" * 256) == ("the API takes extra spec values of 255 characters at most "
                                                   "(256 given)")


# -- the guest the image states, nova's defaults ----------------------------------------------------

@pytest.mark.parametrize("props, os_id", [
    ({"os_distro": "windows", "os_version": "10"}, "http://microsoft.com/win/10"),
    ({"os_distro": "windows", "os_version": "11"}, "http://microsoft.com/win/11"),
    ({"os_distro": "Windows", "os_version": "Server 2022"}, "http://microsoft.com/win/2k22"),
    ({"os_distro": "windows", "os_version": "2012 R2"}, "http://microsoft.com/win/2k12r2"),
    ({"os_distro": "win10"}, "http://microsoft.com/win/10"),
    ({"os_distro": "win2k19"}, "http://microsoft.com/win/2k19"),
    ({"os_distro": "ubuntu22.04"}, "http://ubuntu.com/ubuntu/22.04"),
    ({"os_distro": "windows"}, None), ({"os_distro": "windows", "os_version": "ten"}, None),
    ({"os_distro": "ubuntu"}, None), ({}, None),
])
def test_the_image_states_the_guest_edition(props: dict[str, str], os_id: str | None) -> None:
    assert nova.image_os_id(Image("i", props)) == os_id


WIN_CLIENT = """- openstack.cloud.compute_flavor:
    name: m1.xlarge
    vcpus: 8
    ram: 16384
    disk: 80
    extra_specs:
      hw:vif_multiqueue_enabled: 'true'
- openstack.cloud.image:
    name: win
    filename: win.qcow2
    properties:
      os_type: windows
      os_distro: windows
      os_version: '{version}'
"""


def test_nova_gives_a_windows_client_one_socket_per_vcpu_and_it_uses_two() -> None:
    """Without hw:cpu_sockets / hw:cpu_max_sockets nova's topology is one socket per vCPU
    (hardware._get_possible_cpu_topologies sorts sockets first); Windows 10/11 uses two."""
    (item,) = nova.render([_file("win.yaml", WIN_CLIENT.format(version="10").encode())])[0]
    assert b"<topology sockets='8' cores='1' threads='1'/>" in item.xml.replace(b'"', b"'")
    cpu016 = _placed(item)["CPU016"]
    assert cpu016.finding.severity is Severity.WARNING and cpu016.finding.line == 6
    assert cpu016.finding.message == "topology of 8 sockets: Windows 10 uses 2 at most"
    assert [(e.path, e.value) for e in cpu016.edits] == [((0, "openstack.cloud.compute_flavor", "extra_specs",
                                                          "hw:cpu_sockets"), "1")]
    server = WIN_CLIENT.format(version="2022").encode()
    (item,) = nova.render([_file("win.yaml", server)])[0]
    assert "CPU016" not in _placed(item)  # Windows Server uses 64 sockets
    capped = WIN_CLIENT.format(version="11").replace("'true'\n", "'true'\n      hw:cpu_max_sockets: '2'\n")
    (item,) = nova.render([_file("win.yaml", capped.encode())])[0]
    assert "CPU016" not in _placed(item)


def test_a_flavor_stating_its_page_size_gets_no_hugepage_suggestion() -> None:
    data = (b"name: m1.4k\nvcpus: 4\nram: 16384\ndisk: 10\nextra_specs:\n  hw:mem_page_size: small\n")
    (item,) = nova.render([_file("f.yaml", data)])[0]
    mem001 = _placed(item)["MEM001"]
    assert mem001.finding.severity is Severity.INFO and mem001.edits == () and mem001.finding.line == 6
    assert mem001.finding.note.startswith("on the flavor m1.4k: hw:mem_page_size=small states the page size")
    assert "hw:mem_page_size=large" not in mem001.finding.note


# -- --host: the compute node nova places the guest on ------------------------------------------------

def _on(host_file: str | None, specs: dict[str, str], vcpus: int = 4, ram: int = 4096) -> Any:
    from vmtune.facts.host import load_host
    from vmtune.stacks.openstack.render import NodeHost

    host = None
    if host_file is not None:
        facts = load_host(str(FIXTURES / "hosts" / host_file), None)
        host = NodeHost.from_facts(facts, host_file)
    flavor = Flavor("f", vcpus, ram, 10, specs=specs, source="f.json", form=CLI)
    sources = nova.Sources()
    sources.host = host
    return nova.render_pair(flavor, empty_image(), sources)


def test_the_host_given_replaces_the_assumed_node() -> None:
    """nova places a flavor by the compute node's NUMA cells, CPUs and page pools: `--host` names
    the node, and what it cannot meet is nova's refusal there, not on the assumed node."""
    gigantic = {"hw:mem_page_size": "1GB"}
    assert [n.code for n in _on(None, gigantic).notes] == []  # the assumed node has 1 GiB pages
    (refused,) = _on("intel-2node.xml", gigantic).notes  # this one has none in its pools
    assert refused.code == "STK004" and "hw:mem_page_size" in refused.message
    assert "1 GiB pages for 0 GiB" in refused.message
    three = {"hw:numa_nodes": "3"}
    assert [n.code for n in _on(None, three).notes] == ["STK004"]  # two cells
    assert [n.code for n in _on("amd-4node-256cpu.xml", three, vcpus=6, ram=6144).notes] == []
    pinned = _on("intel-2node.xml", {"hw:cpu_policy": "dedicated"})
    pins = [int(p.split(b"cpuset='")[1].split(b"'")[0]) for p in pinned.xml.split(b"<vcpupin")[1:]]
    assert pins == [0, 1, 2, 3]  # the first cell's CPUs of that host (0-3, 8-11), one each


def test_cli_host_reaches_the_flavors(tmp_path: Path) -> None:
    from conftest import run_vmtune

    flavor = tmp_path / "flavor.yaml"
    flavor.write_text("name: m1.huge\nvcpus: 4\nram: 4096\ndisk: 10\nextra_specs:\n  hw:mem_page_size: 1GB\n")
    plain = run_vmtune("check", "--isolated", "-f", "json", str(flavor))
    assert "STK004" not in plain.stdout
    hosted = run_vmtune("check", "--isolated", "-f", "json", "--host", str(FIXTURES / "hosts" / "intel-2node.xml"),
                        str(flavor))
    assert hosted.returncode == 1, hosted.stderr
    import json

    (refusal,) = [f for f in json.loads(hosted.stdout)["findings"] if f["rule"] == "STK004"]
    assert refusal["line"] == 6 and refusal["severity"] == "error"
    empty = tmp_path / "caps.xml"  # the domain rules can use it; nova's placement cannot: said, not refused
    empty.write_text("<capabilities><host><cpu><arch>x86_64</arch></cpu></host></capabilities>")
    said = run_vmtune("check", "--isolated", "-f", "json", "--host", str(empty), str(flavor))
    assert said.returncode == 1, said.stderr  # USB001's warning, as on the assumed node
    (note,) = [f for f in json.loads(said.stdout)["findings"] if f["rule"] == "STK002"]
    assert note["message"] == (f"--host {empty} lists no NUMA cell with CPUs, which nova places a guest by: placed "
                               "on the assumed compute node")
