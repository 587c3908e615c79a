"""`vmtune check --domain/--all`: the same rules over libvirt's definitions, several hosts at once."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from vmtune.engine import CheckOptions, check_domain
from vmtune.errors import InputError, VmtuneError
from vmtune.facts.domain import Domain
from vmtune.facts.guestos import OsFamily
from vmtune.facts.host import Host
from vmtune.host.inventory import DomainUsage, Inventory
from vmtune.live.connection import (
    all_domains,
    default_uri,
    host_facts,
    host_name,
    libvirt_error,
    libvirt_faults,
    libvirt_module,
    lookup_domain,
    open_connection,
    persistent_xml,
)
from vmtune.report.model import Report, SourceResult
from vmtune.rules.base import Finding, Severity, record
from vmtune.xml.safe import parse_domain

if TYPE_CHECKING:
    from vmtune.request import OptionsResolver

MAX_PARALLEL_HOSTS = 8


class HostFactsCache:
    """Domain capabilities differ per guest arch and domain type; fetch each pair once."""

    def __init__(self, conn: Any, override: Host | None) -> None:
        self.conn = conn
        self.override = override
        self.cache: dict[tuple[str | None, str | None], Host] = {}

    def for_domain(self, domain: Domain) -> Host:
        if self.override is not None:  # --host/--domcaps files win over the connection
            return self.override
        key = (domain.arch, domain.hypervisor or None)
        if key not in self.cache:
            with libvirt_faults(domain.source, "cannot read the host's capabilities"):
                self.cache[key] = host_facts(self.conn, domain.arch, domain.hypervisor or None)
        return self.cache[key]


def read_definitions(conn: Any, os_override: OsFamily | None = None
                     ) -> tuple[dict[str, tuple[Domain, bytes]], list[str]]:
    """Every domain libvirt knows on this host, parsed once: name -> (Domain, its XML without secrets),
    plus read errors."""
    label = host_name(conn)
    parsed: dict[str, tuple[Domain, bytes]] = {}
    errors: list[str] = []
    for dom in all_domains(conn):
        source = f"{label}/{dom.name()}"
        try:
            xml = persistent_xml(dom, secure=False).encode()
            parsed[dom.name()] = (Domain(parse_domain(xml, source), source, os_override), xml)
        except VmtuneError as exc:
            errors.append(str(exc))
        except Exception as exc:  # one unreadable definition must not hide the others
            errors.append(f"{source}: cannot read definition: {libvirt_error(exc)}")
    return parsed, errors


def read_all(conn: Any, os_override: OsFamily | None = None) -> tuple[dict[str, Domain], list[str]]:
    """name -> Domain for every domain of the host, plus read errors."""
    parsed, errors = read_definitions(conn, os_override)
    return {name: domain for name, (domain, _) in parsed.items()}, errors


def hypervisor_hostname(conn: Any) -> str | None:
    """The hypervisor's own name (`virsh hostname`), the host label of metrics; the URI is not:
    qemu:///system reads the same on every hypervisor."""
    try:
        return str(conn.getHostname())
    except Exception:  # a driver without it: the metrics fall back to the run's host
        return None


def _unmatched(running: list[Finding], defined: list[Finding]) -> list[Finding]:
    """The running guest's findings the definition does not have. Matched per rule, by element
    path first and then by count: the live XML adds runtime elements (aliases, an expanded CPU
    model) that can move a finding to another path without it being fixed."""
    paths = Counter((f.rule.code, f.xpath) for f in defined)
    rest: list[Finding] = []
    for finding in running:
        if paths[(finding.rule.code, finding.xpath)] > 0:
            paths[(finding.rule.code, finding.xpath)] -= 1
        else:
            rest.append(finding)
    per_rule = Counter(code for (code, _), count in paths.items() for _ in range(count))
    pending: list[Finding] = []
    for finding in rest:
        if per_rule[finding.rule.code] > 0:
            per_rule[finding.rule.code] -= 1
        else:
            pending.append(finding)
    return pending


def pending_restart(conn: Any, domain: Domain, defined: list[Finding], options: CheckOptions) -> list[Finding]:
    """For a running guest: the findings its live configuration still has that its persistent
    definition no longer has (fixed by `vmtune apply` or by hand, in effect after a full shutdown
    and start). Empty for a guest that is not running or cannot be read."""
    libvirt = libvirt_module()
    try:
        dom = conn.lookupByUUIDString(domain.uuid) if domain.uuid else conn.lookupByName(domain.name)
        if not dom.isActive():
            return []
        xml = str(dom.XMLDesc(0)).encode()
        running = Domain(parse_domain(xml, f"{domain.source} (running)"), domain.source, options.os_override)
    except (libvirt.libvirtError, VmtuneError):
        return []  # stopped or undefined meanwhile: nothing running to differ
    return [record(f) for f in _unmatched(check_domain(running, options), defined)]


