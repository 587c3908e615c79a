"""A `.vmtune.yaml` and policies from a stranger's pull request (issue 23, item 1).

Each case is what an attacker would commit: a configuration naming a secret outside the
repository, /dev/zero, a FIFO, an alias bomb, a catastrophic regex, XPaths that cost
quadratic time or reach outside the document. Every one must end in a one-line error (exit
2) or a safe result, quote nothing of a file that is not configuration, and cost less than
about a second and 200 MB.
"""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

from vmtune.errors import VmtuneError
from vmtune.policy.load import load_policies
from vmtune.xml.paths import stable_path
from vmtune.xml.xpath import XPathNotAllowed, check

from conftest import DOMAINS, ROOT, domain_xml
from helpers import MEMORY_LIMIT_KB, TIME_LIMIT, Run
from helpers import run_measured as vmtune

SECRET = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUtSECRET"
KEY_FILE = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n-----END OPENSSH PRIVATE KEY-----\n"
SHADOW = "root:$y$j9T$SECRETHASHxyz:19700:0:99999:7:::\n"
ENV = "AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/SECRETKEY\n"
@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout: a repository with a domain to check, and secrets beside it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "vm.xml").write_text(domain_xml())
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "id_rsa").write_text(KEY_FILE)
    (outside / "shadow").write_text(SHADOW)
    return root


def assert_one_line_error(run: Run, *fragments: str) -> None:
    assert run.code == 2, run
    assert run.stdout == "" or "checked" in run.stdout
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmtune: "), run.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "SECRET" not in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert run.cpu_seconds < TIME_LIMIT and run.max_rss_kb < MEMORY_LIMIT_KB, run


@pytest.mark.parametrize("config", [
    "extends: ../home/id_rsa\n",
    "extends: [default, ../home/shadow]\n",
    "policies: [../home/id_rsa]\n",
    "host: ../home/shadow\n",
    "domcaps: ../home/shadow\n",
    "baseline: ../home/id_rsa\n",
])
def test_a_configuration_cannot_read_files_outside_its_repository(repo: Path, config: str) -> None:
    (repo / ".vmtune.yaml").write_text(config)
    run = vmtune("check", "vm.xml", cwd=repo)
    key = config.split(":")[0]
    line = 1
    assert_one_line_error(run, f".vmtune.yaml:{line}: {key} '../home/", f"is outside the repository ({repo})")


def test_symlinks_do_not_lead_out_of_the_repository(repo: Path) -> None:
    (repo / "base.yaml").symlink_to(repo.parent / "home" / "id_rsa")
    (repo / ".vmtune.yaml").write_text("name: ok\nextends: base.yaml\n")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), ".vmtune.yaml:2: extends 'base.yaml' is outside")
    # The configuration itself, found beside the checked file, is a reference too.
    (repo / ".vmtune.yaml").unlink()
    (repo / ".vmtune.yaml").symlink_to(repo.parent / "home" / "shadow")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), "the configuration is outside the repository")


def test_git_internals_are_not_configuration(repo: Path) -> None:
    """actions/checkout persists the job's token in .git/config, inside the repository."""
    (repo / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic SECRET\n")
    (repo / ".vmtune.yaml").write_text("host: .git/config\n")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), ".vmtune.yaml:1: host '.git/config' is inside .git")


