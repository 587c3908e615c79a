"""Baselines for adopting vmtune on a legacy repo: record today's findings, report only new ones.

Findings are keyed by rule, domain (UUID, else name) and element path, never by line, so
edits elsewhere in a file do not resurrect baselined findings.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from vmtune.errors import VmtuneError
from vmtune.report.identify import identity
from vmtune.report.model import SourceResult

VERSION = 1


def write_baseline(path: Path, identities: list[str]) -> int:
    """Write the baseline; the number of entries (one per distinct finding identity)."""
    counts = Counter(identities)
    entries = []
    for key, count in sorted(counts.items()):
        rule, domain, xpath = key.split("|", 2)
        entries.append({"rule": rule, "domain": domain, "xpath": xpath, "count": count})
    from vmtune.fileio import write_output

    write_output(path, (json.dumps({"version": VERSION, "findings": entries}, indent=2) + "\n").encode(), "baseline")
    return len(entries)


MAX_BASELINE_BYTES = 64 * 1024 * 1024  # ~400,000 findings

# The shape of a baseline, checked on the text before json.loads builds anything: an object
# of at most 8 scalar members and one list of flat objects of at most 8 scalar members each.
# The decoder's objects are many times the size of the text: 64 MiB of `[],` became 1.7 GB of
# lists (18 s) before being refused. One regular expression without backtracking: possessive
# repeats of single characters; each repeat of a group possessive, (?:...)*+, where the
# interpreter gets those right, else a greedy one inside an atomic group, (?>(?:...)*). CPython
# before 3.11.5 (Debian 12's python3.11 is 3.11.2) went on from where a possessive group's
# failing repeat stopped, not from where that repeat began (gh-106052): `(?:"a",){0,7}+"f"` did
# not match `"f"`, and every baseline was refused as "not a vmtune baseline". From 3.11.5 the
# two match alike, not at the same cost: sre's greedy group repeat keeps a backtracking frame a
# repeat until the atomic group ends (~60 bytes: 64 MiB of `\"` in one string took 2 GB), a
# possessive one none.
_POSSESSIVE_GROUPS = sys.version_info >= (3, 11, 5)
# Before 3.11.5 those frames are bounded instead: one per entry (the list's repeat) and per
# escape of the string being matched (each string's repeat ends with it), so at most one per `{`
# and `\`. A million is ~60 MB; a baseline of 64 MiB holds ~400,000 entries.
_MAX_FRAMES = 1_000_000
_WS = rb"[ \t\n\r]*+"


def _atomic(group: bytes, repeat: bytes) -> bytes:
    if _POSSESSIVE_GROUPS:
        return rb"(?:" + group + rb")" + repeat + rb"+"
    return rb"(?>(?:" + group + rb")" + repeat + rb")"


_STRING = rb'"[^"\\]*+' + _atomic(rb'\\.[^"\\]*+', rb"*") + rb'"'
_SCALAR = rb"(?:" + _STRING + rb"|-?[0-9][0-9.eE+-]*+|true|false|null)"
_MEMBER = _WS + _STRING + _WS + rb":" + _WS + _SCALAR + _WS
_ENTRY = rb"\{" + _MEMBER + _atomic(rb"," + _MEMBER, rb"{0,7}") + rb"\}"
_SHAPE = re.compile(_WS + rb"\{" + _atomic(_MEMBER + rb",", rb"{0,7}") + _WS + rb'"findings"' + _WS + rb":" + _WS
                    + rb"\[" + _WS + _atomic(_ENTRY + _WS + _atomic(rb"," + _WS + _ENTRY + _WS, rb"*"), rb"?")
                    + rb"\]" + _WS + _atomic(rb"," + _MEMBER, rb"{0,7}") + rb"\}" + _WS)
# A run of 64 KiB without a quote is inside a string: no rule code, domain name or element path
# is that long, and one string of 64 MiB with one character outside Latin-1 decodes to 256 MB.
_LONG = re.compile(rb'[^"]{65536}')
_DEEP = re.compile(rb"[\[{]" + _WS + rb"[\[{]" + _WS + rb"[\[{]")  # only to say why a file is refused


class BaselineFilter:
    """Drops findings recorded in a baseline, as many times as it recorded them."""

    def __init__(self, path: Path) -> None:
        from vmtune.inputs import read_bytes

        data = read_bytes(path, str(path), "baseline", MAX_BASELINE_BYTES)
        if not _POSSESSIVE_GROUPS and data.count(b"{") + data.count(b"\\") > _MAX_FRAMES:
            raise VmtuneError(f"cannot read baseline: more than {_MAX_FRAMES:,} entries and escapes, more than "
                              f"Python {sys.version.split()[0]} (before 3.11.5) checks in bounded memory", str(path))
        if _LONG.search(data) or not _SHAPE.fullmatch(data):
            if _DEEP.search(data, 0, 65536):
                raise VmtuneError("cannot read baseline: not a vmtune baseline (nested too deeply)", str(path))
            raise _not_a_baseline(path)
        self.allowed: Counter[str] = Counter()
        try:
            # Each entry is counted as the decoder closes it and not kept: memory is that of
            # the distinct identities, not of a dict per entry.
            document = json.loads(data, object_pairs_hook=self._entry)
        except ValueError as exc:  # JSONDecodeError says where, never what
            line = getattr(exc, "lineno", None)
            if line is None:
                raise _not_a_baseline(path) from None
            raise VmtuneError("cannot read baseline: not JSON", str(path), line) from None
        if not isinstance(document, dict) or not isinstance(document.get("findings"), list):
            raise _not_a_baseline(path)

    def _entry(self, pairs: list[tuple[str, object]]) -> object:
        entry = dict(pairs)
        if isinstance(entry.get("findings"), list):  # the top level: its list holds the Nones returned below
            return entry
        try:
            key = f"{entry['rule']}|{entry['domain']}|{entry['xpath']}"
        except KeyError:
            raise ValueError("entry") from None
        allowed = self.allowed
        allowed[key] = allowed.get(key, 0) + _count(entry.get("count", 1))  # listed twice: both counts
        return None

    def __call__(self, result: SourceResult) -> None:
        kept = []
        for finding in result.findings:
            key = identity(finding)
            if self.allowed[key] > 0:
                self.allowed[key] -= 1
            else:
                kept.append(finding)
        result.findings = kept


def _not_a_baseline(path: Path) -> VmtuneError:
    # Not a baseline vmtune wrote; say so without quoting it (it may be any file).
    return VmtuneError("cannot read baseline: not a vmtune baseline (written by --write-baseline)", str(path))


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("count")
    return value
