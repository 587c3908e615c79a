"""Hostile stack sources (KubeVirt manifests, OpenStack flavors, images and nova.conf) as a pull
request's author writes them: pre-commit reads them, as root on hypervisors too. Wrong types,
huge counts and expansions, characters XML cannot hold and option-like names must be one line
naming the file (and line), exit 0/1/2, never a traceback, a hang or a command that does more
than it says. See SECURITY.md, "Configuration and policies" / "OpenStack flavors ...".
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path

import pytest
from mutate import run_vmtune_in_process
from stack_mutate import mutate_stack

import helpers
from conftest import ROOT, run_vmtune

KUBEVIRT = ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle"
OPENSTACK = ROOT / "fixtures" / "stacks" / "openstack"
HOST = ROOT / "fixtures" / "hosts" / "intel-2node.xml"


def _vm(domain: str, name: str = "a", extra: str = "") -> str:
    return (f"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {name}\nspec:\n  template:\n"
            f"    spec:\n      domain:\n{domain}\n{extra}")


def _timed(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    return helpers.cpu_run(*args, cwd=cwd, timeout=60)


def test_mutated_stack_sources_never_crash_hang_or_explode(tmp_path: Path) -> None:
    """A seeded fuzz of the KubeVirt oracle manifests and the OpenStack fixtures (hostile values in
    random fields, removed and copied subtrees, broken bytes), each checked and fixed in process
    as the CLI runs it. Before: 6 tracebacks in 300 files (unhashable names, `.inf` memory,
    `domain: 5` in CLK004's fix); bench/stack_fuzz.py runs thousands."""
    originals = sorted(KUBEVIRT.glob("*.yaml")) + sorted(
        p for p in OPENSTACK.iterdir() if p.suffix in (".yaml", ".json", ".conf"))
    rng = random.Random(20261127)
    problems = []
    for index in range(70):
        source = rng.choice(originals)
        target = tmp_path / f"{index:03d}-{source.name}"
        target.write_bytes(mutate_stack(source.read_bytes(), source.name, rng))
        for mode in ("check", "fix-latency-host"):
            outcome = run_vmtune_in_process(target, mode, HOST)
            if outcome.problem or outcome.seconds > 2:
                problems.append(f"{target.name} {mode}: {outcome.problem or f'{outcome.seconds:.1f} s'}")
    assert problems == []


@pytest.mark.parametrize("cpu, shown", [
    ("{cores: 100000000, dedicatedCpuPlacement: true}", "100,000,000"),
    ("{cores: 16384, sockets: 16384, threads: 16384, dedicatedCpuPlacement: true}", "over 10^12"),
    ("{cores: 1.0e+308}", "over 10^12"),  # a float to kubectl too (`1e308` is refused: yamltypes)
])
def test_a_vcpu_count_beyond_qemu_is_one_line_naming_the_cpu_field(tmp_path: Path, cpu: str, shown: str) -> None:
    """Before: 10^8 dedicated vCPUs rendered 10^8 <vcpupin>s (killed at 20 s, 4 GB); 16384³ was a
    MemoryError traceback with exit 1."""
    (tmp_path / "vm.yaml").write_text(_vm(f"        cpu: {cpu}"))
    done, cpu_seconds = _timed("check", "vm.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (f"vmtune: vm.yaml:9: VirtualMachine/a: {shown} vCPUs (sockets × cores × threads, or the CPU "
                           "request): more than 4,096, the most QEMU's q35 machine starts\n")
    assert cpu_seconds < 2


def test_4096_dedicated_vcpus_render_in_bounded_time(tmp_path: Path) -> None:
    (tmp_path / "vm.yaml").write_text(_vm("        cpu: {cores: 4096, dedicatedCpuPlacement: true}"))
    done, cpu_seconds = _timed("check", "vm.yaml", cwd=tmp_path)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr
    assert cpu_seconds < 3


def test_template_parameters_expand_to_at_most_4_mib(tmp_path: Path) -> None:
    """A 200 KB default used 20,000 times: before, 6 GB and killed at 20 s; now one line, fast."""
    (tmp_path / "t.yaml").write_text(
        "apiVersion: template.openshift.io/v1\nkind: Template\nparameters:\n- name: X\n  value: " + "x" * 200_000
        + "\nobjects:\n- apiVersion: kubevirt.io/v1\n  kind: VirtualMachine\n  metadata: {name: a}\n"
        "  spec: {template: {spec: {domain: {}, volumes: [{name: '" + "${X}" * 20_000 + "'}]}}}\n")
    done, cpu_seconds = _timed("check", "t.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == ("vmtune: t.yaml:1: Template: its parameters expand to more than 4 MiB of text: process it "
                           "first (oc process)\n")
    assert cpu_seconds < 2


def test_a_typed_parameter_is_read_by_the_bounded_loader(tmp_path: Path) -> None:
    """`${{X}}` whose default is YAML: a tag that would run code stays text, and nested aliases
    (a billion laughs) are refused by the same loader as the file's."""
    laughs = ", ".join(["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"] + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]"
                                                          for i in range(1, 9)])
    marker = tmp_path / "ran"
    for value in ("{" + laughs + "}", f"!!python/object/apply:os.system ['touch {marker}']"):
        (tmp_path / "t.yaml").write_text(
            "apiVersion: template.openshift.io/v1\nkind: Template\nparameters:\n- name: X\n  value: "
            + json.dumps(value) + "\nobjects:\n- apiVersion: kubevirt.io/v1\n  kind: VirtualMachine\n"
            "  metadata: {name: a}\n  spec: {template: {spec: {domain: {devices: '${{X}}'}}}}\n")
        done, cpu_seconds = _timed("check", "t.yaml", cwd=tmp_path)
        assert done.returncode in (0, 1), done.stderr
        assert cpu_seconds < 2 and not marker.exists()