def test_references_inside_the_repository_still_work(repo: Path) -> None:
    (repo / "policies").mkdir()
    (repo / "policies" / "base.yaml").write_text("rules:\n  - ignore: [CPU001]\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "vm.xml").write_text(domain_xml(cpu=""))  # CPU001: no <cpu>
    (repo / "sub" / ".vmtune.yaml").write_text("extends: [default, ../policies/base.yaml]\n")
    assert vmtune("check", "sub/vm.xml", cwd=repo).code == 0
    (repo / "sub" / ".vmtune.yaml").write_text("policies: [default]\n")
    assert vmtune("check", "sub/vm.xml", cwd=repo).code == 1


def test_files_named_on_the_command_line_are_read_where_they_are(repo: Path, tmp_path: Path) -> None:
    fleet = tmp_path / "etc" / "fleet.yaml"
    fleet.parent.mkdir()
    fleet.write_text("extends: default\nrules:\n  - ignore: [CPU001]\n")
    (repo / "vm.xml").write_text(domain_xml(cpu=""))
    assert vmtune("check", "-p", str(fleet), "vm.xml", cwd=repo).code == 0
    assert vmtune("check", "--config", str(fleet), "vm.xml", cwd=repo).code == 0
    # ...but what they name stays in their own tree.
    fleet.write_text("extends: ../home/id_rsa\n")
    assert_one_line_error(vmtune("check", "-p", str(fleet), "vm.xml", cwd=repo), f"{fleet}:1: extends",
                          "is outside the repository")


@pytest.mark.parametrize("content, message, line", [
    (KEY_FILE, "invalid policy: key '(top level)': expected a mapping", 1),
    (SHADOW, "invalid policy: unknown key (keys: ", 1),
    (ENV, "invalid policy: unknown key (keys: ", 1),
    ("password: 'hunter2SECRET\n", "invalid YAML: found unexpected end of stream", 2),
    ("x: !!python/object:os.system SECRET\n", "invalid YAML: ", 1),
    ("a: *SECRET\n", "invalid YAML: found undefined alias", 1),
    ("%SECRET\n", "invalid YAML: ", 1),
])
def test_a_file_that_is_not_configuration_is_never_quoted(repo: Path, content: str, message: str,
                                                         line: int | None) -> None:
    """Inside the repository too: a CI step may have written .env or a key into the checkout."""
    (repo / "leaked").write_text(content)
    (repo / ".vmtune.yaml").write_text("extends: leaked\n")
    run = vmtune("check", "vm.xml", cwd=repo)
    assert_one_line_error(run, f"{repo / 'leaked'}{f':{line}' if line else ''}: {message}")
    for word in ("hunter2", "AWS_SECRET", "wJalr", "root:", "BEGIN", "python/object", "os.system"):
        assert word not in run.stderr


@pytest.mark.parametrize("config", [
    'extends: "a\\0b"\n',
    'policies: ["a\\0b"]\n',
    'host: "a\\0b"\n',
    'domcaps: "a\\0b"\n',
    'baseline: "a\\0b"\n',
])
def test_a_reference_holding_a_nul_byte_is_one_line(repo: Path, config: str) -> None:
    """YAML's "\\0" is a NUL no file name can hold: realpath() raised ValueError, a traceback."""
    (repo / ".vmtune.yaml").write_text(config)
    key = config.split(":")[0]
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo),
                          f".vmtune.yaml:1: {key} 'a\\x00b' is not a file name (it holds a NUL byte)")


@pytest.mark.parametrize("args, message", [
    (("--config", "/dev/zero"), "/dev/zero: cannot read configuration: a character device, not a regular file"),
    (("-p", "/dev/zero"), "/dev/zero: cannot read policy: a character device, not a regular file"),
    (("--host", "/dev/zero"), "/dev/zero: cannot read capabilities: a character device, not a regular file"),
    (("--baseline", "/dev/zero"), "/dev/zero: cannot read baseline: a character device, not a regular file"),
    (("--config", "."), "cannot read configuration: a directory, not a regular file"),
])
def test_devices_are_refused_even_when_named(repo: Path, args: tuple[str, ...], message: str) -> None:
    assert_one_line_error(vmtune("check", *args, "vm.xml", cwd=repo), message)


def test_extends_dev_zero_and_a_fifo(repo: Path) -> None:
    (repo / ".vmtune.yaml").write_text("extends: /dev/zero\n")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), "extends '/dev/zero' is outside the repository")
    os.mkfifo(repo / "pipe.yaml")  # would block a plain open() forever
    (repo / ".vmtune.yaml").write_text("extends: pipe.yaml\n")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), "pipe.yaml: cannot read configuration: a FIFO")


def test_size_and_encoding_limits(repo: Path) -> None:
    (repo / "big.yaml").write_text("# padding\n" * 30_000)
    (repo / ".vmtune.yaml").write_text("extends: big.yaml\n")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), "big.yaml: cannot read configuration: larger than "
                                                                "256 KiB")
    (repo / "big.yaml").write_bytes(b"name: x\n\xff\xfeSECRET\n")
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), "big.yaml:2: cannot read configuration: not UTF-8")


