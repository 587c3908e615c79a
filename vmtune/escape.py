"""What came from input, made safe for each output: one function per kind of output.

Domain names, file names, attribute values and XPaths reach reports and error messages.
A domain `<name>` with a newline must not start a line of its own (a forged `== header`
or GitHub `::error` command), an ESC must not reach a terminal or a CI log that renders
ANSI sequences, a name must not hide characters (two domains that print alike are two
names that print differently), a CI runner must not take a name for one of its commands,
and a file name with bytes that are not UTF-8 (Python holds them as lone surrogates,
PEP 383) must neither crash an encoder nor make JSON or XML invalid.

- printable(): text for terminals and logs; every character str.isprintable() rejects
  (controls, line and paragraph separators, format characters such as bidi overrides, the
  zero-width space and joiners, the BOM, soft hyphen and tag characters; private-use and
  unassigned code points; spaces other than U+0020) and the printable ones that show nothing
  (Hangul fillers, variation selectors, the braille blank: _BLANK_CODES) become visible escapes
  (\\n, \\x1b, \\u200b, \\U000e0041, \\xff for an undecodable byte); backslash itself stays as
  it is. Then the CI runners' command syntax is neutralised (_uncommanded): `##[` anywhere
  shows as `\\x23#[` (and Azure's `##vso[` as `\\x23#vso[`), `::` where a line starts, after
  blanks, as `\\x3a:`. Both escapes name the character they replace, so a reader can undo them.
- visible(): printable() without the CI-command neutralisation, for the property values of
  vmtune's own GitHub commands (report/github.py): there `:` is `%3A` and the runner has taken
  the line for vmtune's command already, and a file name must stay the file's path.
- printable_block(): printable() for multi-line text (a diff, a report): newlines and tabs
  kept, every other character escaped as printable() does; `::` is neutralised at the start
  of each line.
- printable_patch(): printable_block() for a unified diff printed as a patch (`--diff`):
  carriage returns kept too, so the diff of a CRLF file still applies. A lone CR ends a line
  for the GitHub runner (.NET's ReadLine), so `::` after one is neutralised too.
- json_uncommanded(), xml_uncommanded(): a whole JSON or XML document with the CI runners'
  commands written as escapes of the format itself (`\\u0023`, `&#35;`, `&#58;`): a parser
  reads the true value, a runner reading the log finds no command.
- unicode_clean(): valid Unicode for JSON and SARIF: undecodable bytes become \\xNN text,
  everything else is kept (JSON escapes control characters itself; machine formats keep the
  true name, invisible characters included).
- xml_clean(): unicode_clean() plus the characters XML 1.0 cannot carry (C0 controls but
  tab, newline and carriage return; U+FFFE, U+FFFF) as visible escapes.
"""

from __future__ import annotations

import re

# Characters str.isprintable() accepts that show nothing: the Default_Ignorable_Code_Point ones
# that are letters or marks (combining grapheme joiner U+034F, Hangul fillers U+115F, U+1160,
# U+3164, U+FFA0, Khmer inherent vowels U+17B4-U+17B5, Mongolian free variation selectors,
# variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF) and the braille blank U+2800, a
# favourite for names that look empty. Every other default-ignorable character is Cf or Cn,
# which isprintable() rejects. A frozenset built on the first name that is not ASCII (~0.08 ms,
# not at every start): `isdisjoint` scans a name in C.
_BLANK_CODES = (0x34F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0,
                (0xFE00, 0xFE10), (0xE0100, 0xE01F0))
_blanks: frozenset[str] = frozenset()


def _blank_set() -> frozenset[str]:
    global _blanks  # built once, on first use
    if not _blanks:
        _blanks = frozenset(chr(code) for item in _BLANK_CODES
                            for code in (range(*item) if isinstance(item, tuple) else (item,)))
    return _blanks


# The CI runners' commands in output. GitHub's runner (actions/runner ActionCommand.TryParse)
# takes `##[name]` anywhere in a line, Azure Pipelines' agent `##vso[`; TryParseV2 takes `::name::`
# at the start of a line after String.TrimStart(). Of the characters .NET trims, only space and
# tab are left raw by the escaping (the others are controls or Z* separators, escaped), and
# lines end at LF, CR or CRLF. The first character of the marker is shown as its escape.
_HASH_COMMAND = r"(?i)#(?=#(?:vso)?\[)"
_COLON_COMMAND = r"(?:\A|(?<=[\n\r]))([ \t]*):(?=:)"
# Kept as pattern text, compiled by `re` on first use and cached there: compiling these
# character classes costs ~1 ms at every start, and text that str.isprintable() accepts (the
# common case, a scan in C) contains none of them, so most runs never compile one.
_SURROGATE = "[\ud800-\udfff]"
_NOT_XML = "[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]"
# The ASCII characters to escape in lines (printable_block, printable_patch): controls but tab
# and newline (and carriage return).
_ASCII_CONTROLS = {"\t": "[\x00-\x08\x0b-\x1f\x7f]", "\t\r": "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"}
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"  # a tag character, U+E0041: not \ue0041, which reads as U+E004 and a 1


def _plain(text: str) -> bool:
    """Nothing to escape in a line: the common case, decided by scans in C."""
    return text.isprintable() and (text.isascii() or _blank_set().isdisjoint(text))


def _shown(line: str, kept: str) -> str:
    """Every character of a line that would not show as itself, but those in `kept`, as an escape."""
    blanks = _blank_set()
    return "".join(char if (char.isprintable() or char in kept) and char not in blanks else _escape(char)
                   for char in line)


