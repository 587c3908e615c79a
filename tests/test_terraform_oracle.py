"""vmtune's rendering of `libvirt_domain` against the provider's own code (fixtures/terraform/oracle/).

Each cases/<case>.tf is a configuration from terraform-provider-libvirt (its examples, the
configurations its acceptance tests build) or written for vmtune (extra-*), and each
cases/<case>.<label>.xml the domain XML the provider's code defines for `libvirt_domain.<label>`
(Terraform's decoding against the provider's schema, the provider's plan, DomainToXML,
MarshalDomainXML: oracle/vmtune_oracle_test.go); <case>.<label>.rejected.txt is what Terraform or
the provider said instead. The rendering must be that XML (element for element, attribute for
attribute), and vmtune must find the same things in both.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from vmtune.stacks.frontend import read_file
from vmtune.stacks.terraform import frontend, hcl
from vmtune.stacks.terraform.render import render

from conftest import FIXTURES, run_vmtune
from helpers import findings

ORACLE = FIXTURES / "terraform" / "oracle"
CASES = ORACLE / "cases"
COMMIT = "6bd1e07319afe589ad5394e57bd2f065f594b96e"
_RESOURCE = re.compile(r'^resource\s+"libvirt_domain"\s+"([^"]+)"', re.M)


def _domains() -> list[tuple[Path, str]]:
    return [(tf, label) for tf in sorted(CASES.glob("*.tf")) for label in _RESOURCE.findall(tf.read_text())]


def _pairs() -> list[tuple[Path, str]]:
    return [(tf, label) for tf, label in _domains() if (CASES / f"{tf.stem}.{label}.xml").exists()]


def _rendered(tf: Path, label: str) -> Any:
    items, _recognised = frontend.render([read_file(str(tf), tf.read_bytes())])  # no --tf-var(-file)
    (item,) = [i for i in items if i.name == f"libvirt_domain.{label}"]
    return item


def _xml(tf: Path, label: str) -> bytes:
    """vmtune's rendering of one resource. Through the front end, except in a file where
    Terraform refuses another resource (vmtune then refuses the file, as Terraform refuses the
    plan): the provider rendered each resource on its own, and so is this one."""
    if not any((CASES / f"{tf.stem}.{other}.rejected.txt").exists() for t, other in _domains() if t == tf):
        return bytes(_rendered(tf, label).xml)
    blocks = hcl.parse(tf.read_bytes(), str(tf))
    scope = hcl.Scope()
    scope.add(blocks)
    (block,) = [b for b in blocks if b.type == "resource" and b.labels == ("libvirt_domain", label)]
    rendering = render({key: scope.resolve(item.value) for key, item in block.attrs.items()}, label)
    assert not rendering.refused
    return rendering.xml


def _tree(element: etree._Element) -> tuple[Any, ...]:
    """An element as the rules read it: tag, attributes, text, children in order. The provider
    writes the computed `id` (unknown at create, so 0), which libvirt ignores on define."""
    attrs = {k: v for k, v in element.attrib.items() if not (element.tag == "domain" and k == "id")}
    return (element.tag, sorted(attrs.items()), (element.text or "").strip(),
            [_tree(child) for child in element if isinstance(child.tag, str)])


def test_the_oracle_has_the_providers_examples_acceptance_configurations_and_extras() -> None:
    pairs = _pairs()
    assert len(pairs) >= 45
    for prefix in ("example-", "acc-", "extra-"):
        assert sum(tf.stem.startswith(prefix) for tf, _label in pairs) >= 4, prefix
    provenance = (CASES / "GO_VERSION").read_text()
    assert f"provider {COMMIT}" in provenance and "libvirt.org/go/libvirtxml v1.11007.0" in provenance


def test_every_domain_has_one_output_and_every_output_its_domain() -> None:
    wanted = set()
    for tf, label in _domains():
        outputs = [p for p in (CASES / f"{tf.stem}.{label}.xml", CASES / f"{tf.stem}.{label}.rejected.txt")
                   if p.exists()]
        assert len(outputs) == 1, (tf.name, label)
        wanted.add(outputs[0].name)
    present = {p.name for p in CASES.iterdir() if p.suffix in (".xml", ".txt")}
    assert present == wanted


@pytest.mark.parametrize("tf, label", _pairs(), ids=lambda v: v.stem if isinstance(v, Path) else v)
def test_the_rendering_is_the_xml_the_provider_defines(tf: Path, label: str) -> None:
    mine = etree.fromstring(_xml(tf, label))
    theirs = etree.fromstring((CASES / f"{tf.stem}.{label}.xml").read_bytes())
    assert _tree(mine) == _tree(theirs)


@pytest.mark.parametrize("tf, label", _pairs(), ids=lambda v: v.stem if isinstance(v, Path) else v)
def test_vmtune_finds_in_the_rendering_what_it_finds_in_the_providers_xml(tf: Path, label: str) -> None:
    mine = Counter((f.rule.code, str(f.severity)) for f in findings(_xml(tf, label)))
    theirs = Counter((f.rule.code, str(f.severity))
                     for f in findings((CASES / f"{tf.stem}.{label}.xml").read_bytes()))
    assert mine == theirs


def test_a_key_terraform_drops_is_dropped_by_the_providers_path_too() -> None:
    """hyper_v.vpindex (the XML's spelling) never reaches the provider: Terraform's conversion to
    the schema's object type discards it; vmtune says so (STK003) and renders without it."""
    xml = (CASES / "extra-win2k22.win.xml").read_text()
    assert "<relaxed state=\"on\"></relaxed>" in xml and "vpindex" not in xml
    item = _rendered(CASES / "extra-win2k22.tf", "win")
    assert [(n.code, n.line) for n in item.notes] == [("STK003", 22)]


def test_findings_of_the_tuned_guests_are_the_providers() -> None:
    """Not a vacuous agreement: the oracle's domains have findings, warnings among them."""
    codes = {(f.rule.code, str(f.severity)) for tf, label in _pairs()
             for f in findings((CASES / f"{tf.stem}.{label}.xml").read_bytes())}
    assert ("HV001", "warning") in codes and ("CLK001", "warning") in codes


def _refused_files() -> list[Path]:
    return sorted({tf for tf, label in _domains() if (CASES / f"{tf.stem}.{label}.rejected.txt").exists()})


@pytest.mark.parametrize("tf", _refused_files(), ids=lambda p: p.stem)
def test_what_terraform_refuses_vmtune_refuses_naming_the_same_attribute(tf: Path) -> None:
    """Five of the provider's own examples do not plan (no `type`; boot_devices written as
    strings): vmtune says so as bad input, one line at the attribute, exit 2."""
    label = next(label for t, label in _domains() if t == tf and (CASES / f"{tf.stem}.{label}.rejected.txt").exists())
    said = (CASES / f"{tf.stem}.{label}.rejected.txt").read_text()
    attribute = re.findall(r'(?:argument|attribute) "([a-z_]+)"', said)[-1]
    result = run_vmtune("check", str(tf))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"vmtune: {tf}:") and f"libvirt_domain.{label}: " in line and attribute in line
    assert line.endswith("(Terraform refuses it)")


def test_the_hcl_vmtunes_fix_writes_cures_the_warnings_as_the_provider_renders_it() -> None:
    """extra-win2k22-fixed.tf is fixtures/terraform/win2k22.fixed.tf, the bytes `vmtune check
    --fix` writes from win2k22.tf: the provider's own XML of it has none of the warnings."""
    assert (CASES / "extra-win2k22-fixed.tf").read_bytes() == (FIXTURES / "terraform" / "win2k22.fixed.tf").read_bytes()
    before = {(f.rule.code, str(f.severity)) for f in findings((CASES / "extra-win2k22.win.xml").read_bytes())}
    after = {(f.rule.code, str(f.severity)) for f in findings((CASES / "extra-win2k22-fixed.win.xml").read_bytes())}
    assert {c for c, s in before if s != "info"} == {"CLK001", "CLK002", "HV001"}
    assert not {c for c, s in after if s in ("warning", "error")}