def billion_laughs(levels: int = 9) -> str:
    lines = ["name:", "  - &a [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        previous, current = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"  - &{current} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, message", [
    # 9^9 strings: jsonschema's message alone was a multi-GB repr (48 s, then MemoryError).
    (billion_laughs(), ".vmtune.yaml:5: invalid YAML: more than 5000 values once aliases are expanded"),
    ("a: &a [*a]\n", ".vmtune.yaml:1: invalid YAML: an alias refers to the collection that holds it"),
    ("[" * 100_000 + "]" * 100_000, ".vmtune.yaml:1: invalid YAML: nested deeper than 64 levels"),  # segfault
    ("x: [a '" * 30_000, ".vmtune.yaml:1: invalid YAML: nested deeper than 64 levels"),  # not a quote in YAML
    ("".join(f"{' ' * i}k:\n" for i in range(100)), "invalid YAML: nested deeper than 64 levels"),
    ("rules:\n" + "  - select: [ALL]\n" * 1_500, "invalid YAML: more than 5000 values"),  # no alias needed
])
def test_yaml_bombs_end_quickly(repo: Path, text: str, message: str) -> None:
    (repo / ".vmtune.yaml").write_text(text)
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), message)


def test_aliases_within_bounds_still_work(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("rules:\n  - &quiet {ignore: [CPU001]}\n  - *quiet\n")
    assert [e.ignore for e in load_policies([str(policy)]).entries] == [("CPU001",), ("CPU001",)]


REGEX_CHECK = """checks:
  - code: XRE001
    name: mac-format
    severity: warning
    message: MAC address not in the house format
    select: devices/interface
    assert: {{path: mac, attribute: address, matches: "{pattern}"}}
"""


def test_a_catastrophic_regex_runs_in_linear_time(repo: Path) -> None:
    """(a|aa)*c on 40 a's: 17 s in Python's re (exponential backtracking); RE2 is linear."""
    (repo / ".vmtune.yaml").write_text(REGEX_CHECK.format(pattern="(a|aa)*c"))
    nic = f"<interface type='bridge'><source bridge='br0'/><mac address='{'a' * 40}'/><model type='virtio'/>" \
          "</interface>"
    (repo / "vm.xml").write_text(domain_xml(devices=nic, vcpus=1))
    run = vmtune("check", "--select", "XRE001", "vm.xml", cwd=repo)
    assert run.code == 1 and "XRE001 warning MAC address not in the house format" in run.stdout
    assert run.cpu_seconds < TIME_LIMIT and run.max_rss_kb < MEMORY_LIMIT_KB, run
    (repo / "vm.xml").write_text(domain_xml(devices=nic.replace("a" * 40, "52:54:00:ab:cd:ef"), vcpus=1))
    (repo / ".vmtune.yaml").write_text(REGEX_CHECK.format(pattern="52:54:00(:[0-9a-f]{2}){3}"))
    assert vmtune("check", "--select", "XRE001", "vm.xml", cwd=repo).code == 0


@pytest.mark.parametrize("pattern, message", [
    ("(a)\\\\1", "assert.matches: not a pattern RE2 accepts: invalid escape sequence"),  # a backreference
    ("(?=a)b", "assert.matches: not a pattern RE2 accepts: invalid perl operator: (?="),
    ("((a{100}){100}){100}", "assert.matches: not a pattern RE2 accepts: invalid repetition size"),
    ("a" * 1001, "assert.matches: longer than 1000 characters"),
])
def test_patterns_re2_refuses_are_policy_errors_with_their_line(repo: Path, pattern: str, message: str) -> None:
    (repo / ".vmtune.yaml").write_text(REGEX_CHECK.format(pattern=pattern))
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), ".vmtune.yaml:7: invalid custom check XRE001: "
                                                                + message)


XPATH_CHECK = """checks:
  - code: XDOC001
    name: nic-model
    severity: warning
    message: m
    select: "{select}"
    assert: {{path: "{path}", attribute: type, equals: virtio}}
"""


