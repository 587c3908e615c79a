"""Hostile input to the newest code: the stack front ends (KubeVirt manifests, OpenStack flavors,
nova.conf) and `--measure` (`vmtune measure`, `apply --measure`), through the real CLI in a
subprocess, each bounded in time. Domain names come from whoever may define a domain; manifests
from a pull request's author. See SECURITY.md ("Output", "Writes and symlinks", "OpenStack ...").
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_output_escaping import runner_commands

import helpers
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


def test_measure_text_keeps_a_name_with_a_newline_on_its_header_line(tmp_path: Path) -> None:
    """`vmtune measure` printed its `== NAME: measured …` header with the name's newline (libvirt's
    test driver takes one): a domain named `x<LF>== db01: measured over 5.0 s: host CPU 0.10%`
    forged a second domain's header. Now the name is escaped on its line, as check's text output
    does."""
    uri = _node_with(tmp_path, "x&#10;== db01: measured over 5.0 s: host CPU 0.10%")
    code, out, err = _run("measure", "-c", uri, "--all", "--for", "0.1")
    assert (code, err) == (0, "")
    headers = [line for line in out.splitlines() if line.startswith("== ")]
    assert len(headers) == 1
    assert headers[0].startswith("== x\\n== db01: measured over 5.0 s: host CPU 0.10%: measured over 0.1 s: ")


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


# --- manifests: what a small file may expand to ---------------------------------------------------

def _cpu_run(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """The real CLI, with the CPU seconds it used: 120 s at most."""
    return helpers.cpu_run(*args, cwd=cwd, timeout=120)


def _vm_item(name: str) -> str:
    return (f"- apiVersion: kubevirt.io/v1\n  kind: VirtualMachine\n  metadata: {{name: {name}}}\n"
            "  spec: {template: {spec: {domain: {devices: {}}}}}\n")


def test_aliases_repeat_at_most_4_mib_of_text(tmp_path: Path) -> None:
    """Aliases were bounded in nodes only: a 1 MiB name anchored once and aliased by every VM of a
    List rendered a domain of that name for each (1,000 VMs in a 1 MiB file: 17 s, 2 GB). The text
    aliases repeat is now bounded as a file is (4 MiB); the 5th use of a 1 MiB name is refused at its
    line. Small anchors used often (`<<: *defaults`) stay far below it."""
    big = "a" * 1024 * 1024
    (tmp_path / "list.yaml").write_text("apiVersion: v1\nkind: List\nitems:\n" + _vm_item(f"&big {big}")
                                        + _vm_item("*big") * 100)
    done, cpu_seconds = _cpu_run("check", "-q", "list.yaml", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[:300]
    assert done.stderr == "vmtune: list.yaml:26: aliases repeat more than 4 MiB of text: not read\n"
    assert cpu_seconds < 2
    defaults = "x-defaults: &d {cpu: {cores: 2}, memory: {guest: 2Gi}, clock: {utc: {}}}\n"
    (tmp_path / "ok.yaml").write_text("apiVersion: v1\nkind: List\n" + defaults + "items:\n" + "".join(
        _vm_item(f"vm{i}").replace("domain: {", "domain: {<<: *d, ") for i in range(500)))
    done, _ = _cpu_run("check", "-q", "ok.yaml", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr


def test_template_parameters_expand_to_at_most_4_mib_per_file(tmp_path: Path) -> None:
    """The 4 MiB bound on `${P}` expansion held per Template: 600 Templates of 6 KB, each
    expanding to 1.8 MB, made a 3.5 MB file take 1.1 GB. It holds per file now: the third of three
    Templates of 2 MB each is refused at its line."""
    def template(i: int) -> str:
        return ("apiVersion: template.openshift.io/v1\nkind: Template\nparameters:\n- name: P\n  value: "
                + "v" * 1000 + "\nobjects:\n" + _vm_item(f"vm{i}").replace(
                    "devices: {}", "devices: {disks: [{name: d, disk: {bus: '" + "${P}" * 2000 + "'}}]}"))

    text = "---\n".join(template(i) for i in range(3))
    (tmp_path / "t.yaml").write_text(text)
    third = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith("apiVersion: template")][2]
    done, cpu_seconds = _cpu_run("check", "-q", "t.yaml", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[:300]
    assert done.stderr == (f"vmtune: t.yaml:{third}: Template: its parameters expand to more than 4 MiB of text with "
                           "the file's other Templates: process it first (oc process)\n")
    assert cpu_seconds < 2


# --- nova.conf: the lines nova reads --------------------------------------------------------------

def _oslo_value(conf: Path, option: str) -> object:
    """What nova would read: the real oslo.config, in a subprocess (its options are global state)."""
    code = ("import sys\nfrom oslo_config import cfg\nconf = cfg.ConfigOpts()\n"
            f"conf.register_opts([cfg.StrOpt({option!r})], group='libvirt')\n"
            "conf(['--config-file', sys.argv[1]], project='x', default_config_files=[])\n"
            f"print(repr(conf.libvirt.{option}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(conf)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_nova_conf_lines_end_where_oslo_config_ends_them(tmp_path: Path) -> None:
    """vmtune split nova.conf with str.splitlines, which also ends a line at VT, FF, NEL, U+2028...:
    `#<VT>hw_disk_discard = unmap` is a comment to oslo.config (nova has no discard) and was a
    setting to vmtune, so a pull request hid DSK005 from the check, and --fix would have edited the
    comment. Now lines end at LF, CR and CRLF, as oslo.config reads them."""
    pytest.importorskip("oslo_config")
    shutil.copy(ROOT / "fixtures" / "stacks" / "openstack" / "flavor-show.json", tmp_path / "flavor.json")
    conf = tmp_path / "nova.conf"
    hidden = "[libvirt]\nvirt_type = kvm\ncpu_mode = host-passthrough\n#\x0bhw_disk_discard = unmap\n"
    conf.write_text(hidden)
    assert _oslo_value(conf, "hw_disk_discard") == "None"
    code, out, err = _run("check", "--isolated", "--select", "DSK005", "nova.conf", "flavor.json", cwd=tmp_path)
    assert (code, err) == (0, "")
    assert "nova.conf:1: DSK005 info qcow2 disk does not pass guest discards through" in out
    code, out, err = _run("check", "--isolated", "--fix", "--unsafe-fixes", "--select", "DSK005", "nova.conf",
                          "flavor.json", cwd=tmp_path)
    assert (code, err) == (0, ""), out
    assert conf.read_text() == hidden.replace("host-passthrough\n", "host-passthrough\nhw_disk_discard = unmap\n")
    assert _oslo_value(conf, "hw_disk_discard") == "'unmap'"


# --- manifests: time linear in the text -----------------------------------------------------------

VM = ("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: a}\n"
      "spec: {template: {spec: {domain: {devices: {}}}}}\n")


def test_a_suppression_comment_with_a_long_run_of_spaces_costs_linear_time(tmp_path: Path) -> None:
    """`#\\s*(vmtune:.*?)\\s*$` tried `\\s*$` at each character its lazy group took: a comment of
    `# vmtune:`, 30,000 spaces and `x` took 8 s (200 KB: past 120 s). It is still what it was, a
    SUP003 finding at its line."""
    (tmp_path / "vm.yaml").write_text("# vmtune:" + " " * 30_000 + "x\n" + VM)
    done, cpu_seconds = _cpu_run("check", "-q", "--select", "SUP003", "vm.yaml", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert "\nvm.yaml:1: SUP003 warning comment starts with 'vmtune:' but is no suppression" in done.stdout
    assert cpu_seconds < 2


def test_a_quantity_with_a_long_run_of_blanks_costs_linear_time(tmp_path: Path) -> None:
    """`^\\s*(number)\\s*([a-zA-Z]*)\\s*$` backtracked over both runs of blanks: `guest: "1<30,000
    spaces>!"` took 10 s. It is still no quantity (the VM is checked as without memory)."""
    (tmp_path / "vm.yaml").write_text(VM.replace("domain: {", 'domain: {memory: {guest: "1' + " " * 30_000 + '!"}, '))
    done, cpu_seconds = _cpu_run("check", "-q", "--select", "CLK004", "vm.yaml", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert "\nvm.yaml:4: CLK004 info rtc timer has no tickpolicy='catchup'" in done.stdout
    assert cpu_seconds < 2


def test_suppression_spans_walk_each_aliased_subtree_once(tmp_path: Path) -> None:
    """The lines a suppression covers were found by walking each mapping entry's subtree, aliases
    expanded: 18 levels of two aliases each (a 1 KB file, within the node budget) took 10 s. Now
    each distinct node is walked once; the suppression is judged as before (SUP002: unused)."""
    levels = ["x-levels:", "  l0: &l0 {a: 1, b: 2}"] + [f"  l{i}: &l{i} {{a: *l{i - 1}, b: *l{i - 1}}}"
                                                         for i in range(1, 18)]
    (tmp_path / "vm.yaml").write_text('# vmtune: ignore[NET001] reason="x"\n' + VM + "\n".join(levels) + "\n")
    done, cpu_seconds = _cpu_run("check", "-q", "--select", "SUP002,NET001", "vm.yaml", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout == ("== VirtualMachine/a (vm.yaml)\n"
                           "vm.yaml:1: SUP002 warning suppression of NET001 matched no finding (unused-suppression)\n")
    assert cpu_seconds < 2


@pytest.mark.parametrize("ranges, message", [
    (50_000, "the API takes extra spec values of 255 characters at most (349,999 given) (its extra spec validator"),
    (36, "nova refuses the flavor's NUMA/CPU pinning request: a CPU spec naming more than 65,536 CPUs, ranges "
         "counted in full (stack-refuses)"),
], ids=["350KB", "36-ranges"])
def test_a_cpu_mask_of_many_ranges_costs_bounded_time(tmp_path: Path, ranges: int, message: str) -> None:
    """Each range of a CPU spec was capped at 4,096 CPUs, not their sum: a 350 KB
    hw:cpu_dedicated_mask of 50,000 `0-4096` took 13 s (4 MiB: minutes). nova's API refuses a value
    of more than 255 characters; one within them naming more than 65,536 CPUs is refused too. Both
    are STK004 errors that do not quote the spec."""
    openstack = ROOT / "fixtures" / "stacks" / "openstack"
    flavor = json.loads((openstack / "flavor-show.json").read_text())
    flavor["properties"] = {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": ",".join(["0-4096"] * ranges)}
    (tmp_path / "flavor.json").write_text(json.dumps(flavor))
    shutil.copy(openstack / "image-show.json", tmp_path / "image.json")
    done, cpu_seconds = _cpu_run("check", "-q", "--select", "STK004", "flavor.json", "image.json", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "")
    assert "\nflavor.json:1: STK004 error nova refuses " in done.stdout and message in done.stdout
    assert "0-4096" not in done.stdout
    assert cpu_seconds < 2


def test_a_manifest_rendering_past_the_domain_limits_is_its_files_error(tmp_path: Path) -> None:
    """A VM of 12,000 disks renders a domain of more than 50,000 elements. The error named the
    rendered domain and a line of its XML (`VirtualMachine/many:10015`), not the file, and ended the
    run: the other manifests given were not reported. Now one line naming the file and the object's
    line, and the others are checked."""
    disks = ",".join(f"{{name: d{i}}}" for i in range(12_000))
    volumes = ",".join(f"{{name: d{i}, emptyDisk: {{capacity: 1Gi}}}}" for i in range(12_000))
    (tmp_path / "many.yaml").write_text(VM.replace("metadata: {name: a}", "metadata: {name: many}").replace(
        "devices: {}}", f"devices: {{disks: [{disks}]}}}}, volumes: [{volumes}]"))
    (tmp_path / "ok.yaml").write_text(VM)
    done, cpu_seconds = _cpu_run("check", "--select", "CLK004", "many.yaml", "ok.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == ("vmtune: many.yaml:1: VirtualMachine/many: the domain it renders is refused: more than "
                           "50,000 elements, the most vmtune checks in one domain\n")
    assert done.stdout.startswith("== VirtualMachine/a (ok.yaml)\nok.yaml:4: CLK004 info ")
    assert cpu_seconds < 5


def test_a_character_yaml_forbids_is_one_line_naming_its_line(tmp_path: Path) -> None:
    """A NUL or ESC in a manifest (or on stdin) was PyYAML's reader error with no line and its own
    quoting (`…\\n  in "<unicode string>", position 35`); now the line, counted in the UTF-8 text
    libyaml reads (the é before it are two bytes each)."""
    (tmp_path / "nul.yaml").write_bytes("apiVersion: v1\nkind: éééé\nmetadata: {name: \x00}\n".encode())
    code, out, err = _run("check", "-q", "nul.yaml", cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == ("vmtune: nul.yaml:3: not valid YAML: character #x0000 is not allowed (control characters are not "
                   "allowed)\n")
    code, out, err = _run("check", "-q", "-", cwd=tmp_path, stdin=b"\xef\xbb\xbf\n\n\x1b[2J")
    assert (code, out) == (2, "")
    assert err == ("vmtune: <stdin>:3: not valid YAML: character #x001b is not allowed (control characters are not "
                   "allowed)\n")


def test_instancetypes_and_preferences_add_at_most_250000_values_to_a_files_vms(tmp_path: Path) -> None:
    """A reference copies the preference's whole spec into each VM that names it, as an alias does:
    a 645 KB file of a preference with 40,000 CPU features named by 300 VMs took 54 s and 3 GB. What
    a file's VMs take from references is bounded now (common-instancetypes' largest instancetype and
    preference have about 55 values each); past it, one line at the VM that goes past."""
    features = ",".join(f"{{name: f{i}}}" for i in range(30_000))
    preference = ("apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineClusterPreference\n"
                  f"metadata: {{name: p}}\nspec: {{cpu: {{preferredCPUFeatures: [{features}]}}}}\n")
    vm = VM.replace("spec: {", "spec: {preference: {kind: VirtualMachineClusterPreference, name: p}, ")
    (tmp_path / "vms.yaml").write_text("---\n".join([preference] + [vm.replace("name: a", f"name: vm{i}")
                                                                     for i in range(6)]))
    done, cpu_seconds = _cpu_run("check", "-q", "vms.yaml", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("vmtune: vms.yaml:26: VirtualMachine/vm4: the instancetypes and preferences this file's VMs "
                           "name add more than 250,000 values to them: not rendered\n")
    assert cpu_seconds < 3


# --- manifests the hooks must not pass over ------------------------------------------------------

HOOK = ("check", "--skip-non-domain", "--")  # the entry of the shipped vmtune-check-manifests hook


def test_a_vm_whose_api_version_is_spelled_with_escapes_is_checked(tmp_path: Path) -> None:
    """The front ends pick their files by bytes (`kubevirt.io`, `vcpus`): a VM whose apiVersion a
    pull request wrote `"kubevirt\\x2eio/v1"` (JSON: `\\u002e`), which kubectl reads as kubevirt.io/v1,
    was passed over in silence by the manifest hooks (--skip-non-domain) and by directory walks.
    Escapes are now seen through before the bytes are tested."""
    (tmp_path / "vm.yaml").write_text(VM.replace("apiVersion: kubevirt.io/v1", 'apiVersion: "kubevirt\\x2eio/v1"'))
    (tmp_path / "vm.json").write_text(json.dumps(json.loads(json.dumps({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "b"},
        "spec": {"template": {"spec": {"domain": {"devices": {}}}}}}))).replace("kubevirt.io", "kubevirt\\u002eio"))
    for operands in (("vm.yaml", "vm.json"), (".",)):  # as the hook passes them; a directory walk
        code, out, err = _run("check", "-q", "--select", "CLK004", *HOOK[1:], *operands, cwd=tmp_path)
        assert (code, err) == (0, ""), out
        assert "== VirtualMachine/a (vm.yaml)\nvm.yaml:4: CLK004 info " in out
        json_checked = "== VirtualMachine/b (vm.json)\nvm.json:1: CLK004 info " in out
        assert json_checked == ("vm.json" in operands)  # a walk reads *.yaml and *.yml only


def test_a_template_object_typed_by_its_parameters_is_checked(tmp_path: Path) -> None:
    """An OpenShift Template's object with `apiVersion: ${API}` and `kind: ${KIND}` is a
    VirtualMachine once `oc process` takes the defaults, but was checked as written (no KubeVirt
    object) and passed over by the hook. Now its apiVersion and kind are resolved like its spec,
    and the parameters are said as assumed (STK002)."""
    (tmp_path / "t.yaml").write_text(
        "apiVersion: template.openshift.io/v1\nkind: Template\nmetadata: {name: t}\nparameters:\n"
        "- {name: API, value: kubevirt.io/v1}\n- {name: KIND, value: VirtualMachine}\nobjects:\n"
        "- apiVersion: ${API}\n  kind: ${KIND}\n  metadata: {name: tvm}\n"
        "  spec: {template: {spec: {domain: {devices: {}}}}}\n")
    code, out, err = _run("check", "-q", "--select", "CLK004,STK002", "--skip-non-domain", "--", "t.yaml",
                          cwd=tmp_path)
    assert (code, err) == (0, "")
    assert out.splitlines()[:4] == [
        "== VirtualMachine/tvm (t.yaml)",
        "t.yaml:5: STK002 info template parameter 'API' taken as its default 'kubevirt.io/v1' (assumed-input)",
        "t.yaml:6: STK002 info template parameter 'KIND' taken as its default 'VirtualMachine' (assumed-input)",
        "t.yaml:11: CLK004 info rtc timer has no tickpolicy='catchup' (rtc-tickpolicy-missing) [fix: --select CLK004]"]


# --- found by the hunt, fixed after it ---------------------------------------------------------------

# Runs vmtune from a small Python of its own and writes what wait4 says of it. Linux carries the
# peak resident set of a forked child over its exec, so measured straight from pytest (hundreds
# of MB after a few thousand tests) the peak would be pytest's.
_LAUNCH = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-m", "vmtune", *sys.argv[2:]])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
"""