@pytest.mark.parametrize("domain, extra", [
    ("        devices: {disks: [{name: [a]}]}", "      volumes: [{name: {b: 1}, containerDisk: {image: x}}]\n"),
    ("        devices: {disks: [{name: {x: 1}, disk: {bus: virtio}}]}", ""),
    ("        memory: {guest: .inf}", ""),
    ("        memory: {guest: 99999999Ti, hugepages: {pageSize: 1Zi}}", ""),
    ("        cpu: {cores: x, features: [{name: [1]}]}", "      networks: 5\n"),
    ("        devices: {interfaces: [x, 1, null]}\n        features: {hyperv: true}", ""),
])
def test_wrong_types_in_a_manifest_are_checked_without_a_traceback(tmp_path: Path, domain: str, extra: str) -> None:
    (tmp_path / "vm.yaml").write_text(_vm(domain, extra=extra))
    done = run_vmtune("check", "vm.yaml", cwd=tmp_path)
    assert done.returncode in (0, 1) and done.stderr == "", done.stderr


def test_a_name_xml_cannot_hold_is_checked_and_escaped_in_every_report(tmp_path: Path) -> None:
    """Before: `vmtune: VirtualMachine/a\\x00b:2: malformed XML: ...` (the rendered XML's line, exit
    2): a NUL or ESC in a name made the rendered domain XML libxml2 refuses."""
    (tmp_path / "vm.yaml").write_text(_vm("        clock: {timer: {}}", name='"\\e[31m::error::a\\0##[error]"'))
    done = run_vmtune("check", "-f", "github", "vm.yaml", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines()[0] == (
        "::notice file=vm.yaml,line=9,title=CLK004 rtc-tickpolicy-missing::VirtualMachine/\\x1b[31m::error::a\\x00"
        "\\x23#[error]: rtc timer has no tickpolicy='catchup' (spec.template.spec.domain.clock: "
        "{utc: {}, timer: {rtc: {tickPolicy: catchup}}} (a clock needs utc or timezone))")


def _openstack_argv(words: list[str]) -> argparse.Namespace:
    """`openstack image set` as python-openstackclient's argparse parser reads its arguments."""
    parser = argparse.ArgumentParser(prog="openstack image set")
    parser.add_argument("--property", action="append", default=[])
    parser.add_argument("--public", action="store_true")
    parser.add_argument("--name")
    parser.add_argument("image")
    return parser.parse_args(words)


@pytest.mark.parametrize("name", ["--public", "-rf", "--name=pwned", "--property=hw_vif_model=e1000 x",
                                  "x; touch MARK", "nginx"])
def test_the_printed_command_gives_the_name_as_the_image_never_an_option(tmp_path: Path, name: str) -> None:
    """The `openstack image set` line a finding prints, run by a real shell: the words it passes
    name the image (before: `--public` was an option that makes the image public)."""
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"id": "5e1d", "name": name, "disk_format": "qcow2", "container_format": "bare",
                                 "min_ram": 0, "min_disk": 0, "properties": {"os_distro": "ubuntu"}}, indent=1))
    (tmp_path / "flavor.json").write_text('{"name": "m1.nginx", "vcpus": 16, "ram": 16384, "disk": 40, '
                                          '"properties": {}}\n')
    done = run_vmtune("check", "-f", "json", "flavor.json", "image.json", cwd=tmp_path)
    (net,) = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "NET001"]
    command = net["note"].split("; run: ", 1)[1]
    assert command.startswith("openstack image set --property hw_vif_multiqueue_enabled=true ")
    words = subprocess.run(["sh", "-c", f"openstack() {{ shift 2; printf '%s\\n' \"$@\"; }}; {command}"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout.splitlines()
    parsed = _openstack_argv(words)
    assert (parsed.image, parsed.property, parsed.public, parsed.name) == (
        name, ["hw_vif_multiqueue_enabled=true"], False, None)
    assert not (tmp_path / "MARK").exists()


def test_an_edit_yamledit_refuses_is_withheld_with_its_reason_and_writes_nothing(tmp_path: Path) -> None:
    """A mapping that takes keys from a merge key cannot be edited without guessing. Before: the
    refusal ended the run as `vmtune: spec.template.spec.domain.clock: ...`, without the file to
    look at; now that fix is withheld, the finding says why, and the rest of the run goes on."""
    text = ("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n"
            "      domain:\n        <<: {devices: {interfaces: [{name: default, masquerade: {}}]}}\n"
            "        cpu: {cores: 4}\n        memory: {guest: 4Gi}\n      networks: [{name: default, pod: {}}]\n")
    (tmp_path / "vm.yaml").write_text(text)
    done = run_vmtune("check", "--fix", "--select", "CLK004", "vm.yaml", cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "vm.yaml").read_text() == text, done.stderr
    assert done.stderr == ""
    assert ("fix withheld: the edit cannot be made exactly (spec.template.spec.domain.clock: the mapping takes keys "
            "from a merge key (<<): not edited)") in done.stdout


def _many_vms(count: int) -> str:
    source = (KUBEVIRT / "var-dedicated-cpu.yaml").read_text()
    return "---\n".join(source.replace("name: var-dedicated-cpu", f"name: vm{i}") for i in range(count))


def test_fix_of_many_vms_in_one_file_stays_linear(tmp_path: Path) -> None:
    """Each edit re-parsed and verified the whole file: `--fix` of 200 VMs in one 190 KB file took
    124 s of CPU (50: 6.5 s, 100: 27 s), 1,000 VMs about an hour: a pre-commit hook a pull
    request could hang. yamledit plans the edits of one round on one parse and verifies them with
    one more; two keys below one new mapping (CLK004's clock.utc and clock.timer) made every
    round fail its verification and fall back to one parse per edit (60 VMs: 18 s)."""
    (tmp_path / "vms.yaml").write_text(_many_vms(300))
    done, cpu_seconds = _timed("check", "--fix", "--select", "NET001,CLK004", "vms.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("300 domain(s) checked: 0 finding(s) (0 error, 0 warning, 0 info); "
                                "600 fix(es) applied\n")
    text = (tmp_path / "vms.yaml").read_text()
    assert text.count("networkInterfaceMultiqueue: true") == 300 and text.count("tickPolicy: catchup") == 300
    assert cpu_seconds < 10


def test_a_refused_edit_in_a_later_document_names_its_line_in_the_file() -> None:
    from vmtune.stacks import yamledit

    text = "a: 1\n---\nb: 2\n---\nx: {k: 1}\nd:\n  <<: {c: 1}\n  e: 1\n"
    with pytest.raises(yamledit.YamlEditError) as refused:
        yamledit.set_paths(text.encode(), [(1, ("b",), 3), (2, ("d", "c"), 2)])
    assert (refused.value.line, refused.value.message) == (
        7, "d.c: the mapping takes keys from a merge key (<<): not edited")
