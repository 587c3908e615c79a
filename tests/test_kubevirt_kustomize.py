"""KubeVirt manifests in kustomizations: judged as the real `kubectl kustomize` (or kustomize)
builds them, findings on the file that writes the value, fixes in that file, and hostile
kustomizations refused with nothing run (vmtune.stacks.kubevirt.kustomize)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_vmtune

pytestmark = pytest.mark.skipif(shutil.which("kustomize") is None and shutil.which("kubectl") is None,
                                reason="neither kustomize nor kubectl is on PATH")

BASE_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: 4
        devices:
          networkInterfaceMultiqueue: true
          interfaces:
            - name: default
              model: virtio
              masquerade: {}
          disks:
            - name: root
              disk:
                bus: sata
        resources:
          requests:
            memory: 4Gi
      networks:
        - name: default
          pod: {}
      volumes:
        - name: root
          containerDisk:
            image: quay.io/containerdisks/fedora:40
"""
BASE_KUSTOMIZATION = "resources:\n  - vm.yaml\n"
NIC_PATCH = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: web
spec:
  template:
    spec:
      domain:
        devices:
          interfaces:
            - name: default
              model: e1000
              masquerade: {}
"""
PROD_KUSTOMIZATION = "resources:\n  - ../../base\npatches:\n  - path: nic.yaml\nnamePrefix: prod-\n"
DEV_KUSTOMIZATION = "resources:\n  - ../../base\nnamePrefix: dev-\n"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "gitops"
    for folder in ("base", "overlays/prod", "overlays/dev"):
        (repo / folder).mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "base" / "vm.yaml").write_text(BASE_VM)
    (repo / "base" / "kustomization.yaml").write_text(BASE_KUSTOMIZATION)
    (repo / "overlays" / "prod" / "nic.yaml").write_text(NIC_PATCH)
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text(PROD_KUSTOMIZATION)
    (repo / "overlays" / "dev" / "kustomization.yaml").write_text(DEV_KUSTOMIZATION)
    return repo


def _check(repo: Path, *args: str) -> tuple[int, list[tuple[str, str, str, int]]]:
    done = run_vmtune("check", "--isolated", "-f", "json", *args, cwd=repo)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    found = json.loads(done.stdout)["findings"]
    return done.returncode, sorted((f["domain"], f["file"], f["rule"], f["line"]) for f in found)


def test_an_overlay_patch_is_judged_as_the_vm_its_overlay_builds(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    code, found = _check(repo, "overlays/prod/nic.yaml")  # what pre-commit passes when the patch changed
    prod = "VirtualMachine/prod-web (kustomize overlays/prod)"
    assert code == 1
    # the e1000 the patch writes is judged on the patch's line; the sata disk the base writes on
    # the base's; nothing of a whole VM is judged on the patch alone, and no virtio-queue advice
    # for a NIC that is not virtio
    assert found == [(prod, "base/vm.yaml", "DSK004", 21),
                     (prod, "overlays/prod/nic.yaml", "CLK004", 8),
                     (prod, "overlays/prod/nic.yaml", "NET004", 12)]


def test_a_changed_base_is_judged_as_each_overlay_builds_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _code, found = _check(repo, "base/vm.yaml")
    domains = sorted({f[0] for f in found})
    assert domains == ["VirtualMachine/dev-web (kustomize overlays/dev)",
                       "VirtualMachine/prod-web (kustomize overlays/prod)"]
    dev, prod = (d for d in domains)
    # the dev overlay keeps the base's virtio NIC (its ring advice, at the VMI spec as for any VM);
    # prod's patch makes it e1000: no virtio advice there
    assert found == [(dev, "base/vm.yaml", "CLK004", 9), (dev, "base/vm.yaml", "DSK004", 21),
                     (dev, "base/vm.yaml", "NET007", 8),
                     (prod, "base/vm.yaml", "DSK004", 21), (prod, "overlays/prod/nic.yaml", "CLK004", 8),
                     (prod, "overlays/prod/nic.yaml", "NET004", 12)]


def test_fix_writes_each_value_in_the_file_that_owns_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    done = run_vmtune("check", "--isolated", "--fix", "--unsafe-fixes", "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert (repo / "overlays" / "prod" / "nic.yaml").read_text() == NIC_PATCH.replace("model: e1000", "model: virtio")
    assert (repo / "base" / "vm.yaml").read_text() == BASE_VM.replace("bus: sata", "bus: virtio")
    assert (repo / "overlays" / "prod" / "kustomization.yaml").read_text() == PROD_KUSTOMIZATION
    _code, after = _check(repo, "overlays/prod/nic.yaml")
    assert not any(rule in ("NET004", "DSK004") for _d, _f, rule, _l in after)


def test_an_added_field_goes_into_the_overlays_patch_not_the_shared_base(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _build(repo / "overlays" / "dev")
    done = run_vmtune("check", "--isolated", "--fix", "--select", "CLK004", "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "overlays" / "prod" / "nic.yaml").read_text() == NIC_PATCH + (
        "        clock:\n          utc: {}\n          timer:\n            rtc:\n              tickPolicy: catchup\n")
    assert (repo / "base" / "vm.yaml").read_text() == BASE_VM
    assert _build(repo / "overlays" / "dev") == before  # the other overlay builds what it built
    assert b"tickPolicy: catchup" in _build(repo / "overlays" / "prod")


def _severities(repo: Path) -> dict[tuple[str, str], int]:
    """(object, rule) -> the highest severity, over every overlay as kubectl kustomize builds it."""
    done = run_vmtune("check", "--isolated", "-f", "json", "overlays/prod/kustomization.yaml",
                      "overlays/dev/kustomization.yaml", cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    levels = {"info": 0, "warning": 1, "error": 2}
    worst: dict[tuple[str, str], int] = {}
    for finding in json.loads(done.stdout)["findings"]:
        key = (finding["domain"], finding["rule"])
        worst[key] = max(worst.get(key, 0), levels[finding["severity"]])
    return worst


def test_the_fixed_tree_built_again_is_no_worse_in_any_finding(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _severities(repo)
    done = run_vmtune("check", "--isolated", "--fix", "--unsafe-fixes", "overlays/prod/nic.yaml", "base/vm.yaml",
                      cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    after = _severities(repo)
    assert all(level <= before.get(key, 0) for key, level in after.items()), (before, after)
    assert sum(after.values()) < sum(before.values())  # the two warnings (e1000, sata) are gone
    assert not any(level for level in after.values())


def _build(directory: Path) -> bytes:
    tool = shutil.which("kustomize")
    command = [tool, "build", str(directory)] if tool else ["kubectl", "kustomize", str(directory)]
    return subprocess.run(command, check=True, capture_output=True).stdout


# -- hostile kustomizations ------------------------------------------------------------------------

PATCHED = "patches:\n  - path: nic.yaml\nnamePrefix: prod-\n"
HOSTILE = {  # shape -> (the kustomization, the line refused, what the line says)
    "exec plugin": (f"resources:\n  - ../../base\n{PATCHED}generators:\n  - gen.yaml\n", 6, "generators runs plugins"),
    "transformer": (f"resources:\n  - ../../base\n{PATCHED}transformers:\n  - t.yaml\n", 6,
                    "transformers runs plugins"),
    "validator": (f"resources:\n  - ../../base\n{PATCHED}validators:\n  - v.yaml\n", 6, "validators runs plugins"),
    "helm chart": (f"resources:\n  - ../../base\n{PATCHED}helmCharts:\n  - name: x\n    repo: https://example.org/c\n",
                   6, "helmCharts runs plugins"),
    "https base": (f"resources:\n  - ../../base\n  - https://example.org/base\n{PATCHED}", 3, "is remote"),
    "github base": (f"resources:\n  - ../../base\n  - github.com/org/repo//base?ref=v1\n{PATCHED}", 3, "is remote"),
    "git:: base": (f"resources:\n  - ../../base\n  - git::https://example.org/repo.git\n{PATCHED}", 3, "is remote"),
    "ssh base": (f"resources:\n  - ../../base\n  - ssh://git@example.org/repo.git\n{PATCHED}", 3, "is remote"),
    "outside": (f"resources:\n  - ../../base\n  - ../../../outside\n{PATCHED}", 3, "resolves outside the work tree"),
    "absolute": (f"resources:\n  - ../../base\n  - /etc\n{PATCHED}", 3, "absolute path"),
    "symlink out": (f"resources:\n  - ../../base\n  - link\n{PATCHED}", 3, "resolves outside the work tree"),
    "generator env outside": (f"resources:\n  - ../../base\n{PATCHED}configMapGenerator:\n  - name: c\n    envs:\n"
                              "      - ../../../outside/secret.env\n", 9, "resolves outside the work tree"),
    "generator file outside": (f"resources:\n  - ../../base\n{PATCHED}secretGenerator:\n  - name: s\n    files:\n"
                               "      - key=../../../outside/secret.env\n", 9, "resolves outside the work tree"),
    "openapi outside": (f"resources:\n  - ../../base\n{PATCHED}openapi:\n  path: ../../../outside/schema.json\n", 7,
                        "resolves outside the work tree"),
    "crds outside": (f"resources:\n  - ../../base\n{PATCHED}crds:\n  - ../../../outside/crd.yaml\n", 7,
                     "resolves outside the work tree"),
    "base's patch outside": (PROD_KUSTOMIZATION, 4, "resolves outside the work tree"),
    # kustomize decodes with Go's encoding/json: a key in another case (or with 'ſ' for 's') is the field
    "Resources": (f"resources:\n  - ../../base\n{PATCHED}Resources:\n  - ../../../outside\n", 6,
                  "'Resources' is 'resources' to kustomize"),
    "long-s resources": (f"{PATCHED}re\u017fources:\n  - ../../base\n", 4, "is 'resources' to kustomize"),
    "Generators": (f"resources:\n  - ../../base\n{PATCHED}Generators:\n  - gen.yaml\n", 6,
                   "'Generators' is 'generators' to kustomize"),
    "HELMCHARTS": (f"resources:\n  - ../../base\n{PATCHED}HELMCHARTS:\n  - name: x\n", 6,
                   "is 'helmCharts' to kustomize"),
    "patch Path": ("resources:\n  - ../../base\npatches:\n  - path: nic.yaml\n  - Path: ../../../outside/p.yaml\n",
                   5, "'Path' is 'path' to kustomize"),
    "generator Envs": (f"resources:\n  - ../../base\n{PATCHED}configMapGenerator:\n  - name: c\n    Envs:\n"
                       "      - ../../../outside/secret.env\n", 8, "'Envs' is 'envs' to kustomize"),
}


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_a_hostile_kustomization_is_refused_with_nothing_run(tmp_path: Path, shape: str) -> None:
    repo = _repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.env").write_text("TOKEN=secret\n")
    (outside / "kustomization.yaml").write_text("resources: []\n")
    marker = tmp_path / "ran"
    plugin = f"#!/bin/sh\ntouch {marker}\n"
    prod = repo / "overlays" / "prod"
    for name in ("gen.yaml", "t.yaml", "v.yaml"):
        (prod / name).write_text("apiVersion: example.org/v1\nkind: Exec\nmetadata:\n  name: x\n  annotations:\n"
                                 "    config.kubernetes.io/function: |\n      exec:\n        path: ./run.sh\n")
    (prod / "run.sh").write_text(plugin)
    (prod / "run.sh").chmod(0o755)
    os.symlink(outside, prod / "link")
    text, line, said = HOSTILE[shape]
    where = "overlays/prod/kustomization.yaml"
    if shape == "base's patch outside":  # a base the overlay names reads outside: refused at the base's line
        (repo / "base" / "kustomization.yaml").write_text(f"{BASE_KUSTOMIZATION}patches:\n"
                                                          "  - path: ../../outside/p.yaml\n")
        where = "base/kustomization.yaml"
    (prod / "kustomization.yaml").write_text(text)
    done = run_vmtune("check", "--isolated", "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"vmtune: {where}:{line}: kustomize: "), \
        done.stderr
    assert said in lines[0]
    assert "secret" not in done.stdout + done.stderr.replace("secret.env", "").replace("secretGenerator", "")
    assert not marker.exists()


def test_a_field_in_another_case_cannot_build_a_base_outside_the_copy(tmp_path: Path) -> None:
    # `Resources:` is kustomize's `resources`; a relative path climbing to / from the temporary
    # copy reaches any kustomization of the machine (kustomize loads a base directory outside the
    # root): its objects were built and judged as the overlay's
    repo = _repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "vm.yaml").write_text(BASE_VM.replace("virtio", "e1000"))
    (outside / "kustomization.yaml").write_text("resources:\n  - vm.yaml\n")
    climb = "../" * 40 + str(outside).lstrip("/")
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text(f"Resources:\n  - {climb}\n{PATCHED}")
    done = run_vmtune("check", "--isolated", "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == ["vmtune: overlays/prod/kustomization.yaml:1: kustomize: 'Resources' is "
                                        "'resources' to kustomize (it ignores case): spell it 'resources'"]
    assert "prod-web" not in done.stdout


def test_a_failing_build_is_one_bounded_line_naming_the_kustomization(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text(PROD_KUSTOMIZATION + "images: 7\n")
    done = run_vmtune("check", "--isolated", "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("vmtune: overlays/prod/kustomization.yaml: kustomize: the build "
                                                   "failed: "), done.stderr
    assert str(tmp_path) not in lines[0]


def test_another_apps_kustomization_that_uses_helm_is_not_this_front_ends(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "apps" / "web").mkdir(parents=True)
    (repo / "apps" / "web" / "kustomization.yaml").write_text("helmCharts:\n  - name: nginx\n    repo: "
                                                              "https://example.org/charts\n")
    done = run_vmtune("check", "--isolated", "--skip-non-domain", "apps/web/kustomization.yaml",
                      "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "apps/web" not in done.stdout + done.stderr


# -- the shipped pre-commit hooks on a GitOps repository ---------------------------------------------

CHART_TEMPLATE = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {{ .Release.Name }}-vm
spec:
  template:
    spec:
      domain:
        devices:
          interfaces:
            - name: default
              model: {{ .Values.nicModel }}
"""


