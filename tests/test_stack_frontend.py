"""What every stack source gets from vmtune.stacks.frontend, through the real command:
suppressions written in YAML (comments and annotations), --diff and --fix on manifests and
stdin, files that hold no stack object, baselines and machine-readable locations."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_vmtune

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  template:
    spec:
      domain:
        cpu:
          cores: 16
        devices:
          interfaces:
          - name: default
            masquerade: {}
        memory:
          guest: 8Gi
      networks:
      - name: default
        pod: {}
"""
DEVICES_LINE = 11  # NET001's place: the mapping networkInterfaceMultiqueue belongs in


def _json(stdout: str) -> list[tuple[str, str, int]]:
    return [(f["rule"], f["severity"], f["line"]) for f in json.loads(stdout)["findings"]]


def _write(tmp_path: Path, text: str, name: str = "web.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def test_the_queue_warning_is_placed_with_its_field_path_in_json_and_sarif(tmp_path: Path) -> None:
    path = _write(tmp_path, VM)
    result = run_vmtune("check", "-f", "json", str(path))
    assert result.returncode == 1, result.stderr
    (net,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "NET001"]
    assert (net["severity"], net["line"], net["domain"]) == ("warning", DEVICES_LINE, "VirtualMachine/web")
    assert net["xpath"] == "spec.template.spec.domain.devices.networkInterfaceMultiqueue"
    sarif = json.loads(run_vmtune("check", "-f", "sarif", str(path)).stdout)
    located = [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in sarif["runs"][0]["results"]]
    assert ("NET001", path.as_posix().lstrip("/"), DEVICES_LINE) in located or \
        ("NET001", path.as_posix(), DEVICES_LINE) in located or any(
            r[0] == "NET001" and r[1].endswith("web.yaml") and r[2] == DEVICES_LINE for r in located)


def test_a_comment_with_a_reason_suppresses_the_entry_below_it(tmp_path: Path) -> None:
    text = VM.replace("        devices:\n", "        # vmtune: ignore[NET001] reason=\"licence server, one queue\"\n"
                                            "        devices:\n")
    result = run_vmtune("check", "-f", "json", str(_write(tmp_path, text)))
    assert "NET001" not in {f[0] for f in _json(result.stdout)}
    assert result.returncode == 0, result.stdout


def test_suppressions_without_reason_unused_or_malformed_are_reported_at_their_line(tmp_path: Path) -> None:
    unused = "        # vmtune: ignore[CLK002] reason=\"nothing to hide here\"\n"
    text = VM.replace("        devices:\n", "        # vmtune: ignore[NET001]\n        devices:\n").replace(
        "        memory:\n", unused + "        memory:\n").replace(
        "      networks:\n", "      # vmtune:ignore [DSK003]\n      networks:\n")
    found = _json(run_vmtune("check", "-f", "json", str(_write(tmp_path, text))).stdout)
    assert ("SUP001", "warning", 11) in found  # no reason: still suppresses, said
    assert "NET001" not in {f[0] for f in found}
    assert ("SUP003", "warning", 19) in found  # starts like one, does not parse
    assert ("SUP002", "warning", 16) in found  # matched no finding


def test_the_annotation_form_travels_with_the_object(tmp_path: Path) -> None:
    text = VM.replace("  name: web\n", "  name: web\n  annotations:\n"
                                      "    vmtune.io/ignore: 'ignore[NET001] reason=\"bench VM\"'\n")
    result = run_vmtune("check", "-f", "json", str(_write(tmp_path, text)))
    assert "NET001" not in {f[0] for f in _json(result.stdout)}, result.stdout


def test_diff_prints_the_yaml_edit_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path, VM)
    result = run_vmtune("check", "--diff", str(path))
    assert result.returncode == 1
    assert "+          networkInterfaceMultiqueue: true\n" in result.stdout
    assert path.read_text() == VM


