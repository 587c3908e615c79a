"""Hostile input to the newest code: the stack front ends (KubeVirt manifests, OpenStack flavors,
nova.conf) and `--measure` (`vmtune measure`, `apply --measure`), through the real CLI in a
subprocess, each bounded in time. Domain names come from whoever may define a domain; manifests
from a pull request's author. See SECURITY.md ("Output", "Writes and symlinks", "OpenStack ...").
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from test_output_escaping import runner_commands

from conftest import ROOT

WIN10 = ROOT / "fixtures" / "domains" / "win10-timer-storm.xml"
WIN10_UUID = "7f1a2c3e-0000-4000-8000-000000000010"


def _run(*args: str | Path, cwd: Path = ROOT, stdin: bytes | None = None) -> tuple[int, str, str]:
    """vmtune's exit code and output as strict UTF-8 (an invalid byte fails the test); 120 s at most."""
    done = subprocess.run([sys.executable, "-m", "vmtune", *map(str, args)], capture_output=True, timeout=120,
                          cwd=cwd, input=stdin)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _node_with(tmp_path: Path, name_xml: str) -> str:
    """A test-driver host of one running domain (win10's definition) named `name_xml` (XML text)."""
    (tmp_path / "dom.xml").write_text(WIN10.read_text().replace("<name>win10</name>", f"<name>{name_xml}</name>"))
    (tmp_path / "node.xml").write_text(
        "<node><cpu><mhz>3000</mhz><model>x86_64</model><active>16</active><max>16</max><nodes>2</nodes>"
        "<sockets>1</sockets><cores>4</cores><threads>2</threads></cpu><memory>33554432</memory>"
        "<domain file='dom.xml'/></node>\n")
    return f"test://{tmp_path / 'node.xml'}"


# --- --measure: names libvirt gives -----------------------------------------------------------------

def test_measure_json_gives_a_ci_runner_no_command_from_a_domain_name(tmp_path: Path) -> None:
    """`vmtune measure -f json` wrote names with json.dumps: a domain named `##[stop-commands]tok`
    silenced every later workflow command of the CI step. Now the check report's encoder, which
    writes `##[` as `\\u0023#[` (the same string to a parser)."""
    name = "x ##[stop-commands]tok"
    code, out, err = _run("measure", "-c", _node_with(tmp_path, name), "--all", "--for", "0.1", "-f", "json")
    assert (code, err) == (0, "")
    assert runner_commands(out) == []
    assert "\\u0023#[stop-commands]tok" in out
    [measured] = json.loads(out)
    assert measured["domain"] == name


def test_apply_measure_hint_quotes_the_domain_name_for_the_shell(tmp_path: Path) -> None:
    """The command `apply --measure` says to run after the restart named the domain unquoted: for a
    domain named `x; touch PWNED` (anyone who may define a domain chooses it), root pasting the
    hint ran `touch`. Now quoted as the rollback hints are; the hint, run by a real sh, passes
    exactly the name."""
    name = "x; touch PWNED"
    state = tmp_path / "state"
    code, out, err = _run("apply", "-c", _node_with(tmp_path, name), "--domain", name, "--unsafe-fixes", "--yes",
                          "--state-dir", state, "--measure=0.1")
    assert code in (0, 1), err
    [hint] = re.findall(r"`(vmtune apply --domain .* --measure --after)`", out)
    assert hint == "vmtune apply --domain 'x; touch PWNED' --measure --after"
    argv = subprocess.run(["sh", "-c", f"printf '%s\\n' {hint.removeprefix('vmtune ')}"], capture_output=True,
                          text=True, timeout=10, cwd=tmp_path).stdout.splitlines()
    assert argv == ["apply", "--domain", name, "--measure", "--after"]
    assert not (tmp_path / "PWNED").exists()


def test_apply_measure_after_without_a_measurement_escapes_the_name(tmp_path: Path) -> None:
    """`apply --measure --after` with nothing stored printed the domain's name raw on stderr: a
    CSI (U+009B) and a right-to-left override reached the terminal."""
    uri = _node_with(tmp_path, "e&#155;2J&#8238;fdp.exe")
    code, out, err = _run("apply", "-c", uri, "--domain", WIN10_UUID, "--state-dir", tmp_path / "state", "--measure",
                          "--after")
    assert (code, out) == (2, "")
    assert err == ("vmtune: e\\x9b2J\\u202efdp.exe: no `apply --measure` to compare with (no measurement is stored "
                   "with its newest backup)\n")
