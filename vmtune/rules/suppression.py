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

    ## References
    - ruff's unused-noqa rule (RUF100)
    """

    code = "SUP002"
    name = "unused-suppression"
    severity = Severity.WARNING
    engine_driven = True

    def check(self, domain: Domain, ctx: Context) -> Iterator[Finding]:
        return iter(())


SUPPRESSION_WITHOUT_REASON = SuppressionWithoutReason()
UNUSED_SUPPRESSION = UnusedSuppression()
RULES: list[Rule] = [SUPPRESSION_WITHOUT_REASON, UNUSED_SUPPRESSION]
