"""Whether the text report is coloured: shared by the fast path and the typer CLI."""

from __future__ import annotations

import os
import sys


def use_color(choice: str = "auto", output_format: str = "text", to_file: bool = False) -> bool:
    """--color always/never; auto colours a terminal, where NO_COLOR turns it off and FORCE_COLOR
    on (https://no-color.org, https://force-color.org). Machine formats and files never."""
    if output_format != "text" or to_file or choice == "never":
        return False
    if choice == "always":
        return True
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()
