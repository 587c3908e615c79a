"""`vmtune host` over a copy of sysfs and /proc: each host rule firing and staying quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmtune.host.system import HostSystem
from vmtune.rules.hostrules import HOST_RULES

from conftest import run_vmtune

GOOD = {
    "sys/module/kvm_intel/parameters/ept": "Y",
    "sys/module/kvm/parameters/halt_poll_ns": "200000",
    "sys/module/kvm_intel/parameters/enable_apicv": "Y",
    "sys/module/kvm/parameters/pi_inject_timer": "1",
    "sys/kernel/mm/ksm/run": "0",
    "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=managed_irq,domain,2-7 nohz_full=2-7",
    "sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": "1024",
    "sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages": "512",
    "dev/kvm": "",
    "dev/vhost-net": "",
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never",
    "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "powersave",  # a housekeeping CPU may save power
    "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor": "performance",
    "sys/module/kvm_intel/parameters/ple_gap": "0",
    "sys/module/kvm/parameters/kvmclock_periodic_sync": "N",
    "proc/irq/42/smp_affinity_list": "0-1",
    "sys/module/vhost_net/parameters/experimental_zcopytx": "1",
}
BAD = {
    "HOST001": {"sys/module/kvm_intel/parameters/ept": "N"},
    "HOST002": {"sys/module/kvm/parameters/halt_poll_ns": "0"},
    "HOST003": {"sys/kernel/mm/ksm/run": "1"},
    "HOST004": {"sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": "0"},
    "HOST005": {"proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet"},
    "HOST006": {"dev/kvm": None, "dev/null": ""},  # a copied /dev without kvm
    "HOST007": {"sys/module/kvm_intel/parameters/enable_apicv": "N"},
    "HOST008": {"dev/vhost-net": None},
    "HOST009": {"sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]"},
    "HOST010": {"sys/devices/system/cpu/cpu2/cpufreq/scaling_governor": "powersave"},
    "HOST011": {"sys/module/kvm_intel/parameters/ple_gap": "128"},
    "HOST012": {"sys/module/kvm/parameters/kvmclock_periodic_sync": "Y"},
    "HOST013": {"proc/irq/42/smp_affinity_list": "0-15"},
    "HOST014": {"sys/module/vhost_net/parameters/experimental_zcopytx": "0"},
}


def make_root(tmp_path: Path, overrides: dict[str, str | None]) -> Path:
    root = tmp_path / "root"
    for relative, text in {**GOOD, **overrides}.items():
        if text is None:
            continue
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return root


def fired(root: Path) -> set[str]:
    system = HostSystem.read(root)
    return {f.rule.code for rule in HOST_RULES for f in rule.check_host(system)}


def test_a_well_configured_host_is_quiet(tmp_path: Path) -> None:
    assert fired(make_root(tmp_path, {})) == set()


@pytest.mark.parametrize("code", sorted(BAD))
def test_each_host_rule_fires(tmp_path: Path, code: str) -> None:
    assert fired(make_root(tmp_path, BAD[code])) == {code}


def test_every_host_rule_has_a_case() -> None:
    assert sorted(BAD) == sorted(r.code for r in HOST_RULES)


def test_amd_npt_is_read_too(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"sys/module/kvm_intel/parameters/ept": None,
                                "sys/module/kvm_amd/parameters/npt": "0"})
    assert fired(root) == {"HOST001"}


def test_host_command_output_and_exit_codes(tmp_path: Path) -> None:
    root = make_root(tmp_path, {**BAD["HOST001"], **BAD["HOST003"]})
    result = run_vmtune("host", "--root", str(root))
    assert result.returncode == 1
    assert (f"{root}:/sys/module/kvm_intel/parameters/ept: HOST001 error two-dimensional paging (EPT/NPT) is "
            "disabled in KVM (ept-disabled)") in result.stdout
    quiet = run_vmtune("host", "--root", str(root), "--ignore", "HOST001")
    assert quiet.returncode == 0 and "HOST003 info" in quiet.stdout


@pytest.mark.parametrize("overrides, expected", [
    ({"sys/module/kvm_intel/parameters/enable_apicv": "N"},
     "HOST007 warning APICv is disabled: every guest interrupt, EOI and IPI costs a VM exit"),
    ({"sys/module/kvm_intel/parameters/enable_apicv": None, "sys/module/kvm_intel/parameters/ept": None,
      "sys/module/kvm_amd/parameters/npt": "1", "sys/module/kvm_amd/parameters/avic": "0"},
     "HOST007 info AVIC is off: every guest interrupt and IPI costs a VM exit"),
    ({"sys/module/kvm/parameters/pi_inject_timer": "0"},
     "HOST007 info posted timer interrupts are off on a host with nohz_full CPUs: guest timer ticks interrupt them"),
])
def test_interrupt_posting_findings(tmp_path: Path, overrides: dict[str, str | None], expected: str) -> None:
    result = run_vmtune("host", "--root", str(make_root(tmp_path, overrides)), "--fail-on", "error")
    assert result.returncode == 0, result.stderr
    assert [line.split(": ", 1)[1] for line in result.stdout.splitlines() if "HOST007" in line] == [
        expected + " (interrupt-posting-off)"]


def test_posted_timers_off_without_nohz_full_is_not_reported(tmp_path: Path) -> None:
    """pi_inject_timer=-1 resolves to 0 at load on hosts without nohz_full: the default, not a finding."""
    root = make_root(tmp_path, {"sys/module/kvm/parameters/pi_inject_timer": "0",
                                "proc/cmdline": "BOOT_IMAGE=/vmlinuz isolcpus=2-7"})
    assert fired(root) == set()


def test_a_host_with_only_1_gib_pages_has_a_pool(tmp_path: Path) -> None:
    root = make_root(tmp_path, {**BAD["HOST004"],
                                "sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages": "8",
                                "sys/devices/system/node/node0/hugepages/hugepages-1048576kB/free_hugepages": "8"})
    assert fired(root) == set()


NOT_REALTIME = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=2-7"


@pytest.mark.parametrize("code", ["HOST010", "HOST011", "HOST012"])
def test_realtime_host_settings_are_not_asked_of_hosts_without_nohz_full(tmp_path: Path, code: str) -> None:
    """Governor, pause-loop exiting and kvmclock sync are tuned's realtime-virtual-host advice:
    a host whose CPUs keep their tick is not held to it."""
    assert fired(make_root(tmp_path, {**BAD[code], "proc/cmdline": NOT_REALTIME})) == set()


def test_nohz_full_is_read_from_sysfs_when_the_kernel_reports_it(tmp_path: Path) -> None:
    root = make_root(tmp_path, {**BAD["HOST011"], "proc/cmdline": NOT_REALTIME,
                                "sys/devices/system/cpu/nohz_full": "4-7"})
    assert fired(root) == {"HOST011"}
    assert fired(make_root(tmp_path / "null", {**BAD["HOST011"], "proc/cmdline": NOT_REALTIME,
                                               "sys/devices/system/cpu/nohz_full": "(null)"})) == set()


def test_irqs_on_isolated_cpus_read_isolcpus_flags_and_name_the_irqs(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"proc/cmdline": "BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,domain,4-5",
                                "proc/irq/42/smp_affinity_list": "0-3", "proc/irq/7/smp_affinity_list": "0-7",
                                "proc/irq/9/smp_affinity_list": "5"})
    result = run_vmtune("host", "--root", str(root), "--fail-on", "error")
    assert result.returncode == 0, result.stderr
    assert f"{root}:/proc/irq: HOST013 info 2 IRQ(s) may run on the isolated CPUs 4-5 (IRQ 7, 9) " \
           "(irqs-on-isolated-cpus)" in result.stdout


def test_transparent_hugepages_never_fails_the_host_check(tmp_path: Path) -> None:
    result = run_vmtune("host", "--root", str(make_root(tmp_path, BAD["HOST009"])))
    assert result.returncode == 1
    assert "HOST009 warning transparent hugepages are off: guests without hugetlbfs backing run on 4 KiB pages " \
           "(transparent-hugepages-never)" in result.stdout


@pytest.mark.parametrize("root", ["no-such-root", "a" * 300])
def test_a_root_without_sysfs_is_an_error_not_a_healthy_host(tmp_path: Path, root: str) -> None:
    """A mistyped --root read nothing and reported 0 findings (exit 0); a name too long for the
    file system raised a traceback. Both are one line and exit 2 now."""
    given = str(tmp_path / root)
    result = run_vmtune("host", "--root", given)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"vmtune: {given}: not a directory: no host root to read\n"
