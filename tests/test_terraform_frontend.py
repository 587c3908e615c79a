"""Terraform `libvirt_domain` resources through the real command: findings on the HCL line,
fixes written as byte splices of the .tf file, keys Terraform drops, values unknown until apply,
the old schema's advice, and bad HCL as one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_vmtune

FIXTURES = ROOT / "fixtures" / "terraform"


def _findings(stdout: str) -> list[tuple[str, str, int, str]]:
    return [(f["rule"], f["severity"], f["line"], f["xpath"]) for f in json.loads(stdout)["findings"]]


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copyfile(FIXTURES / name, target)
    return target


def test_a_windows_domain_in_hcl_gets_its_findings_on_the_attribute_lines() -> None:
    result = run_vmtune("check", "--format", "json", str(FIXTURES / "win2k22.tf"))
    assert result.returncode == 1, result.stderr
    assert _findings(result.stdout) == [
        ("DSK003", "info", 1, "io_threads"),  # no io_threads yet: the resource's line
        ("MEM001", "info", 4, "memory"),
        ("CLK002", "warning", 20, "features.hyper_v.vp_index.state"),
        ("HV001", "warning", 20, "features.hyper_v.vapic.state"),
        ("STK003", "info", 22, "/"),
        ("CLK001", "warning", 28, "clock.timer[+]"),
        ("CLK004", "info", 28, "clock.timer[+]"),
        ("DSK005", "info", 36, "devices.disks[0].driver.discard"),
        ("DSK008", "info", 36, "devices.disks[0].driver.cache"),
        ("NET001", "info", 38, "devices.interfaces[0].driver.queues"),
    ]


def test_a_key_terraform_drops_is_said_at_its_line_with_the_right_spelling() -> None:
    result = run_vmtune("check", "--select", "STK003", str(FIXTURES / "win2k22.tf"))
    assert result.returncode == 0
    assert (f"{FIXTURES / 'win2k22.tf'}:22: STK003 info features.hyper_v.vpindex is not an attribute of libvirt_domain "
            "(provider's new schema): Terraform drops it without a word (hashicorp/terraform#33570), so it has no "
            "effect; write vp_index (unknown-stack-key)") in result.stdout
    # judged without it: vpindex is missing from the Hyper-V set HV001 names
    full = run_vmtune("check", "--select", "HV001", str(FIXTURES / "win2k22.tf"))
    assert "lacks Hyper-V vapic, spinlocks, vpindex," in full.stdout


def test_fix_writes_the_hcl_byte_exactly_and_a_second_fix_changes_nothing(tmp_path: Path) -> None:
    path = _copy(tmp_path, "win2k22.tf")
    fixed = run_vmtune("check", "--fix", str(path))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr  # what remains is info
    assert path.read_bytes() == (FIXTURES / "win2k22.fixed.tf").read_bytes()
    again = run_vmtune("check", "--fix", str(path))
    assert again.returncode == 0
    assert path.read_bytes() == (FIXTURES / "win2k22.fixed.tf").read_bytes()
    assert "fix(es) applied" not in again.stdout


def test_unsafe_fixes_go_into_inline_objects_lists_and_the_resource_body(tmp_path: Path) -> None:
    path = _copy(tmp_path, "win2k22.tf")
    original = path.read_bytes()
    result = run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "DSK003,DSK008,NET001,CLK004", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    expected = original.replace(
        b'      { name = "hpet", present = "no" },\n',
        b'      { name = "hpet", present = "no" },\n      { name = "rtc", tick_policy = "catchup" },\n').replace(
        b'driver = { name = "qemu", type = "qcow2" }',
        b'driver = { name = "qemu", type = "qcow2", io_thread = 1, cache = "none" }').replace(
        b'      model  = { type = "virtio" }\n',
        b'      model  = { type = "virtio" }\n      driver = { queues = 4 }\n').replace(
        b"    inputs = [{ type = \"tablet\", bus = \"usb\" }]\n  }\n}\n",
        b"    inputs = [{ type = \"tablet\", bus = \"usb\" }]\n  }\n  io_threads = 1\n}\n")
    assert path.read_bytes() == expected


def test_values_known_only_at_apply_are_said_and_never_judged(tmp_path: Path) -> None:
    result = run_vmtune("check", "--format", "json", str(FIXTURES / "vars.tf"))
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["findings"]
    notes = [(f["rule"], f["line"], f["message"]) for f in found if f["rule"] == "STK002"]
    assert notes == [
        ("STK002", 15, "libvirt_domain.fleet is one definition for each instance of its count: the instances were "
                       "checked as one (values that depend on count.index or each are not checked), and a fix of this "
                       "definition changes every instance"),
        ("STK002", 16, "name is not known before apply (count.index differs between the resource's instances): not "
                       "checked"),
        ("STK002", 24, "devices.interfaces[0].source.network.network is not known before apply (var.network has no "
                       "default (its value is given at plan time)): not checked"),
        ("STK002", 29, "devices.disks[0].source.volume.volume is not known before apply (libvirt_volume.root.name is "
                       "known only when Terraform applies): not checked"),
    ]
    # var.memory_gib's default (16 GiB) is what was checked
    assert any(f["rule"] == "MEM001" and f["message"].startswith("16 GiB") and f["line"] == 18 for f in found)


def test_the_old_schema_gets_xslt_advice_and_no_fix(tmp_path: Path) -> None:
    path = _copy(tmp_path, "old-schema.tf")
    before = path.read_bytes()
    result = run_vmtune("check", "--format", "json", str(path))
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["findings"]
    # each on the block or attribute that wrote its element (the disk {} block, the
    # network_interface {} block), the resource's line where none did (no clock attribute)
    assert sorted((f["rule"], f["line"]) for f in found) == [
        ("CLK004", 2), ("DSK003", 11), ("DSK005", 11), ("DSK008", 11), ("NET001", 15), ("STK002", 2)]
    for f in found:
        assert not f["fixable"]
        if f["rule"] != "STK002":
            assert "xml { xslt = file(\"fix.xsl\") }" in f["note"] and "new schema (>= 0.9)" in f["note"]
    # cpu { mode = "host-passthrough" } is read: no CPU001
    assert run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "ALL", str(path)).returncode in (0, 1)
    assert path.read_bytes() == before


def test_bad_hcl_is_one_line_naming_file_and_line_exit_2() -> None:
    path = FIXTURES / "bad.tf"
    result = run_vmtune("check", str(path))
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {path}:4: not valid HCL: unexpected input at column 12\n"


def _mixed_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A repository of a KubeVirt VM and two Terraform modules, one with a file that does not parse."""
    broken, fine = tmp_path / "tf-broken", tmp_path / "tf-fine"
    broken.mkdir()
    fine.mkdir()
    shutil.copyfile(FIXTURES / "bad.tf", broken / "bad.tf")
    shutil.copyfile(FIXTURES / "win2k22.tf", broken / "main.tf")
    shutil.copyfile(FIXTURES / "win2k22.tf", fine / "main.tf")
    manifest = tmp_path / "vm.yaml"
    shutil.copyfile(ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle" / "cit-fedora-n1-large.yaml", manifest)
    return broken, fine, manifest


def test_bad_hcl_refuses_its_module_and_the_run_checks_the_other_files(tmp_path: Path) -> None:
    # One broken .tf used to end every stack check of the run: "0 domain(s) checked", the
    # manifests' findings and the other module's lost. Terraform refuses the module holding it.
    broken, fine, manifest = _mixed_tree(tmp_path)
    for jobs in ("1", "2"):
        result = run_vmtune("check", "--isolated", "-j", jobs, "--format", "json", str(tmp_path))
        assert result.returncode == 2
        assert result.stderr == (f"vmtune: {broken / 'bad.tf'}:4: not valid HCL: unexpected input at column 12 "
                                 "(1 other .tf file of its module not checked: Terraform refuses the whole module)\n")
        report = json.loads(result.stdout)
        assert {f["file"] for f in report["findings"]} == {str(fine / "main.tf"), str(manifest)}
        assert report["summary"]["domains"] == 2


def test_fix_beside_a_module_that_does_not_parse_fixes_the_others(tmp_path: Path) -> None:
    # The fix's second rendering refused the broken module again: "a fix made the file unreadable,
    # nothing written" on a file no fix touched, and no fix written.
    broken, fine, _manifest = _mixed_tree(tmp_path)
    before = (broken / "bad.tf").read_bytes()
    result = run_vmtune("check", "--isolated", "--fix", "--select", "HV001", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {broken / 'bad.tf'}:4: not valid HCL: unexpected input at column 12 "
                             "(1 other .tf file of its module not checked: Terraform refuses the whole module)\n")
    assert (broken / "bad.tf").read_bytes() == before
    assert (broken / "main.tf").read_bytes() == (FIXTURES / "win2k22.tf").read_bytes()
    assert '      vapic = { state = "on" }\n' in (fine / "main.tf").read_text()


def test_a_resource_terraform_refuses_refuses_its_module_and_the_run_checks_the_others(tmp_path: Path) -> None:
    broken, fine, manifest = _mixed_tree(tmp_path)
    (broken / "bad.tf").write_text('resource "libvirt_domain" "t" {\n  name = "t"\n  type = "kvm"\n  memory = 1024\n'
                                   "  io_thread_i_ds = [{ id = 1 }]\n}\n")
    result = run_vmtune("check", "--isolated", "--format", "json", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {broken / 'bad.tf'}:5: libvirt_domain.t: io_thread_i_ds: an object is "
                             "required, but a list was given (Terraform refuses it) (1 other .tf file of its module "
                             "not checked: Terraform refuses the whole module)\n")
    report = json.loads(result.stdout)
    assert {f["file"] for f in report["findings"]} == {str(fine / "main.tf"), str(manifest)}
    assert report["summary"]["domains"] == 2


def test_a_tfvars_file_that_does_not_parse_leaves_the_other_stacks_checked(tmp_path: Path) -> None:
    _broken, fine, manifest = _mixed_tree(tmp_path)
    shutil.rmtree(_broken)
    (fine / "terraform.tfvars").write_text('memory = \n')
    result = run_vmtune("check", "--isolated", "--format", "json", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"vmtune: {fine / 'terraform.tfvars'}:1: ")
    assert result.stderr.count("\n") == 1
    report = json.loads(result.stdout)
    assert {f["file"] for f in report["findings"]} == {str(manifest)}


def test_an_attribute_given_twice_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "twice.tf"
    path.write_text('resource "libvirt_domain" "x" {\n  name = "x"\n  type = "kvm"\n  name = "y"\n}\n')
    result = run_vmtune("check", str(path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {path}:4: attribute 'name' is defined twice in this block "
                             "(Terraform refuses it)\n")


def test_a_value_written_as_an_expression_is_not_edited(tmp_path: Path) -> None:
    path = tmp_path / "expr.tf"
    text = ('locals {\n  hv = { relaxed = { state = "on" } }\n}\n'
            'resource "libvirt_domain" "w" {\n  name = "w"\n  type = "kvm"\n  memory = 4\n  memory_unit = "GiB"\n'
            '  vcpu = 2\n  metadata = {\n    xml = "<libosinfo:libosinfo xmlns:libosinfo=\\"http://libosinfo.org/'
            'xmlns/libvirt/domain/1.0\\"><libosinfo:os id=\\"http://microsoft.com/win/2k22\\"/></libosinfo:libosinfo>"\n'
            '  }\n  features = { hyper_v = local.hv }\n}\n')
    path.write_text(text)
    result = run_vmtune("check", "--fix", "--select", "HV001", str(path))
    assert result.returncode == 1  # the warning stays: its fix cannot be written
    assert "fix withheld: the edit cannot be made exactly (hyper_v is written as an expression" in result.stdout
    assert path.read_text() == text


def test_checking_xml_does_not_import_the_hcl_parser() -> None:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "vmtune", "check",
                             str(ROOT / "fixtures" / "domains" / "win10-timer-storm.xml")],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 1
    assert "hcl2" not in result.stderr and "lark" not in result.stderr


def test_a_fix_that_removes_an_element_removes_the_literal_list_item(tmp_path: Path) -> None:
    path = _copy(tmp_path, "remove.tf")
    original = path.read_bytes()
    listed = run_vmtune("check", "--format", "json", "--select", "USB002,CPU003", str(path))
    assert listed.returncode == 0, listed.stderr
    assert [(f["rule"], f["severity"], f["line"], f["xpath"], f["note"]) for f in
            json.loads(listed.stdout)["findings"]] == [
        ("CPU003", "info", 11, "cpu_tune.vcpu_pin[1]", "remove cpu_tune.vcpu_pin[1]"),
        ("USB002", "info", 15, "devices.inputs[0]", "remove devices.inputs[0]"),
    ]
    fixed = run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "USB002,CPU003", str(path))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    # the pin's own line goes; the tablet goes with the comma that joined it to the keyboard
    assert path.read_bytes() == original.replace(b'      { vcpu = 5, cpu_set = "3" },\n', b"").replace(
        b'[{ type = "tablet", bus = "usb" }, { type', b'[{ type')


