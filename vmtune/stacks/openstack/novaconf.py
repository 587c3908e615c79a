"""Edits of nova.conf that keep every other byte: set an option in a section.

nova.conf is oslo.config INI; a fix changes one option's value where it is written (the last
occurrence, the one oslo.config uses), or adds `option = value` at the end of its section (after
the section's last non-blank line), or appends the section. Line endings, comments, blank lines
and the other options stay as they were.
"""

from __future__ import annotations

from vmtune.errors import VmtuneError


def _section_of(line: str) -> str | None:
    stripped = line.strip()
    if stripped.startswith("[") and stripped.endswith("]") and len(stripped) > 2:
        name = stripped[1:-1].strip()
        return name if name == "DEFAULT" else name.lower()
    return None


def _option_of(line: str) -> str | None:
    if not line.strip() or line[0] in " \t#;[":
        return None
    stripped = line.strip()
    sep = min((i for i in (stripped.find("="), stripped.find(":")) if i > 0), default=-1)
    return stripped[:sep].strip() if sep > 0 else None


def set_option(data: bytes, section: str, option: str, value: object) -> bytes:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise VmtuneError("nova.conf is not UTF-8: not edited") from None
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
    value_text = str(value).lower() if isinstance(value, bool) else str(value)
    if "\n" in value_text or "\r" in value_text:
        raise VmtuneError(f"a nova.conf value cannot hold a line break: [{section}] {option}")
    from vmtune.stacks.openstack.inputs import ini_lines

    lines = ini_lines(text, keepends=True)  # where oslo.config's lines end, as the reader splits them
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    want = section if section == "DEFAULT" else section.lower()
    current: str | None = None
    found_at: int | None = None
    section_last: int | None = None  # index of the section's last non-blank, non-comment line
    header_at: int | None = None
    for index, line in enumerate(lines):
        name = _section_of(line)
        if name is not None:
            current = name
            if name == want and header_at is None:
                header_at = index
                section_last = index
            continue
        if current != want:
            continue
        if _option_of(line) == option:
            found_at = index
        if line.strip() and not line.lstrip().startswith(("#", ";")):
            section_last = index
    if found_at is not None:
        old = lines[found_at]
        ending = old[len(old.rstrip("\r\n")):]
        body = old.rstrip("\r\n")
        sep = min((i for i in (body.find("="), body.find(":")) if i > 0), default=-1)
        head = body[:sep + 1]
        spacing = " " if body[sep + 1:sep + 2] == " " else ""
        lines[found_at] = f"{head}{spacing}{value_text}{ending}"
        # continuation lines of the old value belong to it: drop them
        nxt = found_at + 1
        while nxt < len(lines) and lines[nxt][:1] in (" ", "\t") and lines[nxt].strip():
            del lines[nxt]
    elif section_last is not None:
        at = section_last
        while at + 1 < len(lines) and lines[at + 1][:1] in (" ", "\t") and lines[at + 1].strip():
            at += 1  # after a continued value
        if not lines[at].endswith(("\n", "\r")):
            lines[at] += newline
        lines.insert(at + 1, f"{option} = {value_text}{newline}")
    else:
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += newline
        lead = newline if lines and lines[-1].strip() else ""
        lines.append(f"{lead}[{section}]{newline}{option} = {value_text}{newline}")
    return (bom + "".join(lines)).encode()


def set_options(data: bytes, plan: list[tuple[tuple[str | int, ...], object]]) -> bytes:
    """Apply ((section, option), value) settings in order (the frontend's SourceEdit paths)."""
    for path, value in plan:
        if len(path) != 2:
            raise VmtuneError(f"a nova.conf setting is (section, option), not {path!r}")
        data = set_option(data, str(path[0]), str(path[1]), value)
    return data


def set_paths(data: bytes, plan: list[tuple[int, tuple[str | int, ...], object]], name: str) -> bytes:
    """The front end's editor (vmtune.stacks.registry): ((section, option), value) settings of the
    edits' plan; nova.conf has no documents, so the document index is not read."""
    return set_options(data, [(path, value) for _doc, path, value in plan])