@pytest.mark.parametrize("select, path, line, message", [
    ("devices/interface[document('/etc/passwd')]", "model", 6, "select: XPath outside the allowed subset: "
                                                               "function document() is not allowed (column 19)"),
    ("//*[count(//*[count(//*) > 0]) > 0]", "model", 6, "function count() is not allowed"),
    ("//devices//interface", "model", 6, "// may only open the path"),
    ("devices/*//interface", "model", 6, "// may only open the path"),  # 4 s on 60,000 disks
    ("//source/..", "model", 6, "a .. step is not allowed"),  # 4 s on 60,000 disks
    # Each node looks at its parent's other children, attributes or whole text: minutes on 4 MiB.
    ("//*[contains(../*, 'x')]", "model", 6, "a .. step is not allowed (put the predicate on the parent's step: "
                                             "//*[@type='network']/model rather than //model[../@type='network']"),
    ("//*[../@x='1']", "model", 6, "a .. step is not allowed"),
    ("descendant::interface", "model", 6, "axis descendant:: is not allowed"),
    ("devices/interface[source[@bridge='x']]", "model", 6, "a predicate is not allowed inside []"),
    ("devices/interface[.//model]", "model", 6, "// is not allowed inside []"),
    ("devices/interface[$x]", "model", 6, "a variable is not allowed"),
    ("devices/interface", "/domain/devices", 7, "assert.path: XPath outside the allowed subset: must be relative"),
    ("devices/interface", "../../devices", 7, "a .. step is not allowed"),
    ("//interface", ".//model", 7, "// is allowed once per check: the select already has it"),
    ("//*[" + " or ".join(["@a='1'"] * 17) + "]", "model", 6, "more than 16 comparisons in predicates"),
    ("devices/" + "x/" * 20 + "y", "model", 6, "more than 16 steps"),
])
def test_custom_xpaths_outside_the_subset_are_policy_errors(repo: Path, select: str, path: str, line: int,
                                                            message: str) -> None:
    (repo / ".vmtune.yaml").write_text(XPATH_CHECK.format(select=select, path=path))
    assert_one_line_error(vmtune("check", "vm.xml", cwd=repo), f".vmtune.yaml:{line}: invalid custom check "
                                                                f"XDOC001: ", message)


def big_domain(suppression_xpath: str) -> str:
    disks = "\n".join(f"    <disk type='file' device='disk'><source file='/var/lib/x{i}.img'/>"
                      f"<target dev='vd{i}' bus='virtio'/></disk>" for i in range(300))
    meta = ("<vmtune:vmtune xmlns:vmtune='https://vmtune.dev/xmlns/domain/1'>"
            f"<vmtune:ignore rules='DSK003' reason='x' xpath=\"{suppression_xpath}\"/></vmtune:vmtune>")
    return domain_xml(metadata=meta, devices=disks, cpu="")


def test_a_suppression_xpath_outside_the_subset_is_a_finding_not_13_seconds(repo: Path) -> None:
    nested = "/domain[count(//*[count(//*[count(//*) &gt; 0]) &gt; 0]) &gt; 0]"
    (repo / "vm.xml").write_text(big_domain(nested))
    assert len((repo / "vm.xml").read_bytes()) > 33_000
    run = vmtune("check", "vm.xml", cwd=repo)
    assert run.cpu_seconds < TIME_LIMIT and run.max_rss_kb < MEMORY_LIMIT_KB, run
    assert run.code == 1 and "Traceback" not in run.stderr and "internal error" not in run.stderr
    lines = run.stdout.splitlines()
    assert "vm.xml:3: SUP003 warning suppression of DSK003: xpath outside the allowed subset: function count() " \
           "is not allowed (column 9) (invalid-suppression)" in lines
    # The domain's other findings are still reported, the one it tried to suppress included.
    assert any(" CPU001 " in line for line in lines) and any(" DSK003 " in line for line in lines)


def test_a_suppression_xpath_inside_the_subset_suppresses(repo: Path) -> None:
    (repo / "vm.xml").write_text(big_domain("/domain/devices/disk[target/@dev='vd0']"))
    run = vmtune("check", "vm.xml", cwd=repo)
    assert " DSK003 " not in run.stdout and "SUP00" not in run.stdout and " CPU001 " in run.stdout


@pytest.mark.parametrize("count, xpath, beyond", [
    (20, "/domain/devices[1]", 4),  # 16 suppressions
    (6, "//*[@a='1' or @b='2' or @c='3' or @d='4' or @e='5' or @f='6' or @g='7' or @h='8']", 2),  # 32 comparisons
])
def test_xpath_suppressions_have_a_budget_per_domain(count: int, xpath: str, beyond: int) -> None:
    """Each costs up to linear time in the domain: only so many are evaluated."""
    from helpers import findings

    ignores = "".join(f"<vmtune:ignore rules='CPU001' reason='x' xpath=\"{xpath}\"/>" for _ in range(count))
    xml = domain_xml(metadata=f"<vmtune:vmtune xmlns:vmtune='https://vmtune.dev/xmlns/domain/1'>{ignores}"
                              "</vmtune:vmtune>")
    invalid = [f.message for f in findings(xml) if f.rule.code == "SUP003"]
    assert invalid == ["suppression of CPU001: beyond the 16 xpath suppressions with 32 comparisons in all "
                       "evaluated per domain; not evaluated"] * beyond


