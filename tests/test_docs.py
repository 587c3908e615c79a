"""Rule documentation: complete for every rule, and docs/rules.md generated from it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vmtune.docs import render_rules_markdown
from vmtune.rules import BUILTIN_RULES

from conftest import ROOT, run_vmtune

HEADINGS = ["## What it checks", "## Why it matters", "## Example", "## Fix", "## Calibration", "## References"]


@pytest.mark.parametrize("rule", BUILTIN_RULES, ids=lambda r: r.code)
def test_rule_metadata_and_doc_are_complete(rule) -> None:  # type: ignore[no-untyped-def]
    assert re.fullmatch(r"(CLK|HV|CPU|MEM|LAT|NET|DSK|USB|PCI|SUP|HOST|VAL|STK)\d{3}", rule.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    positions = [rule.doc.find(h) for h in HEADINGS]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), rule.code
    sections = re.split(r"^## .*$", rule.doc, flags=re.M)[1:]
    assert all(s.strip() for s in sections), f"{rule.code} has an empty section"
    fix_section = rule.doc.split("## Fix", 1)[1].split("## Calibration", 1)[0]
    calibration = rule.doc.split("## Calibration", 1)[1].split("## References", 1)[0]
    # docs/rules.md "Calibration": the severity is named and justified in the rule's own doc
    assert re.search(r"\b(Info|Warning|Error)\b", calibration), f"{rule.code}: calibration names no severity"
    if rule.fixable:
        assert rule.fix_safety is not None
        assert re.search(r"\b(safe|unsafe)\b", fix_section, re.I), f"{rule.code}: fix safety not explained"
    else:
        assert fix_section.strip().lower().startswith("none")
    assert "```" in rule.doc.split("## Example", 1)[1].split("## Fix", 1)[0]


def test_rule_documentation_is_cleaned_as_inspect_cleans_a_docstring() -> None:
    """vmtune.rules.base.cleandoc is inspect.cleandoc written out (a report need not import
    inspect): the same text for every rule's docstring, a custom check's (a policy's own text, tabs
    and all) and the shapes a docstring can take."""
    import inspect
    import random

    from vmtune.policy.custom import CustomCheck
    from vmtune.rules.base import cleandoc

    custom = CustomCheck({"code": "XDOC001", "name": "doc-shape", "severity": "info", "message": "m",
                          "select": "devices/interface", "assert": {"present": False},
                          "doc": "first\n\tindented by a tab\n   \n  two\n"}, "policy.yaml", 0)
    texts = [rule.__doc__ or "" for rule in BUILTIN_RULES] + [custom.__doc__ or ""]
    texts += ["", "\n", "one", "  one  ", "\n\n  a\n    b\n  c\n\n", "a\n\tb\n  \tc", "a\n   \n  b\n \n",
              "\x0ca\n\x0c  b", "a\r\n  b\r\n", " \u3000x\n\u3000 y"]
    pieces = ["", " ", "  ", "\t", "\n", "x", "yz", "\u00a0", "\r"]
    generator = random.Random(45)
    texts += ["".join(generator.choice(pieces) for _ in range(generator.randrange(12))) for _ in range(5000)]
    for text in texts:
        assert cleandoc(text) == inspect.cleandoc(text), repr(text)
    assert custom.doc == inspect.cleandoc(custom.__doc__ or "")


def test_codes_and_names_are_unique() -> None:
    assert len({r.code for r in BUILTIN_RULES}) == len({r.name for r in BUILTIN_RULES}) == len(BUILTIN_RULES)


def test_docs_rules_md_is_up_to_date() -> None:
    expected = render_rules_markdown(BUILTIN_RULES)
    actual = (ROOT / "docs" / "rules.md").read_text()
    assert actual == expected, "docs/rules.md is stale: run `vmtune rules --format markdown > docs/rules.md`"


def test_rule_command_prints_the_same_documentation() -> None:
    rule = BUILTIN_RULES[0]
    out = run_vmtune("rule", rule.code).stdout
    assert rule.doc.split("## Why it matters")[1].split("##")[0].strip() in out


def test_rule_docs_cite_what_users_can_read() -> None:
    """Measured figures are stated in the docs; internal material is not cited."""
    text = (ROOT / "docs" / "rules.md").read_text().lower()
    assert "field report" not in text and "shared/seeds" not in text and "session 1" not in text


def test_every_rule_says_the_evidence_and_versions_behind_its_calibration() -> None:
    """Severity and fix safety rest on a source (References) and on what a named libvirt/QEMU
    (or kernel) version does, or the doc says that no version matters."""
    for rule in BUILTIN_RULES:
        calibration = rule.doc.split("## Calibration", 1)[1].split("## References", 1)[0]
        references = rule.doc.split("## References", 1)[1]
        assert re.search(r"\b(libvirt|QEMU|Linux|Xen) [0-9]", calibration) or \
            re.search(r"Versions: (none|no libvirt)", calibration), f"{rule.code}: no version behind its calibration"
        assert re.search(r"^- \S", references, re.M), f"{rule.code}: no source"


def test_a_rules_fix_section_agrees_with_its_declared_safety() -> None:
    """MEM007 once said "Safe." under Fix while declaring an unsafe fix."""
    from vmtune.rules.base import FixSafety

    for rule in BUILTIN_RULES:
        if rule.other_fix_safety is not None or rule.fix_safety is None:
            continue
        fix_section = rule.doc.split("## Fix", 1)[1].split("## Calibration", 1)[0]
        says_safe = re.search(r"(^|[.:] )Safe\b", fix_section, re.M) is not None
        says_unsafe = re.search(r"\bUnsafe\b", fix_section) is not None
        if rule.fix_safety is FixSafety.UNSAFE:
            assert not says_safe, f"{rule.code}: unsafe fix documented as safe"
        else:
            assert not says_unsafe, f"{rule.code}: safe fix documented as unsafe"


def test_the_readme_first_screen_maps_each_user_to_a_command_and_a_page() -> None:
    """Before: 480 lines, and a reader had to find their own section. The first screen (above the
    first `##`) names the four users, each with its command and a page or section that exists."""
    readme = (ROOT / "README.md").read_text()
    head = readme.split("\n## ", 1)[0]
    assert len(head.splitlines()) <= 45
    rows = [line for line in head.splitlines() if line.startswith("| ") and "---" not in line][1:]
    users = ["libvirt domain XML in a repository", "KubeVirt manifests in Git", "OpenStack flavors and images",
             "running on libvirt hosts"]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == [
        "libvirt domain XML in a repository", "KubeVirt manifests in Git (GitOps, kustomize, Helm)",
        "OpenStack flavors and images", "running on libvirt hosts"]
    headings = set(re.findall(r"^#+ (.+)$", readme, re.M))
    stacks = set(re.findall(r"^#+ (.+)$", (ROOT / "docs" / "stacks.md").read_text(), re.M))
    for row, user in zip(rows, users, strict=True):
        _, command, page = row.strip("| ").split(" | ")
        assert "vmtune " in command, user
        for where in re.findall(r'"([^"]+)"', page):  # a section: of the README, else of stacks.md
            assert any(h.startswith(where) for h in headings | stacks), (user, where)
        for path in re.findall(r"docs/\S+\.md", page):
            assert (ROOT / path.rstrip(",")).is_file(), (user, path)


def test_kustomize_overlays_are_checked_as_rendered(tmp_path: Path) -> None:
    """docs/stacks.md: a base is judged as each overlay above it builds it, the same verdict as the
    rendered stream's, placed on the patch that sets the value. Real kustomize (kubectl's)."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    base, prod = tmp_path / "base", tmp_path / "overlays" / "prod"
    base.mkdir()
    prod.mkdir(parents=True)
    (base / "vm.yaml").write_text("""apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: db
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu: {cores: 2}
        devices:
          interfaces:
            - name: default
              masquerade: {}
        resources: {requests: {memory: 4Gi}}
      networks:
        - name: default
          pod: {}
""")
    (base / "kustomization.yaml").write_text("resources:\n  - vm.yaml\n")
    (prod / "kustomization.yaml").write_text("""resources:
  - ../../base
patches:
  - target: {kind: VirtualMachine, name: db}
    patch: |-
      - op: replace
        path: /spec/template/spec/domain/cpu/cores
        value: 16
""")
    rendered = subprocess.run(["kubectl", "kustomize", str(prod)], capture_output=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    deployed = run_vmtune("check", "--isolated", "-", stdin=rendered.stdout)
    assert deployed.returncode == 1
    assert "<stdin>:12: NET001 warning virtio NIC has one queue for 16 vCPUs (virtio-net-single-queue) [*]" in \
        deployed.stdout.splitlines()
    as_built = run_vmtune("check", "--isolated", "base", cwd=tmp_path)
    assert as_built.returncode == 1, as_built.stdout + as_built.stderr
    # the cores come from the JSON 6902 patch written in the overlay's kustomization; the field
    # to add goes to the base, at its devices (the overlay has no patch file of the VM)
    assert "base/vm.yaml:11: NET001 warning virtio NIC has one queue for 16 vCPUs (virtio-net-single-queue) [*]" in \
        as_built.stdout.splitlines(), as_built.stdout
    assert "as each overlay builds it" in (ROOT / "docs" / "stacks.md").read_text()


def test_helm_templates_are_refused_with_the_fix_the_docs_give(tmp_path: Path) -> None:
    """docs/stacks.md tells to `exclude:` chart templates from the hook: this is why."""
    template = tmp_path / "charts" / "db" / "templates" / "vm.yaml"
    template.parent.mkdir(parents=True)
    template.write_text("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {{ .Release.Name }}\n")
    done = run_vmtune("check", "--isolated", "--skip-non-domain", str(template))
    assert done.returncode == 2
    assert done.stderr == f"vmtune: {template}:4: templated YAML (Helm, Jinja) is not YAML: render it first (helm " \
        "template …)\n"
    stacks = (ROOT / "docs" / "stacks.md").read_text()
    assert "exclude: ^charts/[^/]+/templates/" in stacks and "templated YAML (Helm, Jinja) is not YAML" in stacks
    assert "templates outside a Helm\nchart" in stacks  # a chart's own templates are rendered with helm
    assert re.search("^charts/[^/]+/templates/", "charts/db/templates/vm.yaml")  # pre-commit's re.search