def _hook_entry(hook_id: str) -> list[str]:
    import yaml

    from conftest import ROOT

    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    entry = hooks[hook_id]["entry"].split()
    assert entry[0] == "vmtune"
    return entry[1:]


def test_the_manifest_hooks_on_a_gitops_repo_give_no_false_warning_and_no_harmful_fix(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "overlays" / "prod" / "nic.yaml").write_text(NIC_PATCH.replace("e1000", "virtio"))
    (repo / "base" / "vm.yaml").write_text(BASE_VM.replace("bus: sata", "bus: virtio"))
    chart = repo / "charts" / "vm"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: vm\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("nicModel: virtio\n")
    (chart / "templates" / "vm.yaml").write_text(CHART_TEMPLATE)
    changed = ["overlays/prod/nic.yaml", "overlays/prod/kustomization.yaml", "charts/vm/templates/vm.yaml",
               "charts/vm/values.yaml", "charts/vm/Chart.yaml"]
    done = run_vmtune(*_hook_entry("vmtune-check-manifests"), "--isolated", "-f", "json", *changed, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)["findings"]
    assert [f for f in found if f["severity"] != "info"] == []
    assert all(f["file"] in ("overlays/prod/nic.yaml", "base/vm.yaml", "charts/vm/templates/vm.yaml") for f in found)
    if shutil.which("helm") is None:  # the template is skipped, said once; else rendered and judged
        assert "charts/vm/templates/vm.yaml: skipped: a Helm chart's template is judged rendered, and rendering " \
               "it needs helm on PATH" in done.stderr
    else:
        assert any(f["file"] == "charts/vm/templates/vm.yaml" for f in found) or done.stderr == ""
    before = {p: (repo / p).read_bytes() for p in ("base/vm.yaml", "overlays/dev/kustomization.yaml",
                                                   "charts/vm/templates/vm.yaml")}
    dev = _build(repo / "overlays" / "dev")
    fixed = run_vmtune(*_hook_entry("vmtune-fix-manifests"), "--isolated", *changed, cwd=repo)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert {p: (repo / p).read_bytes() for p in before} == before  # the shared base and the chart untouched
    assert _build(repo / "overlays" / "dev") == dev


