"""The Ansible collection (ansible/ansible_collections/vmtune/libvirt) run by ansible-playbook
against localhost: the libvirt test driver for checks and check mode, the embedded QEMU driver
for persistence, idempotence and rollback."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import DOMAINS, ROOT, TESTNODE, TESTNODE_URI, keep_embed_capabilities, new_embed_root, run_vmtune
from helpers import console_messages

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
    # Escaped as everything from a host is (vmtune.libvirt.markdown); rendered, the text is the same.
    assert "| CLK002 | windows\\-synthetic\\-timers\\-missing |" in markdown and "### hv02" in markdown


def test_check_report_lands_where_ansible_runs_with_html_and_honours_the_selection(tmp_path: Path) -> None:
    inventory = _host("hv01", TESTNODE_URI) + "localhost ansible_connection=local ansible_python_interpreter=" + \
        sys.executable + "\n"
    selection = json.dumps({"vmtune_hosts": "hv01", "vmtune_domains": ["win10", "legacy-big"],
                            "vmtune_select": ["CLK", "USB"], "vmtune_ignore": ["CLK004"]})
    result = _playbook(tmp_path, "check.yml", inventory, "-e", selection)
    assert result.returncode == 0, result.stdout + result.stderr
    # no report_dir given: the directory ansible-playbook ran in, never the collection's playbooks/
    assert not list(PLAYBOOKS.glob("fleet-report.*"))
    report = json.loads((tmp_path / "fleet-report.json").read_text())
    findings = report["hosts"][0]["findings"]
    assert {f["domain"] for f in findings} == {"win10", "legacy-big"}
    assert {f["rule"] for f in findings} == {"CLK002", "CLK003", "USB001", "USB002"}  # CLK004 ignored
    assert report["summary"]["findings"] == len(findings) and report["summary"]["domains"] == 2
    page = (tmp_path / "fleet-report.html").read_text()
    assert "<title>vmtune fleet report</title>" in page and ">hv01</b>: 2 domain(s) with findings" in page
    assert page.count('<details class="domain" open>') == 2
    messages, _ = console_messages(tmp_path / "fleet-report.html", tmp_path)  # opens cleanly in a browser
    assert messages == []


def test_check_writes_json_and_md_and_skips_html_when_the_controller_lacks_vmtune(tmp_path: Path) -> None:
    """Before: with vmtune only on the hypervisors (as the collection's README installs it), the
    playbook wrote fleet-report.json and .md, then failed on the HTML task. The controller here is
    a venv that sees ansible-core and its dependencies but not vmtune; hv01's modules run with a
    Python that has vmtune, as a hypervisor's would."""
    import sysconfig

    controller = tmp_path / "controller"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(controller)], check=True, timeout=120)
    site = next(controller.glob("lib/python3*/site-packages"))
    (site / "ansible-only.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # not its .pth files
    python = controller / "bin" / "python"
    imports = [subprocess.run([python, "-c", f"import {name}"], cwd=tmp_path, capture_output=True).returncode
               for name in ("ansible.cli.playbook", "vmtune")]
    assert imports == [0, 1]
    (tmp_path / "inventory.ini").write_text(_host("hv01", TESTNODE_URI))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "ansible"), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "t"),
           "ANSIBLE_HOME": str(tmp_path / "home"), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_STDOUT_CALLBACK": "default"}
    result = subprocess.run([python, "-m", "ansible.cli.playbook", "-i", str(tmp_path / "inventory.ini"),
                             str(PLAYBOOKS / "check.yml"), "-e", "vmtune_hosts=hv01", "-e", f"report_dir={tmp_path}"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"fleet-report.html skipped: vmtune is not installed in {python}, which renders it" in result.stdout
    assert json.loads((tmp_path / "fleet-report.json").read_text())["hosts"][0]["findings"]
    assert "### hv01" in (tmp_path / "fleet-report.md").read_text()
    assert not (tmp_path / "fleet-report.html").exists()

HOSTILE_NAMES = ["<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "# *bold* | `code` ![i](j)"]


def test_fleet_markdown_shows_hostile_domain_names_as_text(tmp_path: Path) -> None:
    """Domain names are anyone's to choose: in fleet-report.md they render as the text they are,
    never as HTML (an <img onerror> ran when the report was viewed), a link or markup."""
    # CommonMark (raw HTML on, as GitHub and GitLab allow some); installed with rich, typer's dependency.
    MarkdownIt = pytest.importorskip("markdown_it").MarkdownIt

    node = re.sub(r"  <domain file=.*\n", "", TESTNODE.read_text())
    for index, name in enumerate(HOSTILE_NAMES):
        escaped = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        (tmp_path / f"d{index}.xml").write_text((DOMAINS / "win10-timer-storm.xml").read_text().replace(
            "<name>win10<", f"<name>{escaped}<").replace("-000000000010<", f"-00000000001{index}<"))
        node = node.replace("</node>", f'  <domain file="d{index}.xml"/>\n</node>')
    (tmp_path / "node.xml").write_text(node)
    inventory = _host("hv01", f"test://{tmp_path / 'node.xml'}") + \
        "localhost ansible_connection=local ansible_python_interpreter=" + sys.executable + "\n"
    result = _playbook(tmp_path, "check.yml", inventory, "-e", "vmtune_hosts=hv01", "-e", f"report_dir={tmp_path}",
                       "-e", '{"vmtune_report_formats": ["json", "md"]}')
    assert "fatal" not in result.stdout, result.stdout
    findings = json.loads((tmp_path / "fleet-report.json").read_text())["hosts"][0]["findings"]
    assert {f["domain"] for f in findings} == set(HOSTILE_NAMES)
    markdown = (tmp_path / "fleet-report.md").read_text()
    assert "- &lt;img src\\=x onerror\\=alert\\(1\\)&gt;: " in markdown  # the bytes: escaped, on its own line
    assert "- \\[x\\]\\(javascript\\:alert\\(1\\)\\): " in markdown
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert "<img" not in html and "<a " not in html and "<em>" not in html and "<code>" not in html
    assert "<h3>hv01</h3>" in html and html.count("<h3>") == 1  # a name starting with # is no heading
    for name in HOSTILE_NAMES:  # each one shown, as text
        shown = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert f"<li>{shown}: " in html, name
    assert html.count("<tr>") == 1 + len({f["rule"] for f in findings})  # no cell or row added by `|`


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


def test_tune_takes_the_domains_named(tmp_path: Path) -> None:
    result = _playbook(tmp_path, "tune.yml", _host("hv01", TESTNODE_URI), "--check", "--diff",
                       "-e", "vmtune_domains=nginx01")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--- before: nginx01" in result.stdout and "before: win10" not in result.stdout
    assert not (tmp_path / "tune-run.json").exists()  # check mode records nothing
    legacy = json.dumps({"vmtune_domains": ["legacy-big"], "vmtune_ignore": ["CPU001"]})
    safe = _playbook(tmp_path, "tune.yml", _host("hv01", TESTNODE_URI), "--check", "--diff", "-e", legacy)
    assert safe.returncode == 0 and "changed=0" in safe.stdout  # its fixes are all unsafe
    unsafe = _playbook(tmp_path, "tune.yml", _host("hv01", TESTNODE_URI), "--check", "--diff", "-e", legacy,
                       "-e", "vmtune_unsafe_fixes=true")
    assert unsafe.returncode == 0 and "+      <target dev='vda' bus='virtio'/>" in unsafe.stdout
    assert "host-passthrough" not in unsafe.stdout  # CPU001 ignored


def test_a_failing_domain_does_not_lose_the_record_of_the_others(tmp_path: Path) -> None:
    """The test driver keeps a define for the module's one connection: enough for win10's backup."""
    inventory = _host("hv01", TESTNODE_URI, vmtune_state_dir=str(tmp_path / "state")) + \
        "localhost ansible_connection=local ansible_python_interpreter=" + sys.executable + "\n"
    result = _playbook(tmp_path, "tune.yml", inventory, "-e", '{"vmtune_hosts": "hv01", "vmtune_domains": '
                       '["win10", "no-such-domain", "nginx01"]}')
    assert result.returncode == 2
    assert "vmtune could not tune 1 domain(s): " in result.stdout and "no such domain 'no-such-domain'" \
        in result.stdout
    record = json.loads((tmp_path / "tune-run.json").read_text())["hv01"]
    assert record["uri"] == TESTNODE_URI and sorted(record["domains"]) == ["nginx01", "win10"]
    assert all(len(d["definition_sha256"]) == 64 and d["backup"] for d in record["domains"].values())


def test_rollback_finds_a_recorded_domain_by_its_uuid_not_by_a_name_like_it(tmp_path: Path) -> None:
    """A domain named after win10's UUID must not stand in for win10 when the record is rolled back:
    looked up by name first, it was found instead, and win10's rollback refused ("backup ... is no
    longer in the state directory": the impostor has no such backup)."""
    uuid = "7f1a2c3e-0000-4000-8000-000000000010"  # win10-timer-storm.xml's
    assert f"<uuid>{uuid}</uuid>" in (DOMAINS / "win10-timer-storm.xml").read_text()
    (tmp_path / "impostor.xml").write_text((DOMAINS / "nginx-single-queue.xml").read_text().replace(
        "<name>nginx01<", f"<name>{uuid}<"))
    node = re.sub(r"  <domain file=.*\n", "", TESTNODE.read_text()).replace(
        "</node>", f'  <domain file="{DOMAINS / "win10-timer-storm.xml"}"/>\n  <domain file="impostor.xml"/>\n</node>')
    (tmp_path / "node.xml").write_text(node)
    inventory = _host("hv01", f"test://{tmp_path / 'node.xml'}", vmtune_state_dir=str(tmp_path / "state")) + \
        "localhost ansible_connection=local ansible_python_interpreter=" + sys.executable + "\n"
    tuned = _playbook(tmp_path, "tune.yml", inventory, "-e", '{"vmtune_hosts": "hv01", "vmtune_domains": ["win10"]}')
    assert tuned.returncode == 0, tuned.stdout
    record = json.loads((tmp_path / "tune-run.json").read_text())["hv01"]["domains"]
    assert list(record) == ["win10"] and record["win10"]["uuid"] == uuid
    # The test driver forgets the define with the module's connection: win10 is back to the
    # backup's definition, so the rollback finds it restored already and changes nothing.
    rolled = _playbook(tmp_path, "tune.yml", inventory, "-e", '{"vmtune_hosts": "hv01", "vmtune_rollback": true}',
                       "-v")
    assert rolled.returncode == 0, rolled.stdout
    assert "no longer in the state directory" not in rolled.stdout
    assert '"domain": "win10"' in rolled.stdout and f'"domain": "{uuid}"' not in rolled.stdout


def test_rollback_without_a_record_or_domains_is_refused(tmp_path: Path) -> None:
    result = _playbook(tmp_path, "tune.yml", _host("hv01", TESTNODE_URI), "-e", "vmtune_rollback=true")
    assert result.returncode == 2
    assert "rollback needs the record of a tune run (tune.yml keeps it in tune-run.json) or the domains" \
        in result.stdout


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
import json, sys, libvirt
from vmtune.live.connection import open_connection
conn = open_connection("qemu:///embed?root=" + sys.argv[1])
flags = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
if sys.argv[2] == "reset":
    for dom in conn.listAllDomains(0):
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
for xml in json.loads(sys.stdin.read() or "[]"):
    conn.defineXML(xml)
json.dump({dom.name(): dom.XMLDesc(flags) for dom in conn.listAllDomains(0)}, sys.stdout)
conn.close()
"""


def _embedded(root: Path, action: str, *xmls: str) -> dict[str, str]:
    """Define XMLs ("reset": after undefining every domain) and return every definition, in a
    process of its own: an embedded driver's root stays held until its process exits."""
    done = subprocess.run([sys.executable, "-c", EMBEDDED, str(root), action], input=json.dumps(list(xmls)),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture
def ansible_embed_root() -> Iterator[Path]:
    """An embedded-driver root of this test's own (new_embed_root): the playbooks' modules and the
    test's own processes open it in turn (one process may hold a root at a time)."""
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed")
    root = new_embed_root("ansible")
    yield root
    keep_embed_capabilities(root)
    shutil.rmtree(root, ignore_errors=True)


def test_tune_persists_is_idempotent_and_rolls_back_only_what_it_changed(tmp_path: Path, libvirt_mod,  # type: ignore[no-untyped-def]
                                                                         ansible_embed_root: Path) -> None:
    root = ansible_embed_root
    # The nginx VM of the multiqueue incident: its fix (queues) does not depend on this host's Hyper-V.
    # nginx02 is its twin that an operator fixes by hand with `vmtune apply`, outside any tune run.
    nginx = (DOMAINS / "nginx-single-queue.xml").read_text()
    twin = re.sub(r"<uuid>[^<]*</uuid>", "", nginx.replace("<name>nginx01</name>", "<name>nginx02</name>"))
    original = _embedded(root, "reset", nginx, twin)
    uri = f"qemu:///embed?root={root}"
    state = tmp_path / "state"

    def definitions() -> dict[str, str]:
        return _embedded(root, "read")

    inventory = _host("hv01", uri, vmtune_state_dir=str(state))
    looked = _playbook(tmp_path, "tune.yml", inventory, "--check", "--diff", "-e", "vmtune_domains=nginx01")
    assert looked.returncode == 0 and "changed=1" in looked.stdout, looked.stdout + looked.stderr
    assert "+      <driver queues='16'/>" in looked.stdout and definitions() == original  # check mode: nothing
    tuned = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_domains=nginx01")
    assert tuned.returncode == 0 and "changed=1" in tuned.stdout, tuned.stdout + tuned.stderr
    assert "<driver queues='16'/>" in definitions()["nginx01"] and definitions()["nginx02"] == original["nginx02"]
    record = json.loads((tmp_path / "tune-run.json").read_text())
    assert list(record) == ["hv01"] and record["hv01"]["uri"] == uri and list(record["hv01"]["domains"]) == ["nginx01"]
    by_hand = run_vmtune("apply", "-c", uri, "-d", "nginx02", "--yes", "--state-dir", str(state))
    assert by_hand.returncode == 0, by_hand.stdout + by_hand.stderr
    again = _playbook(tmp_path, "tune.yml", inventory)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout  # idempotent
    assert json.loads((tmp_path / "tune-run.json").read_text()) == record  # an unchanged run keeps the record
    undone = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_rollback=true")
    assert undone.returncode == 0 and "changed=1" in undone.stdout, undone.stdout + undone.stderr
    after = definitions()
    assert after["nginx01"] == original["nginx01"]  # the exact previous definition
    assert "<driver queues='16'/>" in after["nginx02"]  # not the tune run's change: left alone, backup or not
    twice = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_rollback=true")
    assert twice.returncode == 0 and "changed=0" in twice.stdout
    # Tuned again, then changed by hand: the rollback leaves the hand edit and says why.
    assert "changed=1" in _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_domains=nginx01").stdout
    edited = definitions()["nginx01"].replace("</name>", "</name>\n  <description>edited by hand</description>", 1)
    _embedded(root, "define", edited)
    kept = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_rollback=true", "-v")
    assert kept.returncode == 0 and "changed=0" in kept.stdout, kept.stdout
    assert "changed since the tune run that made backup" in kept.stdout
    assert "edited by hand" in definitions()["nginx01"]
    # Named, outside the record: back to before vmtune's last change of it.
    named = _playbook(tmp_path, "tune.yml", inventory, "-e", "vmtune_rollback=true", "-e", "vmtune_domains=nginx02")
    assert named.returncode == 0 and "changed=1" in named.stdout, named.stdout
    assert definitions()["nginx02"] == original["nginx02"]


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
    specific = {"check": {"fail_on"}, "tune": {"unsafe_fixes", "live", "force", "rollback", "undo", "state_dir"}}
    assert documented == common | specific[module.rsplit(".", 1)[1]]
    assert all(f"{name}=dict(" in source for name in specific[module.rsplit(".", 1)[1]])


def test_every_filter_is_documented(tmp_path: Path) -> None:
    executable = Path(sys.executable).with_name("ansible-doc")
    if not executable.exists():
        pytest.skip("ansible-core is not installed")
    source = COLLECTION / "plugins" / "filter" / "fleet.py"
    spec = importlib.util.spec_from_file_location("vmtune_fleet_filters", source)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    names = sorted(plugin.FilterModule().filters())
    assert names == sorted(p.stem for p in source.parent.glob("*.yml"))
    done = subprocess.run([str(executable), "-t", "filter", "--json", *(f"vmtune.libvirt.{n}" for n in names)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "ansible"),
                               "ANSIBLE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    docs = json.loads(done.stdout)
    for name in names:
        options = docs[f"vmtune.libvirt.{name}"]["doc"]["options"]
        code = getattr(plugin, name).__code__
        assert set(options) == {"_input", *code.co_varnames[1:code.co_argcount]}, name
