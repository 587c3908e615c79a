"""`vmtune check --domain/--all`: the same rules over libvirt's definitions, several hosts at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from vmtune.engine import CheckOptions, check_domain
from vmtune.errors import InputError, VmtuneError
from vmtune.facts.domain import Domain, OsFamily
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
from vmtune.rules.base import Severity
from vmtune.xml.safe import parse_domain

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


def scan_host(uri: str | None, keys: list[str], options: CheckOptions) -> tuple[list[SourceResult], list[str]]:
    """Check the named domains (or all) of one host. Returns results and per-domain errors."""
    conn = open_connection(uri)
    results: list[SourceResult] = []
    try:
        label = host_name(conn)
        facts = HostFactsCache(conn, options.host)
        parsed, errors = read_all(conn, options.os_override)
        # Cross-domain rules see every domain of the host, whichever ones are checked.
        inventory = Inventory([DomainUsage.of(d) for d in parsed.values()])
        chosen: list[Domain] = []
        if keys:
            for key in keys:
                try:
                    name = lookup_domain(conn, key).name()
                except VmtuneError as exc:
                    errors.append(str(exc))
                    continue
                if name in parsed:
                    chosen.append(parsed[name])
        else:
            chosen = list(parsed.values())
        for domain in chosen:
            findings = check_domain(domain, replace(options, host=facts.for_domain(domain), inventory=inventory))
            results.append(SourceResult(domain.source, domain.name, findings, host=label))
    finally:
        conn.close()
    return results, errors


def check_live(request: Any, options: CheckOptions, report: Report, fail_on: Severity) -> None:
    libvirt_module()  # one clear error about the missing extra, not one per host
    uris: list[str | None] = list(request.connect) or [default_uri()]
    keys = [] if request.all_domains else list(request.domains)
    if not keys and not request.all_domains:
        raise VmtuneError("--connect needs --domain NAME or --all")
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_HOSTS, len(uris))) as pool:
        futures = [(uri, pool.submit(scan_host, uri, keys, options)) for uri in uris]
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
