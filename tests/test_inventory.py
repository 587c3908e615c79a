"""The host inventory's indexes answer exactly what a walk over every other domain answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from vmtune.facts.domain import Domain
from vmtune.host.inventory import DomainUsage, Inventory, reserved_of
from vmtune.xml.safe import parse_domain

from conftest import HOSTS, run_vmtune


def domain(name: str, uuid: str | None = None, pins: str = "", memory_mib: int = 1024, hugepages: str = "",
           nodeset: str | None = None) -> Domain:
    cputune = "".join(f"<vcpupin vcpu='{i}' cpuset='{c}'/>" for i, c in enumerate(pins.split())) if pins else ""
    numatune = f"<numatune><memory mode='strict' nodeset='{nodeset}'/></numatune>" if nodeset else ""
    xml = (f"<domain type='kvm'><name>{name}</name>{f'<uuid>{uuid}</uuid>' if uuid else ''}"
           f"<memory unit='MiB'>{memory_mib}</memory><vcpu>{max(1, len(pins.split()))}</vcpu>"
           f"{f'<cputune>{cputune}</cputune>' if cputune else ''}{numatune}"
           f"{f'<memoryBacking><hugepages>{hugepages}</hugepages></memoryBacking>' if hugepages != '' else ''}"
           "<os><type arch='x86_64'>hvm</type></os></domain>")
    return Domain(parse_domain(xml.encode(), f"{name}.xml"), f"{name}.xml")


U1, U2 = "c7a5fdbd-edaf-9455-926a-d65c16db1809", "2d3e0a7e-9a58-4c55-a6d7-1d0c0a3b5e10"
DOMAINS = [
    domain("db1", U1, pins="2 3", nodeset="0", hugepages="<page size='2048' unit='KiB'/>"),
    domain("db2", U2, pins="3 4", memory_mib=4096, nodeset="1", hugepages=" "),
    domain("copy-of-db1", U1, pins="5"),  # libvirt's test suite reuses uuids: the same domain
    domain("anon"), domain("anon", pins="2"),  # no uuid: the same name is the same domain
    domain("web", "6f0b6b9a-0c11-4d1f-9a55-8c1d9c1e2f33", hugepages="<page size='1' unit='GiB'/>", nodeset="0-1"),
    domain("aaa", "0b6d8b4e-3b7a-4f6c-8a3e-1a2b3c4d5e6f", memory_mib=512),
]
OUTSIDER = domain("stdin", "11111111-2222-3333-4444-555555555555", pins="4")


def test_index_answers_what_a_walk_over_the_others_answers() -> None:
    inventory = Inventory([DomainUsage.of(d) for d in DOMAINS])
    for dom in [*DOMAINS, OUTSIDER]:
        others = inventory.others(dom)
        assert others == [u for u in inventory.domains if not u.same_domain(dom)]
        for cpus in (frozenset({2}), frozenset({3, 4}), frozenset({5, 9})):
            assert inventory.pinned_on(cpus, dom) == [o for o in others if cpus & o.vcpu_cpus]
        for size in (2048, 1048576, 4):
            assert inventory.with_page_size(size, dom) == [o for o in others if o.hugepage_kib == size]
        assert inventory.first_by_name(dom) == (not any(o.name < dom.name for o in others))
        assert inventory.totals(dom) == (len(others), sum(o.memory_kib for o in others))
        assert inventory.reserved_by_others(dom) == reserved_of(others)
    assert [inventory.totals(d)[0] for d in DOMAINS[:4]] == [5, 6, 5, 5]


def test_index_follows_a_growing_inventory() -> None:
    inventory = Inventory()
    inventory.domains.append(DomainUsage.of(DOMAINS[0]))
    assert inventory.pinned_on(frozenset({3}), OUTSIDER) == inventory.domains
    inventory.domains.append(DomainUsage.of(DOMAINS[1]))
    assert [u.name for u in inventory.pinned_on(frozenset({3}), OUTSIDER)] == ["db1", "db2"]


def test_cross_domain_findings_of_a_batch(tmp_path: Path) -> None:
    """Each pinned domain names the others sharing its CPUs; an unpinned one gets a placement around them."""
    for i in range(40):
        dom = domain(f"vm{i:02d}", f"00000000-0000-4000-8000-{i:012d}", pins=f"{i % 4 + 2}" if i < 8 else "")
        (tmp_path / f"vm{i:02d}.xml").write_bytes(etree.tostring(dom.root))
    host = str(HOSTS / "intel-2node.xml")
    one = run_vmtune("check", "--isolated", "-j", "1", "--select", "CPU013,CPU007", "--host", host, str(tmp_path))
    two = run_vmtune("check", "--isolated", "-j", "2", "--select", "CPU013,CPU007", "--host", host, str(tmp_path))
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    assert "vm00.xml:" in one.stdout and "vCPU pins 2 are shared with vm04" in one.stdout
    assert one.stdout.count("CPU013") == 8
    assert one.stdout.count("CPU007") == 32


def test_a_host_directory_is_parsed_once_and_reported_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """With --host the inventory pass keeps the domains it parsed for the check, and the usage of
    files unchanged since an earlier run comes from the cache without reading them: each file is
    parsed once. The report is the one parsing everything twice gives (nothing kept, no cache)."""
    import vmtune.commands.check as check_module
    import vmtune.facts.domain as domain_module  # Domain.parse's parse_domain, where it is looked up

    monkeypatch.setenv("VMTUNE_CACHE_DIR", str(tmp_path / "cache"))
    hosts = tmp_path / "host"
    hosts.mkdir()
    for i in range(30):
        dom = domain(f"vm{i:02d}", f"00000000-0000-4000-8000-{i:012d}", pins=f"{i % 3 + 2}" if i < 6 else "",
                     hugepages=" " if i % 5 == 0 else "", nodeset="0" if i % 5 == 0 else None)
        (hosts / f"vm{i:02d}.xml").write_bytes(etree.tostring(dom.root))
    files = sorted(str(p) for p in hosts.glob("*.xml"))
    parsed: list[str] = []
    real = domain_module.parse_domain
    monkeypatch.setattr(domain_module, "parse_domain", lambda data, source: parsed.append(source) or real(data, source))

    def run(keep: int) -> tuple[int, str]:
        parsed.clear()
        monkeypatch.setattr(check_module, "KEEP_PARSED", keep)
        request = check_module.CheckRequest(paths=[str(hosts)], isolated=True, jobs=1,
                                            host=HOSTS / "intel-2node.xml")
        code = check_module.run_check(request)
        return code, capsys.readouterr().out

    kept = run(1000)
    assert sorted(parsed) == files
    fresh = run(0)  # written a moment ago: racily clean, not cached, so parsed twice
    assert len(parsed) == 60
    monkeypatch.setattr(check_module, "RACY_NS", 0)  # as if written long ago
    run(0)
    cached = run(0)  # nothing kept: every usage comes from the cache the run before wrote
    assert sorted(parsed) == files
    pinned = b"<vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='2'/></cputune>"
    (hosts / "vm29.xml").write_bytes((hosts / "vm29.xml").read_bytes().replace(b"<vcpu>1</vcpu>", pinned))
    changed = run(0)
    assert sorted(parsed) == sorted([*files, files[-1]])  # the changed file only is parsed for the inventory
    monkeypatch.setenv("VMTUNE_NO_CACHE", "1")
    (hosts / "vm29.xml").write_bytes((hosts / "vm29.xml").read_bytes().replace(pinned, b"<vcpu>1</vcpu>"))
    twice = run(0)
    assert len(parsed) == 60
    assert kept == fresh == cached == twice and kept[0] == 1
    assert kept[1].count(" CPU013 ") == 6
    assert "shared with vm29" in changed[1]  # the others see the changed file's new pins


@pytest.mark.parametrize("collecting", [True, False])
def test_the_run_s_inventory_is_kept_out_of_the_collector_s_walks(tmp_path: Path, collecting: bool) -> None:
    """check_files' inventory lives to the end of the run: it is built with the cyclic GC off and
    then frozen, as main() does with the start-up's objects. The collector's state is as it was,
    and a caller that had it off (nothing to freeze for) gets nothing frozen."""
    import gc

    from vmtune.commands.check import _lasting_inventory
    from vmtune.sources import iter_sources

    for i in range(3):
        dom = domain(f"vm{i}", f"00000000-0000-4000-8000-{i:012d}", pins=str(i + 2))
        (tmp_path / f"vm{i}.xml").write_bytes(etree.tostring(dom.root))
    was = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        frozen = gc.get_freeze_count()
        inventory = _lasting_inventory(list(iter_sources([str(tmp_path)])), None, None)
        assert gc.isenabled() is collecting
        assert [u.name for u in inventory.domains] == ["vm0", "vm1", "vm2"]
        walked = {id(o) for o in gc.get_objects()}
        outside = [id(u) not in walked for u in inventory.domains] + [id(inventory.index.by_cpu) not in walked]
        assert outside == [collecting] * 4
        assert (gc.get_freeze_count() > frozen) is collecting
    finally:
        (gc.enable if was else gc.disable)()
