"""What came from input, made safe for each output: one function per kind of output.

Domain names, file names, attribute values and XPaths reach reports and error messages.
A domain `<name>` with a newline must not start a line of its own (a forged `== header`
or GitHub `::error` command), an ESC must not reach a terminal or a CI log that renders
ANSI sequences, and a file name with bytes that are not UTF-8 (Python holds them as lone
surrogates, PEP 383) must neither crash an encoder nor make JSON or XML invalid.

- printable(): text for terminals and logs; control characters, line and paragraph
  separators, bidirectional overrides and undecodable bytes become visible escapes
  (\\n, \\x1b, \\u202e, \\xff), backslash itself stays as it is.
- printable_block(): printable() for multi-line text (a diff, a report): newlines and tabs
  kept, every other control character escaped.
- printable_patch(): printable_block() for a unified diff printed as a patch (`--diff`):
  carriage returns kept too, so the diff of a CRLF file still applies.
- unicode_clean(): valid Unicode for JSON and SARIF: undecodable bytes become \\xNN text,
  everything else is kept (JSON escapes control characters itself).
- xml_clean(): unicode_clean() plus the characters XML 1.0 cannot carry (C0 controls but
  tab, newline and carriage return; U+FFFE, U+FFFF) as visible escapes.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, line/paragraph separators, bidi marks and embedding/override/isolate
# controls (the "Trojan Source" characters: U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069),
# and lone surrogates (undecodable bytes). Kept as pattern text, compiled by `re` on first use and
# cached there: compiling these character classes costs ~1 ms at every start, and text that
# str.isprintable() accepts (the common case, a scan in C) contains none of them, so most runs
# never compile one.
_INVISIBLE = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNPRINTABLE = f"[\x00-\x1f{_INVISIBLE}]"
_UNPRINTABLE_IN_BLOCK = f"[\x00-\x08\x0b-\x1f{_INVISIBLE}]"  # but tab and newline
_UNPRINTABLE_IN_PATCH = f"[\x00-\x08\x0b\x0c\x0e-\x1f{_INVISIBLE}]"  # but tab, newline and carriage return
_SURROGATE = "[\ud800-\udfff]"
_NOT_XML = "[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(text: str) -> str:
    """Text safe to print on a terminal or in a log line: one line, nothing invisible."""
    if text.isprintable() or re.search(_UNPRINTABLE, text) is None:  # the common case: one scan in C
        return text
    return re.sub(_UNPRINTABLE, lambda m: _escape(m.group()), text)


def printable_block(text: str) -> str:
    """Lines safe to print on a terminal: its own newlines and tabs (diff indentation) kept,
    nothing else invisible (an ESC in a domain name or attribute value shows as \\x1b)."""
    if text.isprintable() or re.search(_UNPRINTABLE_IN_BLOCK, text) is None:
        return text
    return re.sub(_UNPRINTABLE_IN_BLOCK, lambda m: _escape(m.group()), text)


def printable_patch(text: str) -> str:
    """A unified diff safe to print and to read in a CI log: printable_block() that keeps carriage
    returns too, so the diff of a CRLF or tab-indented file is still a patch that `patch` and `git
    apply` take. Only a file that contains an escaped character (a C1 control or a bidi override in
    a description) gives a diff to read, not to apply: its lines show `\\x9b`, not the byte."""
    if text.isprintable() or re.search(_UNPRINTABLE_IN_PATCH, text) is None:
        return text
    return re.sub(_UNPRINTABLE_IN_PATCH, lambda m: _escape(m.group()), text)


def unicode_clean(text: str) -> str:
    """Text every UTF-8 encoder accepts: undecodable file-name bytes shown as \\xNN."""
    if text.isprintable() or re.search(_SURROGATE, text) is None:
        return text
    return re.sub(_SURROGATE, lambda m: _escape(m.group()), text)


def xml_clean(text: str) -> str:
    """Text XML 1.0 can carry (attribute or element content)."""
    if text.isprintable() or re.search(_NOT_XML, text) is None:
        return text
    return re.sub(_NOT_XML, lambda m: _escape(m.group()), text)
