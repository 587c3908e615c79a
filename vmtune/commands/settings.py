"""`vmtune show-settings PATH`: which configuration applies and what it resolves to."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from vmtune.errors import VmtuneError
from vmtune.request import CheckRequest, OptionsResolver


def run_show_settings(path: Path, config: Path | None, isolated: bool) -> int:
    try:
        resolver = OptionsResolver(CheckRequest(paths=[str(path)], config=config, isolated=isolated))
        settings = resolver.settings_for(path)
        is_file = os.path.isfile(path)  # False, not OSError, for a name too long to look up
        options = resolver.options_for(settings, str(path) if is_file else None)
        data = settings.as_dict()
        data["excluded"] = is_file and settings.excluded(path)
        data["policy_chain"] = options.policy.names
        data["custom_checks"] = [r.code for r in options.policy.rules if r.area == "X"]
        data["ignore_for_path"] = options.ignore
    except VmtuneError as exc:
        print(f"vmtune: {exc}", file=sys.stderr)
        return 2
    from vmtune.escape import json_uncommanded

    print(json_uncommanded(json.dumps(data, indent=2)))  # a configuration's globs and names: no CI command
    return 0
