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

# Backups and records of `apply` in a directory of this test run, not root's /var/lib/vmtune that
# every run (and every pytest-xdist worker) would share.
os.environ["VMTUNE_STATE_DIR"] = tempfile.mkdtemp(prefix="vmtune-test-state-")

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


# What the embedded QEMU driver learns on its first open of a root (it probes the QEMU binaries,
# about a minute): kept between runs in this directory's cache/qemu/capabilities. Each run (and
# each pytest-xdist worker) works in a root of its own, seeded from it: one process may hold a
# root at a time, and two runs sharing one used to undefine each other's domains.
EMBED_CACHE = Path(os.environ.get("VMTUNE_TEST_EMBED_ROOT",
                                  Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vmtune-test-embed"))
_CAPABILITIES = Path("cache") / "qemu" / "capabilities"


def new_embed_root(purpose: str) -> Path:
    """A fresh embedded-driver root for this process, its capabilities cache copied from EMBED_CACHE.
    Short and under the temp dir: QEMU's monitor socket path in it must fit in 108 bytes."""
    import shutil as _shutil

    root = Path(tempfile.mkdtemp(prefix=f"vmt-{purpose}-"))
    (root / "etc").mkdir()
    # QEMU as root when we are root: guests booted by tests read files in 0700 temp dirs.
    (root / "etc" / "qemu.conf").write_text('stdio_handler = "file"\n' + (
        'user = "root"\ngroup = "root"\n' if os.geteuid() == 0 else ""))
    cached = EMBED_CACHE / _CAPABILITIES
    if cached.is_dir():
        _shutil.copytree(cached, root / _CAPABILITIES)
    return root


def keep_embed_capabilities(root: Path) -> None:
    """Store what the driver probed in `root` for later runs, unless the cache holds the same
    already (a QEMU upgrade re-probes into the same file names): written beside the cache and
    renamed, so a concurrent run sees the old cache or the new, never half of one."""
    import shutil as _shutil

    probed, cached = root / _CAPABILITIES, EMBED_CACHE / _CAPABILITIES
    if not probed.is_dir() or all((cached / p.name).is_file() and (cached / p.name).read_bytes() == p.read_bytes()
                                  for p in probed.iterdir()):
        return
    cached.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=".capabilities-", dir=cached.parent))
    _shutil.copytree(probed, staged, dirs_exist_ok=True)
    old = cached.with_name(f".old-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        cached.rename(old)
    try:
        staged.rename(cached)
    except OSError:  # another run stored it meanwhile
        _shutil.rmtree(staged, ignore_errors=True)
    _shutil.rmtree(old, ignore_errors=True)


def drop_embed_root(conn, libvirt, root: Path) -> None:  # type: ignore[no-untyped-def]
    """Stop and undefine what the tests left in the root, keep its capabilities, remove it."""
    import shutil as _shutil

    for dom in conn.listAllDomains(0):
        with contextlib.suppress(libvirt.libvirtError):
            if dom.isActive():
                dom.destroy()
        with contextlib.suppress(libvirt.libvirtError):
            dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
    conn.close()
    keep_embed_capabilities(root)
    _shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def embed_conn(libvirt_mod):  # type: ignore[no-untyped-def]
    """The embedded QEMU driver: real libvirt validation against the real QEMU binary, in a root
    of this session's own (new_embed_root), shared by every test of the session."""
    import shutil as _shutil

    if _shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed")
    from vmtune.live.connection import open_connection

    root = new_embed_root("embed")
    conn = open_connection(f"qemu:///embed?root={root}")
    yield conn
    drop_embed_root(conn, libvirt_mod, root)


def effect_guest() -> tuple[Path, Path]:
    """bench/effect's guest (a Debian kernel and a busybox initrd), built once into bench/out and
    kept: under a lock, since pytest-xdist workers would otherwise build into it at the same time."""
    import fcntl

    if str(ROOT / "bench" / "effect") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench" / "effect"))
    import guest

    out = ROOT / "bench" / "out" / "effect" / "guest"
    out.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return guest.build(out)  # type: ignore[no-any-return]


# The longest tests (in seconds, of the run of 2 December 2026 on two shared cores; docs/benchmarks.md,
# "CI time"), run first: pytest-xdist hands tests out in collection order, and one of these
# started last would leave the other worker idle for its length at the end of the run.
LONGEST_FIRST = (
    "tests/test_measure_guest.py::test_usb_polling_finding_carries_the_measured_host_cpu_and_the_fix_lowers_it",
    "tests/test_measure_guest.py::test_network_findings_carry_the_packets_and_drops_of_a_stream_the_guest_sends",
    "tests/test_measure_guest.py::test_apply_measure_then_restart_shows_the_drop_side_by_side",
    "tests/test_measure_guest.py::test_disk_findings_carry_the_time_per_request_the_guest_made",
    "tests/test_embed_start.py::test_fixed_guests_start_where_the_originals_did",
    "tests/test_ansible.py::test_tune_persists_is_idempotent_and_rolls_back_only_what_it_changed",
    "tests/test_live_faults.py::test_verification_raises_no_false_warning_over_the_corpus",
    "tests/test_workflow.py::test_real_pre_commit_runs_the_readme_hook_pinned_to_the_release_commit",
    "tests/test_hostile_config.py::test_the_subset_stays_linear_on_a_large_domain",
    "tests/test_stack_parallel.py::test_workers_report_on_stack_sources_exactly_what_one_process_reports",
    "tests/test_yamlnodes.py::test_mutated_manifests_read_the_same_natively",
    "tests/test_stack_checks.py::test_the_new_fixes_start_where_the_original_did",
    "tests/test_cli.py::test_scripts_vmtune_says_what_its_first_run_does_then_stays_quiet",
    "tests/test_effect_smoke.py",
    "tests/test_parallel.py::test_ctrl_c_stops_workers_without_a_traceback_or_a_hang",
    "tests/test_hostile_fastpaths.py::test_a_named_file_swapped_for_a_fifo_never_blocks",
    "tests/test_first_hour.py::test_fixable_means_one_thing_in_text_json_and_statistics",
    "tests/test_terraform_frontend.py::test_hcl2s_grammar_compiles_without_regex_when_its_cached_tables_are_missing",
    "tests/test_embed_start.py::test_fixed_stack_guests_start_where_the_originals_did",
)


# Last: it measures the wait a busy thread adds to a vCPU pinned to host CPU 1, and fails when
# CPU 1 is saturated before the thread starts; with the longest tests first, the other worker
# was booting a TCG guest beside it (alone 60.4%, contended 60.0%). At the end the other worker
# has short tests left, or none.
LAST = ("tests/test_measure_guest.py::test_delay_findings_carry_the_wait_a_competing_host_thread_causes",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONGEST_FIRST in its order, then the other tests marked slow, then the rest, then LAST,
    each group in collection order (a stable sort: the order only, never which tests run)."""
    def rank(item: pytest.Item) -> int:
        for index, prefix in enumerate(LONGEST_FIRST):
            if item.nodeid == prefix or item.nodeid.startswith((prefix + "::", prefix + "[")):
                return index
        if item.nodeid in LAST:
            return len(LONGEST_FIRST) + 2
        return len(LONGEST_FIRST) + (0 if item.get_closest_marker("slow") else 1)

    items.sort(key=rank)
