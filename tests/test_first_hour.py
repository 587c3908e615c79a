"""Issue #36, "the first hour": documented workflows tried as a new user would, with real CLI runs.

Live commands run against libvirt's test driver. Each CLI run opens a fresh connection, which
starts again from the node's files; rewriting a domain's file between runs stands in for a
definition that persisted (as it does on a real hypervisor).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import DOMAINS, run_vmtune

WIN10_UUID = "7f1a2c3e-0000-4000-8000-000000000010"
NODE = """<node>
  <cpu><mhz>3000</mhz><model>x86_64</model><active>16</active><max>16</max><nodes>2</nodes>
    <sockets>1</sockets><cores>4</cores><threads>2</threads></cpu>
  <memory>33554432</memory>
  {domains}
</node>
"""


def _node(folder: Path, *files: str) -> str:
    """A test-driver host of the domain files in `folder`; its URI."""
    node = folder / "node.xml"
    node.write_text(NODE.format(domains="\n  ".join(f'<domain file="{name}"/>' for name in files)))
    return f"test://{node}"


def _ok(result: subprocess.CompletedProcess[str], code: int = 0) -> subprocess.CompletedProcess[str]:
    assert result.returncode == code, (result.stdout, result.stderr)
    return result


@pytest.mark.libvirt
def test_a_second_rollback_is_a_no_op_instead_of_re_applying_the_fix(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The issue: after one rollback the newest backup is the fixed definition it replaced, so a
    second `rollback --yes` ("to be sure") silently put the fix back. Now it says so and stops."""
    original = (DOMAINS / "win10-timer-storm.xml").read_bytes()
    guest = tmp_path / "win10.xml"
    guest.write_bytes(original)
    uri, state = _node(tmp_path, "win10.xml"), str(tmp_path / "state")
    live = ("-c", uri, "-d", "win10", "--state-dir", state)
    _ok(run_vmtune("apply", *live, "--select", "CLK002", "--yes"))
    _ok(run_vmtune("fix", "--select", "CLK002", str(guest)), 0)  # the apply persisted
    assert b"<stimer state='on'/>" in guest.read_bytes()
    first = _ok(run_vmtune("rollback", *live, "--yes"))
    listed = sorted((tmp_path / "state").glob("*/*/*.json"))
    before, replaced = (json.loads(p.read_text()) for p in listed)
    assert (before["action"], replaced["action"]) == ("apply", "rollback")
    assert f"restored backup {before['id']}; the replaced definition was saved as {replaced['id']}" in first.stdout
    guest.write_bytes(original)  # the rollback persisted

    second = _ok(run_vmtune("rollback", *live, "--yes"))
    assert second.stdout == (f"win10 already has the definition from before vmtune's last change (backup "
                             f"{before['id']}): nothing to roll back; --to ID restores another backup (see "
                             "`vmtune history --domain win10`)\n")
    assert len(sorted((tmp_path / "state").glob("*/*/*.json"))) == 2  # nothing defined, nothing saved

    # --to still goes anywhere, explicitly: back to the fixed definition.
    explicit = _ok(run_vmtune("rollback", *live, "--to", replaced["id"], "--dry-run"), 1)  # pending, as --diff
    assert "+      <stimer state='on'/>" in explicit.stdout and "dry run: nothing restored" in explicit.stdout


