"""Patched domains are accepted by a real libvirt QEMU driver, and the fixes survive define."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPUS, DOMAINS
from helpers import codes, fix, host, options

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]


def _samples() -> list[Path]:
    paths = sorted(DOMAINS.glob("*.xml"))
    corpus = CORPUS / "domains"
    if corpus.is_dir():
        paths += [p for p in sorted(corpus.glob("*.xml")) if any(
            f"arch={q}{arch}{q}".encode() in p.read_bytes() for arch in ("x86_64", "i686") for q in "'\"")]
    return paths


def _define_and_read(conn, libvirt, xml: str) -> tuple[str | None, str]:  # type: ignore[no-untyped-def]
    """The definition as libvirt keeps it, or None and libvirt's reason."""
    try:
        dom = conn.defineXML(xml)
    except libvirt.libvirtError as exc:
        return None, str(exc)
    try:
        return str(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)), ""
    finally:
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)


@pytest.mark.parametrize("policy, caps", [("default", None), ("latency", "intel-2node.xml")])
def test_patched_domains_define_and_keep_their_fixes(embed_conn, libvirt_mod, policy: str,  # type: ignore[no-untyped-def]
                                                     caps: str | None) -> None:
    """The latency policy with a host adds pinning, NUMA binding, hint-dedicated and the balloon fixes."""
    opts = options((policy,), host(caps) if caps else None)
    defined = 0
    problems: list[str] = []
    for path in _samples():
        if path.name == "xen-ballooned.xml":
            continue  # a Xen guest: not for the QEMU driver
        original = path.read_bytes()
        if _define_and_read(embed_conn, libvirt_mod, original.decode())[0] is None:
            continue  # libvirt 9.0 here does not accept the original either (newer schema, other arch)
        outcome = fix(original, opts, unsafe=True)
        if not outcome.changed:
            continue
        after, reason = _define_and_read(embed_conn, libvirt_mod, outcome.fixed.decode())
        if after is None:
            problems.append(f"{path.name}: libvirt rejected the patched domain: {reason}")
            continue
        defined += 1
        fixed_codes = {a.code for a in outcome.applied}
        lost = fixed_codes & set(codes(after, opts))
        if lost:
            problems.append(f"{path.name}: libvirt dropped the fixes of {sorted(lost)}")
    assert problems == []
    assert defined >= (5 if not (CORPUS / "domains").is_dir() else 60), defined
