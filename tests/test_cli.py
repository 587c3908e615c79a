"""The command line as a user runs it: exit codes, formats, errors without tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import DOMAINS, FIXTURES, HOSTS, ROOT, domain_xml, run_vmtune

JSON_FIELDS = {"rule", "name", "severity", "category", "domain", "file", "line", "xpath", "message", "fixable",
               "fix_safety"}


def test_clean_domain_exits_0() -> None:
    result = run_vmtune("check", str(DOMAINS / "linux-tuned.xml"))
    assert result.returncode == 0, result.stderr
    assert "1 domain(s) checked: 0 finding(s)" in result.stdout


def test_findings_exit_1_with_compiler_style_lines() -> None:
    result = run_vmtune("check", "fixtures/domains/win10-timer-storm.xml")
    assert result.returncode == 1
    assert "== win10 (fixtures/domains/win10-timer-storm.xml)" in result.stdout
    assert ("fixtures/domains/win10-timer-storm.xml:31: CLK002 warning Windows guest has HPET off and no Hyper-V "
            "synthetic timers (stimer): idle host CPU burn (windows-synthetic-timers-missing) [*]") in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("1 domain(s) checked: 5 finding(s)")


def test_fail_on_controls_the_exit_code() -> None:
    path = str(DOMAINS / "nginx-single-queue.xml")  # one warning, two infos
    assert run_vmtune("check", "--fail-on", "error", path).returncode == 0
    assert run_vmtune("check", "--fail-on", "warning", path).returncode == 1
    assert run_vmtune("check", "--select", "MEM001", "--fail-on", "info", path).returncode == 1
    assert run_vmtune("check", "--select", "MEM001", path).returncode == 0


def test_select_and_ignore() -> None:
    path = str(DOMAINS / "legacy-bigvm.xml")
    only = json.loads(run_vmtune("check", "-f", "json", "--select", "NET,USB002", path).stdout)
    assert sorted({f["rule"] for f in only["findings"]}) == ["NET004", "USB002"]
    without = json.loads(run_vmtune("check", "-f", "json", "--ignore", "cpu-model-generic", path).stdout)
    assert "CPU001" not in {f["rule"] for f in without["findings"]}
    bad = run_vmtune("check", "--select", "NOPE999", path)
    assert bad.returncode == 2 and "unknown rule selector 'NOPE999'" in bad.stderr


def test_json_contract() -> None:
    result = run_vmtune("check", "--format", "json", "fixtures/domains/win-stimer-broken.xml")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["summary"] == {"domains": 1, "findings": 5, "error": 1, "warning": 1, "info": 3, "fixable": 5,
                              "fixes_applied": 0, "errors": 0}
    assert doc["errors"] == []
    hv002 = next(f for f in doc["findings"] if f["rule"] == "HV002")
    assert set(hv002) >= JSON_FIELDS
    assert hv002 | {} == {**hv002, "name": "hyperv-dependency-broken", "severity": "error",
                          "category": "Hyper-V enlightenments", "domain": "win-broken",
                          "file": "fixtures/domains/win-stimer-broken.xml", "line": 16,
                          "xpath": "/domain/features/hyperv", "fixable": True, "fix_safety": "safe"}


def test_directory_recursion_skips_non_domain_xml(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    shutil.copy(DOMAINS / "linux-tuned.xml", tmp_path / "sub" / "a.xml")
    (tmp_path / "pom.xml").write_text("<project/>")
    (tmp_path / "notes.txt").write_text("<domain>")
    result = run_vmtune("check", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"{tmp_path}/pom.xml: skipped: not a libvirt domain (root element <project>)" in result.stdout
    assert "1 domain(s) checked" in result.stdout


def test_non_domain_named_explicitly_is_an_error(tmp_path: Path) -> None:
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>\n")
    result = run_vmtune("check", str(pom))
    assert result.returncode == 2
    assert result.stderr.strip() == f"vmtune: {pom}:1: not a libvirt domain (root element <project>)"


def test_malformed_xml_is_one_line_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<domain type='kvm'>\n  <name>x</name>\n  <vcpu>2</vcpu\n</domain>\n")
    result = run_vmtune("check", str(bad))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vmtune: {bad}:4: malformed XML")
    assert "Traceback" not in result.stderr


def test_missing_file_and_unreadable_host(tmp_path: Path) -> None:
    missing = run_vmtune("check", str(tmp_path / "nope.xml"))
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    host = run_vmtune("check", "--host", str(tmp_path / "caps.xml"), str(DOMAINS / "linux-tuned.xml"))
    assert host.returncode == 2 and "cannot read" in host.stderr
    wrong = run_vmtune("check", "--host", str(DOMAINS / "linux-tuned.xml"), str(DOMAINS / "linux-tuned.xml"))
    assert wrong.returncode == 2 and "expected <capabilities>" in wrong.stderr


def test_entity_declarations_are_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.xml"
    evil.write_text('<?xml version="1.0"?>\n<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
                    "<domain><name>&x;</name></domain>\n")
    result = run_vmtune("check", str(evil))
    assert result.returncode == 2
    assert "entity declarations are not allowed" in result.stderr and "root:" not in result.stdout


def _utf16_domain(extra: str) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-16"?>\n' + extra
            + "<domain type='kvm'><name>u16</name><memory>1048576</memory><vcpu>2</vcpu>"
            "<os><type arch='x86_64'>hvm</type></os></domain>\n").encode("utf-16")


@pytest.mark.parametrize("extra", ['<!DOCTYPE domain [<!ENTITY a "aaaaaaaaaa">]>\n',
                                   '<!-- vmtune: ignore[ALL] reason="x" -->\n'],
                         ids=["entity-declaration", "suppression-comment"])
def test_domain_xml_is_read_as_utf8_as_libvirt_reads_it(tmp_path: Path, extra: str) -> None:
    # The entity and comment checks look at the bytes: a UTF-16 file used to slip past both (its
    # entity declaration was accepted, its suppression silently ignored). virsh refuses UTF-16
    # ("Start tag expected"), and so does vmtune now: a document is UTF-8, whatever it declares.
    wide = tmp_path / "wide.xml"
    wide.write_bytes(_utf16_domain(extra))
    for args in (("check",), ("check", "--fix", "--unsafe-fixes")):
        result = run_vmtune(*args, str(wide))
        assert result.returncode == 2 and result.stdout.startswith("0 domain(s) checked")
        assert result.stderr == (f"vmtune: {wide}:1: malformed XML: Start tag expected, '<' not found (the file "
                                 "looks like UTF-16 or UTF-32; libvirt reads domain XML as UTF-8)\n")
    assert wide.read_bytes() == _utf16_domain(extra)
    # A declared Latin-1 accent is refused as libvirt refuses it ("Input is not proper UTF-8")...
    latin = tmp_path / "latin.xml"
    latin.write_bytes('<?xml version="1.0" encoding="ISO-8859-1"?>\n<domain type="kvm"><name>café</name>'
                      "</domain>\n".encode("latin-1"))
    result = run_vmtune("check", str(latin))
    assert result.returncode == 2 and result.stderr == (
        f"vmtune: {latin}:2: malformed XML: Invalid bytes in character encoding (libvirt reads domain XML as "
        "UTF-8, whatever the file declares)\n")
    # ... and a declared UTF-7 is read as UTF-8, so '+ADw-' is text, not a hidden '<'.
    seven = tmp_path / "seven.xml"
    seven.write_bytes(b'<?xml version="1.0" encoding="UTF-7"?>\n<domain type="kvm"><name>x</name>'
                      b'<description>+ADw-!ENTITY</description></domain>\n')
    result = run_vmtune("check", "--select", "VAL001", str(seven))
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == "1 domain(s) checked: 0 finding(s) (0 error, 0 warning, 0 info)\n"


def test_stdin() -> None:
    data = (DOMAINS / "nginx-single-queue.xml").read_bytes()
    result = run_vmtune("check", "-", stdin=data)
    assert result.returncode == 1 and "<stdin>:30: NET001 warning" in result.stdout
    fixed = run_vmtune("check", "--fix", "--select", "NET001", "-", stdin=data)
    assert fixed.stdout.encode() == data.replace(
        b"      <model type='virtio'/>\n    </interface>",
        b"      <model type='virtio'/>\n      <driver queues='16'/>\n    </interface>")


def test_fix_writes_atomically_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "win10.xml"
    shutil.copy(DOMAINS / "win10-timer-storm.xml", target)
    os.chmod(target, 0o640)
    result = run_vmtune("check", "--fix", "--show-fixes", "--select", "CLK002", str(target))
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("fixed: CLK002 enable vpindex, synic and stimer (assumes a host that offers Hyper-V enlightenments: "
            "--domcaps checks) [safe]") in result.stdout
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert b"<stimer state='on'/>" in target.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["win10.xml"]  # no temp file left


def test_diff_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "legacy.xml"
    shutil.copy(DOMAINS / "legacy-bigvm.xml", target)
    before = target.read_bytes()
    result = run_vmtune("check", "--diff", "--unsafe-fixes", str(target))
    assert target.read_bytes() == before
    assert result.stdout.startswith(f"--- a/{target}\n+++ b/{target}\n")
    assert "-    <input type='tablet' bus='usb'/>" in result.stdout
    assert "domain(s) checked" in result.stderr


def test_unsafe_fixes_only_with_flag(tmp_path: Path) -> None:
    target = tmp_path / "legacy.xml"
    shutil.copy(DOMAINS / "legacy-bigvm.xml", target)
    run_vmtune("fix", str(target))
    assert b"<model type='e1000'/>" in target.read_bytes()
    run_vmtune("fix", "--unsafe-fixes", str(target))
    assert b"<model type='virtio'/>" in target.read_bytes()


def test_fix_that_would_not_parse_writes_nothing(tmp_path: Path) -> None:
    from collections.abc import Iterator

    from vmtune.engine import CheckOptions
    from vmtune.errors import VmtuneError
    from vmtune.fixer import fix_document
    from vmtune.patch.edits import set_attrs
    from vmtune.policy.model import PolicySet, Scope
    from vmtune.rules.base import Fix, Rule, Severity

    class BrokenFix(Rule):
        code, name, severity, fixable = "T001", "broken-fix", Severity.ERROR, True

        def check(self, domain, ctx) -> Iterator:  # type: ignore[no-untyped-def]
            yield self.finding(domain, domain.root, "always", Fix("bad", (set_attrs(domain.root, {"a b": "1"}),)))

    opts = CheckOptions(PolicySet(["t"], [], (BrokenFix(),), {"T001": Scope()}))
    with pytest.raises(VmtuneError, match="fixing would produce invalid XML"):
        fix_document((DOMAINS / "linux-tuned.xml").read_bytes(), "x.xml", opts)


def test_host_facts_change_the_windows_fix(tmp_path: Path) -> None:
    target = tmp_path / "win10.xml"
    shutil.copy(DOMAINS / "win10-timer-storm.xml", target)
    result = run_vmtune("check", "--diff", "--unsafe-fixes", "--select", "CLK002",
                        "--domcaps", str(HOSTS / "domcaps-no-stimer.xml"), str(target))
    assert "-    <timer name='hpet' present='no'/>\n+    <timer name='hpet' present='yes'/>" in result.stdout
    assert "stimer" not in [line for line in result.stdout.splitlines() if line.startswith("+")][-1]


def test_os_override(tmp_path: Path) -> None:
    target = tmp_path / "d.xml"
    target.write_text(domain_xml(os=None, clock="<clock offset='utc'><timer name='hpet' present='no'/></clock>"))
    assert "CLK002" not in run_vmtune("check", str(target)).stdout
    assert "CLK002" in run_vmtune("check", "--os", "windows", str(target)).stdout


def test_rule_and_rules_commands() -> None:
    one = run_vmtune("rule", "CLK002")
    assert one.returncode == 0 and one.stdout.startswith("# CLK002 windows-synthetic-timers-missing\n")
    by_name = run_vmtune("rule", "windows-synthetic-timers-missing")
    assert by_name.stdout == one.stdout
    listing = run_vmtune("rules")
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) >= 45


def test_nothing_to_check_is_a_usage_error() -> None:
    result = run_vmtune("check")
    assert result.returncode == 2 and "nothing to check" in result.stderr


def test_readme_quickstart_example_and_its_output_are_true() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "scripts/vmtune check fixtures/domains/win10-timer-storm.xml" in readme
    assert "scripts/test" in readme
    shown = readme.split("idle-CPU incident:\n\n```\n", 1)[1].split("```", 1)[0]
    assert run_vmtune("check", "fixtures/domains/win10-timer-storm.xml").stdout == shown




@pytest.mark.slow
def test_scripts_vmtune_says_what_its_first_run_does_then_stays_quiet(tmp_path: Path) -> None:
    """The README's first command in a fresh checkout (a copy of this one, without .venv): it
    builds its environment, ~30 s; before, nothing was printed meanwhile. One line on stderr says
    what is happening; the second run prints nothing but the check."""
    import subprocess

    checkout = tmp_path / "vmtune"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.so",
                                                                  ".pytest_cache", ".mypy_cache", ".ruff_cache",
                                                                  "*.egg-info", "build"))
    env = {k: v for k, v in os.environ.items() if k not in ("VMTUNE_VENV", "VMTUNE_EXTRAS", "VIRTUAL_ENV")}
    # Not compiled (~45 s): the suite's own environment is compiled by this same ensure_venv
    # (scripts/test), which tests/test_compiled.py checks.
    env["VMTUNE_PURE"] = "1"
    command = ["scripts/vmtune", "check", "fixtures/domains/win10-timer-storm.xml"]
    readme = (ROOT / "README.md").read_text()
    shown = readme.split("idle-CPU incident:\n\n```\n", 1)[1].split("```", 1)[0]
    first = subprocess.run(command, cwd=checkout, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 1, first.stderr
    assert first.stderr.splitlines()[0] == (f"vmtune: first run: creating {checkout}/.venv and installing vmtune "
                                            "with its dependencies (once, about a minute)")
    assert first.stdout == shown
    if os.path.exists("/usr/bin/python3") and "VMTUNE_PYTHON" not in env:
        # the system's interpreter, what a fresh Debian 12 has, not the first python3 on PATH
        assert os.path.realpath(checkout / ".venv" / "bin" / "python") == os.path.realpath("/usr/bin/python3")
    again = subprocess.run(command, cwd=checkout, capture_output=True, text=True, env=env, timeout=300)
    assert (again.returncode, again.stderr, again.stdout) == (1, "", shown)


def test_scripts_vmtune_uses_an_install_with_more_extras_as_it_is(tmp_path: Path) -> None:
    """scripts/test installs vmtune[dev,live]; scripts/vmtune (no extras) installed again beside
    it, as its own stamp was missing: a minute of compiling, in CI inside the suite (its planted-code
    test), rebuilding the compiled modules in place while the other worker ran tests. An install
    with at least the extras asked for, up to date, is used as it is; one with other extras, or
    older than a build file, is not (scripts/_env.sh `installed`, run here by bash)."""
    import subprocess

    venv = tmp_path / "venv"
    venv.mkdir()
    stamp = venv / ".vmtune-installed[dev,live]"
    stamp.touch()

    def installed(*extras: str) -> list[bool]:
        script = (f'source {ROOT}/scripts/_env.sh; VENV={venv}; '
                  'for e in "$@"; do if installed "$e"; then echo yes; else echo no; fi; done')
        done = subprocess.run(["bash", "-c", script, "bash", *extras], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [line == "yes" for line in done.stdout.split()]

    assert installed("", "[live]", "[dev,live]", "[metrics]", "[live,metrics]", "[de]") == [
        True, True, True, False, False, False]
    os.utime(stamp, (0, 0))  # older than setup.py: installed again, whatever its extras
    assert installed("", "[live]") == [False, False]


def test_every_format_lists_a_file_that_failed_to_parse(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<domain><name>x</name>")
    doc = json.loads(run_vmtune("check", "-f", "json", str(bad)).stdout)
    assert doc["errors"] == [{"source": str(bad), "line": 1,
                              "message": "malformed XML: Premature end of data in tag domain line 1"}]
    assert doc["summary"]["errors"] == 1
    sarif = run_vmtune("check", "-f", "sarif", str(bad))
    assert sarif.returncode == 2
    invocation = json.loads(sarif.stdout)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"].startswith("malformed XML")
    github = run_vmtune("check", "-f", "github", str(bad))
    assert github.stdout.startswith(f"::error file={bad},line=1,title=vmtune input error::malformed XML")
    junit = run_vmtune("check", "-f", "junit", str(bad))
    assert "<error message=" in junit.stdout and "malformed XML" in junit.stdout
    metrics = run_vmtune("check", "-f", "openmetrics", "--metrics-host", "hv01", str(bad))
    assert 'vmtune_check_input_errors{host="hv01"} 1.0' in metrics.stdout


def test_diff_exits_1_reports_the_original_lines_and_says_would(tmp_path: Path) -> None:
    target = tmp_path / "win10.xml"
    shutil.copy(DOMAINS / "win10-timer-storm.xml", target)
    before = target.read_bytes()
    result = run_vmtune("check", "--diff", "--show-fixes", str(target))
    assert result.returncode == 1 and target.read_bytes() == before
    assert result.stdout.startswith(f"--- a/{target}")
    assert f"{target}:31: CLK002 warning" in result.stderr  # the line in the file, not in the fixed text
    assert "    would fix: CLK002" in result.stderr and "fixed:" not in result.stderr
    assert "would apply 2 fix(es)" in result.stderr and "fix(es) applied" not in result.stderr
    clean = run_vmtune("check", "--diff", str(FIXTURES / "tuned" / "linux-virtio.xml"))
    assert clean.returncode == 0 and clean.stdout == ""


def test_diff_with_a_machine_format_needs_an_output_file(tmp_path: Path) -> None:
    result = run_vmtune("check", "--diff", "-f", "json", str(DOMAINS / "win10-timer-storm.xml"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "vmtune: --diff writes the diff to stdout; give -o FILE for the json report\n"
    report = tmp_path / "report.json"
    result = run_vmtune("check", "--diff", "-f", "json", "-o", str(report), str(DOMAINS / "win10-timer-storm.xml"))
    assert result.returncode == 1 and result.stdout.startswith("--- a/")
    assert json.loads(report.read_text())["summary"]["findings"] == 5


def test_fix_and_diff_on_live_domains_point_to_apply() -> None:
    result = run_vmtune("check", "--fix", "-c", "test:///default", "--all")
    assert result.returncode == 2
    assert "for live domains use `vmtune apply` (`vmtune apply --dry-run` prints the diff)" in result.stderr


def test_unwritable_outputs_are_one_line_errors() -> None:
    for option in ("-o", "--write-baseline"):
        result = run_vmtune("check", option, "/nonexistent/dir/out.json", str(DOMAINS / "linux-tuned.xml"))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("vmtune: /nonexistent/dir/out.json: cannot write the ")
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_fifos_devices_and_oversized_files(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe.xml")
    shutil.copy(DOMAINS / "linux-tuned.xml", tmp_path / "ok.xml")
    walked = run_vmtune("check", str(tmp_path))  # would block forever reading the FIFO
    assert walked.returncode == 0 and f"{tmp_path}/pipe.xml: skipped: a FIFO" in walked.stdout
    for special in (tmp_path / "pipe.xml", Path("/dev/zero")):
        named = run_vmtune("check", str(special))
        assert named.returncode == 2 and "not a domain file (use '-' to read a stream)" in named.stderr
    big = tmp_path / "big.xml"
    big.write_bytes(b"<domain>" + b" " * (4 * 1024 * 1024) + b"</domain>")
    result = run_vmtune("check", str(big))
    assert result.returncode == 2
    assert result.stderr == f"vmtune: {big}: larger than 4 MiB, the largest definition libvirt accepts\n"
    endless = run_vmtune("check", "-", stdin=b" " * (4 * 1024 * 1024 + 1))
    assert endless.returncode == 2 and "larger than 4 MiB" in endless.stderr


def test_options_replaced_for_another_host_check_with_that_host() -> None:
    """`check --all` over several hypervisors copies one CheckOptions per host (replace()): the
    copy checks with its host's facts, not the rule lists cached for the original."""
    from vmtune.facts.host import load_host

    from helpers import codes, options

    xml = (DOMAINS / "legacy-bigvm.xml").read_bytes()
    without = options()
    assert "CPU012" not in codes(xml, without)  # CPU012 needs host facts; the caches are now filled
    host = load_host(str(HOSTS / "intel-2node.xml"), None)
    copy = without.replace(host=host)
    assert copy.host is host and without.host is None
    assert codes(xml, copy) == codes(xml, options(host_facts=host))
    assert "CPU012" in codes(xml, copy)
