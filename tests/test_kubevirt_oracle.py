"""The KubeVirt oracle (fixtures/stacks/kubevirt/oracle/) is complete and usable.

Each case is an input manifest with either the domain XML KubeVirt's own code wrote for it or
KubeVirt's rejection message, and a row in PROVENANCE.md; every XML must define on libvirt
(the test driver: the parser, no QEMU), since vmtune's rules and the KubeVirt renderer are
judged against these files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ORACLE = Path(__file__).parent.parent / "fixtures" / "stacks" / "kubevirt" / "oracle"
# node-tsc/: the same inputs generated on a node that reports its TSC frequency; live-update/: in
# a cluster with KubeVirt's default vmRolloutStrategy LiveUpdate (CPU and memory hot-plug); wild/:
# public manifests, with their own PROVENANCE.md
SUBSETS = ("node-tsc", "live-update", "wild", "wild/node-tsc")
CASES = sorted(p.relative_to(ORACLE).with_suffix("").as_posix()
               for p in (*ORACLE.glob("*.yaml"), *(q for d in SUBSETS for q in ORACLE.glob(f"{d}/*.yaml"))))
# libvirt before 10 refuses KubeVirt's <maxMemory slots="0"> (virt-launcher ships libvirt 10.10+)
NEEDS_LIBVIRT_10 = "XML error: both maximum memory size and memory slot count must be specified"
# the user guide's partial examples give no memory: KubeVirt d923fdb admits them and writes
# <memory unit="b">0</memory>, which libvirt refuses (such a VMI cannot start)
NO_MEMORY = "XML error: Memory size must be specified via <memory> or in the <numa> configuration"
KINDS = {"VirtualMachine", "VirtualMachineInstance", "VirtualMachinePool", "VirtualMachineInstanceReplicaSet"}


def _provenance_rows() -> dict[str, list[str]]:
    rows = {}
    text = (ORACLE / "PROVENANCE.md").read_text() + (ORACLE / "wild" / "PROVENANCE.md").read_text()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5 and cells[0] not in ("case", "---"):
            rows[cells[0]] = cells
    return rows


def test_the_oracle_has_enough_cases_of_each_origin() -> None:
    xml = [c for c in CASES if (ORACLE / f"{c}.xml").exists()]
    assert len(xml) >= 80
    for prefix in ("example-", "var-", "cit-"):
        assert any(c.startswith(prefix) for c in xml), prefix


@pytest.mark.parametrize("case", CASES)
def test_each_case_has_one_output_and_a_provenance_row(case: str) -> None:
    outputs = [p.name for p in (ORACLE / f"{case}.xml", ORACLE / f"{case}.rejected.txt") if p.exists()]
    assert len(outputs) == 1, outputs
    row = _provenance_rows()[case]
    assert row[4] == f"{case}.xml" if outputs[0].endswith(".xml") else row[4].startswith("rejected: ")
    (doc,) = [d for d in yaml.safe_load_all((ORACLE / f"{case}.yaml").read_text()) if d is not None]
    assert doc["kind"] == row[1] and doc["kind"] in KINDS


def test_every_output_and_provenance_row_has_its_input() -> None:
    outputs = (*ORACLE.glob("*.xml"), *ORACLE.glob("*.txt"),
               *(q for d in SUBSETS for q in (*ORACLE.glob(f"{d}/*.xml"), *ORACLE.glob(f"{d}/*.txt"))))
    stray = {p.relative_to(ORACLE).as_posix().split(".")[0] for p in outputs} - set(CASES)
    assert not stray
    assert set(_provenance_rows()) == set(CASES)


def test_every_oracle_domain_defines_on_libvirt(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    conn = libvirt_mod.open("test:///default")
    failed = {}
    try:
        for path in sorted((*ORACLE.glob("*.xml"), *(q for d in SUBSETS for q in ORACLE.glob(f"{d}/*.xml")))):
            try:
                conn.defineXML(path.read_text()).undefine()
            except libvirt_mod.libvirtError as exc:
                if not ((path.parent.name == "live-update" and str(exc) == NEEDS_LIBVIRT_10)
                        or (path.parent.name == "wild" and str(exc) == NO_MEMORY
                        and '<memory unit="b">0</memory>' in path.read_text())):
                    failed[path.name] = str(exc)
    finally:
        conn.close()
    assert not failed


def test_the_oracle_domains_carry_the_names_kubevirt_gives() -> None:
    # virt-launcher names the domain <namespace>_<vmi>: a renderer must say which object it is.
    for path in sorted((*ORACLE.glob("*.xml"), *(q for d in SUBSETS for q in ORACLE.glob(f"{d}/*.xml")))):
        name = re.search(r"<name>([^<]*)</name>", path.read_text())
        (doc,) = [d for d in yaml.safe_load_all(path.with_suffix(".yaml").read_text()) if d is not None]
        namespace = (doc.get("metadata") or {}).get("namespace") or "default"  # the harness's, unless given
        assert name and name.group(1).startswith(f"{namespace}_"), path.name


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("node-tsc/")])
def test_a_node_reporting_its_tsc_frequency_adds_only_the_tsc_timer(case: str) -> None:
    # The same manifest on a node whose TSC frequency the node labeller reports: KubeVirt's
    # topology hint adds <timer name="tsc" frequency>, which the Hyper-V reenlightenment needs.
    name = case.removeprefix("node-tsc/")
    assert (ORACLE / f"{case}.yaml").read_bytes() == (ORACLE / f"{name}.yaml").read_bytes()
    plain = (ORACLE / f"{name}.xml").read_text().splitlines()
    tsc = (ORACLE / f"{case}.xml").read_text().splitlines()
    added = [line for line in tsc if line not in plain]
    if any(line.startswith("\t<clock") for line in plain):
        assert added == ['\t\t<timer name="tsc" frequency="2400000000"></timer>']
    else:  # a VMI without a clock (the invtsc case): the converter makes one for the timer
        assert added == ["\t<clock>", '\t\t<timer name="tsc" frequency="2400000000"></timer>', "\t</clock>"]
    assert len(tsc) == len(plain) + len(added)


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("live-update/")])
def test_live_update_adds_memory_and_socket_hot_plug_only(case: str) -> None:
    # KubeVirt's default rollout strategy: <maxMemory slots="0"> (4x the guest memory) and, for a
    # socket topology, <vcpu> at 4x the sockets with the extra ones in <vcpus> enabled="no".
    name = case.removeprefix("live-update/")
    assert (ORACLE / f"{case}.yaml").read_bytes() == (ORACLE / f"{name}.yaml").read_bytes()
    plain = set((ORACLE / f"{name}.xml").read_text().splitlines())
    live = (ORACLE / f"{case}.xml").read_text()
    added = [line.strip() for line in live.splitlines() if line not in plain]
    assert added[0].startswith('<maxMemory unit="b" slots="0">')
    assert all(re.fullmatch(r'<(maxMemory|topology|vcpu|/?vcpus)\b.*', line) for line in added), added
