"""What operators expect around the checks: `history --all`, shell completion of rule codes and
domain names, the man page, `--statistics` in JSON, and live summaries that name `apply`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmtune.manpage import render as render_manpage
from vmtune.rules import BUILTIN_RULES

from conftest import DOMAINS, ROOT, TESTNODE_URI, run_vmtune

STORM = str(DOMAINS / "win10-timer-storm.xml")
VMTUNE = Path(sys.executable).with_name("vmtune")  # the console script, as a shell runs it


def complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash completion offers for the last word of `words`, through typer's real protocol
    (the function `vmtune --show-completion bash` installs sets exactly these variables)."""
    if not VMTUNE.exists():
        pytest.skip("the vmtune console script is not installed in this environment")
    cword = len(words.split(" ")) - 1
    done = subprocess.run([str(VMTUNE)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {}), "_VMTUNE_COMPLETE": "complete_bash",
                               "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.split()


def test_completion_offers_rule_codes_and_names() -> None:
    assert complete("vmtune check --select CLK00") == [r.code for r in BUILTIN_RULES if r.code.startswith("CLK00")]
    assert complete("vmtune check --ignore NET001,NET00")[:2] == ["NET001,NET001", "NET001,NET002"]
    assert "hyperv-baseline-missing" in complete("vmtune apply --select hyperv-")
    assert complete("vmtune rule USB00") == [r.code for r in BUILTIN_RULES if r.code.startswith("USB00")]
    assert complete("vmtune check --select ZZZ") == []


def test_completion_offers_the_connections_domain_names(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    assert complete(f"vmtune apply -c {TESTNODE_URI} --domain win") == ["win10", "win10-off"]
    names = complete(f"vmtune check --connect {TESTNODE_URI} -d ")
    assert names == sorted(names) and {"db01", "nginx01", "instance-0000002a"} <= set(names)
    # without --connect: LIBVIRT_DEFAULT_URI, as every live command
    assert complete("vmtune history --domain ng", {"LIBVIRT_DEFAULT_URI": TESTNODE_URI}) == ["nginx01"]
    # an unreachable host offers nothing and prints nothing (complete() checks stderr is empty)
    assert complete("vmtune rollback -c test:///nonexistent/node.xml -d ") == []


def test_installed_bash_completion_completes_rule_codes(tmp_path: Path) -> None:
    """The function `vmtune --show-completion bash` prints, run by bash as a shell would on TAB."""
    if not VMTUNE.exists() or shutil.which("bash") is None:
        pytest.skip("needs the vmtune console script and bash")
    script = subprocess.run([str(VMTUNE), "--show-completion", "bash"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert script.returncode == 0 and "complete -o default -F _vmtune_completion vmtune" in script.stdout
    (tmp_path / "completion.bash").write_text(script.stdout)
    shell = (f"source {tmp_path / 'completion.bash'}; COMP_WORDS=(vmtune check --ignore HV00); COMP_CWORD=3; "
             f"_vmtune_completion {VMTUNE}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == [r.code for r in BUILTIN_RULES if r.code.startswith("HV00")], done.stderr


def test_a_normal_install_puts_the_man_page_where_man_finds_it(tmp_path: Path) -> None:
    # `pip install vmtune` writes the wheel's data/share/man/man1 under the prefix (a venv's or
    # ~/.local's), where man-db looks next to a bin directory on PATH: `man vmtune` works.
    # Built from a copy, so no build/ directory lands in the work tree.
    import zipfile

    from vmtune import __version__, compiled

    tree = tmp_path / "src"
    shutil.copytree(ROOT / "vmtune", tree / "vmtune",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", compiled.INPLACE_MARKER))
    (tree / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "vmtune.1", tree / "docs")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tree)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", str(tree), "-w", str(tmp_path / "dist")],
                           capture_output=True, text=True, timeout=300, cwd=tree,
                           env={**os.environ, "VMTUNE_PURE": "1"})  # see below
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(next((tmp_path / "dist").glob("vmtune-*.whl"))) as wheel:
        page = wheel.read(f"vmtune-{__version__}.data/data/share/man/man1/vmtune.1")
        names = wheel.namelist()
    assert page == (ROOT / "docs" / "vmtune.1").read_bytes()
    # Built with VMTUNE_PURE=1: the native YAML reader alone (where gcc and libyaml's headers are).
    # A compiled build is what the suite itself runs (tests/test_compiled.py), made by the same
    # build_ext; building it again here cost CI ~40 s.
    native = [n for n in names if n.startswith("vmtune/stacks/_yamlnodes.") and n.endswith(".so")]
    assert len(native) == (1 if Path("/usr/include/yaml.h").exists() and shutil.which("gcc") else 0), names
    assert [n for n in names if n.endswith(".so")] == native, names
    assert "vmtune/_commit.txt" not in names  # built from a copy without .git: no commit to name
    assert compiled.INPLACE_MARKER not in "".join(names)  # a wheel's modules are never stale


def test_a_wheel_built_from_a_clone_names_its_commit(tmp_path: Path) -> None:
    """`pip install .` in a clone, `pip install 'vmtune @ git+URL@SHA'` and pre-commit's hook
    environment all build from a git checkout: the wheel records its commit, and the installed
    vmtune's --version names it (there is no checkout beside the installed package to read)."""
    import zipfile

    from vmtune import __version__

    tree = tmp_path / "src"
    shutil.copytree(ROOT / "vmtune", tree / "vmtune", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (tree / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "vmtune.1", tree / "docs")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tree)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "release"]):
        subprocess.run(["git", *command], cwd=tree, check=True, capture_output=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, check=True, capture_output=True, text=True,
                          env=env).stdout.strip()
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", str(tree), "-w", str(tmp_path / "dist")],
                           capture_output=True, text=True, timeout=300, env={**env, "VMTUNE_PURE": "1"})
    assert built.returncode == 0, built.stderr
    installed = tmp_path / "site"
    with zipfile.ZipFile(next((tmp_path / "dist").glob("vmtune-*.whl"))) as wheel:
        assert wheel.read("vmtune/_commit.txt").decode() == head + "\n"
        wheel.extractall(installed)
    shown = subprocess.run([sys.executable, "-m", "vmtune", "--version"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(installed)})
    assert shown.stdout == f"vmtune {__version__} (commit {head})\n", shown.stderr


def test_man_page_is_generated_from_the_cli_and_current() -> None:
    text = render_manpage()
    assert (ROOT / "docs" / "vmtune.1").read_text() == text, \
        "docs/vmtune.1 is stale: run `python -m vmtune.manpage docs/vmtune.1`"
    for command in ("check", "fix", "render", "rule", "rules", "plan", "host", "show\\-settings", "apply", "history",
                    "rollback"):
        assert f'.SS "vmtune {command} [\\fIOPTIONS\\fR]' in text
    assert "\\fB\\-f\\fR, \\fB\\-\\-format\\fR, \\fB\\-\\-output\\-format\\fR \\fI{text|json|sarif|github|junit|" \
        "openmetrics|html}\\fR" in text


def test_man_page_renders_without_warnings() -> None:
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    done = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(ROOT / "docs" / "vmtune.1")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    page = subprocess.run(["groff", "-man", "-rHY=0", "-Tutf8", str(ROOT / "docs" / "vmtune.1")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "GROFF_NO_SGR": "1"}).stdout
    page = " ".join(re.sub(".\x08", "", page).split())  # overstrike bold/underline off, lines joined
    assert "vmtune history [OPTIONS]" in page and "Every domain with backups in the state directory" in page


def test_statistics_in_json_count_findings_and_fixes_per_rule() -> None:
    legacy = str(DOMAINS / "legacy-bigvm.xml")
    done = run_vmtune("check", "--isolated", "--statistics", "--format", "json", STORM, legacy)
    document = json.loads(done.stdout)
    stats = document["statistics"]
    text = run_vmtune("check", "--isolated", "--statistics", STORM, legacy).stdout.splitlines()
    # the rules and order of the text statistics
    assert [s["rule"] for s in stats] == [line.split()[1] for line in text if line.startswith(" ")]
    by_rule = {s["rule"]: s for s in stats}
    assert by_rule["DSK008"] == {"rule": "DSK008", "name": "file-disk-host-page-cache", "count": 2, "fixable": 2}
    assert by_rule["MEM001"]["fixable"] == 0  # a hugepage suggestion without --host has no fix
    assert sum(s["count"] for s in stats) == document["summary"]["findings"]
    assert sum(s["fixable"] for s in stats) == document["summary"]["fixable"]
    assert "statistics" not in json.loads(run_vmtune("check", "--format", "json", STORM).stdout)


def test_live_summary_points_to_apply(libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    live = run_vmtune("check", "--isolated", "-c", TESTNODE_URI, "--all").stdout.splitlines()[-1]
    assert " with `vmtune apply`, " in live and "--fix" not in live
    assert " with `vmtune apply --select CODE`" in live
    both = run_vmtune("check", "--isolated", "-c", TESTNODE_URI, "--domain", "win10", STORM).stdout
    assert "4 with --fix (files) or `vmtune apply` (live domains)" in both.splitlines()[-1]
    files = run_vmtune("check", "--isolated", STORM).stdout.splitlines()[-1]
    assert files.endswith("; 5 fixable: 2 with --fix, 3 with --fix --unsafe-fixes --select CODE")


def test_history_all_lists_every_backed_up_domain_without_a_connection(libvirt_mod, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    state = tmp_path / "state"
    for name in ("win10", "nginx01"):
        done = run_vmtune("apply", "-c", TESTNODE_URI, "-d", name, "--yes", "--state-dir", str(state))
        assert done.returncode == 0, done.stdout + done.stderr
    listed = run_vmtune("history", "--all", "--state-dir", str(state))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    headers = [line for line in lines if line.startswith("== ")]
    # by domain name, then the host the backup names (the connection's label) and the UUID
    assert len(headers) == 2 and re.fullmatch(r"== nginx01 on \S+ \([0-9a-f-]{36}\)", headers[0])
    assert re.fullmatch(r"== win10 on \S+ \(7f1a2c3e-0000-4000-8000-000000000010\)", headers[1])
    assert lines[lines.index(headers[1]) + 1].split()[1:3] == ["apply", "CLK002,"]
    # the same list `history --domain` gives for one of them
    one = run_vmtune("history", "-c", TESTNODE_URI, "--domain", "win10", "--state-dir", str(state)).stdout
    assert one.splitlines() == lines[lines.index(headers[1]) + 1:]
    this_host = run_vmtune("history", "--all", "-c", TESTNODE_URI, "--state-dir", str(state))
    assert this_host.returncode == 0 and this_host.stdout == listed.stdout
    other_host = run_vmtune("history", "--all", "-c", "test:///default", "--state-dir", str(state))
    assert other_host.returncode == 0 and other_host.stdout == f"no backups in {state}\n"


def test_history_needs_a_domain_or_all(tmp_path: Path) -> None:
    for args in ((), ("--all", "--domain", "x")):
        done = run_vmtune("history", *args, "--state-dir", str(tmp_path))
        assert done.returncode == 2 and done.stderr == "vmtune: history needs --domain NAME or --all (not both)\n"


@pytest.mark.slow
def test_pip_install_puts_the_man_page_where_man_finds_it(tmp_path: Path) -> None:
    """`pip install .` (here into a prefix, as into a venv or ~/.local): PREFIX/share/man/man1/vmtune.1,
    and man-db, given PREFIX/bin on PATH, finds it there."""
    if shutil.which("man") is None:
        pytest.skip("man is not installed")
    tree = tmp_path / "src"
    shutil.copytree(ROOT / "vmtune", tree / "vmtune", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (tree / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "vmtune.1", tree / "docs")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tree)
    prefix = tmp_path / "prefix"
    # --ignore-installed: else pip removes the vmtune of the environment running the tests first
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--ignore-installed", "--disable-pip-version-check", "--prefix", str(prefix), str(tree)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VMTUNE_PURE": "1"})  # the man page only: no need to compile
    assert done.returncode == 0, done.stderr
    page = prefix / "share" / "man" / "man1" / "vmtune.1"
    assert page.read_bytes() == (ROOT / "docs" / "vmtune.1").read_bytes()
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    found = subprocess.run(["man", "--path", "vmtune"], capture_output=True, text=True, timeout=60,
                           env={**env, "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}"})
    assert found.stdout.strip() == str(page), found.stderr