def test_a_removal_of_an_item_written_as_an_expression_is_withheld(tmp_path: Path) -> None:
    path = tmp_path / "expr-remove.tf"
    text = (FIXTURES / "remove.tf").read_text().replace('{ type = "tablet", bus = "usb" }',
                                                         '{ type = "tablet", bus = var.bus }')
    path.write_text('variable "bus" {\n  default = "usb"\n}\n' + text)
    result = run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "USB002", str(path))
    assert result.returncode == 0
    assert (f"{path}:18: USB002 info USB tablet on a guest without graphics (usb-tablet-without-graphics)\n"
            "    note: remove devices.inputs[0]; fix withheld: the edit cannot be made exactly (inputs[0] is written "
            "as an expression, not a value: remove it where its value comes from)\n") in result.stdout
    assert path.read_text().startswith('variable "bus"') and path.read_text().endswith(text)


# -- tfvars and modules ------------------------------------------------------------------------------

_VM_MODULE = '''variable "memory_gib" {
  default = 2
}
variable "vcpus" {}

resource "libvirt_domain" "vm" {
  name        = "vm"
  type        = "kvm"
  memory      = var.memory_gib
  memory_unit = "GiB"
  vcpu        = var.vcpus
  os          = { type = "hvm", type_machine = "q35" }
  cpu         = { mode = "host-passthrough" }
  devices = {
    interfaces = [{ source = { network = { network = "default" } }, model = { type = "virtio" } }]
  }
}
'''


