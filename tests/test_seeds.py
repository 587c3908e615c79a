"""The field incidents behind vmtune, and well-tuned domains that must stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmtune.rules.base import Severity

from conftest import DOMAINS, domain_xml
from helpers import codes, findings, fix, host, options


def read(name: str) -> bytes:
    return (DOMAINS / name).read_bytes()


@pytest.mark.parametrize("os", ["linux", "windows"])
def test_builder_base_domains_are_clean(os: str) -> None:
    assert codes(domain_xml(os=os)) == []


@pytest.mark.parametrize("name", ["win10-tuned.xml", "linux-tuned.xml"])
def test_well_tuned_domains_have_no_warning_or_error(name: str) -> None:
    assert [f for f in findings(read(name)) if f.severity >= Severity.WARNING] == []


def test_hyperv_rules_never_fire_on_linux() -> None:
    xml = domain_xml(os="linux", hyperv="<hyperv><stimer state='on'/></hyperv>",
                     clock="<clock offset='utc'><timer name='hpet' present='no'/></clock>")
    fired = set(codes(xml, options(("latency",))))
    # HV002 is a start failure on any OS; the Windows-only advice must stay silent.
    assert not fired & {"HV001", "HV003", "CLK001", "CLK002", "CLK006"}


def test_windows_timer_storm_is_a_warning() -> None:
    found = {f.rule.code: f for f in findings(read("win10-timer-storm.xml"))}
    assert found["CLK002"].severity is Severity.WARNING
    assert found["CLK002"].line == 31


def test_windows_timer_storm_fix_adds_exactly_the_synthetic_timers() -> None:
    original = read("win10-timer-storm.xml")
    outcome = fix(original, options(select=["CLK002"]))
    expected = original.replace(
        b"      <spinlocks state='on' retries='8191'/>\n",
        b"      <spinlocks state='on' retries='8191'/>\n"
        b"      <vpindex state='on'/>\n      <synic state='on'/>\n      <stimer state='on'/>\n",
    )
    assert outcome.fixed == expected
    assert outcome.findings == []


def test_windows_timer_fix_on_host_without_synthetic_timers_is_hpet_and_unsafe() -> None:
    original = read("win10-timer-storm.xml")
    opts = options(select=["CLK002"], host_facts=host(domcaps="domcaps-no-stimer.xml"))
    safe_only = fix(original, opts)
    assert not safe_only.changed
    assert "host does not offer Hyper-V vpindex, synic, stimer" in (safe_only.findings[0].note or "")
    unsafe = fix(original, opts, unsafe=True)
    assert unsafe.fixed == original.replace(b"<timer name='hpet' present='no'/>", b"<timer name='hpet' present='yes'/>")


def test_stimer_without_synic_and_vpindex_is_an_error() -> None:
    found = [f for f in findings(read("win-stimer-broken.xml")) if f.rule.code == "HV002"]
    assert len(found) == 1 and found[0].severity is Severity.ERROR
    assert "stimer requires synic and vpindex" in found[0].message


def test_sixteen_vcpus_with_one_queue() -> None:
    found = [f for f in findings(read("nginx-single-queue.xml")) if f.rule.code == "NET001"]
    assert len(found) == 1 and "16 vCPUs" in found[0].message and found[0].severity is Severity.WARNING
    outcome = fix(read("nginx-single-queue.xml"))  # a bare --fix: safe, and a warning
    # queues only: an explicit name='vhost' would stop the guest on a host without /dev/vhost-net
    assert outcome.fixed == read("nginx-single-queue.xml").replace(
        b"      <model type='virtio'/>\n    </interface>",
        b"      <model type='virtio'/>\n      <driver queues='16'/>\n    </interface>")


def test_the_field_reports_fix_is_clean() -> None:
    """16 vCPUs with queues='16', the nginx VM as the field report fixed it: nothing to say."""
    fixed = read("nginx-single-queue.xml").replace(
        b"      <model type='virtio'/>\n    </interface>",
        b"      <model type='virtio'/>\n      <driver name='vhost' queues='16'/>\n    </interface>")
    assert not {"NET001", "NET002"} & set(codes(fixed))
    assert not fix(fixed, unsafe=True).changed or b"queues='16'" in fix(fixed, unsafe=True).fixed


def test_queues_sized_for_vcpu_hotplug_are_kept() -> None:
    xml = read("queues-above-vcpus.xml").replace(b"<vcpu>4</vcpu>", b"<vcpu current='4'>16</vcpu>")
    assert "NET002" not in codes(xml)


def test_queues_above_vcpus_and_tap_limit() -> None:
    found = [f for f in findings(read("queues-above-vcpus.xml")) if f.rule.code == "NET002"]
    assert found[0].severity is Severity.INFO and found[0].message == "16 queues for 4 vCPUs"
    assert not fix(read("queues-above-vcpus.xml")).changed  # an explicit value: unsafe
    outcome = fix(read("queues-above-vcpus.xml"), options(fix_select=("NET002",)), unsafe=True)
    assert b"<driver name='vhost' queues='4'/>" in outcome.fixed


def test_queues_above_a_three_x_tap_limit_is_an_error(tmp_path: Path) -> None:
    """A fleet of 3.x kernels says so in its policy; above that limit the guest would not start."""
    policy = tmp_path / "old-kernels.yaml"
    policy.write_text("name: old-kernels\nextends: default\nrules:\n  - select: [NET002]\n"
                      "    params: {max_queues: 8}\n")
    found = [f for f in findings(read("queues-above-vcpus.xml"), options((str(policy),)))
             if f.rule.code == "NET002"]
    assert found[0].severity is Severity.ERROR and found[0].message == (
        "16 queues exceed the tap limit of 8 (max_queues): a host with that limit will not start the guest")


def test_xen_guest_ballooned_below_maximum() -> None:
    found = [f for f in findings(read("xen-ballooned.xml")) if f.rule.code == "MEM003"]
    assert len(found) == 1 and found[0].severity is Severity.WARNING
    assert "4 GiB of 16 GiB" in found[0].message


def test_large_legacy_vm() -> None:
    found = set(codes(read("legacy-bigvm.xml")))
    assert {"CPU001", "DSK004", "NET004", "USB001", "USB002", "MEM001"} <= found
    latency = set(codes(read("legacy-bigvm.xml"), options(("latency",))))
    assert "CPU007" in latency  # unpinned


def test_unknown_os_skips_os_specific_rules() -> None:
    xml = domain_xml(os=None, clock="<clock offset='utc'><timer name='hpet' present='no'/></clock>")
    assert not set(codes(xml)) & {"CLK001", "CLK002", "HV001", "CLK003"}
    assert {"CLK001", "CLK002", "HV001"} <= set(codes(xml, options(os="windows")))
