"""What a check is asked to do, and with which settings: the command line (`CheckRequest`, parsed by
the fast path or by typer) and, per source, the nearest .vmtune.yaml overridden by it
(`OptionsResolver`). Below the commands: `vmtune check`, the stack front ends, `vmtune plan`, the
fleet modules and `vmtune apply` all resolve settings here."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vmtune.config import Settings, discover, load_settings
from vmtune.engine import CheckOptions
from vmtune.errors import VmtuneError, held_warnings, unsay_warnings, warn
from vmtune.policy.document import UntrustedFileError
from vmtune.rules.base import Severity

if TYPE_CHECKING:
    from pathlib import Path

    from vmtune.facts.domain import Domain
    from vmtune.host.inventory import Inventory
    from vmtune.policy.model import PolicySet
    from vmtune.sources import Source


def _name(path: str | Path | None) -> str | None:
    return None if path is None else os.fspath(path)


class CheckRequest:
    """What to check and how: the command line, parsed by the fast path or by typer. A plain
    class (a dataclass costs ~0.5 ms to create at every start); equal when every field is."""

    __slots__ = ("all_domains", "allow_command_uri", "baseline", "color", "config", "connect", "diff", "domains",
                 "domcaps", "exit_non_zero_on_fix", "exit_zero", "fail_on", "fix", "host", "ignore", "instancetypes",
                 "isolated", "jobs", "kubevirt_version", "measure", "metrics_host", "os_family", "output_file",
                 "output_format", "pairs", "paths", "policies", "quiet", "select",
                 "show_fixes", "skip_non_domain", "statistics", "stdin_filename", "tf_var_files", "tf_vars",
                 "unsafe_fixes", "write_baseline")

    def __init__(self, paths: list[str], fix: bool = False, diff: bool = False, unsafe_fixes: bool = False,
                 show_fixes: bool = False, output_format: str = "text", output_file: str | Path | None = None,
                 select: list[str] | None = None, ignore: list[str] | None = None, fail_on: str | None = None,
                 policies: list[str] | None = None, host: str | Path | None = None,
                 domcaps: str | Path | None = None,
                 os_family: str | None = None, connect: list[str] | None = None, domains: list[str] | None = None,
                 all_domains: bool = False, config: str | Path | None = None, isolated: bool = False,
                 skip_non_domain: bool = False, baseline: Path | None = None, write_baseline: Path | None = None,
                 jobs: int | None = None, exit_zero: bool = False, exit_non_zero_on_fix: bool = False,
                 statistics: bool = False, quiet: bool = False, color: bool = False,
                 stdin_filename: str | None = None, metrics_host: str | None = None,
                 allow_command_uri: bool = False, kubevirt_version: str | None = None,
                 pairs: list[str] | None = None, instancetypes: list[str] | None = None,
                 measure: float | None = None, tf_var_files: list[str] | None = None,
                 tf_vars: list[str] | None = None) -> None:
        self.paths = paths
        self.fix = fix
        self.diff = diff
        self.unsafe_fixes = unsafe_fixes
        self.show_fixes = show_fixes
        self.output_format = output_format
        # The report, the host's XML and the configuration are names (str(Path(name)), as typer gives
        # them), not Paths: nothing on their way needs pathlib, which costs a run ~3 ms to import.
        self.output_file = _name(output_file)
        self.select: list[str] = [] if select is None else select
        self.ignore: list[str] = [] if ignore is None else ignore
        self.fail_on = fail_on  # None: the configuration's, else warning
        self.policies: list[str] = [] if policies is None else policies  # empty: the configuration's, else default
        self.host = _name(host)
        self.domcaps = _name(domcaps)
        self.os_family = os_family
        self.connect: list[str] = [] if connect is None else connect
        self.domains: list[str] = [] if domains is None else domains
        self.all_domains = all_domains
        self.config = _name(config)
        self.isolated = isolated
        self.skip_non_domain = skip_non_domain  # pre-commit hands us every XML file, pom.xml included
        self.baseline = baseline
        self.write_baseline = write_baseline
        self.jobs = jobs  # worker processes for large inputs; None: all cores
        self.exit_zero = exit_zero  # exit 0 even with findings (2 stays 2)
        self.exit_non_zero_on_fix = exit_non_zero_on_fix  # exit 1 when a fix was applied, even if nothing remains
        self.statistics = statistics  # counts per rule instead of each finding
        self.quiet = quiet  # findings only: no summary, no skip notes
        self.color = color  # decided by the CLI from --color, the terminal and NO_COLOR/FORCE_COLOR
        self.stdin_filename = stdin_filename
        self.metrics_host = metrics_host  # -f openmetrics: host label of files and of the run
        self.allow_command_uri = allow_command_uri  # --connect may name a program to run (vmtune.live.uri)
        self.kubevirt_version = kubevirt_version  # KubeVirt manifests: the release to render as (vmtune.stacks)
        self.pairs: list[str] = [] if pairs is None else pairs  # OpenStack: FLAVOR:IMAGE to check together
        self.instancetypes: list[str] = [] if instancetypes is None else instancetypes  # references' files
        self.tf_var_files: list[str] = [] if tf_var_files is None else tf_var_files  # Terraform: -var-file
        self.tf_vars: list[str] = [] if tf_vars is None else tf_vars  # Terraform: -var NAME=VALUE
        self.measure = measure  # --measure: seconds between two samples of the live domains' statistics

    def __eq__(self, other: object) -> bool:
        return type(other) is CheckRequest and all(
            getattr(self, name) == getattr(other, name) for name in CheckRequest.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return "CheckRequest(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__) + ")"

    @property
    def shows_element_paths(self) -> bool:
        """Whether findings' element paths are used (every format but text, and baselines);
        the text report shows one only for a finding without a line, which record() keeps."""
        return self.output_format != "text" or self.baseline is not None or self.write_baseline is not None


class OptionsResolver:
    """Settings and check options per source: the nearest .vmtune.yaml, overridden by the CLI."""

    def __init__(self, request: CheckRequest) -> None:
        self.request = request
        self.fixed = load_settings(request.config) if request.config else None
        self.settings_cache: dict[str | None, Settings] = {}  # a configuration's resolved name -> its settings
        self.discovered: dict[str, str | None] = {}  # a directory's name -> its nearest configuration
        self.inventory: Inventory | None = None
        # Domains the inventory pass parsed and kept for the check (see build_inventory), by source name.
        self.parsed: dict[str, Domain] = {}
        self.options_cache: dict[tuple[str | None, tuple[str, ...]], CheckOptions] = {}
        self.folder_settings: dict[str, Settings] = {}  # a checked file's directory name -> its settings
        # A file name's part up to and with its last "/" -> its settings: the same for every file
        # of a folder, and made without os.path.dirname (Python, ~4 k instructions a file of a
        # batch). With the "/": "vm.xml" (here) and "/vm.xml" (the root) are in two folders.
        self.name_folders: dict[str, Settings] = {}
        self.severities: dict[str, Severity] = {}  # --fail-on / fail-on: names already parsed
        # a configuration's resolved name -> its policies, or why they cannot be loaded
        self.policies: dict[str | None, PolicySet | VmtuneError] = {}

    def settings_for(self, path: str | Path | None) -> Settings:
        """The settings of a file or directory (None: the current directory)."""
        if self.request.isolated:
            return Settings()
        if self.fixed is not None:
            return self.fixed
        if path is None:
            directory = os.getcwd()
        else:
            name = os.fspath(path)
            directory = name if os.path.isdir(name) else os.path.dirname(name) or "."
        if directory not in self.discovered:  # one walk up per directory, not per file
            self.discovered[directory] = discover(directory)
        config = self.discovered[directory]
        if config not in self.settings_cache:
            self.settings_cache[config] = self._discovered(config) if config else Settings()
        return self.settings_cache[config]

    def _discovered(self, config: str) -> Settings:
        """A discovered configuration's settings, if it and every file it uses (its policies'
        `extends` too, read here rather than at the first check) are ones only the invoking user
        or root could have written; else the defaults, and one line saying why (vmtune.fileio)."""
        try:
            # Discovered, not named: the file itself must be inside its repository too.
            settings = load_settings(config, named=False)
        except UntrustedFileError as exc:
            return _ignored(config, exc)
        if not self.request.policies:  # else the command line's policies replace the configuration's
            try:
                self._policy(settings)
            except UntrustedFileError as exc:
                return _ignored(config, exc)
            except VmtuneError:
                pass  # a broken policy is reported where it always was: by each file's check (_build)
        return settings

    def _policy(self, settings: Settings) -> PolicySet:
        """The policies a configuration (or none: the default policy) names, loaded once."""
        policy = self.policies.get(settings.path)
        if policy is None:
            from vmtune.policy.load import load_policies

            try:
                policy = load_policies(settings.policies or ["default"], settings.root)
            except VmtuneError as exc:  # kept: a broken policy is reported by each check, not loaded again
                policy = exc
            self.policies[settings.path] = policy
        if isinstance(policy, VmtuneError):
            raise policy
        return policy

    def settings_for_file(self, name: str) -> Settings:
        """settings_for(name) for a file (a walk's or one named on the command line), once per
        directory: no stat or Settings made per file of a batch."""
        cut = name[:name.rfind("/") + 1]  # names alike up to here have one dirname (not the reverse: "a//b")
        settings = self.name_folders.get(cut)
        if settings is not None:
            return settings
        folder = os.path.dirname(name)
        settings = self.folder_settings.get(folder)
        if settings is None:
            settings = self.folder_settings[folder] = self.settings_for(name)
        self.name_folders[cut] = settings
        return settings

    @contextlib.contextmanager
    def reading_ahead(self) -> Iterator[list[str]]:
        """Configurations read before the run reaches their files (to fork workers that find them
        read, to leave out what they exclude), their warnings (a configuration ignored) not said:
        when there are any (the list it gives), every configuration is read again when next asked
        for, and its warnings said there, where one process says them."""
        with held_warnings() as held:
            yield held
        if held:
            unsay_warnings(held)
            self.folder_settings.clear()
            self.name_folders.clear()
            self.settings_cache.clear()

    def options_for(self, settings: Settings, path: str | None) -> CheckOptions:
        file_ignores = tuple(settings.file_ignores(path)) if path else ()
        key = (settings.path, file_ignores)
        if key not in self.options_cache:
            self.options_cache[key] = self._build(settings, list(file_ignores))
            self.options_cache[key].inventory = self.inventory
        return self.options_cache[key]

    def set_inventory(self, inventory: Inventory) -> None:
        """The host's domains, for cross-domain rules: every domain among the checked files."""
        self.inventory = inventory
        for options in self.options_cache.values():
            options.inventory = inventory
            options.runnable_cache.clear()
            options.applicable_cache.clear()

    def has_host(self, sources: list[Source]) -> bool:
        """Host facts given (--host, or the configuration of the first file): the files are one host."""
        if self.request.host is not None:
            return True
        return bool(sources) and self.options_for(self.settings_for(sources[0].path), sources[0].path).host is not None

    def _build(self, settings: Settings, file_ignores: list[str]) -> CheckOptions:
        from vmtune.policy.load import load_policies
        from vmtune.policy.model import selector_matches

        request = self.request
        # The command line's policies are read where they are; a configuration's stay in its repository.
        policy = load_policies(request.policies) if request.policies else self._policy(settings)
        caps = str(request.host) if request.host else settings.host
        domcaps = str(request.domcaps) if request.domcaps else settings.domcaps
        host = None
        if caps or domcaps:
            from vmtune.facts.host import load_host  # only with host facts: a plain check never needs it

            host = load_host(caps, domcaps)
        select = request.select or settings.select or []
        ignore = [*settings.ignore, *file_ignores, *request.ignore]
        from vmtune.rules.base import note_renamed

        note_renamed([*select, *ignore])  # a renamed code still selects its rule: said once
        for selector in (*select, *ignore, *(s for sels in settings.per_domain_ignores.values() for s in sels)):
            if not any(selector_matches(selector, r) for r in policy.rules):
                from vmtune.policy.load import did_you_mean, rule_keys

                hint = did_you_mean(selector, rule_keys(policy.rules))
                if selector in (*request.select, *request.ignore):  # the command line's, not the file's
                    raise VmtuneError(f"unknown rule selector '{selector}' on the command line{hint}")
                raise VmtuneError(f"unknown rule selector '{selector}'{hint}",
                                  str(settings.path) if settings.path else None)
        return CheckOptions(policy=policy, host=host, os_override=request.os_family,  # type: ignore[arg-type]
                            select=select, ignore=ignore, domain_ignores=settings.per_domain_ignores,
                            fix_severity=self.fail_on(settings), fix_selected=tuple(request.select))

    def fail_on(self, settings: Settings) -> Severity:
        # Asked once per file; Enum's name lookup is Python code, so each name is parsed once.
        text = self.request.fail_on or settings.fail_on or "warning"
        severity = self.severities.get(text)
        if severity is None:
            severity = self.severities[text] = Severity.parse(text)
        return severity

    def unsafe(self, settings: Settings) -> bool:
        return self.request.unsafe_fixes or bool(settings.unsafe_fixes)




def _ignored(config: str, exc: UntrustedFileError) -> Settings:
    """The defaults, for a discovered configuration another user could have written (said once)."""
    detail = exc.message if exc.source == config and exc.line is None else str(exc)
    warn(f"{config}: configuration ignored: {detail}; checking with the defaults")
    return Settings()



def build_options(request: CheckRequest) -> CheckOptions:
    """Options for commands that act on one domain (apply): the configuration of the cwd."""
    resolver = OptionsResolver(request)
    return resolver.options_for(resolver.settings_for(None), None)
