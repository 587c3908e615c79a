"""nova's extra spec value validators: what `openstack flavor set --property KEY=VALUE` is refused
with (the compute API validates every extra spec it registers from microversion 2.86 on, the
microversion current clients use).

Transcribed from nova 34.0.0 (PyPI wheel): `nova/api/validation/extra_specs/hw.py`, `hw_rng.py`,
`hw_video.py`, `quota.py` and `os.py` for the registered names and their value schemas,
`base.py` (`ExtraSpecValidator._validate_str/_int/_bool`) for how a value is judged and the
message nova answers with, `nova/objects/fields.py` for the enumerations they name
(SoundModelType, USBControllerModelType, BlockDeviceEncryptionFormatType). Only validators of
the libvirt driver's namespaces are here; names nova does not register are STK003 (frontend.py).
"""

from __future__ import annotations

import re
from typing import Any

# name -> ("bool" | "int" | "str", {"enum": ..., "pattern": ..., "min": ..., "max": ...})
_CPU_MASK = r"\^?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*"
_RT_MASK = r"(\^)?\d+((-\d+)?(,\^?\d+(-\d+)?)?)*"
_PMEM = r"([a-zA-Z0-9_]+(,)?)+"
Schema = tuple[str, dict[str, Any]]

# nova's patterns nest quantifiers ambiguously: re.fullmatch backtracks exponentially on a value
# that fails late (a 62-character mask took 4 s). Each is matched by an unambiguous pattern of
# the same language instead (every repetition of the CPU masks is a run of `-N` and `,^?N`
# pieces; pmem's is names separated by single commas, one trailing comma allowed);
# tests/test_openstack_render.py compares both on random strings. Messages quote nova's.
LINEAR = {
    _CPU_MASK: re.compile(r"\^?\d+(?:-\d+|,\^?\d+)*"),
    _RT_MASK: re.compile(r"\^?\d+(?:-\d+|,\^?\d+)*"),
    _PMEM: re.compile(r"[a-zA-Z0-9_]+(?:,[a-zA-Z0-9_]+)*,?"),
}

