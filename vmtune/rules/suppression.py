"""Rules about suppressions themselves (their findings are made by the engine)."""

from __future__ import annotations

from collections.abc import Iterator

from vmtune.facts.domain import Domain
from vmtune.rules.base import Context, Finding, Rule, Severity


class SuppressionWithoutReason(Rule):
    """
    ## What it checks
    A `vmtune: ignore[...]` comment or `<vmtune:ignore>` metadata element without a
    `reason`.

    ## Why it matters
    A suppression hides a finding from everyone who reads the report later; without a
    reason nobody can tell a deliberate exception from a shortcut, or know when it may go.

    ## Example
    ```xml
    <!-- vmtune: ignore[CLK003] -->
    <clock offset='utc'/>
    ```

    ## Fix
    None: add `reason="..."`.

    ## Calibration
    Warning: a suppression without a reason hides a finding without saying why, which
    the linter conventions treat as a defect of the file.
    Versions: none; a convention of vmtune's files, not of libvirt.

    ## References
    - README, section Suppressions
    """

    code = "SUP001"
    name = "suppression-without-reason"
    severity = Severity.WARNING
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


class UnusedSuppression(Rule):
    """
    ## What it checks
    A suppression that matched no finding of a rule that ran.

    ## Why it matters
    The problem it hid was fixed (or never there): the stale suppression would silently
    hide the next real finding in that element.

    ## Example
    ```xml
    <!-- vmtune: ignore[NET001] reason="single queue wanted" -->
    <interface type='bridge'><model type='virtio'/><driver queues='4'/></interface>
    ```

    ## Fix
    None: delete the suppression.

    ## Calibration
    Warning: an unused suppression would hide a future finding nobody reviewed.
    Versions: none; a convention of vmtune's files, not of libvirt.

    ## References
    - ruff's unused-noqa rule (RUF100)
    """

    code = "SUP002"
    name = "unused-suppression"
    severity = Severity.WARNING
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


class InvalidSuppression(Rule):
    """
    ## What it checks
    A suppression that cannot work: a comment that starts with `vmtune:` but does not parse
    (`vmtune:ignore [CLK003]`, a missing bracket), one whose selectors name no rule
    (`ignore[NET999]`, `ignore-file[DKS]`), or a `<vmtune:ignore xpath=...>` whose XPath is
    outside the linear-time subset vmtune evaluates (`count()`, `document()`, a `..` step;
    SECURITY.md), beyond the 16 XPath suppressions evaluated per domain, or past what is
    left of the domain's XPath budget after the custom checks (a very large domain).

    ## Why it matters
    A typo in a suppression suppresses nothing and says nothing: the author believes the
    finding is handled, and a reviewer believes there was a reason.

    ## Example
    ```xml
    <!-- vmtune: ignore[NET999] reason="single queue wanted" -->
    ```

    ## Fix
    None: correct the code, prefix or name (`vmtune rules` lists them), the syntax
    `<!-- vmtune: ignore[CODE,...] reason="..." -->`, or the XPath (the `xpath` vmtune
    reports for a finding is always in the subset).

    ## Calibration
    Warning: the suppression the author wrote is not in effect, which the linter
    conventions (ruff's RUF100/PGH004) treat as a defect of the file.
    Versions: none; a convention of vmtune's files, not of libvirt.

    ## References
    - README, section Suppressions
    """

    code = "SUP003"
    name = "invalid-suppression"
    severity = Severity.WARNING
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


SUPPRESSION_WITHOUT_REASON = SuppressionWithoutReason()
UNUSED_SUPPRESSION = UnusedSuppression()
INVALID_SUPPRESSION = InvalidSuppression()
RULES: list[Rule] = [SUPPRESSION_WITHOUT_REASON, UNUSED_SUPPRESSION, INVALID_SUPPRESSION]
