"""Rule documentation, rendered from each rule's docstring: `vmtune rule`, docs/rules.md, SARIF."""

from __future__ import annotations

from functools import cache

from vmtune.rules.base import AREAS, Rule

CALIBRATION = """\
## Calibration

Every rule's severity and fix safety follow one rule, and each rule's "Calibration"
section says how it applies:

- **Severity.** `warning` or `error` only for a measured or authoritatively documented
  cost or risk *in this domain's configuration* (the UHCI polling cost is reported at
  warning on a UHCI controller, not on xHCI); `error` when libvirt or QEMU refuses the
  domain or the guest cannot start. Everything else is `info`: a suggestion.
- **Which fixes `--fix` applies.** Safe fixes of findings at or above `--fail-on`
  (default `warning`). Info findings are suggestions: shown with `[fix: --select CODE]`,
  and fixed only when their rule is named with `--select` on the command line
  (`vmtune check --fix --select DSK003 vm.xml`), or with `--fail-on info`.
  `--unsafe-fixes` adds unsafe fixes under the same condition.
- **Unsafe.** A fix that removes a device or element the user declared, changes a value
  they wrote, changes guest-visible hardware that needs a driver, or whose benefit depends
  on the workload (I/O threads, hugepages, pinning, discard, multiqueue on small guests).
- **No new findings.** The fixed text is checked again; a fix after which a finding at
  or above `--fail-on` appears that the original did not have is withheld, with a note
  naming that finding. A pre-commit `--fix` hook never blocks a commit on a finding
  vmtune wrote.
- **Valid stays valid.** Every fix keeps a schema-valid file valid and a definable
  domain definable; elements a fix creates carry the attributes libvirt's schema
  requires (`<clock offset='utc'>`). Tested on the shared corpus and on definitions
  made by Debian's `virt-install --print-xml` (`fixtures/virt-install/`) and by the
  management stacks (`fixtures/stacks/`: nova, KubeVirt, oVirt, vagrant-libvirt, CloudStack).
- **Evidence.** Each Calibration names its source and the libvirt/QEMU version (here
  libvirt 9.0, QEMU 7.2) behind the severity and the fix's safety.
- **Guest OS.** libosinfo metadata, else `--os`, else the tool that wrote the domain
  (minikube, CRC and multipass guests are Linux; kcli and virt-lightning record the image
  or distro: `fixtures/tools/`), else strong signals in the definition (Hyper-V
  enlightenments, a `hypervclock` timer: stacks write them for Windows only).
  A finding that depends on an inferred OS says what it was inferred from; advice that
  depends on the Windows version takes the safe side when the version is unknown.
"""


def applicability(rule: Rule) -> str:
    if rule.area == "HOST":
        return "the host vmtune runs on (`vmtune host`), not domains"
    parts = []
    if rule.os:
        since = " Vista/2008 and later" if rule.enlightened_windows else ""
        inferred = ", or the tool that wrote the domain" + (
            ", or inferred from Hyper-V enlightenments" if rule.os == "windows" else "")
        parts.append(f"{rule.os.capitalize()}{since} guests (libosinfo metadata or --os{inferred})")
    if rule.hypervisors:
        parts.append("domain type " + "/".join(sorted(rule.hypervisors)))
    if rule.x86_only:
        parts.append("x86")
    if rule.needs_host:
        parts.append("needs host facts (--host/--domcaps or a live connection)")
    return ", ".join(parts) or "any domain"


def fix_label(rule: Rule) -> str:
    if not rule.fixable:
        return "none"
    if rule.fix_safety and rule.other_fix_safety:
        return "safe|unsafe"
    return str(rule.fix_safety) if rule.fix_safety else "yes"


@cache
def _builtin_enabled(policy_name: str) -> frozenset[str]:
    """Codes a built-in policy enables for some domain (ignoring scopes)."""
    from vmtune.policy.load import load_policies
    from vmtune.policy.model import selector_matches

    policy = load_policies([policy_name])
    enabled: set[str] = set()
    for entry in policy.entries:
        for rule in policy.rules:
            if any(selector_matches(s, rule) for s in entry.select):
                enabled.add(rule.code)
            if any(selector_matches(s, rule) for s in entry.ignore):
                enabled.discard(rule.code)
    return frozenset(enabled)


def in_policies(rule: Rule) -> str:
    names = [name for name in ("default", "latency") if rule.code in _builtin_enabled(name)]
    return ", ".join(names) or "none (select it explicitly)"


def lifecycle(rule: Rule) -> str:
    """`stable since 0.1.0`, `preview (select it by code) since 0.2.0`, and the codes it had."""
    from vmtune.rules.base import RENAMED

    said = "preview (no built-in policy enables it: select it by code)" if rule.stability == "preview" else "stable"
    said += f", since {rule.since}" if rule.since != "unreleased" else ", unreleased (in the next release)"
    old = sorted(code for code, new in RENAMED.items() if new == rule.code)
    return said + (f"; formerly {', '.join(old)} (still selected by it)" if old else "")


