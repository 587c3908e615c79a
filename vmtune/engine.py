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


def enabled_rules(domain: Domain, options: CheckOptions) -> dict[str, RuleConfig]:
    config = options.policy.resolve(domain)
    return apply_cli_selection(config, options.policy.rules, options.select, options.ignore)


def check_domain(domain: Domain, options: CheckOptions) -> list[Finding]:
    config = enabled_rules(domain, options)
    findings: list[Finding] = []
    for rule in options.policy.rules:
        rule_config = config.get(rule.code)
        if rule_config is None or not rule.applies(domain, options.host):
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
    if domain.manager:
        from vmtune.managers import advice

        for finding in findings:
            hint = advice(domain.manager, finding.rule.code)
            finding.note = f"{hint}; {finding.note}" if finding.note else hint
    findings.sort(key=lambda f: (f.line or 0, f.rule.code))
    return findings
