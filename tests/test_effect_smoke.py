"""Keeps the A/B effect harness from rotting: build the guest and boot it once (TCG)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, effect_guest

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]


def test_guest_boots_idles_and_reports(embed_conn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("apt-get") is None or shutil.which("qemu-system-x86_64") is None:
        pytest.skip("needs apt-get (to fetch Debian's kernel) and qemu-system-x86_64")
    sys.path.insert(0, str(ROOT / "bench" / "effect"))
    import boot

    kernel, initrd = effect_guest()
    # One embedded driver per process: use the test suite's (conftest's embed_conn).
    console = tmp_path / "console.log"
    xml = (f"<domain type='qemu'><name>smoke</name><memory unit='MiB'>256</memory><vcpu>1</vcpu><os>"
           f"<type arch='x86_64' machine='pc'>hvm</type><kernel>{kernel}</kernel><initrd>{initrd}</initrd>"
           "<cmdline>console=ttyS0 quiet vmtune.workload=idle vmtune.size=2</cmdline></os>"
           "<features><acpi/></features><devices><serial type='file'>"
           f"<source path='{console}'/></serial><memballoon model='none'/></devices></domain>")
    result = boot.boot(embed_conn, xml, console, timeout=300, idle_window=1.0)
    assert "IDLE_END" in result.console and "DONE" in result.console
    assert result.idle_cpu_percent is not None and 0 <= result.idle_cpu_percent < 100
