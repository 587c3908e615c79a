"""What a finding is about, without line numbers, and its fingerprint: how baselines and SARIF
know a finding again after the file around it changed. Apart from the format dispatcher
(vmtune.report), which imports the formats that use it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmtune.rules.base import Finding


def identity(finding: Finding) -> str:
    """What a finding is about, without line numbers: rule, domain (UUID or name), element path."""
    domain = finding.domain.uuid or finding.domain.name
    return f"{finding.rule.code}|{domain}|{finding.xpath}"


def fingerprint(finding: Finding) -> str:
    global _sha256
    if _sha256 is None:
        _sha256 = _builtin_sha256()
    return _sha256(identity(finding).encode()).hexdigest()[:32]


_sha256: Callable[[bytes], Any] | None = None


def _builtin_sha256() -> Callable[[bytes], Any]:
    """SHA-256 from CPython's built-in module: `import hashlib` loads OpenSSL (~3.5 ms, a tenth
    of a one-file `check -f sarif`) for the same digest; hashlib where the module is missing.
    Not at the top: the text report does not need it."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found,no-redef]  # Python 3.11
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment]
    return sha256  # type: ignore[no-any-return]