def render_rule(rule: Rule, level: int = 1) -> str:
    lines = [
        f"{'#' * level} {rule.code} {rule.name}",
        "",
        f"- Severity: {rule.severity_label}",
        f"- Fix: {fix_label(rule)}",
        f"- Applies to: {applicability(rule)}",
        f"- Enabled by policies: {in_policies(rule)}",
        f"- Stability: {lifecycle(rule)}",
    ]
    for param, default in rule.params.items():
        lines.append(f"- Parameter `{param}` (default `{default}`): {rule.param_docs.get(param, '')}")
    lines.append("")
    doc = rule.doc
    # After Calibration, before References: what --measure confirms it with, each stack's knob
    # for it and where the stacks detect it (their tables and declarations, vmtune.stacks.registry).
    extra = "".join(section for section in (_measured_section(rule.code), stack_knobs_section(rule.code),
                                            detection_section(rule.code)) if section)
    if extra:
        head, refs, tail = doc.partition("## References")
        doc = f"{head.rstrip()}\n\n{extra}\n{refs}{tail}" if refs else f"{doc.rstrip()}\n\n{extra}"
    lines += [("#" * (level + 1) + line[2:]) if line.startswith("## ") else line for line in doc.splitlines()]
    return "\n".join(lines) + "\n"


def _measured_section(code: str) -> str:
    from vmtune.live.signatures import doc_section  # pure data: no libvirt

    return doc_section(code)


def _file(package: str, module: str) -> str:
    """A front end's module as a path: ("vmtune.stacks.kubevirt", "frontend") -> vmtune/stacks/kubevirt/frontend.py."""
    return f"{package}.{module}".replace(".", "/") + ".py"


def stack_knobs_section(code: str) -> str:
    """Each stack's knob for the rule, from its knob table: the setting that cures the finding
    where the stack writes the domain (the first is what --fix writes), or why there is none."""
    from vmtune.stacks.knob_table import rows, said_on
    from vmtune.stacks.registry import frontends

    lines = []
    for declared in frontends():
        if declared.knobs is None:
            continue
        table, no_knob = rows(declared.name)
        where = f"`{_file(declared.package, declared.knobs)}`"
        alternatives = table.get(code, ())
        if alternatives:
            said = [f"{knob.text}{'' if knob.value is not None else ' (advice only: no fix)'}" for knob in alternatives]
            lines.append(f"- {declared.stack_title} ({where}): {said[0]}" +
                         "".join(f"; or {other}" for other in said[1:]))
        elif code in no_knob:
            on = said_on(declared.name).get(code)
            at = f" (said on the {on[0]}, at {on[1]})" if on else ""
            lines.append(f"- {declared.stack_title} ({where}): {no_knob[code]}{at}")
    if not lines:
        return ""
    return "## In the stacks\n" + "\n".join(lines) + "\n"


def detection_section(code: str) -> str:
    """Where the stack front ends make the rule's findings themselves (FrontEnd.notes)."""
    from vmtune.stacks.registry import frontends

    lines = []
    for declared in frontends():
        places = declared.notes.get(code, ())
        if places:
            named = ", ".join(f"`{_file(declared.package, module)}` {function}()"
                              for module, _dot, function in (place.rpartition(".") for place in places))
            lines.append(f"- {declared.title}: {named}")
    if not lines:
        return ""
    return "## Where it is detected\n" + "\n".join(lines) + "\n"


def render_rules_markdown(rules: tuple[Rule, ...]) -> str:
    out = [
        "# vmtune rules",
        "",
        "Generated from the rules' own documentation by `vmtune rules --format markdown`;",
        "do not edit by hand (a test fails when this file is stale).",
        "",
        "Each rule is stable or preview, as ruff's are: a preview rule runs only when selected by",
        "code (`--select CODE`; no built-in policy enables it) and may still change; each says the",
        "release that first shipped it (`since`). A renamed code keeps selecting, ignoring and",
        "suppressing the rule it became, with a warning naming the new code.",
        "",
        *CALIBRATION.splitlines(),
        "",
        "| code | name | severity | fix | summary |",
        "|---|---|---|---|---|",
    ]
    for rule in rules:
        out.append(f"| [{rule.code}](#{rule.code.lower()}-{rule.name}) | {rule.name} | {rule.severity_label} | "
                   f"{fix_label(rule)} | {rule.summary} |")
    out.append("")
    current = None
    for rule in rules:
        if rule.area != current:
            current = rule.area
            out += [f"## {current}: {AREAS[current]}", ""]
        out.append(render_rule(rule, level=3))
    return "\n".join(out).rstrip() + "\n"