def _summary(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.splitlines()[-1] if result.stdout else result.stderr.splitlines()[-1]


def test_every_fix_hint_of_the_summary_leads_to_a_command_that_fixes(tmp_path: Path) -> None:
    """The issue: `N suggestion(s) with a fix (--fix --select CODE)` counted unsafe suggestions too;
    following it (`--diff --select DSK008`) printed nothing and exited 0."""
    guest = tmp_path / "win10.xml"
    guest.write_bytes((DOMAINS / "win10-timer-storm.xml").read_bytes())
    lookup = run_vmtune("check", "--isolated", "--diff", "--select", "DSK008", str(guest))
    assert _summary(lookup).endswith("; 1 fixable: 1 with --fix --unsafe-fixes --select CODE")
    follow = run_vmtune("check", "--isolated", "--diff", "--unsafe-fixes", "--select", "DSK008", str(guest))
    assert follow.returncode == 1 and "+      <driver name='qemu' type='raw' cache='none'/>" in follow.stdout

    # Each part of the summary, followed with --diff (CODE: the rules of that part), changes the file.
    findings = json.loads(run_vmtune("check", "--isolated", "-f", "json", str(guest)).stdout)["findings"]
    summary = _summary(run_vmtune("check", "--isolated", str(guest)))
    assert summary.endswith("; 5 fixable: 2 with --fix, 3 with --fix --unsafe-fixes --select CODE")
    for part in summary.split(" fixable: ", 1)[1].split(", "):
        count, flags = part.split(" with ", 1)
        unsafe, suggestion = "--unsafe-fixes" in flags, "--select CODE" in flags
        codes = [f["rule"] for f in findings if f["fixable"] and (f["fix_safety"] == "unsafe") == unsafe
                 and (f["severity"] == "info") == suggestion]
        assert len(codes) == int(count), part
        args = flags.replace("--fix", "--diff").replace("CODE", ",".join(codes)).split()
        done = run_vmtune("check", "--isolated", *args, str(guest))
        assert done.returncode == 1 and done.stdout.startswith("--- a/"), (part, done.stderr)


def test_fixable_means_one_thing_in_text_json_and_statistics() -> None:
    """The issue: 38 fixable in the text summary of fixtures/, 237 in JSON and HTML."""
    text = _summary(run_vmtune("check", "--isolated", "fixtures/"))
    document = json.loads(run_vmtune("check", "--isolated", "--statistics", "-f", "json", "fixtures/").stdout)
    total = document["summary"]["fixable"]
    assert f"; {total} fixable: " in text
    parts = [int(part.split(" with ", 1)[0]) for part in text.split(" fixable: ", 1)[1].split(", ")]
    assert sum(parts) == total == sum(s["fixable"] for s in document["statistics"])


def _repo(tmp_path: Path, config: str) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "vm.xml").write_bytes((DOMAINS / "linux-tuned.xml").read_bytes())
    (tmp_path / ".vmtune.yaml").write_text(config)
    return tmp_path


@pytest.mark.parametrize("config, message", [
    # PyYAML's own punctuation stays; it was "did not find expected or" (the redaction ate ',').
    ("select: [HV, 'SECRET'\nignore: [X]\n", ".vmtune.yaml:2: invalid YAML: did not find expected ',' or ']'"),
    ("per-domain-ignores: {SECRET: [HV]\nx: 1\n",
     ".vmtune.yaml:2: invalid YAML: did not find expected ',' or '}'"),
    ("select: [HV]\n'SECRET': %SECRET\n", ".vmtune.yaml:2: invalid YAML: found character that cannot start any token"),
    # A misspelt built-in: said as `-p latncy` says it, without quoting the value.
    ("extends: latncy\n", ".vmtune.yaml:1: extends: cannot read policy: No such file or directory; built-in "
                          "policies: default, latency; did you mean 'latency'?"),
    ("extends: [default, SECRET]\n", ".vmtune.yaml:1: extends: cannot read policy: No such file or directory; "
                                     "built-in policies: default, latency"),
    ("policies: [defualt]\n", ".vmtune.yaml:1: policies: cannot read policy: No such file or directory; built-in "
                              "policies: default, latency; did you mean 'default'?"),
])
def test_configuration_errors_say_what_is_wrong_without_quoting_the_file(tmp_path: Path, config: str,
                                                                       message: str) -> None:
    repo = _repo(tmp_path, config)
    run = run_vmtune("check", "vm.xml", cwd=repo)
    assert (run.returncode, run.stdout, run.stderr) == (2, "", f"vmtune: {repo}/{message}\n")
    assert "SECRET" not in run.stderr and "latncy" not in run.stderr


