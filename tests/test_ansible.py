"""The Ansible collection (ansible/ansible_collections/vmtune/libvirt) run by ansible-playbook
against localhost: the libvirt test driver for checks and check mode, the embedded QEMU driver
for persistence, idempotence and rollback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT, TESTNODE_URI

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

COLLECTION = ROOT / "ansible" / "ansible_collections" / "vmtune" / "libvirt"
PLAYBOOKS = COLLECTION / "playbooks"


def _playbook(tmp_path: Path, playbook: str, inventory: str, *args: str) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).with_name("ansible-playbook")
    if not executable.exists():
        pytest.skip("ansible-core is not installed (pip install '.[dev]')")
    (tmp_path / "inventory.ini").write_text(inventory)
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "ansible"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "t"),
           "ANSIBLE_HOME": str(tmp_path / "home"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_STDOUT_CALLBACK": "default"}
    return subprocess.run([str(executable), "-i", str(tmp_path / "inventory.ini"), str(PLAYBOOKS / playbook), *args],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)


def _host(name: str, uri: str, python: str = sys.executable, **extra: str) -> str:
    more = " ".join(f"{k}={v}" for k, v in extra.items())
    return f"{name} ansible_connection=local ansible_python_interpreter={python} vmtune_uri={uri} {more}\n"


def test_check_playbook_writes_one_fleet_report(tmp_path: Path) -> None:
    inventory = _host("hv01", TESTNODE_URI) + _host("hv02", TESTNODE_URI) + \
        "localhost ansible_connection=local ansible_python_interpreter=" + sys.executable + "\n"
    result = _playbook(tmp_path, "check.yml", inventory, "-e", "vmtune_hosts=hv0*", "-e", f"report_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hv01                       : ok=1    changed=0" in result.stdout  # the check changes nothing
    report = json.loads((tmp_path / "fleet-report.json").read_text())
    assert [h["host"] for h in report["hosts"]] == ["hv01", "hv02"]
    per_host = len(report["hosts"][0]["findings"])
    assert per_host > 10 and report["counts_per_rule"]["CLK002"] == 2 * sum(
        1 for f in report["hosts"][0]["findings"] if f["rule"] == "CLK002")
    assert set(report["hosts"][0]["findings"][0]) >= {"rule", "severity", "domain", "line", "xpath", "message"}
    markdown = (tmp_path / "fleet-report.md").read_text()
    assert "| CLK002 | windows-synthetic-timers-missing |" in markdown and "### hv02" in markdown


def test_check_fails_a_host_only_when_asked(tmp_path: Path) -> None:
    inventory = _host("hv01", TESTNODE_URI) + "localhost ansible_connection=local\n"
    asked = _playbook(tmp_path, "check.yml", inventory, "-e", "vmtune_hosts=hv01", "-e", f"report_dir={tmp_path}",
                      "-e", "vmtune_fail_on=error")
    assert asked.returncode == 2 and "findings at or above error" in asked.stdout
    assert "vmtune failed on hv01" in asked.stdout
    report = json.loads((tmp_path / "fleet-report.json").read_text())  # the report is written all the same
    assert report["hosts"][0]["failed"] is True and report["hosts"][0]["findings"]


def test_tune_check_mode_shows_a_diff_on_the_test_driver(tmp_path: Path) -> None:
    result = _playbook(tmp_path, "tune.yml", _host("hv01", TESTNODE_URI), "--check", "--diff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--- before: win10\n+++ after: win10" in result.stdout and "+      <stimer state='on'/>" in result.stdout
    assert "hv01                       : ok=2    changed=1" in result.stdout


def test_a_host_without_vmtune_is_told_what_to_install(tmp_path: Path) -> None:
    python = shutil.which("python3", path="/usr/bin")
    if python is None or subprocess.run([python, "-c", "import vmtune"], capture_output=True,
                                        cwd=tmp_path).returncode == 0:
        pytest.skip("no system Python without vmtune")
    result = _playbook(tmp_path, "tune.yml", _host("hv01", TESTNODE_URI, python=python))
    assert result.returncode != 0
    assert "vmtune is not installed on this host: install vmtune on the hypervisor: pip install" in result.stdout
    assert "Traceback" not in result.stdout


EMBEDDED = """
import sys, libvirt
from vmtune.live.connection import open_connection
conn = open_connection("qemu:///embed?root=" + sys.argv[1])
flags = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
if sys.argv[2] == "define":
    for dom in conn.listAllDomains(0):
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    conn.defineXML(sys.stdin.read())
sys.stdout.write(conn.lookupByName("nginx01").XMLDesc(flags))
conn.close()
"""


def _embedded(root: Path, action: str, xml: str = "") -> str:
    """In a process of its own: an embedded driver's root stays held until its process exits."""
    done = subprocess.run([sys.executable, "-c", EMBEDDED, str(root), action], input=xml, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_tune_persists_is_idempotent_and_rolls_back_exactly(tmp_path: Path, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed")
    # Its own cached root (the first open probes QEMU for about a minute).
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vmtune-test-embed-ansible"
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "qemu.conf").write_text('stdio_handler = "file"\n')
    # The nginx VM of the multiqueue incident: its fix (queues) does not depend on this host's Hyper-V.
    original = _embedded(root, "define", (DOMAINS / "nginx-single-queue.xml").read_text())

    def definition() -> str:
        return _embedded(root, "read")

    inventory = _host("hv01", f"qemu:///embed?root={root}", vmtune_state_dir=str(tmp_path / "state"))
    looked = _playbook(tmp_path, "tune.yml", inventory, "--check", "--diff")
    assert looked.returncode == 0 and "changed=1" in looked.stdout, looked.stdout + looked.stderr
    assert "+      <driver queues='16'/>" in looked.stdout and definition() == original  # check mode: nothing
    tuned = _playbook(tmp_path, "tune.yml", inventory)
    assert tuned.returncode == 0 and "changed=1" in tuned.stdout, tuned.stdout + tuned.stderr
    assert "<driver queues='16'/>" in definition()
    again = _playbook(tmp_path, "tune.yml", inventory)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout  # idempotent
    undone = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_rollback=true")
    assert undone.returncode == 0 and "changed=1" in undone.stdout, undone.stdout + undone.stderr
    assert definition() == original  # the exact previous definition
    twice = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_rollback=true")
    assert twice.returncode == 0 and "changed=0" in twice.stdout


@pytest.mark.parametrize("module", ["vmtune.libvirt.check", "vmtune.libvirt.tune"])
def test_module_documentation_parses_and_matches_the_arguments(module: str, tmp_path: Path) -> None:
    """What `ansible-test sanity`'s validate-modules would check first (it cannot run here: its pip
    bootstrap downloads from a host this network does not reach)."""
    executable = Path(sys.executable).with_name("ansible-doc")
    if not executable.exists():
        pytest.skip("ansible-core is not installed")
    done = subprocess.run([str(executable), "--json", module], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "ansible"),
                               "ANSIBLE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    documented = set(json.loads(done.stdout)[module]["doc"]["options"])
    source = (COLLECTION / "plugins" / "modules" / f"{module.rsplit('.', 1)[1]}.py").read_text()
    common = {"uri", "domains", "policy", "select", "ignore"}
    specific = {"check": {"fail_on"}, "tune": {"unsafe_fixes", "live", "force", "rollback", "state_dir"}}
    assert documented == common | specific[module.rsplit(".", 1)[1]]
    assert all(f"{name}=dict(" in source for name in specific[module.rsplit(".", 1)[1]])
