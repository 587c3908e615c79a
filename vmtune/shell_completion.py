"""Shell completion output that no shell evaluates: vmtune's own formats for typer's shells.

Completion candidates come from places other people control: the domain names of a libvirt
host (anyone who may define a domain, also on a remote host reached with `-c`, picks them) and
the file system. typer's own formats let such a name run commands as whoever presses TAB
(root, on a hypervisor): its zsh script `eval`s the output and its escaping misses backslashes,
so a domain named `\\" ); cmd; ( true \\"` ran `cmd`. Its bash output is inserted unquoted
(`a;cmd` lands on the command line as two commands) and globbed, and a newline or a tab in a
name adds a candidate or cuts one short in every shell.

So vmtune registers its own class for each shell typer supports, and its own scripts for bash
and zsh (what `--install-completion`/`--show-completion` write):

- A candidate with a character that is a control, a format or invisible character (C0/C1,
  DEL, zero-width and bidi marks, line/paragraph separators, spaces other than ' ', unassigned
  or private-use code points) is left out: it would break the one-candidate-per-line format,
  move the cursor or hide what is inserted, and no one types such a name (`virsh list` shows
  it; the UUID names the domain as well). Descriptions keep such characters as visible escapes.
- bash: each candidate is printed already quoted for bash (a backslash before every character
  that is not plainly literal; inside a quote the user opened, quoted for that quote), read by
  the script with `mapfile` (no splitting, no globbing), and inserted as is: the word bash reads
  back is the name. A `!` inside double quotes cannot be quoted (history expansion): left out.
- zsh: the script reads plain lines (kind, value, description) and hands values to `compadd`,
  which quotes what it inserts; nothing is `eval`ed. A zsh script installed by an older vmtune
  (typer's, which `eval`s the output) still works and stays safe: without the new script's
  marker variable the output is one `compadd` command whose every value is a `$'\\xNN'` string.
- fish: typer's script; fish quotes inserted candidates itself and does not evaluate them.
- PowerShell: the value is inserted verbatim by PowerShell, so it is single-quoted unless made
  of letters, digits, `_`, `.` and `-`; values holding a single quote (or a typographic one,
  which PowerShell also takes as a quote) or `:::` (the format's separator) are left out.
- File names: typer's Path parameters give no candidates, so each shell's own file completion
  runs (it quotes file names itself); a click `file`/`dir` item is handed to it as well.

tests/test_completion_shells.py presses TAB in real bash, zsh and fish with such names.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from typer import _completion_classes as typer_classes

# Set by the scripts below, not by typer's (still installed where an older vmtune put them):
# the zsh script's marker, and the bash script's line up to the cursor and COMP_WORDBREAKS.
PROTOCOL_VAR = "_VMTUNE_COMPLETE_PROTOCOL"
LINE_VAR, BREAKS_VAR = "_VMTUNE_COMPLETE_LINE", "_VMTUNE_COMPLETE_BREAKS"
_BASH_BREAKS = " \t\n\"'><=;|&(:"  # bash's default COMP_WORDBREAKS

# Unicode categories of characters a candidate must not hold: controls, format characters
# (zero-width, bidi), surrogates (undecodable bytes), private use, unassigned, line/paragraph
# separators; and spaces other than U+0020 (no-break, em...: they look like a space but are not).
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
# Pattern text: `re` compiles it once and caches it.
_BASH_LITERAL = r"[A-Za-z0-9_\-./,:@%+=]"
_PWSH_BARE = r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*"
_PWSH_QUOTES = "'\u2018\u2019\u201a\u201b"

BASH_SCRIPT = """
%(complete_func)s() {
    local -a line=()  # the line up to the cursor; COMP_WORDS alone when called outside completion
    [[ -v COMP_LINE ]] && line=(_VMTUNE_COMPLETE_LINE="${COMP_LINE:0:COMP_POINT}")
    COMPREPLY=()
    mapfile -t COMPREPLY < <(env "${line[@]}" _VMTUNE_COMPLETE_BREAKS="$COMP_WORDBREAKS" \\
                             COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" \\
                             %(autocomplete_var)s=complete_bash "$1")
    [[ ${#COMPREPLY[@]} == 1 && -z ${COMPREPLY[0]} ]] && COMPREPLY=()  # no candidate: an empty line
    return 0
}

complete -o default -F %(complete_func)s %(prog_name)s
"""

ZSH_SCRIPT = """
#compdef %(prog_name)s

%(complete_func)s() {
  local -a reply values shown
  local kind value help
  reply=("${(@f)$(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _VMTUNE_COMPLETE_PROTOCOL=lines \\
                     %(autocomplete_var)s=complete_zsh %(prog_name)s)}")
  for kind value help in "${reply[@]}"; do
    case $kind in
      (plain) values+=("$value"); if [[ $help == _ ]]; then shown+=("$value"); else shown+=("$value  -- $help"); fi ;;
      (dir) _path_files -/; return ;;
      (file) _files; return ;;
    esac
  done
  if (( ${#values} )); then
    compadd -U -l -d shown -a values
  else
    _files
  fi
}

if (( ${+compstate} )); then  # in a completion: autoloaded from fpath, as --install-completion sets up
  %(complete_func)s "$@"
else  # sourced
  compdef %(complete_func)s %(prog_name)s
fi
"""


def offerable(value: str) -> bool:
    """A candidate every shell's format carries as one visible word: nothing hidden in it."""
    if value.isascii():
        return value.isprintable()
    import unicodedata

    return all(unicodedata.category(ch) not in _HIDDEN and (ch == " " or not ch.isspace()) for ch in value)


def bash_word(value: str) -> str:
    """`value` as bash reads it back literally: a backslash before each character that could mean
    something to bash ($, `, quotes, ;, space, globs, braces, ~, #, !...). Non-ASCII letters mean
    nothing to it and stay as they are."""
    return "".join(ch if ch >= "\x80" or re.fullmatch(_BASH_LITERAL, ch) else "\\" + ch for ch in value)


def _scan(text: str, breaks: str) -> tuple[int, str, int]:
    """Shell quoting read left to right: where the last word-break character outside quotes (or
    escaped) leaves off, the quote still open at the end ('' if none), and where it opened."""
    start, quote, opened, escaped = 0, "", 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif quote:
            escaped = ch == "\\" and quote == '"'
            quote = "" if ch == quote else quote
        elif ch == "\\":
            escaped = True
        elif ch in "'\"":
            quote, opened = ch, i
        elif ch in breaks:
            start = i + 1
    return start, quote, opened


def word_start(line: str) -> int:
    """Where the shell word under the cursor starts in `line` (blanks inside quotes or after a
    backslash do not end a word)."""
    return _scan(line, " \t\n")[0]


def readline_word(typed: str, breaks: str) -> tuple[int, str]:
    """Where the text readline replaces starts in the shell word `typed`, and the quote it is in:
    after an unclosed quote, else after the last word-break character outside quotes."""
    start, quote, opened = _scan(typed, breaks)
    return (opened + 1, quote) if quote else (start, "")


def bash_quoted(value: str, quote: str) -> str | None:
    """`value` inside the quote the user opened (readline adds the closing one): None for a `!` in
    double quotes, which interactive bash expands from its history there."""
    if quote == "'":
        word = value.replace("'", "'\\''")
    elif "!" in value:
        return None
    else:
        word = re.sub(r'([\\$`"])', r"\\\1", value)
    return word + quote if word.endswith(quote) else word  # readline closes no quote after one


def zsh_dollar_quoted(value: str) -> str:
    """`value` as a zsh `$'...'` string of letters, digits and `\\xNN` escapes only: after the
    word splitting and `eval` of typer's old zsh script it is still exactly `value`."""
    return "$'" + "".join(chr(b) if chr(b).isalnum() and b < 0x80 else f"\\x{b:02x}"
                          for b in value.encode("utf-8")) + "'"


def pwsh_word(value: str) -> str | None:
    """`value` as PowerShell inserts it: bare, or in single quotes (verbatim there); None when it
    holds a quote character or the separator of typer's PowerShell format."""
    if re.fullmatch(_PWSH_BARE, value):
        return value
    if ":::" in value or any(q in value for q in _PWSH_QUOTES):
        return None
    return f"'{value}'"


def _help(text: str | None) -> str:
    from vmtune.escape import printable

    return printable(" ".join((text or "").split())) or "_"


def _plain(items: list[Any]) -> list[Any]:
    return [item for item in items if item.type == "plain" and offerable(item.value)]


def _wants_files(items: list[Any]) -> str | None:
    """'file' or 'dir' when click asks the shell to complete a path (a Path parameter)."""
    return next((item.type for item in items if item.type in ("file", "dir")), None)


class BashComplete(typer_classes.BashComplete):
    """bash splits COMP_WORDS at `:` and `=` too (COMP_WORDBREAKS): typer rebuilt the line from
    them, so `-c qemu+ssh://host/system` reached vmtune as `qemu+ssh`. The script passes the line
    itself; readline replaces only the end of the shell word (after its last `:` or `=`, or after
    an opening quote, which it closes), so the candidate is cut and quoted for that."""

    source_template = BASH_SCRIPT

    def get_completion_args(self) -> tuple[list[str], str]:
        line = os.environ.get(LINE_VAR)
        if line is None:  # typer's script, installed before, or the function called by hand
            return super().get_completion_args()
        start = word_start(line)
        tail = typer_classes.click_split_arg_string(line[start:]) if line[start:] else []
        return typer_classes.click_split_arg_string(line[:start])[1:], tail[0] if tail else ""

    def complete(self) -> str:
        line = os.environ.get(LINE_VAR, "")
        typed = line[word_start(line):]
        start, quote = readline_word(typed, os.environ.get(BREAKS_VAR, _BASH_BREAKS))
        kept = typed[:start]
        words = []
        for item in _plain(self.get_completions(*self.get_completion_args())):
            if quote:  # readline inserts after the quote the word opens with, and closes it
                word = bash_quoted(item.value, quote) if start == 1 else None
            else:
                word = bash_word(item.value)
                word = word[len(kept):] if word.startswith(kept) else None
            if word is not None:
                words.append(word)
        # A path parameter gives none: bash's `-o default` completes file names itself.
        return "\n".join(words)


class ZshComplete(typer_classes.ZshComplete):
    source_template = ZSH_SCRIPT

    def complete(self) -> str:
        items = self.get_completions(*self.get_completion_args())
        files = _wants_files(items)
        if os.environ.get(PROTOCOL_VAR) == "lines":
            if files:
                return files
            return "\n".join(f"plain\n{item.value}\n{_help(item.help)}" for item in _plain(items))
        # typer's script, installed before: it runs `eval $(output)`.
        values = [zsh_dollar_quoted(item.value) for item in _plain(items)]
        if files or not values:
            return "_path_files -/" if files == "dir" else "_files"
        return "compadd -U -- " + " ".join(values)


class FishComplete(typer_classes.FishComplete):
    def complete(self) -> str:
        items = self.get_completions(*self.get_completion_args())
        plain = [] if _wants_files(items) else _plain(items)
        if os.environ.get("_TYPER_COMPLETE_FISH_ACTION", "") == "is-args":
            sys.exit(0 if plain else 1)  # 1: fish completes file names itself
        return "\n".join(f"{item.value}\t{_help(item.help)}" if item.help else item.value for item in plain)


class PowerShellComplete(typer_classes.PowerShellComplete):
    def complete(self) -> str:
        items = self.get_completions(*self.get_completion_args())
        words = [(pwsh_word(item.value), item) for item in _plain(items)]
        return "\n".join(f"{word}:::{_help(item.help) if item.help else ' '}" for word, item in words if word)


_OURS: dict[str, type[Any]] = {"bash": BashComplete, "zsh": ZshComplete, "fish": FishComplete,
                               "powershell": PowerShellComplete, "pwsh": PowerShellComplete}
# What `--install-completion`/`--show-completion` write (fish and PowerShell: typer's scripts).
SCRIPTS = {"bash": BASH_SCRIPT, "zsh": ZSH_SCRIPT}


def register() -> None:
    """Our classes for typer's shells. Called by vmtune.cli's hook just before typer looks the
    class up: typer registers its own each time it builds the command (completion_init)."""
    for shell, cls in _OURS.items():
        typer_classes.add_completion_class(cls, shell)