def _repo(tmp_path: Path, calls: str) -> Path:
    """A repository with modules/vm (one libvirt_domain) and envs/prod calling it."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "modules" / "vm").mkdir(parents=True)
    (tmp_path / "modules" / "vm" / "main.tf").write_text(_VM_MODULE)
    (tmp_path / "envs" / "prod").mkdir(parents=True)
    (tmp_path / "envs" / "prod" / "main.tf").write_text('variable "vcpus" {\n  default = 2\n}\n\n' + calls)
    return tmp_path


def _json_findings(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str, str, int, str, str]]:
    return [(f["rule"], f["severity"], f["file"], f["line"], f["domain"], f["message"])
            for f in json.loads(result.stdout)["findings"]]


def test_tfvars_override_defaults_in_terraforms_order(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(_VM_MODULE.replace('variable "vcpus" {}', 'variable "vcpus" {\n  default = 2\n}'))
    (tmp_path / "terraform.tfvars").write_text("vcpus = 4\nmemory_gib = 16\n")

    def net001() -> tuple[str, str]:
        result = run_vmtune("check", "--format", "json", "--select", "NET001", str(tmp_path / "main.tf"))
        ((severity, message),) = [(f[1], f[5]) for f in _json_findings(result)]
        assert result.returncode == (1 if severity == "warning" else 0), result.stderr
        return severity, message

    assert net001() == ("info", "virtio NIC has one queue for 4 vCPUs")
    (tmp_path / "b.auto.tfvars").write_text("vcpus = 16\n")
    (tmp_path / "a.auto.tfvars.json").write_text('{"vcpus": 8}')
    # *.auto.tfvars after terraform.tfvars, in lexical order
    assert net001() == ("warning", "virtio NIC has one queue for 16 vCPUs")
    (tmp_path / "b.auto.tfvars").unlink()
    assert net001() == ("warning", "virtio NIC has one queue for 8 vCPUs")


def test_bad_tfvars_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(_VM_MODULE)
    (tmp_path / "terraform.tfvars").write_text("vcpus = 4\nvcpus = 5\n")
    result = run_vmtune("check", str(tmp_path / "main.tf"))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {tmp_path / 'terraform.tfvars'}:2: variable 'vcpus' is given twice in this "
                             "file (Terraform refuses it)\n")


def test_a_local_module_is_rendered_with_its_calls_arguments_and_fixed_in_its_file(tmp_path: Path) -> None:
    repo = _repo(tmp_path, 'module "db" {\n  source     = "../../modules/vm"\n  memory_gib = 64\n'
                           '  vcpus      = var.vcpus\n}\n\nmodule "remote" {\n'
                           '  source = "git::https://example.com/vm.git"\n}\n')
    (repo / "envs" / "prod" / "terraform.tfvars").write_text("vcpus = 16\n")
    module = str(repo / "modules" / "vm" / "main.tf")
    prod = str(repo / "envs" / "prod" / "main.tf")
    result = run_vmtune("check", "--format", "json", str(repo))
    assert result.returncode == 1, result.stderr
    name = "module.db.libvirt_domain.vm"
    assert sorted(_json_findings(result)) == sorted([
        ("STK002", "info", prod, 11, name, "module.remote's source is not a directory of this repository: its "
                                           "resources are not checked"),
        ("CLK004", "info", module, 6, name, "rtc timer has no tickpolicy='catchup'"),
        ("STK002", "info", module, 6, name, "module.db.libvirt_domain.vm is rendered with the arguments of module.db "
                                            f"({prod}:5)"),
        ("MEM001", "info", module, 9, name, "64 GiB of guest memory on 4 KiB pages"),
        ("NET001", "warning", module, 15, name, "virtio NIC has one queue for 16 vCPUs"),
    ])
    # the module's directory checked too: its file is fixed (the call's 16 vCPUs, 16 queues)
    fixed = run_vmtune("check", "--fix", str(repo))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (repo / "modules" / "vm" / "main.tf").read_text() == _VM_MODULE.replace(
        'model = { type = "virtio" } }]', 'model = { type = "virtio" }, driver = { queues = 16 } }]')


def test_a_module_not_among_the_files_is_read_but_not_fixed(tmp_path: Path) -> None:
    repo = _repo(tmp_path, 'module "db" {\n  source = "../../modules/vm"\n  vcpus  = 8\n}\n')
    result = run_vmtune("check", "--fix", "--select", "NET001", str(repo / "envs" / "prod"))
    assert result.returncode == 1  # the warning stays: its fix is not written
    assert ("note: set devices.interfaces[0].driver.queues = 8 (the module's files were not among the files "
            "checked: check its directory too to fix it)") in result.stdout
    assert (repo / "modules" / "vm" / "main.tf").read_text() == _VM_MODULE


def test_a_module_called_twice_with_different_values_is_not_fixed(tmp_path: Path) -> None:
    repo = _repo(tmp_path, 'module "a" {\n  source = "../../modules/vm"\n  vcpus  = 12\n}\n\n'
                           'module "b" {\n  source = "../../modules/vm"\n  vcpus  = 8\n}\n')
    result = run_vmtune("check", "--fix", "--select", "NET001", str(repo))
    assert result.returncode == 1
    assert "set devices.interfaces[0].driver.queues = 12 (the module's calls give this definition different values: " \
           "change it for each call by hand)" in result.stdout
    assert "virtio NIC has one queue for 8 vCPUs" in result.stdout
    assert (repo / "modules" / "vm" / "main.tf").read_text() == _VM_MODULE


def test_a_module_source_outside_the_repository_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "vm").mkdir(parents=True)
    (outside / "vm" / "main.tf").write_text(_VM_MODULE)
    inner = tmp_path / "repo"
    inner.mkdir()
    repo = _repo(inner, 'module "db" {\n  source = "../../modules/vm"\n  vcpus  = 8\n}\n\n'
                        'module "far" {\n  source = "../../../outside/vm"\n  vcpus  = 8\n}\n')
    prod = str(repo / "envs" / "prod" / "main.tf")
    result = run_vmtune("check", "--format", "json", "--select", "STK002", str(repo / "envs" / "prod"))
    assert result.returncode == 0, result.stderr
    assert [(f[0], f[2], f[3], f[4], f[5]) for f in _json_findings(result)] == [
        ("STK002", prod, 10, "module.db.libvirt_domain.vm",
         f"module.far's source is outside the repository ({repo}): not read"),
        ("STK002", str(repo / "modules" / "vm" / "main.tf"), 6, "module.db.libvirt_domain.vm",
         f"module.db.libvirt_domain.vm is rendered with the arguments of module.db ({prod}:5)"),
    ]


def test_a_tf_check_loads_hcl2s_parser_without_its_api_or_urllib() -> None:
    """Start-up of a one-.tf pre-commit run: python-hcl2's grammar, post-lexer and cached tables
    are used, but not the `hcl2` package, whose __init__ imports its whole API (a sixth of the
    run), nor xml.sax.saxutils (urllib, http.client, email), nor `regex`, which lark imports
    when it can and this grammar never needs."""
    probe = ("import sys\nsys.argv = ['vmtune', 'check', '-q', {path!r}]\nfrom vmtune.main import main\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
             "watched = {{'hcl2', 'urllib', 'http', 'email', 'typer', 'jsonschema', 'lark', 'regex'}}\n"
             "print('IMPORTED', sorted({{m.split('.')[0] for m in sys.modules}} & watched), 'EXIT', code)\n")
    out = subprocess.run([sys.executable, "-c", probe.format(path=str(FIXTURES / "win2k22.tf"))],
                         capture_output=True, text=True, cwd=ROOT, timeout=300).stdout
    assert out.splitlines()[-1] == "IMPORTED ['lark'] EXIT 1"


def test_a_value_of_the_wrong_type_is_refused_as_terraform_refuses_it(tmp_path: Path) -> None:
    """Terraform's conversion to the schema's type fails before the provider sees the plan (as
    the oracle's provider run said for these two values): one line at the attribute, exit 2."""
    path = tmp_path / "typed.tf"
    head = 'resource "libvirt_domain" "t" {\n  name = "t"\n  type = "kvm"\n  memory = 1024\n'
    path.write_text(head + "  io_thread_i_ds = [{ id = 1 }]\n}\n")
    result = run_vmtune("check", str(path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {path}:5: libvirt_domain.t: io_thread_i_ds: an object is required, but a list "
                             "was given (Terraform refuses it)\n")
    path.write_text(head + '  devices = {\n    rngs = [{ model = "virtio", '
                           'backend = { random = { device = "/dev/urandom" } } }]\n  }\n}\n')
    result = run_vmtune("check", str(path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {path}:6: libvirt_domain.t: devices.rngs[0].backend.random: a string is "
                             "required, but an object was given (Terraform refuses it)\n")


def test_a_fix_that_removes_xml_attributes_and_a_flattened_element_removes_their_lines(tmp_path: Path) -> None:
    """CPU001's fix sets mode and check, removes match (an XML attribute set to None) and the
    <model> element (cpu.model, flattened with model_fallback and model_vendor_id, none of which
    the file sets): the removed attributes' lines go, the new key joins the object."""
    path = _copy(tmp_path, "cpu-model.tf")
    listed = run_vmtune("check", "--select", "CPU001", str(path))
    assert listed.returncode == 1
    assert (f"{path}:9: CPU001 warning guest CPU is qemu64: host CPU features hidden (cpu-model-generic) "
            "[unsafe fix]\n    note: set cpu.mode = \"host-passthrough\", remove cpu.match, set cpu.check = \"none\", "
            "remove cpu.model\n") in listed.stdout
    fixed = run_vmtune("check", "--fix", "--unsafe-fixes", "--select", "CPU001", str(path))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert path.read_bytes() == (FIXTURES / "cpu-model.tf").read_bytes().replace(
        b'    mode  = "custom"\n    match = "exact"\n    model = "qemu64"\n',
        b'    mode  = "host-passthrough"\n    check = "none"\n')


def test_hcl2s_grammar_compiles_without_regex_when_its_cached_tables_are_missing() -> None:
    """The path where lark finds no cached tables (a read-only site-packages hcl2 never wrote
    them to): the grammar is compiled with `re` alone, and parses."""
    code = ("from vmtune.stacks.terraform import hcl\nhcl._import_lark()\nimport sys, os, importlib.util\n"
            "assert 'regex' not in sys.modules\nfrom lark import Lark\n"
            "here = os.path.dirname(importlib.util.find_spec('hcl2').origin)\n"
            "spec = importlib.util.spec_from_file_location('pl', os.path.join(here, 'postlexer.py'))\n"
            "post = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(post)\n"
            "p = Lark.open('hcl2.lark', parser='lalr', rel_to=os.path.join(here, 'parser.py'), "
            "propagate_positions=True, postlex=post.PostLexer())\n"
            f"print(p.parse(open({str(FIXTURES / 'win2k22.tf')!r}).read() + '\\n').data)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "start\n"


def test_a_tfvars_file_linking_outside_the_repository_is_refused_unread(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("password = hunter2\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()
    (repo / "main.tf").write_text(_VM_MODULE)
    (repo / "terraform.tfvars").symlink_to(secret)
    result = run_vmtune("check", str(repo / "main.tf"))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {repo / 'terraform.tfvars'}: a .tfvars file that links outside the repository "
                             f"({repo}): not read\n")