def test_a_value_a_json6902_patch_sets_is_placed_on_its_operation_and_not_fixed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    prod = repo / "overlays" / "prod"
    (prod / "nic.yaml").unlink()
    ops = "- op: add\n  path: /metadata/labels\n  value: {tier: web}\n" \
          "- op: replace\n  path: /spec/template/spec/domain/devices/interfaces/0/model\n  value: e1000\n"
    (prod / "nic.json.yaml").write_text(ops)
    (prod / "kustomization.yaml").write_text("resources:\n  - ../../base\npatches:\n  - path: nic.json.yaml\n"
                                             "    target:\n      kind: VirtualMachine\n      name: web\n")
    _code, found = _check(repo, "overlays/prod/nic.json.yaml")
    assert ("overlays/prod/nic.json.yaml", "NET004", 4) in [f[1:] for f in found]
    done = run_vmtune("check", "--isolated", "--fix", "--unsafe-fixes", "overlays/prod/nic.json.yaml", cwd=repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (prod / "nic.json.yaml").read_text() == ops
    assert "fix withheld" not in done.stdout  # never offered: said as not fixed, with why
    assert "not fixed: a JSON 6902 patch sets it" in done.stdout
    assert (repo / "base" / "vm.yaml").read_text() == BASE_VM.replace("bus: sata", "bus: virtio")


def test_a_patch_written_in_the_kustomization_owns_what_it_sets(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    prod = repo / "overlays" / "prod"
    (prod / "nic.yaml").unlink()
    kustomization = ("resources:\n  - ../../base\npatches:\n  - patch: |-\n      apiVersion: kubevirt.io/v1\n"
                     "      kind: VirtualMachine\n      metadata:\n        name: web\n      spec:\n        template:\n"
                     "          spec:\n            domain:\n              devices:\n                disks:\n"
                     "                  - name: root\n                    disk:\n                      bus: sata\n")
    (prod / "kustomization.yaml").write_text(kustomization)
    _code, found = _check(repo, "overlays/prod/kustomization.yaml")
    assert ("overlays/prod/kustomization.yaml", "DSK004", 4) in [f[1:] for f in found], found
    done = run_vmtune("check", "--isolated", "--fix", "--unsafe-fixes", "overlays/prod/kustomization.yaml", cwd=repo)
    assert (prod / "kustomization.yaml").read_text() == kustomization
    assert (repo / "base" / "vm.yaml").read_text() == BASE_VM  # the base's sata is not what this VM runs
    assert "not fixed: a patch written inside the kustomization sets it" in done.stdout


def test_a_function_annotation_on_a_resource_runs_nothing(tmp_path: Path) -> None:
    """kustomize runs KRM functions only from the fields vmtune refuses, and never without the
    flags vmtune never passes: a resource that asks for one is built as data."""
    repo = _repo(tmp_path)
    marker = tmp_path / "ran"
    base = repo / "base"
    (base / "run.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (base / "run.sh").chmod(0o755)
    (base / "fn.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fn\n  annotations:\n"
                                  "    config.kubernetes.io/function: |\n      exec:\n        path: ./run.sh\n"
                                  "data: {a: b}\n")
    (base / "kustomization.yaml").write_text("resources:\n  - vm.yaml\n  - fn.yaml\n")
    code, found = _check(repo, "overlays/prod/nic.yaml")
    assert code == 1 and ("overlays/prod/nic.yaml", "NET004", 12) in [f[1:] for f in found]
    assert not marker.exists()


# -- Helm charts (scripts/test puts helm's release binary on PATH: scripts/_env.sh ensure_helm) ------

needs_helm = pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not on PATH "
                                "(scripts/test installs it)")
HELM_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {{ .Release.Name }}-vm
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        devices:
          interfaces:
            - name: default
              model: e1000
              masquerade: {}
          disks:
            - name: root
              disk:
                bus: {{ .Values.diskBus }}
        resources:
          requests:
            memory: 2Gi
      networks:
        - name: default
          pod: {}
      volumes:
        - name: root
          containerDisk:
            image: quay.io/containerdisks/fedora:40
"""


def _chart(tmp_path: Path, chart_yaml: str = "apiVersion: v2\nname: vm\nversion: 0.1.0\n") -> Path:
    repo = tmp_path / "repo"
    (repo / "charts" / "vm" / "templates").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "charts" / "vm" / "Chart.yaml").write_text(chart_yaml)
    (repo / "charts" / "vm" / "values.yaml").write_text("diskBus: sata\n")
    (repo / "charts" / "vm" / "templates" / "vm.yaml").write_text(HELM_VM)
    return repo


@needs_helm
def test_a_charts_vm_is_judged_as_helm_renders_it_and_never_fixed_in_the_chart(tmp_path: Path) -> None:
    repo = _chart(tmp_path)
    code, found = _check(repo, "--skip-non-domain", "charts/vm/templates/vm.yaml")
    vm = "VirtualMachine/release-vm (helm charts/vm)"
    assert code == 1
    # e1000 is written literally in the template: its line; sata comes from values.yaml: the
    # template's first line
    assert (vm, "charts/vm/templates/vm.yaml", "NET004", 13) in found
    assert (vm, "charts/vm/templates/vm.yaml", "DSK004", 1) in found
    done = run_vmtune("check", "--isolated", "--skip-non-domain", "--fix", "--unsafe-fixes",
                      "charts/vm/templates/vm.yaml", "charts/vm/values.yaml", cwd=repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (repo / "charts" / "vm" / "templates" / "vm.yaml").read_text() == HELM_VM
    assert (repo / "charts" / "vm" / "values.yaml").read_text() == "diskBus: sata\n"
    assert "not fixed: the value comes from a Helm chart's template" in done.stdout
    _code, again = _check(repo, "--skip-non-domain", "charts/vm/values.yaml")  # a changed values.yaml
    assert again == found


@needs_helm
def test_a_chart_with_a_dependency_to_fetch_is_refused_with_nothing_run(tmp_path: Path) -> None:
    repo = _chart(tmp_path, "apiVersion: v2\nname: vm\nversion: 0.1.0\ndependencies:\n  - name: db\n"
                            "    version: 1.0.0\n    repository: https://example.org/charts\n")
    done = run_vmtune("check", "--isolated", "--skip-non-domain", "charts/vm/templates/vm.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == ("vmtune: charts/vm/Chart.yaml: helm: dependency 'db' comes from "
                                   "'https://example.org/charts', not vendored in charts/: vmtune fetches nothing")


@needs_helm
def test_a_chart_with_a_symlink_out_of_the_work_tree_is_refused(tmp_path: Path) -> None:
    repo = _chart(tmp_path)
    (tmp_path / "secret.txt").write_text("TOKEN=secret\n")
    os.symlink(tmp_path / "secret.txt", repo / "charts" / "vm" / "files.txt")
    done = run_vmtune("check", "--isolated", "--skip-non-domain", "charts/vm/templates/vm.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == ("vmtune: charts/vm/Chart.yaml: helm: charts/vm/files.txt resolves outside the "
                                   "work tree")


def test_a_build_that_runs_away_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    """An alias bomb in an inline patch: vmtune reads it bounded (not expanded); the tool, which
    expands it, is stopped at its time limit (or its output cap): one line, exit 2."""
    repo = _repo(tmp_path)
    bomb = "      a: &a [x,x,x,x,x,x,x,x,x,x]\n"
    for i in range(1, 9):
        name, previous = chr(ord("a") + i), chr(ord("a") + i - 1)
        bomb += f"      {name}: &{name} [" + ",".join([f"*{previous}"] * 10) + "]\n"
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources:\n  - ../../base\npatches:\n  - path: nic.yaml\n"
        "  - patch: |-\n      apiVersion: kubevirt.io/v1\n      kind: VirtualMachine\n"
        "      metadata:\n        name: web\n" + bomb)
    done = run_vmtune("check", "--isolated", "overlays/prod/nic.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("vmtune: overlays/prod/kustomization.yaml: kustomize: the build failed: ")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.slow
def test_real_pre_commit_with_the_manifest_hooks_on_a_gitops_repo(tmp_path: Path) -> None:
    """The shipped hooks through the real pre-commit (its own environment of vmtune, installed from
    a clone of this repository's commit): a commit that changes an overlay's patch builds the
    overlay; the fix hook writes the cure into the patch and the base, never into the other
    overlay, and the check passes once fixed."""
    from conftest import ROOT

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    pytest.importorskip("pre_commit")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    clone = tmp_path / "vmtune.git"
    subprocess.run(["git", "clone", "-q", "--no-tags", str(ROOT), str(clone)], check=True)
    repo = _repo(tmp_path)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {clone.as_uri()}\n    rev: {head}\n    hooks:\n      - id: vmtune-fix-manifests\n"
        "        args: [--unsafe-fixes]\n")
    # VMTUNE_PURE: the hook's environment installs vmtune as Python, ~1 min of compiling sooner
    # (the suite's own install is compiled by the same build, tests/test_compiled.py)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "VMTUNE_PURE": "1"}
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    dev = _build(repo / "overlays" / "dev")

    def pre_commit(*files: str) -> subprocess.CompletedProcess[str]:
        import sys

        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", *files], cwd=repo,
                              capture_output=True, text=True, env=env, timeout=900)

    first = pre_commit("overlays/prod/nic.yaml")
    assert first.returncode != 0 and "files were modified by this hook" in first.stdout, first.stdout
    assert (repo / "overlays" / "prod" / "nic.yaml").read_text() == NIC_PATCH.replace("e1000", "virtio")
    assert (repo / "base" / "vm.yaml").read_text() == BASE_VM.replace("bus: sata", "bus: virtio")
    assert _build(repo / "overlays" / "dev") == dev.replace(b"bus: sata", b"bus: virtio")
    assert (repo / "overlays" / "dev" / "kustomization.yaml").read_text() == DEV_KUSTOMIZATION
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    again = pre_commit("overlays/prod/nic.yaml", "base/vm.yaml")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_component_included_from_two_places_is_no_cycle_and_a_cycle_is_refused(tmp_path: Path) -> None:
    """common-instancetypes includes the same components from many kustomizations: each inclusion
    is built (before: refused as a cycle once the same file was met twice). A kustomization that
    includes itself through another is refused at once, nothing run."""
    repo = _repo(tmp_path)
    for name in ("a", "b"):
        component = repo / "components" / name
        component.mkdir(parents=True)
        (component / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n  - ../shared\n")
    shared = repo / "components" / "shared"
    shared.mkdir()
    (shared / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n  - path: cores.yaml\n")
    (shared / "cores.yaml").write_text(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: web\nspec:\n  template:\n"
        "    spec:\n      domain:\n        cpu:\n          cores: 2\n")
    (repo / "overlays" / "dev" / "kustomization.yaml").write_text(
        DEV_KUSTOMIZATION + "components:\n  - ../../components/a\n  - ../../components/b\n")
    code, found = _check(repo, "overlays/dev/kustomization.yaml")
    assert code == 1 and {domain for domain, *_ in found} == {"VirtualMachine/dev-web (kustomize overlays/dev)"}
    (repo / "base" / "kustomization.yaml").write_text(BASE_KUSTOMIZATION + "  - ../overlays/dev\n")
    done = run_vmtune("check", "--isolated", "overlays/dev/kustomization.yaml", cwd=repo)
    assert done.returncode == 2
    assert done.stderr.endswith("kustomize: kustomizations include each other in a cycle\n"), done.stderr


# -- a GitOps repository as kept: common-instancetypes by name, an overlay, a chart -------------------

GITOPS_TREE = Path(__file__).parent.parent / "fixtures" / "gitops"  # outside fixtures/stacks: its walk has no helm
GITOPS = {str(p.relative_to(GITOPS_TREE)): p.read_text() for p in sorted(GITOPS_TREE.rglob("*.yaml"))}


@pytest.mark.parametrize("changed", [None, ["clusters/prod/win/run.yaml"], ["apps/win/vm.yaml"],
                                     ["apps/fedora/vm.yaml", "charts/vm/values.yaml"]], ids=str)
def test_a_well_tuned_gitops_repo_gets_no_warning_and_no_fix_from_the_shipped_hooks(
        tmp_path: Path, changed: list[str] | None) -> None:
    """#50's done-when: VMs that name common-instancetypes instancetypes and preferences (a Windows
    one whose preference sets every enlightenment), a kustomize overlay that patches one into a
    namespace, and a Helm chart with a VM and a Service template. The check hook on every file,
    or on what a commit changed, says nothing above info; the fix hook writes nothing."""
    repo = tmp_path / "gitops"
    for name, text in GITOPS.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    given = changed or sorted(GITOPS)
    done = run_vmtune(*_hook_entry("vmtune-check-manifests"), "--isolated", "-f", "json", *given, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)["findings"]
    assert [(f["file"], f["rule"]) for f in found if f["severity"] != "info"] == []
    built = "VirtualMachine/win2k22 (kustomize clusters/prod/win)"
    windows = {f["rule"] for f in found if f["domain"].startswith(built)}
    assert not windows & {"CLK001", "CLK002", "HV001", "HV003"}  # the preference's enlightenments are seen
    if changed is None or "apps/win/vm.yaml" in changed or "clusters/prod/win/run.yaml" in changed:
        assert windows  # built through its overlay and judged
    charted = any(f["domain"] == "VirtualMachine/release-vm (helm charts/vm)" for f in found)
    assert charted == (shutil.which("helm") is not None and (changed is None or "charts/vm/values.yaml" in changed))
    fixed = run_vmtune(*_hook_entry("vmtune-fix-manifests"), "--isolated", *given, cwd=repo)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert {name: (repo / name).read_text() for name in GITOPS} == GITOPS


def test_a_refused_kustomization_is_one_line_and_the_other_files_are_still_judged(tmp_path: Path) -> None:
    """A remote base (common in GitOps) cannot be built: that overlay is one line, exit 2, as a
    file refused is (#49), and the run's other VMs are still judged and reported."""
    repo = _repo(tmp_path)
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources:\n  - ../../base\n  - https://example.org/base\npatches:\n  - path: nic.yaml\n")
    (repo / "alone.yaml").write_text(BASE_VM.replace("name: web", "name: alone"))
    done = run_vmtune("check", "--isolated", "-f", "json", "overlays/prod/nic.yaml", "alone.yaml", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("vmtune: overlays/prod/kustomization.yaml:3: kustomize: resource 'https://example.org/base' "
                           "is remote: vmtune builds only what the work tree holds (no fetch)\n")
    found = json.loads(done.stdout)["findings"]
    assert {f["domain"] for f in found} == {"VirtualMachine/alone"}
    assert ("alone.yaml", "DSK004") in {(f["file"], f["rule"]) for f in found}


SWAP_AFTER_BUILD = """\
import os, sys
from vmtune.stacks.kubevirt import kustomize
built = kustomize.run
outside = sys.argv.pop(1)
builds = []
def run(build):
    built(build)
    builds.append(build.leaf)
    if len(builds) == 2:  # after the build of the fixed files (checked again), before they are written
        os.rename("base", "base.moved")
        os.symlink(outside, "base")
kustomize.run = run
sys.argv[0] = "vmtune"
from vmtune.main import run as main
main()
"""


def test_a_fix_is_not_written_through_a_directory_swapped_for_a_symlink_after_the_read(tmp_path: Path) -> None:
    # a base file is read for the build and fixed (DSK004); its directory swapped for a symlink to
    # a directory outside the work tree in between must not lead the write there (it did: the base
    # file, read without its identity, was written at its name, wherever that led by then)
    import sys

    repo = _repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "vm.yaml").write_text(BASE_VM)
    done = subprocess.run([sys.executable, "-c", SWAP_AFTER_BUILD, str(outside), "check", "--isolated", "--fix",
                           "--unsafe-fixes", "overlays/prod/nic.yaml"], capture_output=True, text=True, cwd=repo,
                          timeout=300)
    assert (outside / "vm.yaml").read_text() == BASE_VM, done.stdout + done.stderr
    assert (repo / "base.moved" / "vm.yaml").read_text() == BASE_VM
    assert done.returncode == 2, done.stdout + done.stderr
    assert "base/vm.yaml: the directory changed (moved or swapped for a symlink) since it was read" in done.stderr


def test_the_builds_of_one_run_are_bounded_in_number(tmp_path: Path) -> None:
    # every overlay of a changed base is built (up to TIMEOUT each): a tree of 10,000 overlays made
    # one run take hours; the run builds MAX_RUNS and says, once, that the others are not judged
    from vmtune.stacks.kubevirt.kustomize import MAX_RUNS

    repo = _repo(tmp_path)
    shutil.rmtree(repo / "overlays")
    for i in range(MAX_RUNS + 1):
        (repo / "many" / f"o{i:03}").mkdir(parents=True)
        (repo / "many" / f"o{i:03}" / "kustomization.yaml").write_text(f"resources:\n  - ../../base\n"
                                                                       f"nameSuffix: -o{i:03}\n")
    done = run_vmtune("check", "--isolated", "-f", "json", "base/vm.yaml", cwd=repo)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"vmtune: many/o{MAX_RUNS:03}/kustomization.yaml: kustomize: not built: this "
                                        f"run has built or rendered {MAX_RUNS} kustomizations and charts (at most "
                                        f"{MAX_RUNS}, in 120 s); the others are not judged"]
    domains = {f["domain"] for f in json.loads(done.stdout)["findings"]}
    assert len(domains) == MAX_RUNS


def test_a_patch_target_name_is_not_a_regular_expression_that_runs_for_hours(tmp_path: Path) -> None:
    # kustomize's (Go's) regular expressions are linear; Python's backtrack: `(a+)+b` against a
    # name of 40 a's ran for hours in the pre-scan, before any tool's time limit
    import sys

    repo = _repo(tmp_path)
    name = "a" * 40
    (repo / "base" / "vm.yaml").write_text(BASE_VM.replace("name: web", f"name: {name}"))
    (repo / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources:\n  - ../../base\npatches:\n  - path: nic.yaml\n    target:\n      kind: VirtualMachine\n"
        "      name: (a+)+b\n")
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", "--fix", "--unsafe-fixes",
                           "overlays/prod/nic.yaml"], capture_output=True, text=True, cwd=repo, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"== VirtualMachine/{name} (kustomize overlays/prod)" in done.stdout
    # which objects the pattern selects is not told: nothing is fixed on a guess
    assert "(not fixed: a patch of it selects its targets by a regular expression vmtune does not evaluate)" \
        in done.stdout
    assert (repo / "base" / "vm.yaml").read_text() == BASE_VM.replace("name: web", f"name: {name}")
    assert (repo / "overlays" / "prod" / "nic.yaml").read_text() == NIC_PATCH


@needs_helm
def test_a_source_line_a_template_writes_cannot_make_vmtune_wait_on_a_fifo(tmp_path: Path) -> None:
    # findings are placed by the `# Source:` line before a rendered document, and a template can
    # write one itself: naming a FIFO of the chart (not copied, not rendered), vmtune's open() of
    # it waited for ever
    import sys

    repo = _chart(tmp_path)
    (repo / "charts" / "vm" / "templates" / "vm.yaml").write_text("# Source: vm/templates/pipe\n" + HELM_VM)
    os.mkfifo(repo / "charts" / "vm" / "templates" / "pipe")
    done = subprocess.run([sys.executable, "-m", "vmtune", "check", "--isolated", "-f", "json", "--skip-non-domain",
                           "charts/vm/templates/vm.yaml"], capture_output=True, text=True, cwd=repo, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    found = {(f["file"], f["rule"], f["line"]) for f in json.loads(done.stdout)["findings"]}
    assert ("charts/vm/templates/vm.yaml", "NET004", 14) in found  # on the template's line (one more above)
    assert not any(f[0].endswith("pipe") for f in found)


def test_a_kustomization_is_parsed_once_for_all_the_files_beside_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # whether a file belongs to a kustomization parsed the kustomization again for each file given:
    # 1,000 files beside a 1 MiB kustomization took 10 minutes (0.6 s each)
    from vmtune.stacks import yamldoc
    from vmtune.stacks.kubevirt import kustomize

    folder = tmp_path / "apps"
    folder.mkdir()
    (folder / "kustomization.yaml").write_text("resources:\n" + "".join(f"  - r{i:04}.yaml\n" for i in range(500)))
    parsed: list[str] = []
    load = yamldoc.load

    def counted(data: bytes, name: str) -> object:
        parsed.append(name)
        return load(data, name)

    monkeypatch.setattr(yamldoc, "load", counted)
    looked: dict[str, str | None] = {}
    members = [kustomize.member_of(str(folder / f"r{i:04}.yaml"), looked) for i in range(0, 1000, 2)]
    assert members == [str(folder)] * 250 + [None] * 250  # r0000..r0498 are listed, r0500.. are not
    assert len(parsed) == 1
    (folder / "kustomization.yaml").write_text("resources:\n  - r0500.yaml\n")  # changed: read again
    assert kustomize.member_of(str(folder / "r0500.yaml"), looked) == str(folder)
    assert kustomize.member_of(str(folder / "r0000.yaml"), looked) is None
    assert len(parsed) == 2


def test_a_component_included_many_times_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the pre-scan parsed a kustomization at each inclusion: 50 inclusions of a 1 MiB component
    # took 25 s before any build, and a build may include MAX_KUSTOMIZATIONS (2,000)
    from vmtune.stacks import yamldoc
    from vmtune.stacks.kubevirt import kustomize

    repo = _repo(tmp_path)
    (repo / "component").mkdir()
    (repo / "component" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonAnnotations:\n  team: vm\n")
    prod = repo / "overlays" / "prod"
    (prod / "kustomization.yaml").write_text(PROD_KUSTOMIZATION + "components:\n" + "  - ../../component\n" * 50)
    parsed: list[str] = []
    load = yamldoc.load

    def counted(data: bytes, name: str) -> object:
        parsed.append(name)
        return load(data, name)

    monkeypatch.setattr(yamldoc, "load", counted)
    build = kustomize.prepare(str(prod), str(repo), {})
    assert build.included == 52  # the overlay, its base, the component 50 times
    assert sorted(set(parsed)) == sorted(parsed)  # each file once
    assert any(name.endswith("component/kustomization.yaml") for name in parsed)


def test_a_tools_error_written_below_its_log_line_is_the_one_shown(tmp_path: Path) -> None:
    # kubectl writes some errors on the lines below its log line (`err=<`): the one line shown
    # was `E1202 15:24:12.586172 9853 run.go:72] "command failed" err=<`, saying nothing
    from vmtune.stacks.kubevirt.kustomize import bounded, first_error, scrubbed, tool

    command = tool(str(tmp_path))
    if command is None or os.path.basename(command[0]) != "kubectl":
        pytest.skip("kubectl's log format (the build runs kustomize here)")
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "kustomization.yaml").write_text("helmCharts:\n  - name: x\n")  # refused by kubectl itself
    _out, error, code = bounded([*command, str(tmp_path / "k")], scrubbed(str(tmp_path)), str(tmp_path))
    assert code != 0
    shown = first_error(error.decode())
    assert shown.startswith("trouble configuring builtin HelmChartInflationGenerator with config: ` name: x `"), shown
    assert shown.endswith("--enable-helm"), shown
    assert first_error('E1202 15:24:11.547259    9832 run.go:72] "command failed" err="loading generator plugins"') \
        == '"loading generator plugins"'
