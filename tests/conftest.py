"""Shared test helpers: a domain XML builder, paths to fixtures and the shared corpus."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The parsed-YAML cache (vmtune.cache) of this test run: not the user's, and inherited by
# every `vmtune` subprocess the tests start.
os.environ["VMTUNE_CACHE_DIR"] = tempfile.mkdtemp(prefix="vmtune-test-cache-")

# Files the tests write are 0644, directories 0755, as in a clone made with the usual umask, also
# for a developer whose umask is 002: vmtune ignores a .vmtune.yaml the group could write.
os.umask(0o022)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DOMAINS = FIXTURES / "domains"
HOSTS = FIXTURES / "hosts"
CORPUS = ROOT.parent / "shared" / "corpus"

OSINFO = {
    "windows": "http://microsoft.com/win/10",
    "linux": "http://debian.org/debian/12",
}
TUNED_CLOCK = {
    "linux": """<clock offset='utc'>
    <timer name='rtc' tickpolicy='catchup'/>
    <timer name='pit' tickpolicy='delay'/>
    <timer name='hpet' present='no'/>
  </clock>""",
    "windows": """<clock offset='localtime'>
    <timer name='rtc' tickpolicy='catchup'/>
    <timer name='pit' tickpolicy='delay'/>
    <timer name='hpet' present='no'/>
    <timer name='hypervclock' present='yes'/>
  </clock>""",
}
FULL_HYPERV = """<hyperv>
      <relaxed state='on'/>
      <vapic state='on'/>
      <spinlocks state='on' retries='8191'/>
      <vpindex state='on'/>
      <runtime state='on'/>
      <synic state='on'/>
      <stimer state='on'/>
      <frequencies state='on'/>
      <tlbflush state='on'/>
      <ipi state='on'/>
    </hyperv>"""


def domain_xml(
    *,
    os: str | None = "linux",
    dtype: str = "kvm",
    name: str = "guest",
    vcpus: int | str = 2,
    memory: str = "<memory unit='GiB'>4</memory>",
    features: str | None = None,
    hyperv: str | None = None,
    cpu: str = "<cpu mode='host-passthrough'/>",
    clock: str | None = None,
    devices: str = "",
    extra: str = "",
    machine: str = "q35",
    arch: str = "x86_64",
    metadata: str = "",
    boot: str = "",
) -> str:
    """A domain that the default policy finds nothing in; override a part to make a case."""
    meta = metadata
    if os is not None:
        meta += (f"\n    <libosinfo:libosinfo xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>"
                 f"\n      <libosinfo:os id='{OSINFO[os]}'/>\n    </libosinfo:libosinfo>")
    if hyperv is None:
        hyperv = FULL_HYPERV if os == "windows" else ""
    if features is None:
        features = f"<features>\n    <acpi/>\n    <apic/>\n    {hyperv}\n  </features>"
    if clock is None:
        clock = TUNED_CLOCK["windows" if os == "windows" else "linux"]
    vcpu = vcpus if isinstance(vcpus, str) else f"<vcpu>{vcpus}</vcpu>"
    return f"""<domain type='{dtype}'>
  <name>{name}</name>
  <metadata>{meta}
  </metadata>
  {memory}
  {vcpu}
  {extra}
  <os>
    <type arch='{arch}' machine='{machine}'>hvm</type>{boot}
  </os>
  {features}
  {cpu}
  {clock}
  <devices>
    {devices}
  </devices>
</domain>
"""


def run_vmtune(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess: exit codes and stderr as a user sees them."""
    return subprocess.run(
        [sys.executable, "-m", "vmtune", *args], input=stdin.decode() if stdin is not None else None,
        capture_output=True, text=True, cwd=cwd or ROOT, timeout=300,
    )


@pytest.fixture
def corpus_domains() -> list[Path]:
    folder = CORPUS / "domains"
    if not folder.is_dir():
        pytest.skip("../shared/corpus/domains is not present")
    return sorted(folder.glob("*.xml"))


TESTNODE = HOSTS / "testnode" / "node.xml"
TESTNODE_URI = f"test://{TESTNODE}"


@pytest.fixture(scope="session")
def libvirt_mod():  # type: ignore[no-untyped-def]
    return pytest.importorskip("libvirt", reason="libvirt-python is not installed (pip install '.[live]')")


@pytest.fixture(scope="session")
def embed_conn(libvirt_mod):  # type: ignore[no-untyped-def]
    """The embedded QEMU driver: real libvirt validation against the real QEMU binary.

    Its root is cached between runs (the first open probes QEMU for about a minute);
    domains left over from an earlier run are undefined first.
    """
    import shutil as _shutil

    if _shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed")
    from vmtune.live.connection import open_connection

    root = Path(os.environ.get("VMTUNE_TEST_EMBED_ROOT",
                               Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vmtune-test-embed"))
    (root / "etc").mkdir(parents=True, exist_ok=True)
    # QEMU as root when we are root: guests booted by tests read files in 0700 temp dirs.
    (root / "etc" / "qemu.conf").write_text('stdio_handler = "file"\n' + (
        'user = "root"\ngroup = "root"\n' if os.geteuid() == 0 else ""))
    conn = open_connection(f"qemu:///embed?root={root}")
    for dom in conn.listAllDomains(0):
        # A run killed mid-test leaves a domain libvirt still thinks is running while its QEMU is gone.
        with contextlib.suppress(libvirt_mod.libvirtError):
            if dom.isActive():
                dom.destroy()
        with contextlib.suppress(libvirt_mod.libvirtError):
            dom.undefineFlags(libvirt_mod.VIR_DOMAIN_UNDEFINE_NVRAM | libvirt_mod.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
    yield conn
    conn.close()
