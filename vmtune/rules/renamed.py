"""Rule codes that were renamed, old -> new: an old code still selects, ignores and suppresses
the rule it became, and each use says so once (as ruff redirects its renamed rules). A code is
never reused for another rule. Empty while no rule has been renamed; a rename adds its line here
and a CHANGELOG entry."""

from __future__ import annotations

RENAMED: dict[str, str] = {}


def current(selector: str) -> str:
    """The code a selector stands for now (itself unless it is a renamed code)."""
    return RENAMED.get(selector, selector)


def note_renamed(selectors: tuple[str, ...] | list[str], where: str = "") -> None:
    """One warning per renamed code used (`where`: the file, for a configuration or a comment)."""
    if not RENAMED:
        return
    from vmtune.errors import warn

    for selector in selectors:
        new = RENAMED.get(selector)
        if new is not None:
            warn(f"{where + ': ' if where else ''}{selector} is now {new}: read as {new} (write {new})")
