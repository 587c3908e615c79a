"""`vmtune check` on OpenStack sources through the real console entry point: exit codes, the
lines findings point at, the command printed for CLI output, one-line errors, nova.conf fixes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, run_vmtune

HERE = FIXTURES / "stacks" / "openstack"


def _findings(*args: str, cwd: Path | None = None) -> tuple[int, list[dict[str, object]]]:
    done = run_vmtune("check", "-f", "json", *args, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["findings"]


def test_the_seed_incident_from_printed_cli_output_points_at_the_image_with_the_command(tmp_path: Path) -> None:
    flavor = tmp_path / "flavor.json"
    flavor.write_text('{"name": "m1.nginx", "vcpus": 16, "ram": 16384, "disk": 40, "swap": 0,\n'
                      ' "OS-FLV-EXT-DATA:ephemeral": 0, "properties": {}}\n')
    image = tmp_path / "image.json"
    image.write_text('{"id": "5e1d", "name": "nginx", "disk_format": "qcow2", "container_format": "bare",\n'
                     ' "status": "active", "min_ram": 0, "min_disk": 0,\n "properties": {"os_distro": "ubuntu"}}\n')
    code, found = _findings("flavor.json", "image.json", cwd=tmp_path)
    (net,) = [f for f in found if f["rule"] == "NET001"]
    assert code == 1 and net["severity"] == "warning" and net["domain"] == "m1.nginx × nginx"
    assert (net["file"], net["line"]) == ("image.json", 3)
    assert net["note"] == ("on the image nginx: hw_vif_multiqueue_enabled=true; run: openstack image set --property "
                           "hw_vif_multiqueue_enabled=true nginx")
    image.write_text(image.read_text().replace('"ubuntu"}', '"ubuntu", "hw_vif_multiqueue_enabled": "true"}'))
    _code, found = _findings("flavor.json", "image.json", cwd=tmp_path)
    assert "NET001" not in {f["rule"] for f in found}


def test_pair_option_checks_only_the_named_pair() -> None:
    _code, found = _findings("--pair", "m1.xlarge:win2k22", str(HERE / "flavor-list-long.json"),
                             str(HERE / "image-show.json"), str(HERE / "image-show.yaml"))
    assert {f["domain"] for f in found} == {"m1.xlarge × win2k22"}


def test_a_non_integer_vcpus_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "flavors.json"
    bad.write_text('[{"Name": "m1", "VCPUs": "two", "RAM": 1024, "Disk": 1}]\n')
    done = run_vmtune("check", "flavors.json", cwd=tmp_path)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith("flavors.json:1: flavor m1: VCPUs must be an integer, not 'two'")
    assert "Traceback" not in done.stderr


def test_malformed_string_properties_exit_2_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "flavors.yaml"
    bad.write_text("- Name: m1\n  VCPUs: 2\n  RAM: 1024\n  Properties: hw:cpu_policy='dedicated\n")
    done = run_vmtune("check", "flavors.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "flavors.yaml:4: properties: the value of 'hw:cpu_policy' has no closing quote" in done.stderr


def test_nova_conf_fix_sets_the_option_and_keeps_every_other_byte(tmp_path: Path) -> None:
    pytest.importorskip("vmtune.stacks.yamledit")  # the fix path loads the YAML editor too
    shutil.copy(HERE / "nova.conf", tmp_path / "nova.conf")
    shutil.copy(HERE / "flavor-show.json", tmp_path / "flavor.json")
    before = (tmp_path / "nova.conf").read_bytes()
    run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "DSK005", "nova.conf", "flavor.json", cwd=tmp_path)
    after = (tmp_path / "nova.conf").read_bytes()
    assert after == before.replace(b"cpu_mode = host-passthrough\n",
                                   b"cpu_mode = host-passthrough\nhw_disk_discard = unmap\n")
    assert (tmp_path / "flavor.json").read_bytes() == (HERE / "flavor-show.json").read_bytes()


def test_ansible_tasks_fix_writes_the_extra_spec_and_properties_in_place(tmp_path: Path) -> None:
    pytest.importorskip("vmtune.stacks.yamledit")
    shutil.copy(HERE / "tasks.yaml", tmp_path / "tasks.yaml")
    before = (tmp_path / "tasks.yaml").read_text()
    done = run_vmtune("check", "--fix", "--unsafe-fixes", "tasks.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = (before.replace('      hw:numa_nodes: "1"\n',
                               '      hw:numa_nodes: "1"\n      hw:emulator_threads_policy: isolate\n')
                .replace("      hw_vif_model: e1000\n",
                         "      hw_vif_model: virtio\n      hw_vif_multiqueue_enabled: 'true'\n"
                         "      hw_input_bus: virtio\n"))
    assert (tmp_path / "tasks.yaml").read_text() == expected


def test_fix_on_printed_cli_output_changes_nothing_and_gives_the_command(tmp_path: Path) -> None:
    shutil.copy(HERE / "flavor-show.json", tmp_path / "flavor.json")
    done = run_vmtune("check", "--fix", "--unsafe-fixes", "flavor.json", cwd=tmp_path)
    assert (tmp_path / "flavor.json").read_bytes() == (HERE / "flavor-show.json").read_bytes()
    assert "run: openstack flavor set --property hw:vif_multiqueue_enabled=true m1.xlarge" in done.stdout


BIG_DEDICATED = (b"name: c1.big\nvcpus: 16\nram: 16384\ndisk: 10\nextra_specs:\n  hw:cpu_policy: dedicated\n"
                 b"  hw:vif_multiqueue_enabled: 'true'\n")


@pytest.mark.parametrize("select", [(), ("--select", "CPU004,CPU005")], ids=["all-rules", "selected"])
def test_a_fix_that_makes_nova_refuse_the_flavor_is_never_written(tmp_path: Path, select: tuple[str, ...]) -> None:
    """isolate on 16 dedicated vCPUs needs a 17th CPU in their 16-CPU host cell (NoValidHost): the
    re-rendered flavor is refused, so the fix is withheld, also when --select leaves STK004 out."""
    (tmp_path / "big.yaml").write_bytes(BIG_DEDICATED)
    code, found = _findings("--fix", "--unsafe-fixes", *select, "big.yaml", cwd=tmp_path)
    assert (tmp_path / "big.yaml").read_bytes() == BIG_DEDICATED
    (cpu004,) = [f for f in found if f["rule"] == "CPU004"]
    assert code == 1 and str(cpu004["note"]).endswith("fix withheld: fixing it raises STK004")


def test_a_flavor_nova_refuses_exits_1_with_the_error_at_its_key(tmp_path: Path) -> None:
    (tmp_path / "flavors.json").write_text(
        '[{"Name": "c1.rt", "VCPUs": 4, "RAM": 4096, "Disk": 10,\n'
        '  "Properties": {"hw:cpu_policy": "dedicated",\n'
        '                 "hw:emulator_threads_policy": "isolated"}}]\n')
    code, found = _findings("flavors.json", cwd=tmp_path)
    assert code == 1
    assert [(f["rule"], f["severity"], f["line"]) for f in found] == [("STK004", "error", 3)]
    assert str(found[0]["message"]).startswith("nova refuses the extra spec hw:emulator_threads_policy: Validation "
                                               "failed; 'isolated' is not one of: isolate, share.")


def test_a_flavor_listing_of_n_flavors_with_an_image_is_n_domains(tmp_path: Path) -> None:
    """A pair's findings sit on the flavor's file and on the image's: one domain, counted once
    (3 flavors × 1 image were 6 domains)."""
    rows = [{"ID": str(i), "Name": f"m1.f{i}", "RAM": 2048 * i, "Disk": 20, "Ephemeral": 0, "VCPUs": 2 * i,
             "Is Public": True} for i in (1, 2, 3)]
    (tmp_path / "flavors.json").write_text(json.dumps(rows, indent=2))
    shutil.copy(HERE / "image-show.json", tmp_path / "image.json")
    done = run_vmtune("check", "-f", "json", "flavors.json", "image.json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["summary"]["domains"] == 3
    assert {f["file"] for f in report["findings"]} == {"flavors.json", "image.json"}
    alone = run_vmtune("check", "-f", "json", "flavors.json", cwd=tmp_path)
    assert json.loads(alone.stdout)["summary"]["domains"] == 3


def test_a_windows_image_on_nova_gets_the_timer_warning_with_no_knob_in_its_note(tmp_path: Path) -> None:
    """Issue 48's seed incident: nova writes no Hyper-V stimer and has no knob for it. The cost is
    that of the XML nova generates, so the finding keeps its warning; the note says there is no knob."""
    flavor = tmp_path / "flavor.json"
    flavor.write_text('{"name": "w1.large", "vcpus": 4, "ram": 8192, "disk": 80, "swap": 0,\n'
                      ' "OS-FLV-EXT-DATA:ephemeral": 0, "properties": {}}\n')
    image = tmp_path / "image.json"
    image.write_text('{"id": "9a2f", "name": "win2k22", "disk_format": "qcow2", "container_format": "bare",\n'
                     ' "status": "active", "min_ram": 0, "min_disk": 0,\n'
                     ' "properties": {"os_type": "windows", "os_distro": "windows"}}\n')
    code, found = _findings("flavor.json", "image.json", cwd=tmp_path)
    (timer,) = [f for f in found if f["rule"] == "CLK002"]
    assert code == 1 and timer["severity"] == "warning"
    assert str(timer["note"]).endswith("(no nova knob)"), timer["note"]


@pytest.mark.parametrize(("given", "said"), [
    (("nova.conf", "flavor-show.json", "image-show.json"), "{tmp}/nova.conf:3: malformed section header '[[['"),
    (("--pair", "no:pe", "flavor-show.json", "image-show.json"),
     "--pair no:pe: neither the flavor nor the image is in the files given"),
])
def test_openstack_sources_that_cannot_be_paired_leave_the_other_stacks_checked(
        tmp_path: Path, given: tuple[str, ...], said: str) -> None:
    # A malformed nova.conf (every pair's domain) or a --pair naming nothing given refuses the
    # OpenStack renderings; it used to end the whole run with "0 domain(s) checked", a KubeVirt
    # manifest's findings beside it lost.
    for name in ("flavor-show.json", "image-show.json"):
        shutil.copy(HERE / name, tmp_path / name)
    (tmp_path / "nova.conf").write_text("[libvirt]\ncpu_mode = host-passthrough\n[[[\n")
    manifest = tmp_path / "vm.yaml"
    shutil.copy(FIXTURES / "stacks" / "kubevirt" / "oracle" / "cit-fedora-n1-large.yaml", manifest)
    done = run_vmtune("check", "--isolated", "-f", "json", *given[:-2], "vm.yaml", *given[-2:], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"vmtune: {said.format(tmp=tmp_path)}\n".replace(f"{tmp_path}/", "")
    report = json.loads(done.stdout)
    assert report["summary"]["domains"] == 1
    assert {f["file"] for f in report["findings"]} == {"vm.yaml"}


FLAVOR_LINES = ('{"name": "m1.large", "vcpus": 4, "ram": 8192, "disk": 40, "swap": 0,\n'
                ' "OS-FLV-EXT-DATA:ephemeral": 0,\n'
                ' "properties": {"hw:cpu_sockets": "1", "hw:mem_page_size": "large"}}\n')


@pytest.mark.parametrize("old, new, message", [
    ('"m1.large"', '"m1\\u001blarge"', "nova refuses the flavor name 'm1\\x1blarge': the compute API takes printable "
     "characters only (InvalidName)"),
    ('"hw:mem_page_size"', '"hw:mem/page"', "nova refuses the extra spec key 'hw:mem/page': the compute API takes keys "
     "of 1-255 letters, digits, '-', '_', ':', '.' and spaces (its request schema)"),
    ('"hw:mem_page_size"', '"hw:mem\\npage"', "nova refuses the extra spec key 'hw:mem\\npage': the compute API takes "
     "keys of 1-255 letters, digits, '-', '_', ':', '.' and spaces (its request schema)"),
    ('"large"}', '"large", "aggregate_instance_extra_specs:ssd": "a\\u0001b"}',
     "nova refuses the extra spec aggregate_instance_extra_specs:ssd: its value holds a "
     "control character; nova's libvirt driver cannot write it into the domain's metadata: the server goes to ERROR"),
])
def test_a_flavor_nova_cannot_take_is_refused_at_its_place_not_a_malformed_rendering(
        tmp_path: Path, old: str, new: str, message: str) -> None:
    """A control character in a flavor's name or an extra spec's value, or a key outside the API's
    key pattern: the domain vmtune rendered held it and failed to parse ("the domain it renders is
    refused: malformed XML", exit 2), as if the rendering were at fault. nova refuses such a flavor
    (its API) or cannot write the domain (lxml refuses the character): STK004, at the flavor."""
    flavor = tmp_path / "flavor.json"
    flavor.write_text(FLAVOR_LINES.replace(old, new))
    done = run_vmtune("check", "--isolated", "-f", "json", "flavor.json", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr == "", done.stderr
    found = json.loads(done.stdout)["findings"]
    assert [(f["rule"], f["severity"], f["file"], f["message"]) for f in found] == [
        ("STK004", "error", "flavor.json", message)]


def test_an_image_property_nova_cannot_write_is_refused_at_the_image(tmp_path: Path) -> None:
    (tmp_path / "flavor.json").write_text(FLAVOR_LINES)
    (tmp_path / "image.json").write_text('{"id": "5e1d", "name": "img", "disk_format": "qcow2",\n'
                                         ' "container_format": "bare", "min_ram": 0, "min_disk": 0,\n'
                                         ' "properties": {"hw_qemu_guest_agent": "yes\\u001b"}}\n')
    done = run_vmtune("check", "--isolated", "flavor.json", "image.json", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert ("image.json:3: STK004 error nova refuses image property 'hw_qemu_guest_agent': it holds a control "
            "character; nova's libvirt driver cannot write it into the domain's metadata: the server goes to ERROR "
            "(stack-refuses)") in done.stdout.splitlines()
    # its name nova never writes (the metadata holds the image's uuid): nothing refused for it
    (tmp_path / "image.json").write_text(
        (tmp_path / "image.json").read_text().replace('"img"', '"img\\u001b"').replace("yes\\u001b", "yes"))
    done = run_vmtune("check", "--isolated", "flavor.json", "image.json", cwd=tmp_path)
    assert done.returncode in (0, 1) and done.stderr == "", done.stderr
    assert "STK004" not in done.stdout and "== m1.large × img\\x1b (flavor.json)" in done.stdout.splitlines()