def _visible_lines(text: str, kept: str) -> str:
    """_shown for lines: newlines and the characters in `kept` (tab; carriage return) kept."""
    if text.isascii():  # O(1): then the only characters to escape are ASCII controls, one regex scan
        pattern = _ASCII_CONTROLS[kept]
        return text if re.search(pattern, text) is None else re.sub(pattern, lambda m: _escape(m.group()), text)
    probe = text.replace("\n", "")
    for char in kept:
        probe = probe.replace(char, "")
    if probe.isprintable() and _blank_set().isdisjoint(text):  # scans in C, not a loop over lines
        return text
    lines = text.split("\n")
    for index, line in enumerate(lines):
        probe = line
        for char in kept:  # printable here, not to str.isprintable()
            probe = probe.replace(char, "")
        if not _plain(probe):
            lines[index] = _shown(line, kept)
    return "\n".join(lines)


def _uncommanded(text: str) -> str:
    """Text in which no CI runner finds a command: see _HASH_COMMAND and _COLON_COMMAND."""
    if "##" in text:
        text = re.sub(_HASH_COMMAND, r"\\x23", text)
    if "::" in text:
        text = re.sub(_COLON_COMMAND, r"\1\\x3a", text)
    return text


def visible(text: str) -> str:
    """One line with nothing invisible: every character that would not show as itself escaped."""
    return text if _plain(text) else _shown(text, "")


def printable(text: str) -> str:
    """Text safe to print on a terminal or in a log line: one line, nothing invisible, no CI
    command (a name that begins a line of output begins with `\\x3a:`, never `::`)."""
    if not (text.isprintable() and (text.isascii() or (_blanks or _blank_set()).isdisjoint(text))):  # _plain
        text = _shown(text, "")
    if "##" in text:  # rare: the regex is compiled only then
        text = re.sub(_HASH_COMMAND, r"\\x23", text)
    if text.startswith((" ", ":")) and text.lstrip(" ").startswith("::"):  # one line starts only here (tab: \\t)
        blanks = len(text) - len(text.lstrip(" "))
        text = f"{text[:blanks]}\\x3a{text[blanks + 1:]}"
    return text


def printable_block(text: str) -> str:
    """Lines safe to print on a terminal: its own newlines and tabs (diff indentation) kept,
    nothing else invisible (an ESC in a domain name or attribute value shows as \\x1b), and
    no line a CI runner takes for a command."""
    return _uncommanded(_visible_lines(text, "\t"))


def printable_patch(text: str) -> str:
    """A unified diff safe to print and to read in a CI log: printable_block() that keeps carriage
    returns too, so the diff of a CRLF or tab-indented file is still a patch that `patch` and `git
    apply` take. Only a file that contains an escaped character (a C1 control or a bidi override in
    a description, a zero-width space, `##[` or a line that starts with `::`) gives a diff to read,
    not to apply: its lines show `\\x9b` or `\\x23#[`, not what the file holds."""
    return _uncommanded(_visible_lines(text, "\t\r"))


def json_uncommanded(document: str) -> str:
    """A JSON document (json, sarif) in which no CI runner finds a command, and that parses to the
    same value: `##[` in a string is written `\\u0023#[` (`#` is never part of a JSON escape, so
    any `##[` is inside a string). No line of JSON starts with `::`: strings hold no raw newline."""
    return re.sub(_HASH_COMMAND, r"\\u0023", document) if "##" in document else document


def xml_uncommanded(document: str) -> str:
    """The same for the XML vmtune serialises (junit: elements, attributes and text, no comments
    or CDATA): `##[` as `&#35;#[`, and `::` that starts a line of text (a file name with a
    newline) as `&#58;:`; lxml writes a newline in an attribute as `&#10;` already."""
    if "##" in document:
        document = re.sub(_HASH_COMMAND, "&#35;", document)
    if "::" in document:
        document = re.sub(_COLON_COMMAND, r"\1&#58;", document)
    if not document.isprintable():  # a tab, DEL or C1 control (CSI \x9b) of a name: as references, inert
        document = re.sub("[\t\x7f-\x9f]", lambda m: f"&#{ord(m.group())};", document)
    return document


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


def xml_comment(text: str) -> str:
    """One line of text to put inside an XML comment `<!-- ... -->` that a terminal shows and a
    parser keeps a comment: printable() (nothing invisible, no CI command, no newline), then no
    `--` (a comment may not hold it; `-->` would end it) and no `-` at its end (`--->`): such a
    hyphen is written `\\x2d`, like printable()'s other escapes."""
    text = printable(text)
    if "-" not in text:
        return text
    text = re.sub("-(?=-)", r"\\x2d", text)
    return text[:-1] + "\\x2d" if text.endswith("-") else text


def xml_visible(document: str) -> str:
    """An XML document vmtune made (elements, attributes and text; no comments, CDATA or processing
    instructions) to print on a terminal: every character printable() would escape (a C1 control,
    a bidi override, a zero-width space from a manifest's name) but newline and tab written as its
    character reference, which parses to the same document, then xml_uncommanded()."""
    if not _plain(document.replace("\n", "").replace("\t", "")):
        blanks = _blank_set()
        document = "".join(char if char in "\n\t" or (char.isprintable() and char not in blanks)
                           else f"&#x{ord(char):x};" for char in document)
    return xml_uncommanded(document)
