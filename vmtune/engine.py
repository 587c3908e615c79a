"""Running the enabled rules over one domain: pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from vmtune.errors import VmtuneError
from vmtune.facts.domain import Domain, OsFamily
from vmtune.facts.host import Host
from vmtune.policy.model import PolicySet, RuleConfig, apply_cli_selection
from vmtune.rules.base import Context, Finding


@dataclass
class CheckOptions:
    policy: PolicySet
    host: Host | None = None
    os_override: OsFamily | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    domain_ignores: dict[str, list[str]] = field(default_factory=dict)  # name glob -> selectors


def apply_suppressions(domain: Domain, findings: list[Finding], config: dict[str, RuleConfig]) -> list[Finding]:
    """Drop suppressed findings; report suppressions without a reason or that matched nothing."""
    from vmtune.policy.model import selector_matches
    from vmtune.rules.suppression import SUPPRESSION_WITHOUT_REASON, UNUSED_SUPPRESSION
    from vmtune.suppress import collect, covers

    suppressions = collect(domain)
    if not suppressions:
        return findings
    kept = []
    for finding in findings:
        hit = next((s for s in suppressions if covers(s.scope, finding.element)
                    and any(selector_matches(sel, finding.rule) for sel in s.selectors)), None)
        if hit is None:
            kept.append(finding)
        else:
            hit.used.add(finding.rule.code)
    for s in suppressions:
        label = ",".join(s.selectors) or "(nothing)"
        if SUPPRESSION_WITHOUT_REASON.code in config and not s.reason:
            kept.append(SUPPRESSION_WITHOUT_REASON.finding(domain, s.origin, f"suppression of {label} gives no reason"))
        # Only judge suppressions of rules that ran: an ignore for a rule the policy disabled is not "unused".
        ran = any(selector_matches(sel, r) for sel in s.selectors for r in _rules_enabled(config))
        if UNUSED_SUPPRESSION.code in config and not s.used and ran:
            kept.append(UNUSED_SUPPRESSION.finding(domain, s.origin, f"suppression of {label} matched no finding"))
    return kept


def _rules_enabled(config: dict[str, RuleConfig]):  # type: ignore[no-untyped-def]
    from vmtune.rules import BY_CODE

    return [BY_CODE[c] for c in config if c in BY_CODE]


def enabled_rules(domain: Domain, options: CheckOptions) -> dict[str, RuleConfig]:
    import fnmatch

    config = options.policy.resolve(domain)
    ignore = list(options.ignore)
    for pattern, selectors in options.domain_ignores.items():
        if fnmatch.fnmatchcase(domain.name, pattern):
            ignore += selectors
    return apply_cli_selection(config, options.policy.rules, options.select, ignore)


def check_domain(domain: Domain, options: CheckOptions) -> list[Finding]:
    config = enabled_rules(domain, options)
    findings: list[Finding] = []
    for rule in options.policy.rules:
        rule_config = config.get(rule.code)
        if rule_config is None or rule.engine_driven or not rule.applies(domain, options.host):
            continue
        ctx = Context(options.host, rule_config.params)
        try:
            for finding in rule.check(domain, ctx):
                if rule_config.severity is not None:
                    finding.severity = rule_config.severity
                findings.append(finding)
        except VmtuneError:
            raise
        except Exception as exc:  # a rule bug must not hide the other findings behind a traceback
            raise VmtuneError(f"internal error in rule {rule.code} ({type(exc).__name__}: {exc})",
                              domain.source) from exc
    findings = apply_suppressions(domain, findings, config)
    if domain.manager:
        from vmtune.managers import advice

        for finding in findings:
            hint = advice(domain.manager, finding.rule.code)
            finding.note = f"{hint}; {finding.note}" if finding.note else hint
    findings.sort(key=lambda f: (f.line or 0, f.rule.code))
    return findings
