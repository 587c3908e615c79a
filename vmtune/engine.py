"""Running the enabled rules over one domain: pure, no I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lxml import etree

from vmtune.errors import VmtuneError
from vmtune.facts.domain import Domain
from vmtune.facts.guestos import OsFamily
from vmtune.policy.model import PolicySet, RuleConfig, apply_cli_selection
from vmtune.rules.base import Context, Finding, Rule, Severity

if TYPE_CHECKING:
    from collections.abc import Callable

    from vmtune.facts.host import Host  # annotations only: host facts load with --host
    from vmtune.host.inventory import Inventory


class CheckOptions:
    """How to check domains: the policy, host facts, selections. A plain class, not a dataclass
    (creating one costs ~0.5 ms at every start); `replace()` makes a copy for another host."""

    __slots__ = ("applicable_cache", "domain_ignores", "fix_selected", "fix_severity", "host", "ignore", "inventory",
                 "needed_tags", "os_override", "policy", "runnable_cache", "select", "selection_cache")
    _INIT = ("policy", "host", "os_override", "select", "ignore", "domain_ignores", "inventory", "fix_severity",
             "fix_selected")  # the constructor's fields; the caches start empty in every copy

    def __init__(self, policy: PolicySet, host: Host | None = None, os_override: OsFamily | None = None,
                 select: list[str] | None = None, ignore: list[str] | None = None,
                 domain_ignores: dict[str, list[str]] | None = None, inventory: Inventory | None = None,
                 fix_severity: Severity = Severity.WARNING, fix_selected: tuple[str, ...] = ()) -> None:
        self.policy = policy
        self.host = host
        self.os_override = os_override
        self.select: list[str] = [] if select is None else select
        self.ignore: list[str] = [] if ignore is None else ignore
        self.domain_ignores: dict[str, list[str]] = domain_ignores or {}  # name glob -> selectors
        self.inventory = inventory  # every domain of the host, for cross-domain rules
        # Which findings --fix acts on: those at or above fix_severity (--fail-on), and any of a rule
        # named on the command line with --select (asking for a rule by name asks for its fix too).
        self.fix_severity = fix_severity
        self.fix_selected = fix_selected
        # resolved configuration per (policy resolution, extra ignores): the same for most domains
        self.selection_cache: dict[tuple[int, tuple[str, ...]], dict[str, RuleConfig]] = {}
        self.runnable_cache: dict[int, list[tuple[Rule, Context, RuleConfig]]] = {}
        self.applicable_cache: dict[tuple[object, ...], list[tuple[Rule, Context, RuleConfig]]] = {}
        self.needed_tags: frozenset[str] | None = None  # the top-level tags the policy's rules need (Rule.needs)

    def replace(self, **changes: Any) -> CheckOptions:
        """A copy with some fields changed (another host), as dataclasses.replace: with empty caches."""
        return CheckOptions(**{name: changes.pop(name, getattr(self, name)) for name in self._INIT}, **changes)


def apply_suppressions(domain: Domain, findings: list[Finding], config: dict[str, RuleConfig],
                       ran: list[Rule]) -> list[Finding]:
    """Drop suppressed findings; report suppressions without a reason, that matched nothing, or
    that name no rule or do not parse.

    `ran` are the rules enabled for this domain, custom checks included."""
    from vmtune.policy.model import selector_matches
    from vmtune.rules import BUILTIN_RULES
    from vmtune.rules.suppression import INVALID_SUPPRESSION, SUPPRESSION_WITHOUT_REASON, UNUSED_SUPPRESSION
    from vmtune.suppress import collect, covers, malformed, trails_an_element

    suppressions = collect(domain)
    broken = malformed(domain) if INVALID_SUPPRESSION.code in config else []
    if not suppressions and not broken:
        return findings
    kept = []
    for finding in findings:
        hit = next((s for s in suppressions if covers(s.scope, finding.element)
                    and any(selector_matches(sel, finding.rule) for sel in s.selectors)), None)
        if hit is None:
            kept.append(finding)
        else:
            hit.used.add(finding.rule.code)
    known = [*BUILTIN_RULES, *ran]
    for comment in broken:
        kept.append(INVALID_SUPPRESSION.finding(domain, comment, "comment starts with 'vmtune:' but is no "
                                                "suppression: write <!-- vmtune: ignore[CODE] reason=\"...\" -->"))
    for s in suppressions:
        label = ",".join(s.selectors) or "(nothing)"
        if s.error is not None:  # an XPath it may not use: a finding on the domain, its other findings kept
            if INVALID_SUPPRESSION.code in config:
                kept.append(INVALID_SUPPRESSION.finding(domain, s.origin, f"suppression of {label}: {s.error}"))
            continue
        unknown = [sel for sel in s.selectors if not any(selector_matches(sel, r) for r in known)]
        if INVALID_SUPPRESSION.code in config and (unknown or not s.selectors):
            kept.append(INVALID_SUPPRESSION.finding(domain, s.origin, f"suppression names no rule: "
                                                    f"{', '.join(unknown) or '(empty)'}"))
            continue
        if SUPPRESSION_WITHOUT_REASON.code in config and not s.reason:
            kept.append(SUPPRESSION_WITHOUT_REASON.finding(domain, s.origin, f"suppression of {label} gives no reason"))
        # Only judge suppressions of rules that ran: an ignore for a rule the policy disabled is not "unused".
        judged = any(selector_matches(sel, r) for sel in s.selectors for r in ran)
        if UNUSED_SUPPRESSION.code in config and not s.used and judged:
            # Any: lxml-stubs type a tag str, which compiled code checks, and a comment's is a function
            origin: Any = s.origin
            note = ("a suppression comment applies to the next element, not the one it follows on its line"
                    if origin.tag is etree.Comment and trails_an_element(s.origin) else None)
            kept.append(UNUSED_SUPPRESSION.finding(domain, s.origin, f"suppression of {label} matched no finding",
                                                   note=note))
    return kept


def enabled_rules(domain: Domain, options: CheckOptions) -> dict[str, RuleConfig]:
    config = options.policy.resolve(domain)
    extra: tuple[str, ...] = ()
    if options.domain_ignores:
        import fnmatch

        extra = tuple(s for pattern, sels in options.domain_ignores.items()
                      if fnmatch.fnmatchcase(domain.name, pattern) for s in sels)
    key = (id(config), extra)
    selected = options.selection_cache.get(key)
    if selected is None:
        selected = apply_cli_selection(config, options.policy.rules, options.select, [*options.ignore, *extra])
        options.selection_cache[key] = selected
    return selected


def _runnable(config: dict[str, RuleConfig], options: CheckOptions) -> list[tuple[Rule, Context, RuleConfig]]:
    """The enabled rules in registry order with their contexts, built once per configuration."""
    key = id(config)
    runnable = options.runnable_cache.get(key)
    if runnable is None:
        runnable = [(rule, Context(options.host, config[rule.code].params, options.inventory), config[rule.code])
                    for rule in options.policy.rules if rule.code in config and not rule.engine_driven]
        options.runnable_cache[key] = runnable
    return runnable


def _applicable(config: dict[str, RuleConfig], domain: Domain,
                options: CheckOptions) -> list[tuple[Rule, Context, RuleConfig]]:
    """Rules whose OS/hypervisor/arch requirements the domain meets and whose needed top-level
    element (Rule.needs) it has; these facts take few values."""
    needed = options.needed_tags
    if needed is None:
        needed = options.needed_tags = frozenset(r.needs for r in options.policy.rules if r.needs is not None)
    key = (id(config), domain.os_family, domain.windows_legacy, domain.hypervisor, domain.is_x86,
           needed.intersection(domain.top_tags))
    rules = options.applicable_cache.get(key)
    if rules is None:
        rules = [item for item in _runnable(config, options) if item[0].applies(domain, options.host)]
        options.applicable_cache[key] = rules
    return rules


def _where_the_fix_belongs(domain: Domain) -> Callable[[str], str | None] | None:
    """Advice by rule code in the terms of what wrote the domain: a manager that rewrites it
    (vmtune.manager_advice) or a tool that wrote it once (vmtune.tool_advice); None for a hand-made one."""
    manager = domain.manager
    if manager:
        from vmtune.manager_advice import advice

        return lambda code: advice(manager, code)
    creator = domain.creator
    if creator is not None:
        from vmtune import tool_advice

        return lambda code: tool_advice.advice(creator[0], code)
    return None


def check_domain(domain: Domain, options: CheckOptions, stack_advice: bool = True) -> list[Finding]:
    """The enabled rules' findings on one domain. `stack_advice=False`: the caller says where a fix
    belongs itself (a stack front end places findings on the manifest or flavor it rendered)."""
    config = enabled_rules(domain, options)
    findings: list[Finding] = []
    for rule, ctx, rule_config in _applicable(config, domain, options):
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
    # where a suppression can be written; most files have no comment, known without the comments' cached fact
    if (domain.may_have_comments and domain.comments) or domain.vmtune_metadata is not None:
        findings = apply_suppressions(domain, findings, config, [rule for rule, _, _ in _runnable(config, options)])
    where = _where_the_fix_belongs(domain) if findings and stack_advice else None
    if where is not None:
        for finding in findings:
            said = where(finding.rule.code)
            finding.note = f"{said}; {finding.note}" if finding.note else said
    if len(findings) > 1:  # most domains have none or one
        findings.sort(key=lambda f: (f.line or 0, f.rule.code))
    return findings
