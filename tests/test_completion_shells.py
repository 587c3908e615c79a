"""TAB pressed in real bash, zsh and fish offers hostile names as exactly those names, runs nothing.

Security issue #32: domain names come from libvirt, where anyone who may define a domain picks
them, and reach the shell through completion. Each test starts the shell interactively on a
pseudo-terminal with the script `vmtune --show-completion SHELL` prints, types a command line
with `-c test:///…/node.xml` (the libvirt test driver, domains with hostile names), presses TAB,
and a key bound to a small function writes the edited line to a file. Then:

- the marker file the names try to `touch` does not exist (nothing ran on TAB);
- the line, run by the same shell with `vmtune` defined as a function that prints its
  arguments, gives exactly the domain's name as the last argument (the inserted text is the
  name, quoted for that shell), and runs nothing either;
- a name with a control, format or invisible character is left out (the line is unchanged).

vmtune.shell_completion says why; SECURITY.md ("Shell completion") states the guarantee.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer import _completion_shared

from vmtune.rules import BUILTIN_RULES

VMTUNE = Path(sys.executable).with_name("vmtune")  # the console script, as a shell runs it
MARKER = "MARKER"

# Offered, each as exactly itself. Unique prefixes (xNN): TAB after one inserts that name.
OFFERED = [
    'x01\\" ); touch MARKER; ( true \\"',  # the reviewer's: typer's zsh escaping missed the backslash
    "x02-$(touch MARKER)",
    "x03-`touch MARKER`",
    "x04-a;touch MARKER",
    "x05-it's",
    'x06-say "hi"',
    "x07-with space",
    "x08-*",
    "x09-{a,b}",
    "x10-~",
    "x11-back\\slash\\",
    "x12-!!",
    "x13-é",
    "x14-a&b|c>d<e",
    "x15-#hash",
    "x16-a:b=c",
]
# Left out: they would break the one-candidate-per-line formats, or hide what is inserted.
LEFT_OUT = [
    "x17-new\nline",
    "x18-tab\there",
    "x19-cr\rx",
    "x20-\x9b31mcsi",
    "x21-zero\u200bwidth",
    "x22-bidi\u202eevil",
    "x23-nbsp\u00a0x",
]
# Hostile file names, completed by the shell's own file completion.
FILES = ["f1-$(touch MARKER).xml", "f2-;touch MARKER", "f3-with space.xml", "f4-it's", "f5-*"]

SHELLS = ("bash", "zsh", "fish")


def _node(path: Path, names: list[str]) -> str:
    """A libvirt test driver node with these domain names; its test:/// URI."""
    def xml_text(name: str) -> str:
        return "".join(f"&#{ord(c)};" if ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c in "<>&" else c for c in name)

    domains = "".join(
        f"<domain type='test'><name>{xml_text(name)}</name><uuid>00000000-0000-4000-8000-{i:012d}</uuid>"
        "<memory>1048576</memory><os><type>hvm</type></os></domain>" for i, name in enumerate(names))
    path.write_text(f"<node>{domains}</node>", encoding="utf-8")
    return f"test://{path}"


# Per shell: the command line to start it, and the set-up line (SCRIPT, OUT, READY replaced):
# load the completion script, bind Ctrl-X d to append the edited line and a NUL to OUT and clear it.
STARTS = {
    "bash": ["bash", "--norc", "--noprofile", "-i"],
    "zsh": ["zsh", "-f", "-i"],
    "fish": ["fish", "--no-config", "-i"],
}
SETUPS = {
    "bash": ("source SCRIPT; dump() { printf '%s\\0' \"$READLINE_LINE\" >> OUT; READLINE_LINE=; READLINE_POINT=0; }; "
             "bind -x '\"\\C-xd\": dump'; : > READY\n"),
    "zsh": ("autoload -Uz compinit; compinit -u -D; source SCRIPT; "
            "dump() { print -rn -- \"$BUFFER\"$'\\0' >> OUT; BUFFER=; }; zle -N dump; bindkey '^Xd' dump; : > READY\n"),
    "fish": ("source SCRIPT; function dump; printf '%s\\0' (commandline | string collect) >> OUT; commandline ''; end; "
             "bind \\cxd dump; touch READY\n"),
}
# How each shell runs a line, with `vmtune` a function printing its arguments NUL-terminated.
ECHO_ARGS = {
    "bash": ["bash", "--norc", "--noprofile", "-c", "vmtune() { printf '%s\\0' \"$@\"; }\n"],
    "zsh": ["zsh", "-f", "-c", "vmtune() { print -rN -- \"$@\" }\n"],
    "fish": ["fish", "--no-config", "-c", "function vmtune; string join0 -- $argv; end\n"],
}


