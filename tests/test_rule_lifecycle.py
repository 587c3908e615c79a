"""Rule lifecycle, as ruff has it: each rule stable or preview and `since` a release; a renamed
code keeps selecting, ignoring and suppressing the rule it became, with a warning."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from vmtune.docs import _builtin_enabled
from vmtune.rules import BUILTIN_RULES

ROOT = Path(__file__).resolve().parent.parent
NGINX = ROOT / "fixtures" / "domains" / "nginx-single-queue.xml"


def _vmtune(*args: str, renamed: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI (vmtune.main.main), with renames added to the registry's table first: none are
    in it yet, and a test of the redirect must not wait for the first."""
    runner = ("import json, sys; from vmtune.rules.base import RENAMED; "
              "RENAMED.update(json.loads(sys.argv.pop(1))); from vmtune.main import main; main()")
    return subprocess.run([sys.executable, "-c", runner, json.dumps(renamed or {}), *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"})


def test_every_rule_is_stable_or_preview_since_a_release_the_changelog_has() -> None:
    released = set(re.findall(r"^## (\d+\.\d+\.\d+) \(", (ROOT / "CHANGELOG.md").read_text(), re.M))
    assert {"0.1.0", "0.2.0"} <= released
    for rule in BUILTIN_RULES:
        assert rule.stability in ("stable", "preview"), rule.code
        assert rule.since in released or rule.since == "unreleased", (rule.code, rule.since)
        if rule.stability == "preview":  # opt-in: only a selection by code runs it
            assert all(rule.code not in _builtin_enabled(p) for p in ("default", "latency")), rule.code


def test_since_is_the_release_that_first_shipped_the_rule() -> None:
    """0.1.0 shipped 87 rules, 0.2.0 added CPU022-CPU031, DSK010, MEM011, NET008, STK001-STK003
    and VAL002 (the release commits' registries); STK004 and issue 48's rules are not released yet."""
    listed = json.loads(_vmtune("rules", "--format", "json").stdout)
    since = {r["code"]: r["since"] for r in listed}
    assert sum(1 for v in since.values() if v == "0.1.0") == 87
    assert sorted(c for c, v in since.items() if v == "0.2.0") == [
        "CPU022", "CPU023", "CPU024", "CPU025", "CPU026", "CPU027", "CPU028", "CPU029", "CPU030", "CPU031",
        "DSK010", "MEM011", "NET008", "STK001", "STK002", "STK003", "VAL002"]
    assert {c for c, v in since.items() if v == "unreleased"} == {"STK004", "CPU032", "CPU033", "CPU034", "CPU035",
                                                                 "DSK011", "DSK012", "LAT002", "NET009"}
    assert "- Stability: stable, since 0.1.0\n" in _vmtune("rule", "CLK002").stdout
    assert "- Stability: stable, unreleased (in the next release)\n" in _vmtune("rule", "STK004").stdout


def test_a_renamed_code_selects_ignores_and_suppresses_the_rule_it_became(tmp_path: Path) -> None:
    renamed = {"NETQ01": "NET001"}
    warning = "vmtune: warning: NETQ01 is now NET001: read as NET001 (write NET001)\n"
    selected = _vmtune("check", "--isolated", "--select", "NETQ01", str(NGINX), renamed=renamed)
    assert selected.returncode == 1 and selected.stderr == warning, selected
    assert ":30: NET001 warning virtio NIC has one queue for 16 vCPUs" in selected.stdout
    assert "MEM001" not in selected.stdout  # only what was selected
    ignored = _vmtune("check", "--isolated", "--ignore", "NETQ01", str(NGINX), renamed=renamed)
    assert ignored.returncode == 0 and ignored.stderr == warning and "NET001" not in ignored.stdout, ignored
    suppressed = tmp_path / "vm.xml"
    suppressed.write_text(NGINX.read_text().replace(
        "    <interface type='bridge'>", "    <!-- vmtune: ignore[NETQ01] reason=\"one queue is enough here\" -->\n"
                                        "    <interface type='bridge'>"))
    done = _vmtune("check", "--isolated", str(suppressed), renamed=renamed)
    assert done.returncode == 0 and done.stderr == warning, done
    assert "NET001" not in done.stdout and "SUP002" not in done.stdout  # the suppression matched
    rule = _vmtune("rule", "NETQ01", renamed=renamed)
    assert rule.stdout.startswith("# NET001 ") and rule.stderr == warning
    assert "- Stability: stable, since 0.1.0; formerly NETQ01 (still selected by it)\n" in rule.stdout


def test_without_the_rename_the_old_code_is_an_unknown_selector() -> None:
    """The redirect is the table's doing: the same command line without it is refused."""
    done = _vmtune("check", "--isolated", "--select", "NETQ01", str(NGINX))
    assert done.returncode == 2
    assert done.stderr.startswith("vmtune: unknown rule selector 'NETQ01' on the command line"), done.stderr
