"""The command line. Thin: parse options, call pure functions, print, pick the exit code.

Heavy modules (lxml, rules, libvirt) are imported inside commands so `--help` and
shell completion stay fast; a pre-commit hook runs this on every commit.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

app = typer.Typer(
    name="vmtune",
    help="Find the libvirt domain settings that make VMs slow, and fix them.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _safe_completion() -> None:
    """Completion candidates are domain names other people choose, and typer's zsh script ran
    commands hidden in them (#32): vmtune.shell_completion's classes and scripts replace typer's.
    Loaded only when a shell asks for completion or a script is shown or installed; the hooks
    are where typer looks these up at that moment."""
    from typer import _completion_shared, completion

    typer_complete, typer_script = completion.shell_complete, _completion_shared.get_completion_script

    def shell_complete(*args: Any, **kwargs: Any) -> int:
        from vmtune.shell_completion import register

        register()
        return typer_complete(*args, **kwargs)

    def get_completion_script(*, prog_name: str, complete_var: str, shell: str) -> str:
        from vmtune.shell_completion import SCRIPTS

        _completion_shared._completion_scripts.update(SCRIPTS)
        return typer_script(prog_name=prog_name, complete_var=complete_var, shell=shell)

    completion.shell_complete = shell_complete
    completion.get_completion_script = _completion_shared.get_completion_script = get_completion_script


_safe_completion()


class Format(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"
    junit = "junit"
    openmetrics = "openmetrics"
    html = "html"


class FailOn(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"


class OsChoice(StrEnum):
    windows = "windows"
    linux = "linux"


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def run_app() -> None:
    """app() as typer runs it, but a usage error is printed escaped like any error: click quotes
    the argument it could not take, and that can be a file name (pre-commit passes a file named
    `--##[stop-commands]x.xml` as it is, and click prints `No such option: --##[stop-...`)."""
    from vmtune.escape import printable

    # click's base class, found through typer's public BadParameter: typer vendors click in 0.28
    # (typer._click) and imports the click package before.
    usage = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    import sys

    sys.argv[1:] = marked_arguments(sys.argv[1:])
    try:
        code = app(standalone_mode=False)  # a command's typer.Exit(N) comes back as N
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        raise SystemExit(1) from None
    except Exception as exc:
        if not isinstance(exc, usage):
            raise
        exc.message = printable(exc.message)  # type: ignore[attr-defined]  # what format_message() quotes
        exc.show()  # type: ignore[attr-defined]
        raise SystemExit(exc.exit_code) from None  # type: ignore[attr-defined]
    raise SystemExit(code if isinstance(code, int) else 0)


def marked_arguments(argv: list[str]) -> list[str]:
    """argv with `--` before the first argument of a command that names an existing path, and
    `--measure`'s optional value resolved (vmtune.argv): click then reads both as it must. The
    option table is the command's own, so an option's value is never taken for an operand."""
    from vmtune.argv import operands_marked, value_options

    if not argv:
        return argv
    command = typer.main.get_command(app)
    sub = getattr(command, "commands", {}).get(argv[0])
    if sub is None:  # `--version`, `--help`, a mistyped command: click's message
        return argv
    options = [(list(p.opts) + list(p.secondary_opts), not (p.is_flag or p.count))
               for p in sub.params if getattr(p, "param_type_name", "") == "option"]
    return [argv[0], *operands_marked(argv[1:], value_options(options))]


def _seconds(value: Optional[float]) -> Optional[float]:
    from vmtune.live.measure import MAX_SECONDS

    if value is not None and not 0 < value <= MAX_SECONDS:
        raise _fail(f"--measure/--for: seconds between 0 and {MAX_SECONDS:g}, not {value:g}")
    return value


MeasureOpt = Annotated[Optional[float], typer.Option(
    "--measure", metavar="[=SECONDS]", help="Live domains: sample libvirt's domain statistics twice, SECONDS apart "
    "(--measure alone: 5), and attach to each finding the measurement that confirms it.")]
ApplyMeasureOpt = Annotated[Optional[float], typer.Option(
    "--measure", metavar="[=SECONDS]", help="Measure SECONDS (--measure alone: 5) before applying and store it with "
    "the backup; after the guest's full restart, measure again for as long and show both. With --all: one "
    "measurement of every domain (two bulk statistics calls), each domain's own stored with its backup.")]


def _fail(message: str) -> typer.Exit:
    from vmtune.escape import printable

    typer.echo(f"vmtune: {printable(message)}", err=True)  # it may quote an argument: escaped like any error
    return typer.Exit(EXIT_ERROR)


def _refuse_program_uri(uri: str | None, allowed: bool) -> None:
    """A --connect URI that runs a program, without --allow-command-uri: one line, exit 2."""
    from vmtune.errors import VmtuneError
    from vmtune.live.uri import refuse_program_uri

    try:
        refuse_program_uri(uri, allowed)
    except VmtuneError as exc:
        typer.echo(f"vmtune: {exc}", err=True)  # escaped by VmtuneError
        raise typer.Exit(EXIT_ERROR) from None


def _complete_rules(incomplete: str) -> list[tuple[str, str]]:
    from vmtune.completion import rule_selectors  # only when the shell asks

    return rule_selectors(incomplete)


def _complete_rule(incomplete: str) -> list[tuple[str, str]]:
    from vmtune.completion import rules

    return rules(incomplete)


def _complete_domains(ctx: typer.Context, incomplete: str) -> list[str]:
    """Domain names of the --connect URI(s) given before on the line, else the default URI."""
    from vmtune.completion import domain_names

    connect = ctx.params.get("connect")
    uris = [connect] if isinstance(connect, str) else list(connect or [])
    return domain_names(uris, incomplete)


PathsArg = Annotated[Optional[list[str]], typer.Argument(
    metavar="[PATH]...", help="Domain XML files or directories; '-' reads stdin.")]
PolicyOpt = Annotated[Optional[list[str]], typer.Option(
    "--policy", "-p", metavar="POLICY", help="Policy name (default, latency) or YAML file; repeatable. "
    "Default: default.")]
SelectOpt = Annotated[Optional[list[str]], typer.Option(
    "--select", metavar="RULES", help="Only these rules: codes, prefixes or names (comma-separated, repeatable).",
    autocompletion=_complete_rules)]
IgnoreOpt = Annotated[Optional[list[str]], typer.Option("--ignore", metavar="RULES", help="Skip these rules.",
                                                        autocompletion=_complete_rules)]
FailOnOpt = Annotated[Optional[FailOn], typer.Option(
    "--fail-on", help="Lowest severity that makes the exit code 1 (default: the configuration's, else warning).")]
FormatOpt = Annotated[Format, typer.Option("--format", "--output-format", "-f", help="Output format.")]
HostOpt = Annotated[Optional[Path], typer.Option("--host", metavar="FILE",
                                                    help="`virsh capabilities` XML of the host.")]
DomcapsOpt = Annotated[Optional[Path], typer.Option("--domcaps", metavar="FILE",
                                                       help="`virsh domcapabilities` XML of the host.")]
OsOpt = Annotated[Optional[OsChoice], typer.Option("--os", help="Guest OS when metadata does not say.")]
UnsafeOpt = Annotated[bool, typer.Option("--unsafe-fixes", help="Also apply fixes marked unsafe.")]
ShowFixesOpt = Annotated[bool, typer.Option("--show-fixes", help="List the fixes applied.")]
ConnectOpt = Annotated[Optional[list[str]], typer.Option(
    "--connect", "-c", metavar="URI",
    help="libvirt URI (repeatable). Default: LIBVIRT_DEFAULT_URI, then libvirt's default.")]
AllowCommandUriOpt = Annotated[bool, typer.Option(
    "--allow-command-uri", help="Open a --connect URI that runs a program (the ext transport, command=, netcat=); "
    "refused without it.")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", metavar="FILE",
                                                     help="Use this configuration, no discovery.")]
IsolatedOpt = Annotated[bool, typer.Option("--isolated", help="Ignore .vmtune.yaml files.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output-file", "-o", metavar="FILE",
                                                     help="Write the report to this file.")]
BaselineOpt = Annotated[Optional[Path], typer.Option("--baseline", metavar="FILE",
                                                       help="Report only findings not in this baseline.")]
WriteBaselineOpt = Annotated[Optional[Path], typer.Option(
    "--write-baseline", metavar="FILE", help="Record the current findings as the baseline.")]
SkipNonDomainOpt = Annotated[bool, typer.Option(
    "--skip-non-domain", help="Skip non-domain XML silently, even when named (pre-commit).")]
KubevirtVersionOpt = Annotated[Optional[str], typer.Option(
    "--kubevirt-version", metavar="VERSION",
    help="KubeVirt manifests: the cluster's KubeVirt release, X.Y or vX.Y.Z (1.1 to 1.9): the common-instancetypes "
         "it deploys (default: the newest).")]
PairOpt = Annotated[Optional[list[str]], typer.Option(
    "--pair", metavar="FLAVOR:IMAGE",
    help="OpenStack: check this flavor with this image (repeatable; default: every flavor with every image).")]
InstancetypesOpt = Annotated[Optional[list[str]], typer.Option(
    "--instancetypes", metavar="PATH",
    help="KubeVirt: files or directories holding instancetypes and preferences the manifests name (repeatable); "
         "a directory with a kustomization.yaml is read as kustomize builds it.")]
TfVarFileOpt = Annotated[Optional[list[str]], typer.Option(
    "--tf-var-file", metavar="FILE",
    help="Terraform: a .tfvars (or .tfvars.json) file, as `terraform plan -var-file` (repeatable; after "
    "terraform.tfvars and *.auto.tfvars).")]
TfVarOpt = Annotated[Optional[list[str]], typer.Option(
    "--tf-var", metavar="NAME=VALUE",
    help="Terraform: a root module variable, as `terraform plan -var` (repeatable; after every --tf-var-file).")]
MetricsHostOpt = Annotated[Optional[str], typer.Option(
    "--metrics-host", metavar="NAME", help="-f openmetrics: the host label of domain files, `vmtune host` and the "
    "run's own series (default: this machine's name as libvirt gives it); live domains carry their hypervisor's.")]
DomainOpt = Annotated[Optional[list[str]], typer.Option(
    "--domain", "-d", metavar="NAME", help="Live domain name or UUID (repeatable).",
    autocompletion=_complete_domains)]


class ColorChoice(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


def _version(value: bool) -> None:
    if value:
        from vmtune.commit import version_line

        typer.echo(version_line())
        raise typer.Exit(EXIT_CLEAN)


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Find the libvirt domain settings that make VMs slow, and fix them."""


# Options come before the operands: after the first file, directory or '-', every argument is
# an operand even when it starts with '-' (POSIX). pre-commit and xargs append file names that a
# pull request chooses, and `--output-file=/x.xml` must stay a file name (vmtune.main's fast path
# reads command lines the same way).
OPERANDS_LAST = {"allow_interspersed_args": False}


@app.command(context_settings=OPERANDS_LAST)
def check(
    paths: PathsArg = None,
    fix: Annotated[bool, typer.Option("--fix", help="Apply safe fixes in place.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print the fixes as a unified diff; write nothing.")] = False,
    unsafe_fixes: UnsafeOpt = False,
    show_fixes: ShowFixesOpt = False,
    output_format: FormatOpt = Format.text,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    fail_on: FailOnOpt = None,
    policy: PolicyOpt = None,
    host: HostOpt = None,
    domcaps: DomcapsOpt = None,
    os_family: OsOpt = None,
    connect: ConnectOpt = None,
    domain: DomainOpt = None,
    all_domains: Annotated[bool, typer.Option("--all", help="Check every domain of the connection(s).")] = False,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
    output_file: OutputOpt = None,
    baseline: BaselineOpt = None,
    write_baseline: WriteBaselineOpt = None,
    skip_non_domain: SkipNonDomainOpt = False,
    jobs: Annotated[Optional[int], typer.Option(
        "--jobs", "-j", min=1, metavar="N", help="Worker processes for large inputs (default: all cores).")] = None,
    exit_zero: Annotated[bool, typer.Option(
        "--exit-zero", help="Exit 0 even when findings remain (input errors still exit 2).")] = False,
    exit_non_zero_on_fix: Annotated[bool, typer.Option(
        "--exit-non-zero-on-fix", help="Exit 1 when --fix changed a file, even if nothing remains.")] = False,
    statistics: Annotated[bool, typer.Option(
        "--statistics", help="Print the number of findings per rule instead of each finding.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print findings only: no summary line.")] = False,
    color: Annotated[ColorChoice, typer.Option(
        "--color", help="Colour the text report: auto (a terminal, unless NO_COLOR), always, never.")]
    = ColorChoice.auto,
    stdin_filename: Annotated[Optional[str], typer.Option(
        "--stdin-filename", metavar="FILE",
        help="Name of the file read from '-': reports, .vmtune.yaml and per-file ignores.")]
    = None,
    metrics_host: MetricsHostOpt = None,
    allow_command_uri: AllowCommandUriOpt = False,
    kubevirt_version: KubevirtVersionOpt = None,
    pair: PairOpt = None,
    instancetypes: InstancetypesOpt = None,
    tf_var_file: TfVarFileOpt = None,
    tf_var: TfVarOpt = None,
    measure: MeasureOpt = None,
) -> None:
    """Check domain XML files, KubeVirt manifests, OpenStack flavors and images (or live domains)."""
    from vmtune.commands.check import CheckRequest, run_check
    from vmtune.terminal import use_color

    request = CheckRequest(
        paths=paths or [], fix=fix, diff=diff, unsafe_fixes=unsafe_fixes, show_fixes=show_fixes,
        output_format=output_format.value, output_file=output_file, select=_split(select), ignore=_split(ignore),
        fail_on=fail_on.value if fail_on else None, policies=policy or [], host=host, domcaps=domcaps,
        os_family=os_family.value if os_family else None, connect=connect or [], domains=domain or [],
        all_domains=all_domains, config=config, isolated=isolated, skip_non_domain=skip_non_domain,
        baseline=baseline, write_baseline=write_baseline, jobs=jobs, exit_zero=exit_zero,
        exit_non_zero_on_fix=exit_non_zero_on_fix, statistics=statistics, quiet=quiet,
        color=use_color(color.value, output_format.value, output_file is not None), stdin_filename=stdin_filename,
        metrics_host=metrics_host, allow_command_uri=allow_command_uri, kubevirt_version=kubevirt_version,
        pairs=pair or [], instancetypes=instancetypes or [], measure=_seconds(measure),
        tf_var_files=tf_var_file or [], tf_vars=tf_var or [],
    )
    raise typer.Exit(run_check(request))


@app.command("fix", context_settings=OPERANDS_LAST)
def fix_command(
    paths: PathsArg = None,
    diff: Annotated[bool, typer.Option("--diff", help="Print a unified diff; write nothing.")] = False,
    unsafe_fixes: UnsafeOpt = False,
    show_fixes: ShowFixesOpt = False,
    output_format: FormatOpt = Format.text,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    fail_on: FailOnOpt = None,
    policy: PolicyOpt = None,
    host: HostOpt = None,
    domcaps: DomcapsOpt = None,
    os_family: OsOpt = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
    skip_non_domain: SkipNonDomainOpt = False,
    kubevirt_version: KubevirtVersionOpt = None,
    pair: PairOpt = None,
    instancetypes: InstancetypesOpt = None,
    tf_var_file: TfVarFileOpt = None,
    tf_var: TfVarOpt = None,
) -> None:
    """Shorthand for `check --fix`."""
    from vmtune.commands.check import CheckRequest, run_check

    request = CheckRequest(
        paths=paths or [], fix=not diff, diff=diff, unsafe_fixes=unsafe_fixes, show_fixes=show_fixes,
        output_format=output_format.value, select=_split(select), ignore=_split(ignore),
        fail_on=fail_on.value if fail_on else None, policies=policy or [], host=host, domcaps=domcaps,
        os_family=os_family.value if os_family else None, config=config, isolated=isolated,
        skip_non_domain=skip_non_domain, kubevirt_version=kubevirt_version, pairs=pair or [],
        instancetypes=instancetypes or [], tf_var_files=tf_var_file or [], tf_vars=tf_var or [],
    )
    raise typer.Exit(run_check(request))


@app.command("render", context_settings=OPERANDS_LAST)
def render_command(
    paths: Annotated[Optional[list[str]], typer.Argument(
        metavar="[PATH]...", help="KubeVirt manifests, OpenStack flavors, images and nova.conf, or directories; "
        "'-' reads stdin.")] = None,
    kubevirt_version: KubevirtVersionOpt = None,
    pair: PairOpt = None,
    instancetypes: InstancetypesOpt = None,
    skip_non_domain: SkipNonDomainOpt = False,
    isolated: IsolatedOpt = False,
) -> None:
    """Print the domain XML vmtune renders from KubeVirt manifests and OpenStack flavors and images (what
    `check` judges), each after comments naming its object and what was assumed or not seen."""
    from vmtune.commands.render import run_render

    raise typer.Exit(run_render(paths or [], kubevirt_version, pair or [], instancetypes or [], skip_non_domain,
                                isolated))


@app.command()
def rule(code: Annotated[str, typer.Argument(metavar="CODE", help="Rule code or name, e.g. CLK002.",
                                             autocompletion=_complete_rule)]) -> None:
    """Print a rule's documentation."""
    from vmtune.docs import render_rule
    from vmtune.rules import lookup
    from vmtune.rules.base import note_renamed

    found = lookup(code)
    if found is None:
        raise _fail(f"unknown rule '{code}' (see `vmtune rules`)")
    note_renamed([code.upper()])
    typer.echo(render_rule(found), nl=False)


class RulesFormat(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"


@app.command()
def rules(output_format: Annotated[RulesFormat, typer.Option("--format", "-f")] = RulesFormat.text) -> None:
    """List every rule."""
    from vmtune.docs import fix_label, render_rules_markdown
    from vmtune.rules import BUILTIN_RULES

    if output_format is RulesFormat.markdown:
        typer.echo(render_rules_markdown(BUILTIN_RULES), nl=False)
    elif output_format is RulesFormat.json:
        import json

        typer.echo(json.dumps([{"code": r.code, "name": r.name, "severity": r.severity_label,
                                "category": r.category, "fix": fix_label(r), "summary": r.summary,
                                "stability": r.stability, "since": r.since}
                               for r in BUILTIN_RULES], indent=2))
    else:
        for r in BUILTIN_RULES:
            typer.echo(f"{r.code:<7} {r.name:<34} {r.severity_label:<13} fix:{fix_label(r):<11} {r.summary}")


StateOpt = Annotated[Optional[Path], typer.Option(
    "--state-dir", metavar="DIR",
    help="Backup directory. Default: $XDG_STATE_HOME/vmtune, or /var/lib/vmtune as root.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show the diff and stop (exit 1 if there is a change).")]
OneConnectOpt = Annotated[Optional[str], typer.Option(
    "--connect", "-c", metavar="URI", help="libvirt URI. Default: LIBVIRT_DEFAULT_URI, then libvirt's default.")]
OneDomainOpt = Annotated[str, typer.Option("--domain", "-d", metavar="NAME", help="Domain name or UUID.",
                                           autocompletion=_complete_domains)]
MaybeDomainOpt = Annotated[Optional[str], typer.Option("--domain", "-d", metavar="NAME", help="Domain name or UUID.",
                                                       autocompletion=_complete_domains)]


@app.command(context_settings=OPERANDS_LAST)
def plan(
    paths: PathsArg = None,
    host: HostOpt = None,
    connect: Annotated[Optional[str], typer.Option(
        "--connect", "-c", metavar="URI",
        help="Plan the domains of this libvirt URI (its capabilities describe the host).")]
    = None,
    policy: Annotated[Optional[list[str]], typer.Option(
        "--policy", "-p", metavar="POLICY",
        help="Policies that say which domains are dedicated (CPU007 enabled). Default: latency.")]
    = None,
    diff: Annotated[bool, typer.Option("--diff", help="Print the placements as unified diffs.")] = False,
    write: Annotated[bool, typer.Option(
        "--write", help="Write the placements: files atomically; live domains as `apply` does.")] = False,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    state_dir: StateOpt = None,
    live: Annotated[bool, typer.Option(
        "--live", help="With --connect --write: also re-pin the threads of running domains now.")] = False,
    housekeeping: Annotated[Optional[str], typer.Option(
        "--housekeeping", metavar="CPUSET",
        help="cpuset kept for the host and emulator threads (default: first core per node).")]
    = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
    allow_command_uri: AllowCommandUriOpt = False,
) -> None:
    """Plan dedicated CPUs, NUMA binding and thread isolation for a host's domains."""
    _refuse_program_uri(connect, allow_command_uri)
    from vmtune.commands.plan import LiveWrite, run_plan
    from vmtune.request import CheckRequest

    request = CheckRequest(paths=paths or [], policies=policy or ["latency"], host=host, config=config,
                           isolated=isolated)
    raise typer.Exit(run_plan(request, diff, write, housekeeping, connect,
                               LiveWrite(yes, dry_run, state_dir, live)))


@app.command("host")
def host_command(
    root: Annotated[Path, typer.Option("--root", metavar="DIR",
                                       help="Read sysfs and /proc under this directory (a copy).")]
    = Path("/"),
    output_format: FormatOpt = Format.text,
    fail_on: FailOnOpt = None,
    ignore: IgnoreOpt = None,
    output_file: OutputOpt = None,
    metrics_host: MetricsHostOpt = None,
) -> None:
    """Check this host's KVM settings: EPT/NPT, APICv, halt polling, KSM, hugepage pools, CPU isolation."""
    from vmtune.commands.hostcheck import run_host

    raise typer.Exit(run_host(root, output_format.value, fail_on.value if fail_on else "warning", _split(ignore),
                              output_file, metrics_host))


@app.command("show-settings", context_settings=OPERANDS_LAST)
def show_settings(
    path: Annotated[Path, typer.Argument(metavar="PATH",
                                         help="A file or directory to show the effective settings for.")],
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
) -> None:
    """Print the effective configuration for a path (which .vmtune.yaml, policies, rules)."""
    from vmtune.commands.settings import run_show_settings

    raise typer.Exit(run_show_settings(path, config, isolated))


@app.command()
def apply(
    domain: MaybeDomainOpt = None,
    all_domains: Annotated[bool, typer.Option(
        "--all", help="Every domain of the connection, one after the other (nova/KubeVirt ones skipped).")] = False,
    connect: OneConnectOpt = None,
    unsafe_fixes: UnsafeOpt = False,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Redefine a domain that nova or KubeVirt manages.")] = False,
    live: Annotated[bool, typer.Option("--live", help="Also pin vCPU/emulator/I/O threads of a running domain.")]
    = False,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    policy: PolicyOpt = None,
    os_family: OsOpt = None,
    state_dir: StateOpt = None,
    allow_command_uri: AllowCommandUriOpt = False,
    measure: ApplyMeasureOpt = None,
    after: Annotated[bool, typer.Option(
        "--after", help="With --measure: apply nothing; measure again the domain restarted since `apply --measure` "
        "and show before and after side by side. With --all: every domain whose newest backup holds a before and "
        "no after yet, for as long as the longest stored before; each one not restarted yet is named.")] = False,
) -> None:
    """Fix a live domain's persistent definition (backup, diff, confirm, define, verify)."""
    _refuse_program_uri(connect, allow_command_uri)
    from vmtune.commands.live import run_apply, run_apply_measured

    if measure is not None or after:
        raise typer.Exit(run_apply_measured(domain, all_domains, connect, _seconds(measure), after, unsafe_fixes, yes,
                                            dry_run, force, live, _split(select), _split(ignore), policy or [],
                                            os_family.value if os_family else None, state_dir))
    raise typer.Exit(run_apply(domain, all_domains, connect, unsafe_fixes, yes, dry_run, force, live, _split(select),
                               _split(ignore), policy or [], os_family.value if os_family else None,
                               state_dir))


class MeasureFormat(StrEnum):
    text = "text"
    json = "json"


@app.command("measure")
def measure_command(
    domain: DomainOpt = None,
    all_domains: Annotated[bool, typer.Option("--all", help="Every running domain: those that cost most first.")]
    = False,
    connect: OneConnectOpt = None,
    seconds: Annotated[float, typer.Option("--for", metavar="SECONDS", help="Seconds between the two samples.")]
    = 5.0,
    top: Annotated[int, typer.Option("--top", min=1, metavar="N", help="--all: show the N domains that cost most.")]
    = 10,
    output_format: Annotated[MeasureFormat, typer.Option("--format", "-f")] = MeasureFormat.text,
    policy: PolicyOpt = None,
    os_family: OsOpt = None,
    allow_command_uri: AllowCommandUriOpt = False,
) -> None:
    """What running domains cost the host (libvirt's domain statistics, sampled twice), each cost
    linked to the findings that explain it."""
    _refuse_program_uri(connect, allow_command_uri)
    from vmtune.commands.live import run_measure

    if not domain and not all_domains:
        raise _fail("measure needs --domain NAME or --all")
    raise typer.Exit(run_measure(domain or [], all_domains, connect, _seconds(seconds) or 5.0, top,
                                 output_format.value, policy or [], os_family.value if os_family else None))


@app.command()
def history(
    domain: MaybeDomainOpt = None,
    all_domains: Annotated[bool, typer.Option(
        "--all", help="Every domain with backups in the state directory, read from the files (with --connect: "
        "of that host only).")] = False,
    connect: OneConnectOpt = None,
    state_dir: StateOpt = None,
    allow_command_uri: AllowCommandUriOpt = False,
) -> None:
    """List the backups vmtune made of a domain's definition (or of every domain: --all), read from
    the state directory; --domain takes a name or UUID they recorded (with --connect: as libvirt
    names the domain now)."""
    _refuse_program_uri(connect, allow_command_uri)
    from vmtune.commands.live import run_history, run_history_all

    if (domain is None) == (not all_domains):
        raise _fail("history needs --domain NAME or --all (not both)")
    if all_domains:
        raise typer.Exit(run_history_all(connect, state_dir))
    raise typer.Exit(run_history(domain or "", connect, state_dir))


@app.command()
def rollback(
    domain: OneDomainOpt,
    to: Annotated[Optional[str], typer.Option(
        "--to", metavar="ID",
        help="Backup id (default: the newest an apply or plan made; a second rollback does nothing).")] = None,
    connect: OneConnectOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
    state_dir: StateOpt = None,
    allow_command_uri: AllowCommandUriOpt = False,
) -> None:
    """Restore a live domain's definition from a backup."""
    _refuse_program_uri(connect, allow_command_uri)
    from vmtune.commands.live import run_rollback

    raise typer.Exit(run_rollback(domain, to, connect, yes, dry_run, state_dir))