def test_the_subset_stays_linear_on_a_large_domain() -> None:
    """The most expensive expressions the subset accepts stay linear in the domain's size:
    doubling the disks (20,000 to 40,000: 240,000 elements) at most about doubles their CPU
    time, where a `//` after a step or a `..` step outside a predicate grows quadratically (4x).
    A ratio, not a time, so a loaded machine does not decide it; each time is the best of 3.
    Below 20,000 disks the tree still fits in the CPU's caches and the step from 10,000 to
    20,000 costs more than twice as much for any expression, linear or not; times under 50 ms
    are noise."""
    from lxml import etree

    from vmtune.xml.xpath import compile_checked

    def domain(count: int) -> etree._ElementTree:
        disks = "".join(f"<disk type='file'><source file='/x{i}'/><target dev='vd{i}' bus='virtio'/><a><b>"
                        "<c x='1'/></b></a></disk>" for i in range(count))
        return etree.fromstring(f"<domain><devices>{disks}</devices></domain>".encode()).getroottree()

    def cpu(xpath: object, tree: etree._ElementTree) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            xpath(tree)  # type: ignore[operator]
            best = min(best, time.process_time() - start)
        return best

    small, large = domain(20_000), domain(40_000)
    term = "not(*/*/*/*) and not(*/*/@q='1') and not(*/*/*/@x='2') and not(contains(text(),'z'))"
    for expression in [f"//*[{term}][{term}][{term}][{term}]", "//*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*",
                       "/domain/devices/*[@type='file']/*/*/*[*/@x='1' or text()='x']"]:
        xpath, _ = compile_checked(expression)
        base, double = cpu(xpath, small), cpu(xpath, large)
        assert double < 3 * max(base, 0.05), (expression, base, double)


def test_every_element_path_vmtune_prints_is_in_the_subset() -> None:
    """Suppressions are written from the `xpath` vmtune reports (JSON, SARIF, baselines):
    every one of those must be accepted and select its element."""
    assert element_paths_checked(sorted(DOMAINS.glob("*.xml"))) > 200


def test_every_element_path_of_the_corpus_is_in_the_subset(corpus_domains: list[Path]) -> None:
    assert element_paths_checked(corpus_domains) > 10_000  # 200 virt-manager domains


def element_paths_checked(files: list[Path]) -> int:
    from lxml import etree

    from vmtune.xml.xpath import compile_checked

    checked = 0
    for file in files:
        root = etree.parse(str(file)).getroot()
        for element in root.iter():
            path = stable_path(element)
            xpath, _ = compile_checked(path)
            target = element if isinstance(element.tag, str) else None
            if target is not None:
                assert xpath(root.getroottree())[0] is target, path  # type: ignore[operator]
            checked += 1
    return checked


@pytest.mark.parametrize("expression", [
    "devices/interface[@type='bridge'][source/@bridge='br-prod']",  # README
    "channel[target/@name='org.qemu.guest_agent.0']",
    "/domain/devices/disk[target/@dev='hda']",
    "//disk[@device='cdrom' and not(readonly)]",
    "devices/*[local-name()='interface'][2]",
    "features/hyperv/*[@state='on' or @state='off']",
    "os/type[starts-with(@machine, 'pc-i440fx') or contains(text(), 'hvm')]",
    "vcpu[. > 8]", ".", "/", "@placement",
])
def test_what_checks_need_is_in_the_subset(expression: str) -> None:
    check(expression)


def test_the_subset_refuses_long_expressions() -> None:
    with pytest.raises(XPathNotAllowed, match="longer than 512"):
        check("a[@b='" + "x" * 600 + "']")


def test_a_bad_xpath_in_a_policy_given_by_name_blames_the_policy(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(XPATH_CHECK.format(select="id('x')", path="model"))
    with pytest.raises(VmtuneError) as info:
        load_policies([str(policy)])
    assert (info.value.source, info.value.line) == (str(policy), 6)
    assert "function id() is not allowed" in info.value.message


def test_config_and_policy_loading_import_each_other_nowhere() -> None:
    """The import circle between config.py and policy/load.py is gone (both use policy/document.py)."""
    def imports(module: Path) -> set[str]:
        tree = ast.parse(module.read_text())
        return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | \
            {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}

    assert "vmtune.policy.load" not in imports(ROOT / "vmtune" / "config.py")
    assert "vmtune.config" not in imports(ROOT / "vmtune" / "policy" / "load.py")
    assert not {"vmtune.config", "vmtune.policy.load"} & imports(ROOT / "vmtune" / "policy" / "document.py")
