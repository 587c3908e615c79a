"""docs/vmtune.1, the man page, written from the command line's own definition (vmtune.cli).

    python -m vmtune.manpage docs/vmtune.1      # regenerate; tests/test_ops.py checks it is current
    man -l docs/vmtune.1

Every command, option, choice and default comes from the typer app, so the page cannot drift
from `vmtune --help`; the sections around them (exit status, environment, files) are here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from vmtune import __version__

DESCRIPTION = """\
vmtune is a linter and auto\\-patcher for libvirt domain XML. It finds the settings that make
virtual machines slow, explains each with its measured effect, and writes the smallest fix
that \\fBvirsh define\\fR accepts, leaving every other byte of the file as it was. It reads
domain XML files, or the definitions of a libvirt connection (\\fB\\-\\-connect\\fR,
\\fB\\-\\-domain\\fR, \\fB\\-\\-all\\fR; needs libvirt\\-python), and fixes live definitions with
\\fBvmtune apply\\fR (backup, diff, confirmation, guarded define, verification).
.PP
Options come before the operands: after the first file, directory or \\fB\\-\\fR (standard
input), and after \\fB\\-\\-\\fR, every argument is a file, even one that starts with \\fB\\-\\fR.
Whatever appends file names (pre\\-commit, \\fBxargs\\fR) ends its options with \\fB\\-\\-\\fR.
A \\fB\\-\\-connect\\fR URI that makes libvirt run a program (the \\fBext\\fR transport,
\\fBcommand=\\fR, \\fBnetcat=\\fR) is refused unless \\fB\\-\\-allow\\-command\\-uri\\fR is given."""

TAIL = """\
.SH EXIT STATUS
.TP
.B 0
Nothing at or above \\fB\\-\\-fail\\-on\\fR (default: warning); \\fBapply\\fR, \\fBplan \\-\\-write\\fR,
\\fBrollback\\fR: done and verified, or nothing to do; \\fBplan\\fR: nothing to place.
.TP
.B 1
Findings at or above \\fB\\-\\-fail\\-on\\fR; changes pending: \\fB\\-\\-diff\\fR showed a change,
\\fBplan\\fR printed a placement, \\fB\\-\\-dry\\-run\\fR of \\fBapply\\fR, \\fBplan \\-\\-write\\fR or
\\fBrollback\\fR showed one; declined; domains that do not fit; libvirt did not keep a change.
.TP
.B 2
Usage error, unreadable or malformed input, bad policy or configuration, unreachable host:
one line on standard error naming the file (and line), never a traceback.
.SH ENVIRONMENT
.TP
.B LIBVIRT_DEFAULT_URI
The connection live commands use without \\fB\\-\\-connect\\fR, opened as set, even when it
runs a program (the user's own setting); shell completion never opens such a URI.
.TP
.B VMTUNE_STATE_DIR
Where \\fBapply\\fR keeps backups (before \\fBXDG_STATE_HOME\\fR).
.TP
.B XDG_STATE_HOME
Backups go to \\fI$XDG_STATE_HOME/vmtune\\fR; without it \\fI/var/lib/vmtune\\fR as root, else
\\fI~/.local/state/vmtune\\fR.
.TP
.B NO_COLOR\\fR, \\fBFORCE_COLOR
Colour of the text report with \\fB\\-\\-color auto\\fR.
.SH FILES
.TP
.I .vmtune.yaml
Configuration, found in the checked file's directory or above, up to its work tree's top (else
up to \\fI$HOME\\fR, else the file's directory only); used only when root or you own it and
nobody else can write it (\\fBvmtune show\\-settings PATH\\fR prints what applies).
.TP
.I /var/lib/vmtune/HOST/UUID/ID.xml
A backup of a live definition (mode 0600), with \\fIID.json\\fR describing the change.
.SH EXAMPLES
.nf
vmtune check win10.xml
vmtune check \\-\\-fix \\-\\-select DSK003 win10.xml
vmtune check \\-\\-all \\-c qemu:///system \\-\\-format html \\-o report.html
vmtune apply \\-\\-domain win10 \\-\\-dry\\-run
vmtune history \\-\\-all
vmtune \\-\\-install\\-completion
.fi
.SH SEE ALSO
.BR virsh (1),
.BR virt\\-xml (1);
the rule reference: \\fBvmtune rules\\fR, \\fBvmtune rule CODE\\fR.
"""


def _roff(text: str) -> str:
    """Text safe in a roff line: backslashes and hyphens escaped, no control character at a line start."""
    lines = text.replace("\\", "\\e").replace("-", "\\-").splitlines()
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in lines)


def _metavar(param: Any) -> str:
    choices = getattr(param.type, "choices", None)
    if choices:
        return "{" + "|".join(str(c) for c in choices) + "}"
    if param.metavar:  # what `--help` shows (vmtune.cli names each option's value): one source
        return str(param.metavar)
    return {"path": "PATH", "integer": "N", "int range": "N"}.get(param.type.name, "TEXT")


def _default(param: Any) -> str:
    default = param.default
    if param.is_flag or default in (None, False, (), []):
        return ""
    return str(getattr(default, "value", default))


def _option(param: Any) -> str:
    names = ", ".join(f"\\fB{_roff(o)}\\fR" for o in sorted(param.opts, key=len))
    value = "" if param.is_flag else f" \\fI{_roff(_metavar(param))}\\fR"
    text = _roff(param.help or "")
    default = _default(param)
    if default:
        text += f" Default: \\fB{_roff(default)}\\fR."
    if getattr(param, "multiple", False) and "repeatable" not in (param.help or "").lower():
        text += " Repeatable."
    return f".TP\n{names}{value}\n{text}\n"


def _usage(name: str, command: Any) -> str:
    args = []
    for param in command.params:
        if param.param_type_name == "argument":
            shown = (param.metavar or "").strip("[].") or param.name.upper()  # as `--help` names it
            word = f"\\fI{shown}\\fR" + ("..." if param.nargs == -1 else "")
            args.append(word if param.required else f"[{word}]")
    words = " ".join([f"vmtune {_roff(name)}", "[\\fIOPTIONS\\fR]", *args])
    return f'.SS "{words}"\n'


def render(app: Any = None) -> str:
    import typer.main

    if app is None:
        from vmtune.cli import app
    group: Any = typer.main.get_command(app)  # a click Group (typer's own copy of click)
    out = [
        f'.TH VMTUNE 1 "" "vmtune {__version__}" "User Commands"\n',
        ".SH NAME\nvmtune \\- find the libvirt domain settings that make VMs slow, and fix them\n",
        ".SH SYNOPSIS\n.B vmtune\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...\n",
        f".SH DESCRIPTION\n{DESCRIPTION}\n",
        ".SH OPTIONS\n", *(_option(p) for p in group.params if not p.hidden),
        ".SH COMMANDS\n",
    ]
    for name, command in group.commands.items():  # in the order the CLI defines them
        if command.hidden:
            continue
        out.append(_usage(name, command))
        out.append(_roff(command.help or "").strip() + "\n")
        out += [_option(p) for p in command.params if p.param_type_name == "option" and not p.hidden]
    out.append(TAIL)
    return "".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