VALIDATORS: dict[str, Schema] = {
    "hw:cpu_realtime": ("bool", {}),
    "hw:cpu_realtime_mask": ("str", {"pattern": _RT_MASK}),
    "hw:hide_hypervisor_id": ("bool", {}),
    "hw:cpu_policy": ("str", {"enum": ("dedicated", "shared", "mixed")}),
    "hw:cpu_thread_policy": ("str", {"enum": ("prefer", "isolate", "require")}),
    "hw:emulator_threads_policy": ("str", {"enum": ("isolate", "share")}),
    "hw:cpu_dedicated_mask": ("str", {"pattern": _CPU_MASK}),
    "hw:mem_page_size": ("str", {"pattern": r"(large|small|any|\d+([kKMGT]i?)?(b|bit|B)?)"}),
    "hw:locked_memory": ("bool", {}),
    "hw:numa_nodes": ("int", {"min": 1}),
    "hw:pci_numa_affinity_policy": ("str", {"enum": ("required", "preferred", "legacy", "socket")}),
    "hw:cpu_sockets": ("int", {"min": 1}),
    "hw:cpu_cores": ("int", {"min": 1}),
    "hw:cpu_threads": ("int", {"min": 1}),
    "hw:cpu_max_sockets": ("int", {"min": 1}),
    "hw:cpu_max_cores": ("int", {"min": 1}),
    "hw:cpu_max_threads": ("int", {"min": 1}),
    "hw:boot_menu": ("bool", {}),
    "hw:vif_multiqueue_enabled": ("bool", {}),
    "hw:mem_encryption": ("bool", {}),
    "hw:mem_encryption_model": ("str", {"enum": ("amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx")}),
    "hw:pmem": ("str", {"pattern": _PMEM}),
    "hw:pmu": ("bool", {}),
    "hw:serial_port_count": ("int", {"min": 0}),
    "hw:tpm_model": ("str", {"enum": ("tpm-tis", "tpm-crb")}),
    "hw:tpm_version": ("str", {"enum": ("1.2", "2.0")}),
    "hw:tpm_secret_security": ("str", {"enum": ("user", "host", "deployment")}),
    "hw:watchdog_action": ("str", {"enum": ("none", "pause", "poweroff", "reset", "disabled")}),
    "hw:viommu_model": ("str", {"enum": ("intel", "smmuv3", "virtio", "auto")}),
    "hw:virtio_packed_ring": ("bool", {}),
    "hw:sound_model": ("str", {"enum": ("sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio")}),
    "hw:usb_model": ("str", {"enum": ("none", "nec-xhci", "qemu-xhci")}),
    "hw:redirected_usb_ports": ("int", {"min": 0, "max": 15}),
    "hw:ephemeral_encryption": ("bool", {}),
    "hw:ephemeral_encryption_format": ("str", {"enum": ("plain", "luks", "luksv2")}),
    "hw_rng:allowed": ("bool", {}),
    "hw_rng:rate_bytes": ("int", {"min": 0}),
    "hw_rng:rate_period": ("int", {"min": 0}),
    "hw_video:ram_max_mb": ("int", {"min": 0}),
    "quota:cpu_shares": ("int", {"min": 0}),
    "quota:cpu_period": ("int", {"min": 0}),
    "quota:cpu_quota": ("int", {}),
    "os:secure_boot": ("str", {"enum": ("disabled", "required")}),
    # quota.py's VMware quotas, by a loop over cpu, memory, disk_io and vif
    **{f"quota:{key}_limit": ("int", {"min": 0}) for key in ("cpu", "memory", "disk_io", "vif")},
    **{f"quota:{key}_reservation": ("int", {}) for key in ("cpu", "memory", "disk_io", "vif")},
    **{f"quota:{key}_shares_level": ("str", {"enum": ("custom", "high", "normal", "low")})
       for key in ("cpu", "memory", "disk_io", "vif")},
    **{f"quota:{key}_shares_share": ("int", {"min": 0}) for key in ("cpu", "memory", "disk_io", "vif")},
    **{f"quota:disk_{stat}_{metric}_sec": ("int", {"min": 0}) for stat in ("read", "write", "total")
       for metric in ("bytes", "iops")},
    **{f"quota:vif_{stat}_{metric}": ("int", {"min": 0}) for stat in ("inbound", "outbound")
       for metric in ("average", "peak", "burst")},
}
# Names with a parameter (hw.py: `hw:numa_cpus.{num}`, `hw:numa_mem.{num}`, num = \d+)
PARAMETERISED: tuple[tuple[re.Pattern[str], Schema], ...] = (
    (re.compile(r"hw:numa_cpus\.\d+"), ("str", {"pattern": _CPU_MASK})),
    (re.compile(r"hw:numa_mem\.\d+"), ("int", {"min": 1})),
)
# oslo.utils strutils.bool_from_string(strict=True): the words it accepts, lowercased and stripped
_BOOL_WORDS = frozenset({"1", "t", "true", "on", "y", "yes", "0", "f", "false", "off", "n", "no"})
# Python's int() accepts surrounding white space, a sign and digit-group underscores
_INT = re.compile(r"\s*[+-]?\d+(_\d+)*\s*")
# The compute API's schema of extra specs (schemas/flavors_extraspecs.py, parameter_types.metadata)
# takes values of 255 characters at most
MAX_VALUE_CHARS = 255
# and keys of this form (its _metadata_key), at every microversion
SPEC_KEY = re.compile(r"[a-zA-Z0-9\-_:. ]{1,255}")
SPEC_KEYS = re.compile(r"[a-zA-Z0-9\-_:. ]{1,255}(?:\n[a-zA-Z0-9\-_:. ]{1,255})*")  # keys joined by newlines


def schema(name: str) -> Schema | None:
    found = VALIDATORS.get(name)
    if found is not None:
        return found
    for pattern, parameterised in PARAMETERISED:
        if pattern.fullmatch(name):
            return parameterised
    return None


QUOTED_CHARS = 64  # a refused value longer than this is not quoted back (it is the file's text)


def _said(value: str) -> str:
    return repr(value) if len(value) <= QUOTED_CHARS else f"a value of {len(value)} characters"


def refusal(name: str, value: str) -> str | None:
    """nova's validator message for a value it refuses (`Validation failed; ...`), or None. A
    value is quoted as nova quotes it, but for a CPU mask or other patterned text (free text of
    the file, said by its format) and one longer than QUOTED_CHARS."""
    found = schema(name)
    if found is None:
        return None
    if len(value) > MAX_VALUE_CHARS:
        return f"the API takes extra spec values of {MAX_VALUE_CHARS} characters at most ({len(value):,} given)"
    kind, rules = found
    if kind == "bool":
        if value.strip().lower() not in _BOOL_WORDS:
            return f"Validation failed; {_said(value)} is not a valid boolean-like value."
        return None
    if kind == "int":
        if not _INT.fullmatch(value):
            return f"Validation failed; {_said(value)} is not a valid integer value."
        number = int(value)
        if "max" in rules and int(rules["max"]) < number:
            return f"Validation failed; {_said(value)} is greater than the max value of '{rules['max']}'."
        if "min" in rules and int(rules["min"]) > number:
            return f"Validation failed; {_said(value)} is less than the min value of '{rules['min']}'."
        return None
    pattern = rules.get("pattern")
    if pattern is not None:
        matcher = LINEAR.get(str(pattern)) or re.compile(str(pattern))
        if not matcher.fullmatch(value):
            return f"Validation failed; the value is not of the format '{pattern}'."
        return None
    allowed = rules.get("enum")
    if allowed is not None and value not in allowed:
        return f"Validation failed; {_said(value)} is not one of: {', '.join(allowed)}."
    return None
