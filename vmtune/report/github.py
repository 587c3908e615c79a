"""GitHub Actions workflow commands: one annotation per finding.

`::error file=F,line=N,title=T::MESSAGE` is one line of the job log, parsed by the runner:
everything from input goes through _data (the message) or _prop (property values) so that
no name can end the line (and forge a command on the next one) or a property, no ESC
reaches a log viewer that renders ANSI sequences, and no invisible character hides in a name.
A message shows input as text output does (`##[` as `\\x23#[`); a property keeps the file's
path: its `:` is `%3A`, and the runner, having parsed the line as vmtune's `::error`, does
not look for a `##[` command in it (actions/runner ActionCommandManager.TryProcessCommand).
"""

from __future__ import annotations

from vmtune.escape import printable, visible
from vmtune.report.model import Report
from vmtune.rules.base import Severity

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _data(text: str) -> str:
    """The runner's own escapes (actions/toolkit escapeData) for %, CR and LF, then every other
    control character as a visible escape (the runner would pass it on)."""
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _prop(text: str) -> str:
    """escapeProperty: also : and , which end a property. A `##[` (a command to the runner
    anywhere in a line of other tools) shows as `\x23#[`, as in every format: that one file's
    annotation then names a path that does not exist, and the log carries no `##[`."""
    shown = visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))
    if "##" in shown:
        shown = printable(shown)
    return shown.replace(":", "%3A").replace(",", "%2C")


def render(report: Report) -> str:
    lines = []
    for result in report.results:
        for f in result.findings:
            where = f"file={_prop(result.source)},line={f.line or 1}," if result.host is None else ""
            message = f.message + (f" ({f.note})" if f.note else "")
            lines.append(f"::{COMMANDS[f.severity]} {where}title={_prop(f'{f.rule.code} {f.rule.name}')}"
                         f"::{_data(f'{result.domain_name}: {message}')}")
    for error in report.errors:  # an input that could not be checked is an error annotation, not silence
        where = f"file={_prop(error.source)},line={error.line or 1}," if error.source and error.source != "<stdin>" \
            else ""
        lines.append(f"::error {where}title=vmtune input error::{_data(error.message)}")
    return "\n".join(lines) + ("\n" if lines else "")