def _env(home: Path) -> dict[str, str]:
    return {"PATH": f"{VMTUNE.parent}:/usr/bin:/bin", "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8",
            "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache")}


def press_tab(shell: str, script: Path, lines: list[str], cwd: Path) -> list[str]:
    """Each line as the shell has it after typing it and pressing TAB once."""
    out, ready, home = cwd / ".lines", cwd / ".ready", cwd.parent / f"home-{shell}"
    home.mkdir(exist_ok=True)
    setup = SETUPS[shell].replace("SCRIPT", str(script)).replace("OUT", str(out)).replace("READY", str(ready))
    if script.name == "_vmtune":  # installed: zsh autoloads it from its directory, as ~/.zshrc says
        setup = setup.replace(f"source {script}; ", "").replace("autoload", f"fpath=({script.parent} $fpath); autoload")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the shell, on the pseudo-terminal
        os.chdir(cwd)
        os.execvpe(STARTS[shell][0], STARTS[shell], _env(home))

    def wait_for(done, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 60
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"{shell}: no {what} after 60 s")
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    os.read(fd, 65536)  # drain the terminal, or the shell blocks writing to it
                except OSError:
                    raise AssertionError(f"{shell} ended before {what}") from None

    def count() -> int:
        return out.read_bytes().count(b"\0") if out.exists() else 0

    try:
        os.write(fd, setup.encode())
        wait_for(ready.exists, "set-up")
        for n, line in enumerate(lines, 1):
            os.write(fd, line.encode() + b"\t\x18d")
            wait_for(lambda n=n: count() >= n, f"line after TAB on {line!r}")  # type: ignore[misc]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    return out.read_bytes().decode().split("\0")[:-1]


