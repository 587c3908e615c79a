"""--tf-var-file and --tf-var through the real command: Terraform's -var-file and -var, applied
after terraform.tfvars and *.auto.tfvars (hashicorp/terraform website/docs/language/values/
variables.mdx, "Variable Definition Precedence": -var and -var-file options last, later ones
winning); a var file named on the command line may be anywhere; bad ones are one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from test_terraform_frontend import _VM_MODULE

from conftest import run_vmtune


def _net001(main: Path, *options: str) -> tuple[int, str]:
    """NET001's message (it names the vCPU count the domain was rendered with) and the exit code."""
    result = run_vmtune("check", "--format", "json", "--select", "NET001", *options, str(main))
    found = json.loads(result.stdout)["findings"] if result.stdout else []
    assert result.returncode in (0, 1), result.stderr
    (message,) = [f["message"] for f in found]
    return result.returncode, message


def test_var_files_and_vars_win_over_auto_tfvars_in_order(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()
    main = repo / "main.tf"
    main.write_text(_VM_MODULE)
    (repo / "terraform.tfvars").write_text("vcpus = 2\n")
    (repo / "z.auto.tfvars").write_text("vcpus = 4\n")
    # a var file outside the repository: named by the user, so read
    elsewhere = tmp_path / "prod.tfvars"
    elsewhere.write_text("vcpus = 16\n")
    later = tmp_path / "later.tfvars.json"
    later.write_text('{"vcpus": 8}')

    assert _net001(main) == (0, "virtio NIC has one queue for 4 vCPUs")  # auto.tfvars over terraform.tfvars
    assert _net001(main, "--tf-var-file", str(elsewhere)) == (1, "virtio NIC has one queue for 16 vCPUs")
    # the later file wins
    assert _net001(main, "--tf-var-file", str(elsewhere), "--tf-var-file", str(later)) == (
        1, "virtio NIC has one queue for 8 vCPUs")
    # -var after every -var-file; a string "12" is a number to Terraform where one is required
    assert _net001(main, "--tf-var-file", str(elsewhere), "--tf-var", "vcpus=12", "--tf-var", "vcpus=10") == (
        1, "virtio NIC has one queue for 10 vCPUs")
    # the same through `vmtune fix --diff` (typer's path, not the fast one) and with --opt=value
    result = run_vmtune("check", "--tf-var=vcpus=9", "--select", "NET001", "--fail-on", "error", str(main))
    assert "one queue for 9 vCPUs" in result.stdout, result.stderr
    diff = run_vmtune("fix", "--diff", "--tf-var", "vcpus=10", "--select", "NET001", str(main))
    assert "+    interfaces = [{ source = { network = { network = \"default\" } }, model = { type = \"virtio\" }, " \
           "driver = { queues = 10 } }]" in diff.stdout, diff.stdout + diff.stderr


def test_an_object_value_is_read_as_hcl(tmp_path: Path) -> None:
    main = tmp_path / "main.tf"
    main.write_text(_VM_MODULE.replace('variable "vcpus" {}', 'variable "vcpus" {}\nvariable "cpu" {}')
                    .replace('cpu         = { mode = "host-passthrough" }', 'cpu         = var.cpu'))
    unset = run_vmtune("check", "--select", "STK002", "--tf-var", "vcpus=2", str(main))
    assert "cpu is not known before apply (var.cpu has no default (its value is given at plan time))" in unset.stdout
    # as the literal string it would be refused ("an object is required"); as HCL it is the object
    given = run_vmtune("check", "--format", "json", "--select", "STK002", "--tf-var", "vcpus=2", "--tf-var",
                       'cpu={ mode = "host-passthrough" }', str(main))
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout)["findings"] == []


def test_bad_var_options_are_one_line_exit_2(tmp_path: Path) -> None:
    main = tmp_path / "main.tf"
    main.write_text(_VM_MODULE)
    result = run_vmtune("check", "--tf-var", "vcpus", str(main))
    assert result.returncode == 2
    assert result.stderr == ("vmtune: --tf-var: 'vcpus' is not NAME=VALUE (a variable's name, =, its value) as "
                             "terraform -var takes it\n")
    missing = tmp_path / "nope.tfvars"
    result = run_vmtune("check", "--tf-var-file", str(missing), str(main))
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {missing}: cannot read a --tf-var-file: No such file or directory\n"
    bad = tmp_path / "bad.tfvars"
    bad.write_text("vcpus = 4\nvcpus = 5\n")
    result = run_vmtune("check", "--tf-var-file", str(bad), str(main))
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {bad}:2: variable 'vcpus' is given twice in this file (Terraform refuses it)\n"
    bad_json = tmp_path / "bad.tfvars.json"
    bad_json.write_text('{"vcpus":\n 4,,}')
    result = run_vmtune("check", "--tf-var-file", str(bad_json), str(main))
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {bad_json}:2: not valid JSON\n"