def test_fix_writes_the_field_keeps_every_other_byte_and_is_idempotent(tmp_path: Path) -> None:
    crlf = VM.replace("\n", "\r\n").replace("  name: web\r\n", "  name: web   # the front end\r\n")
    path = _write(tmp_path, crlf)
    result = run_vmtune("check", "--fix", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed = path.read_bytes().decode()
    assert fixed == crlf.replace("          - name: default\r\n            masquerade: {}\r\n",
                                 "          - name: default\r\n            masquerade: {}\r\n"
                                 "          networkInterfaceMultiqueue: true\r\n")
    again = run_vmtune("check", "--fix", str(path))
    assert again.returncode == 0 and path.read_bytes().decode() == fixed


def test_stdin_yaml_is_checked_and_fix_prints_the_fixed_manifest(tmp_path: Path) -> None:
    checked = run_vmtune("check", "-", stdin=VM.encode())
    assert checked.returncode == 1 and f"<stdin>:{DEVICES_LINE}: NET001 warning" in checked.stdout
    fixed = run_vmtune("check", "--fix", "-q", "-", stdin=VM.encode())
    assert fixed.stdout.startswith(VM.split("          - name: default")[0])
    assert "networkInterfaceMultiqueue: true\n" in fixed.stdout


def test_a_named_yaml_without_stack_objects_is_one_line_exit_2_and_skipped_with_skip_non_domain(
        tmp_path: Path) -> None:
    path = _write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "cm.yaml")
    result = run_vmtune("check", str(path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {path}: no KubeVirt, OpenStack or Terraform definition in it "
                             "(--skip-non-domain skips such files)\n")
    quiet = run_vmtune("check", "--skip-non-domain", str(path))
    assert (quiet.returncode, quiet.stderr) == (0, "")


def test_the_hooks_skip_a_charts_templates_of_other_kinds(tmp_path: Path) -> None:
    """pre-commit passes every template of a chart to the manifest hooks (--skip-non-domain): a
    Service template is not YAML either, and was exit 2 (#50); it holds no stack object, so it is
    skipped unparsed. Named without the flag it is still said."""
    path = _write(tmp_path, "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\n"
                            "spec:\n  ports:\n  {{- range .Values.ports }}\n  - port: {{ . }}\n  {{- end }}\n",
                  "service.yaml")
    hooked = run_vmtune("check", "--skip-non-domain", str(path))
    assert (hooked.returncode, hooked.stderr) == (0, "") and "0 domain(s) checked" in hooked.stdout
    named = run_vmtune("check", str(path))
    assert named.returncode == 2 and "templated YAML (Helm, Jinja) is not YAML" in named.stderr


def test_helm_templates_are_refused_with_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n"
                            "  name: {{ .Values.name }}\n", "vm.yaml")
    result = run_vmtune("check", str(path))
    assert result.returncode == 2
    assert result.stderr == (f"vmtune: {path}:4: templated YAML (Helm, Jinja) is not YAML: render it first "
                             "(helm template …)\n")


def test_a_baseline_accepts_the_manifests_findings_until_they_change(tmp_path: Path) -> None:
    path = _write(tmp_path, VM)
    baseline = tmp_path / "baseline.json"
    written = run_vmtune("check", "--write-baseline", str(baseline), str(path))
    assert written.returncode == 0, written.stderr
    again = run_vmtune("check", "--baseline", str(baseline), str(path))
    assert again.returncode == 0, again.stdout


def test_fix_does_not_write_through_a_symlink(tmp_path: Path) -> None:
    target = _write(tmp_path, VM, "real.yaml")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    result = run_vmtune("check", "--fix", str(link))
    assert result.returncode == 2
    assert "symlink" in result.stderr and result.stderr.count("\n") == 1
    assert target.read_text() == VM


SHARED_DEVICES = """\
apiVersion: v1
kind: List
items:
- apiVersion: kubevirt.io/v1
  kind: VirtualMachine
  metadata: {name: a}
  spec:
    template:
      spec:
        domain:
          cpu: {cores: 16}
          devices: &devices
            interfaces:
            - {name: default, masquerade: {}}
          memory: {guest: 8Gi}
        networks:
        - {name: default, pod: {}}
- apiVersion: kubevirt.io/v1
  kind: VirtualMachine
  metadata: {name: b}
  spec:
    template:
      spec:
        domain:
          cpu: {cores: 16}
          devices: *devices
          memory: {guest: 8Gi}
        networks:
        - {name: default, pod: {}}
"""


def test_a_fix_the_yaml_editor_cannot_make_exactly_is_withheld_and_said_not_a_crash(tmp_path: Path) -> None:
    """Both VMs share their devices through an anchor: an edit of one changes the other, which
    yamledit's verification refuses. Was: the refusal ended the whole run (exit 2)."""
    path = _write(tmp_path, SHARED_DEVICES, "list.yaml")
    result = run_vmtune("check", "--fix", "-f", "json", str(path))
    assert result.returncode == 1, result.stderr
    assert path.read_text() == SHARED_DEVICES
    notes = [f["note"] for f in json.loads(result.stdout)["findings"] if f["rule"] == "NET001"]
    assert len(notes) == 2 and all("fix withheld: the edit cannot be made exactly (" in n for n in notes), notes


def test_another_kubevirt_version_is_said_not_silently_assumed(tmp_path: Path) -> None:
    path = _write(tmp_path, VM)
    result = run_vmtune("check", "--kubevirt-version", "v1.4.0", "-f", "json", str(path))
    said = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "STK002"]
    assert [(f["line"], f["message"]) for f in said] == [
        (1, "rendered as KubeVirt d923fdb (main, after v1.9.0-beta.0) writes it: differences of KubeVirt v1.4.0 "
            "other than its common-instancetypes are not modelled")]
    assert "STK002" not in {f[0] for f in _json(run_vmtune("check", "-f", "json", str(path)).stdout)}
