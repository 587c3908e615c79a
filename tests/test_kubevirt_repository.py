"""KubeVirt manifests as GitOps repositories keep them (issue 50): cluster-api-provider-kubevirt's
machine templates read as the VMs they make, instancetypes and preferences found in other files of
the same work tree, and what vmtune did not see said, never fixed from the partial view. Through
the real command: findings and their lines, exact fixed bytes, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from kubevirt_schema import validate

from vmtune.stacks.frontend import StackContext, read_file
from vmtune.stacks.kubevirt import frontend

from conftest import FIXTURES, run_vmtune

CAPK = FIXTURES / "stacks" / "kubevirt" / "capk" / "cluster.yaml"


def _findings(stdout: str) -> list[tuple[str, str, int, str]]:
    return [(f["rule"], f["severity"], f["line"], f["domain"]) for f in json.loads(stdout)["findings"]]


# -- cluster-api-provider-kubevirt -------------------------------------------------------------------

def test_a_kubevirt_machine_template_is_checked_as_the_vm_it_makes(tmp_path: Path) -> None:
    done = run_vmtune("check", "--isolated", "-f", "json", str(CAPK))
    assert done.returncode == 1, done.stderr
    assert _findings(done.stdout) == [
        ("CLK004", "info", 32, "KubevirtMachineTemplate/tenant-a-md-0"),
        ("DSK003", "info", 32, "KubevirtMachineTemplate/tenant-a-md-0"),
        ("MEM001", "info", 35, "KubevirtMachineTemplate/tenant-a-md-0"),
        ("NET001", "warning", 37, "KubevirtMachineTemplate/tenant-a-md-0")]
    (net001,) = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "NET001"]
    assert net001["note"] == ("spec.template.spec.virtualMachineTemplate.spec.template.spec.domain.devices."
                              "networkInterfaceMultiqueue: true")


def test_its_fix_is_written_in_the_vm_template_and_kubevirt_accepts_the_vm(tmp_path: Path) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_bytes(CAPK.read_bytes())
    done = run_vmtune("check", "--isolated", "--fix", str(manifest))
    assert done.returncode == 0, done.stdout + done.stderr
    before = CAPK.read_text().splitlines(keepends=True)
    assert manifest.read_text() == "".join(
        [*before[:41], "                  networkInterfaceMultiqueue: true\n", *before[41:]])
    template = next(d for d in yaml.safe_load_all(manifest.read_text()) if d["kind"] == "KubevirtMachineTemplate")
    vm = template["spec"]["template"]["spec"]["virtualMachineTemplate"]
    validate({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", **vm})
    assert run_vmtune("check", "--isolated", "--fix", str(manifest)).returncode == 0
    assert manifest.read_text() == "".join([*before[:41], "                  networkInterfaceMultiqueue: true\n",
                                            *before[41:]])


def test_the_machine_templates_vm_renders_as_the_same_vm_written_plainly() -> None:
    """The wrapper adds nothing: its VM, written as a VirtualMachine, renders to the same domain."""
    docs = list(yaml.safe_load_all(CAPK.read_text()))
    template = next(d for d in docs if d["kind"] == "KubevirtMachineTemplate")
    plain = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
             "metadata": {"name": template["metadata"]["name"], "namespace": "tenants"},
             "spec": template["spec"]["template"]["spec"]["virtualMachineTemplate"]["spec"]}
    (wrapped,), _ = frontend.render([read_file("capk.yaml", CAPK.read_bytes())], StackContext())
    (vm,), _ = frontend.render([read_file("vm.yaml", yaml.safe_dump(plain).encode())], StackContext())
    assert wrapped.xml == vm.xml and wrapped.name == "KubevirtMachineTemplate/tenant-a-md-0"


def test_other_cluster_api_kinds_are_not_read(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CAPK.read_text().split("---\n")[0])  # the KubevirtCluster alone
    done = run_vmtune("check", "--isolated", "c.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "vmtune: c.yaml: no KubeVirt or OpenStack definition in it (--skip-non-domain skips such " \
                          "files)\n"