def measurements_of(conn: Any, chosen: list[Domain], looked_up: list[Any] | None, seconds: float,
                    label: str, intervals: int = 1) -> list[Any]:
    """The measurement (live.measure.DomainMeasure) of each chosen domain, in order: two samples
    `seconds` apart of the looked-up domains (None: one bulk call each for all); each domain's is
    found while the interval runs, and filled in when measure() returns."""
    from vmtune.live.measure import Measured, measure

    found: list[Any] = []

    def find(samples: list[Any]) -> None:
        measured = Measured(samples)
        found.extend(measured.of(domain.uuid, domain.name) for domain in chosen)

    measure(conn, looked_up, seconds, label, meanwhile=find, intervals=intervals)
    return found


def scan_host(uri: str | None, keys: list[str], options: CheckOptions,
              conn: Any = None, measure: float | None = None,
              intervals: int = 1) -> tuple[list[SourceResult], list[str]]:
    """Check the named domains (or all) of one host (or of the open connection `conn`, left open),
    measured over `measure` seconds in `intervals` (live.measure.measure) when given.
    Returns results and per-domain errors."""
    own = conn is None
    conn = open_connection(uri) if own else conn
    results: list[SourceResult] = []
    try:
        label, hostname = host_name(conn), hypervisor_hostname(conn)
        facts = HostFactsCache(conn, options.host)
        parsed, errors = read_all(conn, options.os_override)
        # Cross-domain rules see every domain of the host, whichever ones are checked.
        # Shut-off definitions use no host memory or CPU: cross-domain rules count only running ones.
        running = {d.name() for d in conn.listAllDomains(1)}  # VIR_CONNECT_LIST_DOMAINS_ACTIVE
        inventory = Inventory([DomainUsage.of(d, active=d.name in running) for d in parsed.values()])
        chosen: list[Domain] = []
        looked_up: list[Any] = []
        if keys:
            for key in keys:
                try:
                    found = lookup_domain(conn, key)
                except VmtuneError as exc:
                    errors.append(str(exc))
                    continue
                looked_up.append(found)
                if found.name() in parsed:
                    chosen.append(parsed[found.name()])
        else:
            chosen = list(parsed.values())
        measurements = None
        if measure is not None and (chosen or not keys):
            # One bulk call per sample for --all; one call for the named domains.
            measurements = measurements_of(conn, chosen, looked_up if keys else None, measure, label, intervals)
        for i, domain in enumerate(chosen):
            domain_options = options.replace(host=facts.for_domain(domain), inventory=inventory)
            findings = check_domain(domain, domain_options)
            result = SourceResult(domain.source, domain.name, findings, host=label, hostname=hostname,
                                  pending_restart=pending_restart(conn, domain, findings, domain_options))
            if measurements is not None:
                from vmtune.live.report import attach

                attach(result, measurements[i])
            results.append(result)
    finally:
        if own:
            conn.close()
    return results, errors


def check_live_domains(resolver: OptionsResolver, report: Report) -> None:
    """The request's live domains, with the settings of the working directory (no file to look beside)."""
    settings = resolver.settings_for(None)
    check_live(resolver.request, resolver.options_for(settings, None), report, resolver.fail_on(settings))


def check_live(request: Any, options: CheckOptions, report: Report, fail_on: Severity) -> None:
    libvirt_module()  # one clear error about the missing extra, not one per host
    uris: list[str | None] = list(request.connect) or [default_uri()]
    keys = [] if request.all_domains else list(request.domains)
    if not keys and not request.all_domains:
        raise VmtuneError("--connect needs --domain NAME or --all")
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_HOSTS, len(uris))) as pool:
        futures = [(uri, pool.submit(scan_host, uri, keys, options, None,
                                              getattr(request, "measure", None))) for uri in uris]
        for uri, future in futures:  # report in the order given, whatever finishes first
            try:
                results, errors = future.result()
            except VmtuneError as exc:
                report.errors.append(InputError.of(exc, uri))
                continue
            for result in results:
                result.fail_on = fail_on
                report.add(result)
            report.errors += [InputError.of(e) for e in errors]