@pytest.mark.libvirt
def test_history_of_one_domain_reads_the_state_directory_without_libvirt(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The issue: `history --domain X` needed a connection while `history --all` read the same
    backups offline; with the hypervisor down, an operator could not see what to restore."""
    import os
    import sys

    from conftest import ROOT

    (tmp_path / "win10.xml").write_bytes((DOMAINS / "win10-timer-storm.xml").read_bytes())
    uri, state = _node(tmp_path, "win10.xml"), str(tmp_path / "state")
    _ok(run_vmtune("apply", "-c", uri, "-d", "win10", "--select", "CLK002", "--yes", "--state-dir", state))
    (saved,) = (tmp_path / "state").glob("*/*/*.json")
    backup_id = json.loads(saved.read_text())["id"]
    unreachable = {**os.environ, "LIBVIRT_DEFAULT_URI": "qemu+tcp://127.0.0.1:1/system"}

    def history(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "vmtune", "history", *args, "--state-dir", state],
                              capture_output=True, text=True, cwd=ROOT, env=unreachable, timeout=120)

    everything = _ok(history("--all"))
    for key in ("win10", WIN10_UUID, WIN10_UUID.upper()):
        one = _ok(history("--domain", key))
        assert one.stdout == everything.stdout, key
    assert one.stdout.splitlines()[0] == f"== win10 on {uri} ({WIN10_UUID})"
    assert one.stdout.splitlines()[1].startswith(f"{backup_id}  apply    CLK002  ")
    assert _ok(history("--domain", "nginx01")).stdout == f"nginx01: no backups in {state}\n"
    # --connect still asks libvirt (a renamed domain is found by its UUID); undefined, the files answer.
    assert _ok(history("--domain", "win10", "-c", uri)).stdout == "\n".join(everything.stdout.splitlines()[1:]) + "\n"
    _node(tmp_path)  # win10 undefined since
    assert _ok(history("--domain", "win10", "-c", uri)).stdout == everything.stdout


def test_plan_resolves_two_dedicated_guests_sharing_pins(tmp_path: Path) -> None:
    """The issue: `check --host` called db01 and db02 an error for sharing pins (a copied
    definition), and `plan` answered "no unpinned dedicated domains to place"."""
    from conftest import HOSTS

    caps = str(HOSTS / "intel-2node.xml")
    for name in ("db01", "db02"):
        (tmp_path / f"{name}.xml").write_bytes((HOSTS / "testnode" / f"{name}.xml").read_bytes())
    files = [str(tmp_path / "db01.xml"), str(tmp_path / "db02.xml")]
    check = run_vmtune("check", "--isolated", "--host", caps, *files)
    assert check.returncode == 1 and "CPU013 error vCPU pins 2-3 are shared with db02 (both dedicated)" in check.stdout
    diff = _ok(run_vmtune("plan", "--isolated", "--host", caps, "--diff", *files), 1)  # pending, as check --diff
    moved = "db02: vCPU pins 2-3 are shared with db01 (both dedicated): planned anew\n"
    assert diff.stdout.startswith(f"{moved}--- a/{files[1]}\n+++ b/{files[1]}\n")
    assert "-    <vcpupin vcpu='0' cpuset='2'/>\n-    <vcpupin vcpu='1' cpuset='3'/>\n" \
           "-    <emulatorpin cpuset='0'/>\n+    <vcpupin vcpu='0' cpuset='1'/>\n" \
           "+    <vcpupin vcpu='1' cpuset='9'/>\n+    <emulatorpin cpuset='0,8'/>\n" in diff.stdout
    assert f"a/{files[0]}" not in diff.stdout  # db01 keeps its pins
    written = _ok(run_vmtune("plan", "--isolated", "--host", caps, "--write", *files))
    assert written.stdout == f"{moved}{files[1]}: pinned to node 0\n"
    again = run_vmtune("check", "--isolated", "--host", caps, *files)
    assert "CPU013" not in again.stdout, again.stdout
    assert _ok(run_vmtune("plan", "--isolated", "--host", caps, *files)).stdout == \
        "no unpinned dedicated domains to place (dedicated: domains the policy enables CPU007 for)\n"


@pytest.mark.libvirt
def test_pending_changes_exit_1_in_plan_and_apply_dry_run_as_in_check_diff(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The issue: `plan` and `apply --dry-run` exited 0 with changes to make, `check --diff` 1."""
    from conftest import HOSTS, TESTNODE_URI

    state = str(tmp_path / "state")
    guest = DOMAINS / "nginx-single-queue.xml"
    assert run_vmtune("check", "--isolated", "--diff", "--select", "NET001", str(guest)).returncode == 1
    dry = run_vmtune("apply", "-c", TESTNODE_URI, "-d", "nginx01", "--select", "NET001", "--dry-run",
                     "--state-dir", state)
    assert dry.returncode == 1 and "dry run: nothing applied" in dry.stdout, dry.stderr
    nothing = run_vmtune("apply", "-c", TESTNODE_URI, "-d", "nginx01", "--select", "CLK002", "--dry-run",
                         "--state-dir", state)
    assert (nothing.returncode, nothing.stdout) == (0, "nginx01: nothing to fix\n")
    plan = ("plan", "--isolated", "-c", TESTNODE_URI, "--host", str(HOSTS / "intel-2node.xml"))
    placed = run_vmtune(*plan, "-p", "latency", "--write", "--dry-run", "--state-dir", state)
    assert placed.returncode == 1 and "dry run: nothing placed" in placed.stdout, placed.stderr
    assert not (tmp_path / "state").exists()
    printed = run_vmtune("plan", "--isolated", "--host", str(HOSTS / "intel-2node.xml"),
                         str(DOMAINS / "linux-tuned.xml"))
    assert printed.returncode == 1 and printed.stdout.startswith("linux-tuned: node 0, vCPU->CPU ")


COMMANDS = ("check", "fix", "render", "rule", "rules", "plan", "host", "show-settings", "apply", "history", "rollback")
METAVARS = {"FILE", "DIR", "PATH", "NAME", "URI", "RULES", "CODE", "POLICY", "ID", "CPUSET", "N", "VERSION",
            "FLAVOR:IMAGE", "NAME=VALUE", "SECONDS", "[=SECONDS]"}


def _help_metavars(command: str) -> dict[str, str]:
    """--option -> what `vmtune COMMAND --help` shows for its value ('' for a flag)."""
    import os
    import re
    import sys

    from conftest import ROOT

    shown = subprocess.run([sys.executable, "-m", "vmtune", command, "--help"], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ, "COLUMNS": "200"}, timeout=60).stdout
    found = {}
    for line in shown.splitlines():
        match = re.match(r"\s+(?:-\w, )?((?:--[\w-]+(?:, )?)+)(?: (\S+))?(?:\s{2,}|$)", line)
        if match and match.group(1).startswith("--"):
            found[match.group(1).split(", ")[0]] = match.group(2) or ""
    return found


def test_every_option_value_has_one_kind_of_metavar_in_help_and_the_man_page() -> None:
    """The issue: `--help` mixed `<str>`, `<path>`, `NAME` and `<int range>`; the man page said URI
    where `--help` said <str>."""
    from vmtune.manpage import render

    page = render()
    for command in COMMANDS:
        for option, metavar in _help_metavars(command).items():
            if metavar.startswith("<") and "|" in metavar:  # a choice lists its values
                continue
            assert metavar in METAVARS | {""}, (command, option, metavar)
            if metavar:
                man = option.replace("-", "\\-")
                assert f"\\fB{man}\\fR \\fI{metavar}\\fR" in page, (command, option, metavar)
    usage = subprocess.run([*_vmtune(), "check", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert " check [OPTIONS] [PATH]...\n" in usage.splitlines(keepends=True)[0]


def _vmtune() -> list[str]:
    import sys

    return [sys.executable, "-m", "vmtune"]


def test_the_readme_documents_every_command_of_help() -> None:
    """The issue: `vmtune fix` is in `--help` but not in the README."""
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    for command in COMMANDS:
        assert f"vmtune {command} " in readme, command
