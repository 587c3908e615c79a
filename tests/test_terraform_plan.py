"""`terraform show -json` plans through the real command: each planned libvirt_domain checked
from its values, findings on the line of its "address" key naming the address, values the plan
marks after_unknown said and not judged, nothing fixed, bad JSON as one line.

fixtures/terraform/win2k22.plan.json is hand-written on terraform's plan representation
(hashicorp/terraform docs/internals/json-format.md: format_version, planned_values.root_module
with resources[] and child_modules[], resource_changes[] with change.after and
change.after_unknown; unknown values omitted from `after`, `true` in after_unknown); its win[0]
is fixtures/terraform/win2k22.tf without the dropped `vpindex` key, as Terraform plans it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ROOT, run_vmtune

PLAN = ROOT / "fixtures" / "terraform" / "win2k22.plan.json"


def _findings(stdout: str) -> list[tuple[str, str, int, str]]:
    return [(f["rule"], f["severity"], f["line"], f["xpath"]) for f in json.loads(stdout)["findings"]]


def test_a_plan_is_checked_resource_by_resource_on_the_lines_of_their_addresses() -> None:
    result = run_vmtune("check", "--format", "json", str(PLAN))
    assert result.returncode == 1, result.stderr  # CLK001, CLK002, HV001 are warnings
    assert _findings(result.stdout) == [
        # libvirt_domain.win[0]: its "address" key is on line 8
        ("CLK001", "warning", 8, "clock.timer[+]"),
        ("CLK002", "warning", 8, "features.hyper_v.vp_index.state"),
        ("CLK004", "info", 8, "clock.timer[+]"),
        ("DSK003", "info", 8, "io_threads"),
        ("DSK005", "info", 8, "devices.disks[0].driver.discard"),
        ("DSK008", "info", 8, "devices.disks[0].driver.cache"),
        ("HV001", "warning", 8, "features.hyper_v.vapic.state"),
        ("MEM001", "info", 8, "memory"),
        ("NET001", "info", 8, "devices.interfaces[0].driver.queues"),
        ("STK002", "info", 8, "/"),
        # module.db.libvirt_domain.vm, in planned_values' child_modules: line 46
        ("CLK004", "info", 46, "clock.timer[+]"),
        ("STK002", "info", 46, "/"),
    ]


def test_findings_name_the_address_and_the_attribute_and_say_the_fix_belongs_in_the_hcl() -> None:
    result = run_vmtune("check", "--select", "NET001,MEM001", str(PLAN))
    assert f"== libvirt_domain.win[0] ({PLAN})" in result.stdout
    assert (f"{PLAN}:8: NET001 info virtio NIC has one queue for 4 vCPUs (virtio-net-single-queue)\n"
            "    note: set devices.interfaces[0].driver.queues = 4 (a plan is not fixed: write it in the HCL of "
            "libvirt_domain.win[0])") in result.stdout
    assert "note: set memory in libvirt_domain.win[0]" in result.stdout


def test_values_known_only_after_apply_are_said_not_judged() -> None:
    result = run_vmtune("check", "--select", "STK002,NET001", str(PLAN))
    out = result.stdout
    assert (f"{PLAN}:8: STK002 info libvirt_domain.win[0]: devices.disks[0].source.file.file is not known before "
            "apply (after_unknown in the plan): not checked (assumed-input)") in out
    assert (f"{PLAN}:46: STK002 info module.db.libvirt_domain.vm: vcpu is not known before apply (after_unknown in "
            "the plan): not checked (assumed-input)") in out
    # db's vcpu is unknown: no vCPU count is judged for its NIC (win[0] has 4 and gets NET001)
    assert out.count("NET001") == 1


def test_fix_of_a_plan_changes_nothing(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    shutil.copyfile(PLAN, plan)
    result = run_vmtune("check", "--fix", str(plan))
    assert plan.read_bytes() == PLAN.read_bytes()
    assert result.returncode == 1  # the warnings stay: the fix belongs in the HCL


def test_resource_changes_alone_are_a_plan_and_a_deleted_domain_is_not_checked(tmp_path: Path) -> None:
    plan = tmp_path / "changes.json"
    plan.write_text(json.dumps({"format_version": "1.2", "resource_changes": [
        {"address": "libvirt_domain.gone", "mode": "managed", "type": "libvirt_domain", "name": "gone",
         "change": {"actions": ["delete"], "before": {"name": "gone", "type": "kvm"}, "after": None}},
        {"address": "libvirt_domain.vm", "mode": "managed", "type": "libvirt_domain", "name": "vm",
         "change": {"actions": ["create"], "after": {"name": "vm", "type": "kvm", "vcpu": 8, "devices": {
             "interfaces": [{"source": {"network": {"network": "default"}}, "model": {"type": "virtio"}}]}},
             "after_unknown": {"id": True}}}]}, indent=1))
    address_line = plan.read_text().splitlines().index('   "address": "libvirt_domain.vm",') + 1
    result = run_vmtune("check", "--format", "json", "--select", "NET001", str(plan))
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)["findings"]
    assert [(f["rule"], f["severity"], f["line"], f["message"]) for f in found] == [
        ("NET001", "warning", address_line, "virtio NIC has one queue for 8 vCPUs")]


def test_an_old_schema_plan_gets_the_xslt_advice(tmp_path: Path) -> None:
    plan = tmp_path / "old.json"
    plan.write_text(json.dumps({"format_version": "1.2", "planned_values": {"root_module": {"resources": [
        {"address": "libvirt_domain.old", "mode": "managed", "type": "libvirt_domain", "name": "old",
         "values": {"name": "old", "memory": 2048, "vcpu": 8, "cpu": [{"mode": "host-passthrough"}],
                    "network_interface": [{"network_name": "default"}]}}]}}}))
    result = run_vmtune("check", "--select", "NET001,STK002", str(plan))
    assert result.returncode == 1
    assert f"{plan}:1: NET001 warning virtio NIC has one queue for 8 vCPUs" in result.stdout
    assert "note: the provider 0.7/0.8 schema has no attribute for it: add an `xml { xslt" in result.stdout
    assert "libvirt_domain.old uses the provider's 0.7/0.8 schema" in result.stdout


def test_bad_plan_json_is_one_line_exit_2(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"format_version": "1.2", "planned_values": {"root_module": {"resources": [\n'
                    '{"address": "libvirt_domain.x", "type": "libvirt_domain",,}]}}}\n')
    result = run_vmtune("check", str(plan))
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {plan}:2: not valid YAML: did not find expected node content\n"


def test_a_plan_without_libvirt_domain_is_no_definition(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format_version": "1.2", "planned_values": {"root_module": {"resources": [
        {"address": "null_resource.x", "mode": "managed", "type": "null_resource", "name": "x", "values": {}}]}},
        "comment": "libvirt_domain"}))
    result = run_vmtune("check", str(plan))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {plan}: no KubeVirt, OpenStack or Terraform definition in it "
                             "(--skip-non-domain skips such files)\n")


def test_an_attribute_the_plan_has_and_vmtunes_schema_lacks_is_said_not_dropped_silently(tmp_path: Path) -> None:
    # Terraform planned it, so the provider has it: a newer provider than vmtune's table, not a typo (no STK003)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format_version": "1.2", "planned_values": {"root_module": {"resources": [
        {"address": "libvirt_domain.vm", "mode": "managed", "type": "libvirt_domain", "name": "vm",
         "values": {"name": "vm", "type": "kvm", "features": {"hyper_v": {"future_knob": {"state": "on"}}}}}]}}}))
    result = run_vmtune("check", "--select", "STK002,STK003", str(plan))
    assert result.returncode == 0
    assert (f"{plan}:1: STK002 info libvirt_domain.vm: features.hyper_v.future_knob is not in the schema vmtune "
            "renders (terraform-provider-libvirt 0.9 schema (6bd1e073, libvirtxml v1.11007.0)): not rendered, not "
            "checked (assumed-input)") in result.stdout
    assert "STK003" not in result.stdout
