"""The CPU placement planner and `vmtune plan`, on real and synthetic topologies."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from vmtune.facts.domain import Domain
from vmtune.facts.host import Host, load_host
from vmtune.host.inventory import DomainUsage
from vmtune.host.planner import Plan, cores_of, default_housekeeping, plan
from vmtune.xml.safe import parse_domain

from conftest import CORPUS, DOMAINS, HOSTS, domain_xml, run_vmtune
from helpers import codes, host, options


def dom(name: str, vcpus: int, memory_gib: int = 2, extra: str = "", cpu: str = "<cpu mode='host-passthrough'/>"
        ) -> Domain:
    xml = domain_xml(name=name, vcpus=vcpus, memory=f"<memory unit='GiB'>{memory_gib}</memory>", extra=extra, cpu=cpu)
    return Domain(parse_domain(xml.encode(), name), name)


def assert_sound(h: Host, result: Plan, reserved: frozenset[int] = frozenset(),
                 housekeeping: frozenset[int] | None = None) -> None:
    housekeeping = default_housekeeping(h) if housekeeping is None else housekeeping
    used: set[int] = set()
    owner: dict[int, str] = {}
    for p in result.placements:
        cpus = set(p.vcpu_pins.values())
        assert len(cpus) == len(p.vcpu_pins), "two vCPUs on one host CPU"
        assert not cpus & used, "placements overlap"
        assert not cpus & housekeeping, "a housekeeping CPU was given away"
        assert not cpus & reserved, "another domain's pinned CPU was given away"
        cell = next(c for c in h.cells if c.id == p.node)
        assert cpus <= cell.cpu_ids, "a domain spans NUMA nodes"
        used |= cpus
        for cpu in cpus:
            owner[cpu] = p.domain
    for cell in h.cells:  # siblings together: a core's threads never belong to two domains
        for core in cores_of(cell):
            owners = {owner[c] for c in core.cpus if c in owner}
            assert len(owners) <= 1, f"core {core.cpus} split between {owners}"


def test_one_node_host() -> None:
    h = host("intel-1node.xml")
    assert h is not None
    result = plan(h, [dom("a", 2), dom("b", 4)], [])
    assert_sound(h, result)
    assert result.for_domain("b").vcpu_pins == {0: 1, 1: 5, 2: 2, 3: 6}  # type: ignore[union-attr]
    assert result.for_domain("a").vcpu_pins == {0: 3, 1: 7}  # type: ignore[union-attr]
    assert result.for_domain("a").housekeeping == frozenset({0, 4})  # type: ignore[union-attr]


def test_two_node_smt_host_with_reserved_pins_and_misfits() -> None:
    h = host("intel-2node.xml")
    assert h is not None
    reserved = DomainUsage.of(Domain(parse_domain(domain_xml(
        name="legacy", extra="<cputune><vcpupin vcpu='0' cpuset='5'/><vcpupin vcpu='1' cpuset='13'/></cputune>"
    ).encode(), "x"), "x"))
    domains = [dom("big", 6), dom("mid", 4), dom("small", 2), dom("huge", 12)]
    result = plan(h, domains, [reserved])
    assert_sound(h, result, reserved=reserved.vcpu_cpus)
    assert result.misfits["huge"] == "node 0 has 3 free core(s), 6 needed; node 1 has 2 free core(s), 6 needed"
    assert result.misfits["small"] == "node 0 has 0 free core(s), 1 needed; node 1 has 0 free core(s), 1 needed"
    placed = {p.domain: p.node for p in result.placements}
    assert placed == {"big": 0, "mid": 1}  # node 1 lost a core to the reserved domain
    fat = plan(h, [dom("fat", 2, memory_gib=40)], [])
    assert fat.misfits["fat"] == ("node 0 has 16 GiB of memory left, the guest needs 40 GiB; "
                                  "node 1 has 16 GiB of memory left, the guest needs 40 GiB")


def test_guest_threads_need_host_smt() -> None:
    h = host("intel-2node.xml")
    assert h is not None
    threaded = dom("t", 4, cpu="<cpu mode='host-passthrough'><topology sockets='1' cores='2' threads='2'/></cpu>")
    result = plan(h, [threaded], [])
    pins = result.for_domain("t").vcpu_pins  # type: ignore[union-attr]
    cell = h.cells[result.for_domain("t").node]  # type: ignore[union-attr]
    sibling_of = {c.id: c.siblings for c in cell.cpus}
    assert pins[1] in sibling_of[pins[0]] and pins[3] in sibling_of[pins[2]]
    one_thread = Host(cells=[type(cell)(0, cell.memory_kib, tuple(type(c)(c.id, c.core_id, c.socket_id,
                                                                         frozenset({c.id})) for c in cell.cpus),
                                       cell.pages)])
    assert "1 thread(s) per core, the guest wants 2" in plan(one_thread, [threaded], []).misfits["t"]


def test_big_host_is_sound_and_deterministic() -> None:
    h = host("amd-4node-256cpu.xml")
    assert h is not None
    rng = random.Random(7)
    domains = [dom(f"vm{i:03d}", rng.choice([1, 2, 4, 8, 16]), rng.choice([2, 4, 8])) for i in range(200)]
    first = plan(h, domains, [])
    second = plan(h, list(reversed(domains)), [])
    assert_sound(h, first)
    assert [(p.domain, p.vcpu_pins) for p in first.placements] == [(p.domain, p.vcpu_pins) for p in second.placements]
    assert first.misfits == second.misfits
    assert first.placements and all("free core" in why or "memory" in why for why in first.misfits.values())


def test_corpus_topologies() -> None:
    folder = CORPUS / "capabilities"
    if not folder.is_dir():
        pytest.skip("../shared/corpus/capabilities is not present")
    planned = 0
    for caps in sorted(folder.glob("*.xml")):
        if "domcaps" in caps.name:
            continue
        h = load_host(str(caps), None)
        if h is None or not h.cells or not any(c.cpus for c in h.cells):
            continue
        result = plan(h, [dom("a", 2, memory_gib=1), dom("b", 1, memory_gib=1)], [])
        assert_sound(h, result)
        planned += 1
    assert planned >= 3


def test_cpu007_fix_uses_the_planner_and_resolves_the_rule() -> None:
    from helpers import fix, inventory

    neighbour = domain_xml(name="n", extra="<cputune><vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' "
                                          "cpuset='9'/></cputune>")
    opts = options(("latency",), host("intel-2node.xml"), others=inventory(neighbour))
    outcome = fix(domain_xml(vcpus=2), opts, unsafe=True)
    assert b"<vcpupin vcpu='0' cpuset='2'/>" in outcome.fixed and b"<vcpupin vcpu='1' cpuset='10'/>" in outcome.fixed
    assert b"<emulatorpin cpuset='0,8'/>" in outcome.fixed
    assert b"<memory mode='strict' nodeset='0'/>" in outcome.fixed
    assert not {"CPU007", "CPU004", "CPU011", "CPU013"} & set(codes(outcome.fixed, opts))


def test_plan_command_prints_diffs_and_writes(tmp_path: Path) -> None:
    hv = tmp_path / "hv01"
    hv.mkdir()
    for name in ("legacy-bigvm.xml", "linux-tuned.xml", "win10-timer-storm.xml"):
        shutil.copy(DOMAINS / name, hv / name)
    printed = run_vmtune("plan", "--isolated", "--host", str(HOSTS / "intel-2node.xml"), str(hv))
    assert printed.returncode == 1  # legacy-big (16 vCPUs) does not fit a 4-core node
    assert "legacy-big: does not fit: node 0 has 3 free core(s), 8 needed" in printed.stdout
    assert "linux-tuned: node 0, vCPU->CPU 0->1, 1->9, 2->2, 3->10" in printed.stdout
    diff = run_vmtune("plan", "--isolated", "--diff", "--host", str(HOSTS / "intel-2node.xml"), str(hv))
    assert "+    <vcpupin vcpu=\"0\" cpuset=\"1\"/>" in diff.stdout
    run_vmtune("plan", "--isolated", "--write", "--host", str(HOSTS / "intel-2node.xml"), str(hv))
    after = run_vmtune("check", "--isolated", "--policy", "latency", "--host", str(HOSTS / "intel-2node.xml"),
                       "--select", "CPU007,CPU004,CPU011,CPU013,CPU014", str(hv / "linux-tuned.xml"),
                       str(hv / "win10-timer-storm.xml"))
    assert "0 finding(s)" in after.stdout, after.stdout
    missing = run_vmtune("plan", "--isolated", str(hv))
    assert missing.returncode == 2 and "--host caps.xml" in missing.stderr


@pytest.mark.parametrize("cpuset, error", [
    ("bogus", "vmtune: --housekeeping 'bogus' is not a cpuset (e.g. 0,8 or 0-1,16-17)"),
    ("^3", "vmtune: --housekeeping '^3' is not a cpuset (e.g. 0,8 or 0-1,16-17)"),
    ("0,99-100", "vmtune: --housekeeping names CPUs the host does not have: 99-100"),
])
def test_plan_refuses_a_bad_housekeeping_cpuset(cpuset: str, error: str) -> None:
    result = run_vmtune("plan", "--isolated", "--host", str(HOSTS / "intel-2node.xml"), "--housekeeping", cpuset,
                        str(DOMAINS / "linux-tuned.xml"))
    assert result.returncode == 2 and result.stderr.strip() == error