def run_line(shell: str, line: str, cwd: Path) -> list[str]:
    """The arguments `vmtune` gets when the shell runs `line`."""
    done = subprocess.run([*ECHO_ARGS[shell][:-1], ECHO_ARGS[shell][-1] + line], capture_output=True,
                          cwd=cwd, env=_env(cwd), timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


INSTALLED = {"bash": ".bash_completions/vmtune.sh", "zsh": ".zfunc/_vmtune",
             "fish": ".config/fish/completions/vmtune.fish"}


def installed_script(shell: str, tmp_path: Path) -> Path:
    """The file `vmtune --install-completion SHELL` writes (zsh: autoloaded from its directory)."""
    if shutil.which(shell) is None or not VMTUNE.exists():
        pytest.skip(f"needs {shell} (apt-get install {shell}) and the vmtune console script")
    home = tmp_path / "installed"
    done = subprocess.run([str(VMTUNE), "--install-completion", shell], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(home), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert done.returncode == 0, done.stderr
    script = home / INSTALLED[shell]
    shown = subprocess.run([str(VMTUNE), "--show-completion", shell], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert shown.stdout.strip() == script.read_text().strip()
    return script


@pytest.mark.parametrize("shell", SHELLS)
def test_no_installed_script_evaluates_what_vmtune_prints(shell: str, tmp_path: Path) -> None:
    assert not re.search(r"\beval\b", installed_script(shell, tmp_path).read_text())


def check_domain_names(shell: str, script: Path, tmp_path: Path) -> None:
    pytest.importorskip("libvirt", reason="libvirt-python is not installed (pip install '.[live]')")
    uri = _node(tmp_path / "node.xml", OFFERED + LEFT_OUT)
    dash_uri = _node(tmp_path / "dash.xml", ["-rf $(touch MARKER)"])  # completed from an empty word
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    work.mkdir()
    scratch.mkdir()
    typed = [f"vmtune check -c {uri} --domain {name[:3]}" for name in OFFERED + LEFT_OUT]
    typed.append(f"vmtune apply -c {dash_uri} -d ")
    # inside a quote the user opened, and after a ':' or '=' (where bash's readline word starts)
    in_quotes = [(name, f"vmtune check -c {uri} --domain {quote}{name[:3]}") for name in OFFERED for quote in "'\""
                 if any(c in name for c in "\\$`'\"!") and not (quote == '"' and "!" in name)]  # see bash_quoted
    in_quotes += [(OFFERED[-1], f"vmtune check -c {uri} --domain {OFFERED[-1][:6]}"),
                  (OFFERED[-1], f"vmtune check -c {uri} --domain {OFFERED[-1][:8]}")]
    typed += [line for _name, line in in_quotes]
    lines = press_tab(shell, script, typed, work)

    assert not (work / MARKER).exists(), f"{shell} ran a command hidden in a domain name on TAB"
    names = [*OFFERED, *LEFT_OUT, "-rf $(touch MARKER)", *(name for name, _line in in_quotes)]
    for name, before, after in zip(names, typed, lines, strict=True):
        if name in LEFT_OUT:
            assert after == before, f"{shell} offered {name!r}: {after!r}"
            continue
        assert run_line(shell, after, scratch)[-1] == name, f"{shell} inserted {after!r} for {name!r}"
    assert not (scratch / MARKER).exists(), f"a line {shell} completed runs a command hidden in a domain name"


@pytest.mark.parametrize("shell", SHELLS)
def test_tab_inserts_hostile_domain_names_exactly_and_runs_nothing(shell: str, tmp_path: Path) -> None:
    check_domain_names(shell, installed_script(shell, tmp_path), tmp_path)


def test_a_zsh_script_installed_by_typer_before_stays_safe(tmp_path: Path) -> None:
    """Users who ran `vmtune --install-completion` before keep typer's zsh script, which `eval`s
    the output: without the new script's marker variable, vmtune answers with a `compadd` whose
    values are `$'\\xNN'` strings."""
    installed_script("zsh", tmp_path)  # the skips
    old = _completion_shared.COMPLETION_SCRIPT_ZSH % {
        "complete_func": "_vmtune_completion", "prog_name": "vmtune", "autocomplete_var": "_VMTUNE_COMPLETE"}
    assert "eval $(env" in old  # what this test is about
    script = tmp_path / "typer.zsh"
    script.write_text(old)
    check_domain_names("zsh", script, tmp_path)


@pytest.mark.parametrize("shell", SHELLS)
def test_tab_completes_hostile_file_names_with_the_shells_own_file_completion(shell: str, tmp_path: Path) -> None:
    """`--host` is a path: the shell's own file completion (which quotes), not typer's echo of the
    typed word; a positional path too."""
    script = installed_script(shell, tmp_path)
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    (work / "in").mkdir(parents=True)
    scratch.mkdir()
    for name in FILES:
        (work / "in" / name).write_text("<capabilities/>")
    typed = [f"vmtune check --host in/{name[:2]}" for name in FILES] + [f"vmtune check in/{FILES[1][:2]}"]
    lines = press_tab(shell, script, typed, work)
    assert not (work / MARKER).exists()
    for name, after in zip([*FILES, FILES[1]], lines, strict=True):
        assert run_line(shell, after, scratch)[-1] == f"in/{name}", f"{shell} inserted {after!r} for {name!r}"
    assert not (scratch / MARKER).exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_tab_completes_rule_codes_and_names(shell: str, tmp_path: Path) -> None:
    script = installed_script(shell, tmp_path)
    codes = [r.code for r in BUILTIN_RULES]
    code = next(c for c in codes if sum(o.startswith(c[:-1]) for o in codes) == 1)  # one TAB inserts it
    work = tmp_path / "work"
    work.mkdir()
    typed = ["vmtune check --select hyperv-baseline-mi", f"vmtune check --ignore NET001,{code[:-1]}",
             f"vmtune rule {code[:-1]}"]
    lines = press_tab(shell, script, typed, work)
    assert [line.rstrip() for line in lines] == [
        "vmtune check --select hyperv-baseline-missing", f"vmtune check --ignore NET001,{code}", f"vmtune rule {code}"]


def test_bash_reads_the_connection_uri_whole(tmp_path: Path, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """bash splits COMP_WORDS at ':' (COMP_WORDBREAKS): typer rebuilt `-c test:///…` from them as
    `test : ///…` and offered no domain of that URI."""
    script = installed_script("bash", tmp_path)
    uri = _node(tmp_path / "node.xml", ["db01", "web01"])
    work = tmp_path / "work"
    work.mkdir()
    assert press_tab("bash", script, [f"vmtune check -c {uri} --domain we"], work) == [
        f"vmtune check -c {uri} --domain web01 "]


def test_powershell_output_is_quoted_or_left_out(tmp_path: Path, libvirt_mod) -> None:  # type: ignore[no-untyped-def]
    """PowerShell inserts the value verbatim (no pwsh on Debian to press TAB in: typer's protocol,
    as its PowerShell script drives it): bare names, single-quoted ones, quotes and `:::` left out."""
    names = ["db01", "x02-$(touch MARKER)", "x05-it's", "x24-\u2019smart", "x25-a:::b", "x26-`n", "-rf"]
    uri = _node(tmp_path / "node.xml", names + LEFT_OUT)
    done = subprocess.run([str(VMTUNE)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "_VMTUNE_COMPLETE": "complete_powershell",
                               "_TYPER_COMPLETE_ARGS": f"vmtune check -c {uri} --domain ",
                               "_TYPER_COMPLETE_WORD_TO_COMPLETE": ""})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["'-rf'::: ", "db01::: ", "'x02-$(touch MARKER)'::: ", "'x26-`n'::: "]
    assert not (tmp_path / MARKER).exists()