def _rss_run(*args: str, cwd: Path) -> tuple[int, str, str, float, float]:
    """The real CLI: exit code, stdout, stderr, CPU seconds and peak resident set (MiB); 120 s at most."""
    done = subprocess.run([sys.executable, "-c", _LAUNCH, str(cwd / ".usage"), *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)
    code, cpu, rss = (cwd / ".usage").read_text().split()
    return int(code), done.stdout, done.stderr, float(cpu), int(rss) / 1024


def test_a_large_yaml_of_many_nodes_is_refused_before_it_is_composed(tmp_path: Path) -> None:
    """PyYAML composes a whole document before vmtune can count it: a 3.8 MB list of one-letter
    items (~10^6 nodes) took 5 s and 730 MB. A file over 512 KiB is first read as a stream of
    parser events and refused beyond 500,000; a large real one (a List of 6,000 VMs) is read."""
    (tmp_path / "flat.yaml").write_text("- a\n" * 950_000)
    code, out, err, cpu, rss = _rss_run("check", "-q", "flat.yaml", cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == "vmtune: flat.yaml: more than 500,000 YAML nodes and ends of collections: not read\n"
    assert cpu < 3 and rss < 200, (cpu, rss)
    (tmp_path / "list.yaml").write_text("apiVersion: v1\nkind: List\nitems:\n"
                                        + "".join(_vm_item(f"vm{i}") for i in range(6_000)))
    assert (tmp_path / "list.yaml").stat().st_size > 512 * 1024
    code, out, err, _cpu, _rss = _rss_run("check", "-q", "--select", "USB001", "list.yaml", cwd=tmp_path)
    assert (code, err) == (0, ""), err


def test_an_invalid_cpu_spec_is_refused_without_quoting_it(tmp_path: Path) -> None:
    """nova's refusal of a flavor's CPU mask quoted the mask (a file's text, up to megabytes)."""
    openstack = ROOT / "fixtures" / "stacks" / "openstack"
    for mask in ("0-3,SECRET", "9-2,SECRET"):
        flavor = json.loads((openstack / "flavor-show.json").read_text())
        flavor["properties"] = {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": mask}
        (tmp_path / "flavor.json").write_text(json.dumps(flavor))
        shutil.copy(openstack / "image-show.json", tmp_path / "image.json")
        code, out, err = _run("check", "--select", "STK004", "flavor.json", "image.json", cwd=tmp_path)
        assert (code, err) == (1, "")
        assert "nova refuses the extra spec hw:cpu_dedicated_mask: Validation failed; the value is not of the " \
               "format" in out
        assert "SECRET" not in out
    # within the validator's format, nova's CPU-spec parser refuses it: still not quoted
    flavor["properties"] = {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0-3,9-2"}
    (tmp_path / "flavor.json").write_text(json.dumps(flavor))
    code, out, err = _run("check", "--select", "STK004", "flavor.json", "image.json", cwd=tmp_path)
    assert (code, err) == (1, "")
    assert "nova refuses the flavor's NUMA/CPU pinning request: invalid CPU range" in out and "9-2" not in out


def test_stdin_xml_after_a_byte_order_mark_is_read_as_xml() -> None:
    """stdin is told apart by its first byte; a byte-order mark before `<domain` made it YAML."""
    code, out, err = _run("check", "-", stdin=b"\xef\xbb\xbf" + WIN10.read_bytes())
    assert code == 1 and err == "", err
    assert "CLK002" in out and "== win10 (<stdin>)" in out


def test_a_manifest_named_in_capitals_is_a_manifest(tmp_path: Path) -> None:
    """pre-commit's `types: [yaml]` passes VM.YAML; vmtune read it as domain XML (exit 2)."""
    manifest = ROOT / "fixtures" / "stacks" / "kubevirt" / "oracle" / "example-vmi-windows.yaml"
    shutil.copy(manifest, tmp_path / "VM.YAML")
    shutil.copy(manifest, tmp_path / "vm.yaml")
    upper = _run("check", "VM.YAML", cwd=tmp_path)
    lower = _run("check", "vm.yaml", cwd=tmp_path)
    assert upper[0] == lower[0] == 1
    assert upper[1] == lower[1].replace("vm.yaml", "VM.YAML")


def test_a_loop_of_symbolic_links_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "loop.xml").symlink_to("loop.xml")
    code, out, err = _run("check", "loop.xml", cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == "vmtune: loop.xml: a loop of symbolic links: it names no file\n"
