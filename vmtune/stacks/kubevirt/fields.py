"""The fields of a KubeVirt VMI spec's `domain` (v1.DomainSpec), as KubeVirt d923fdb's API defines
them: a key not here is not a KubeVirt field, and the API server refuses it (kubectl's strict field
validation, its default since 1.27: "unknown field") or drops it (the CRD's structural schema prunes
unknown fields), so it does nothing. Generated from fixtures/stacks/kubevirt/schema/kubevirt-openapi.json
(KubeVirt's swagger.json at d923fdb; tests/test_kubevirt_fields.py checks that they agree). A nested
dict: a field's value is the fields of the object it holds (of each item, for a list of objects),
or None where the value is not an object of known fields (a scalar, a quantity, a free-form map).

Only `domain` is checked: it is where every knob vmtune reads or fixes sits, and a misspelt key
there looks set to a reviewer while KubeVirt never sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

DOMAIN: dict[str, Any] = {'chassis': {'asset': None,
                                      'manufacturer': None,
                                      'serial': None,
                                      'sku': None,
                                      'version': None},
                          'clock': {'timer': {'hpet': {'present': None, 'tickPolicy': None},
                                              'hyperv': {'present': None},
                                              'kvm': {'present': None},
                                              'pit': {'present': None, 'tickPolicy': None},
                                              'rtc': {'present': None, 'tickPolicy': None, 'track': None}},
                                    'timezone': None,
                                    'utc': {'offsetSeconds': None}},
                          'cpu': {'cores': None,
                                  'dedicatedCpuPlacement': None,
                                  'features': {'name': None, 'policy': None},
                                  'isolateEmulatorThread': None,
                                  'maxSockets': None,
                                  'model': None,
                                  'numa': {'guestMappingPassthrough': None},
                                  'realtime': {'mask': None},
                                  'sockets': None,
                                  'threads': None},
                          'devices': {'autoattachGraphicsDevice': None,
                                      'autoattachInputDevice': None,
                                      'autoattachMemBalloon': None,
                                      'autoattachPodInterface': None,
                                      'autoattachSerialConsole': None,
                                      'autoattachVSOCK': None,
                                      'blockMultiQueue': None,
                                      'clientPassthrough': None,
                                      'disableHotplug': None,
                                      'disks': {'blockSize': {'custom': {'discardGranularity': None,
                                                                         'logical': None,
                                                                         'physical': None},
                                                              'matchVolume': {'enabled': None}},
                                                'bootOrder': None,
                                                'cache': None,
                                                'cdrom': {'bus': None, 'readonly': None, 'tray': None},
                                                'changedBlockTracking': None,
                                                'dedicatedIOThread': None,
                                                'disk': {'bus': None, 'pciAddress': None, 'readonly': None},
                                                'errorPolicy': None,
                                                'io': None,
                                                'lun': {'bus': None, 'readonly': None, 'reservation': None},
                                                'name': None,
                                                'serial': None,
                                                'shareable': None,
                                                'tag': None},
                                      'downwardMetrics': None,
                                      'filesystems': {'name': None, 'virtiofs': None},
                                      'gpus': {'claimName': None,
                                               'deviceName': None,
                                               'name': None,
                                               'requestName': None,
                                               'tag': None,
                                               'virtualGPUOptions': {'display': {'enabled': None,
                                                                                 'ramFB': {'enabled': None}}}},
                                      'hostDevices': {'claimName': None,
                                                      'deviceName': None,
                                                      'name': None,
                                                      'requestName': None,
                                                      'tag': None},
                                      'inputs': {'bus': None, 'name': None, 'type': None},
                                      'interfaces': {'acpiIndex': None,
                                                     'binding': {'name': None},
                                                     'bootOrder': None,
                                                     'bridge': None,
                                                     'dhcpOptions': {'bootFileName': None,
                                                                     'ntpServers': None,
                                                                     'privateOptions': {'option': None,
                                                                                        'value': None},
                                                                     'tftpServerName': None},
                                                     'macAddress': None,
                                                     'macvtap': None,
                                                     'masquerade': None,
                                                     'model': None,
                                                     'name': None,
                                                     'passt': None,
                                                     'passtBinding': None,
                                                     'pciAddress': None,
                                                     'portRanges': {'end': None, 'protocol': None, 'start': None},
                                                     'ports': {'name': None, 'port': None, 'protocol': None},
                                                     'slirp': None,
                                                     'sriov': None,
                                                     'state': None,
                                                     'tag': None},
                                      'logSerialConsole': None,
                                      'networkInterfaceMultiqueue': None,
                                      'panicDevices': {'model': None},
                                      'rng': None,
                                      'sound': {'model': None, 'name': None},
                                      'tpm': {'enabled': None, 'persistent': None},
                                      'useVirtioTransitional': None,
                                      'video': {'type': None},
                                      'watchdog': {'diag288': {'action': None},
                                                   'i6300esb': {'action': None},
                                                   'name': None}},
                          'features': {'acpi': {'enabled': None},
                                       'apic': {'enabled': None, 'endOfInterrupt': None},
                                       'hyperv': {'evmcs': {'enabled': None},
                                                  'frequencies': {'enabled': None},
                                                  'ipi': {'enabled': None},
                                                  'reenlightenment': {'enabled': None},
                                                  'relaxed': {'enabled': None},
                                                  'reset': {'enabled': None},
                                                  'runtime': {'enabled': None},
                                                  'spinlocks': {'enabled': None, 'spinlocks': None},
                                                  'synic': {'enabled': None},
                                                  'synictimer': {'direct': {'enabled': None}, 'enabled': None},
                                                  'tlbflush': {'direct': {'enabled': None},
                                                               'enabled': None,
                                                               'extended': {'enabled': None}},
                                                  'vapic': {'enabled': None},
                                                  'vendorid': {'enabled': None, 'vendorid': None},
                                                  'vpindex': {'enabled': None}},
                                       'hypervPassthrough': {'enabled': None},
                                       'kvm': {'hidden': None},
                                       'pvspinlock': {'enabled': None},
                                       'smm': {'enabled': None}},
                          'firmware': {'acpi': {'msdmNameRef': None, 'slicNameRef': None},
                                       'bootloader': {'bios': {'useSerial': None},
                                                      'efi': {'persistent': None, 'secureBoot': None}},
                                       'kernelBoot': {'container': {'image': None,
                                                                    'imagePullPolicy': None,
                                                                    'imagePullSecret': None,
                                                                    'initrdPath': None,
                                                                    'kernelPath': None},
                                                      'kernelArgs': None},
                                       'serial': None,
                                       'uuid': None},
                          'ioThreads': {'supplementalPoolThreadCount': None},
                          'ioThreadsPolicy': None,
                          'launchSecurity': {'sev': {'attestation': None,
                                                     'dhCert': None,
                                                     'policy': {'encryptedState': None},
                                                     'session': None},
                                             'snp': None,
                                             'tdx': None},
                          'machine': {'type': None},
                          'memory': {'guest': None,
                                     'hugepages': {'pageSize': None},
                                     'maxGuest': None,
                                     'reservedOverhead': {'addedOverhead': None, 'memLock': None}},
                          'rebootPolicy': None,
                          'resources': {'limits': None, 'overcommitGuestOverhead': None, 'requests': None}}


def unknown(domain: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """(path below `domain`, advice) for each key of a VMI spec's `domain` that is not a KubeVirt
    field there, in document order; below an unknown key nothing more is said."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    _walk(domain, DOMAIN, (), found)
    return found


_UNKNOWN = object()

# A path while walking: () or (parent path, key), a pair made per nested value; made a flat
# tuple (_flat) only for an unknown key. Every manifest check walks its spec's domain (~14
# mappings), and `(*path, key)` at each cost more than the keys' look-ups.
_Path = tuple[Any, ...]


def _walk(value: Any, fields: dict[str, Any], path: _Path, found: list[tuple[tuple[str | int, ...], str]]) -> None:
    # Appends rather than yields: a generator per mapping cost more than the walk. YAML nests at
    # most 64 deep.
    if isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, fields, (path, i), found)
    elif isinstance(value, dict):
        _mapping(value, fields, path, found)


def _mapping(value: dict[Any, Any], fields: dict[str, Any], path: _Path,
             found: list[tuple[tuple[str | int, ...], str]]) -> None:
    for key, item in value.items():
        sub: Any = fields.get(key, _UNKNOWN)  # a key that is not a text (1, true) is no field either
        if sub is _UNKNOWN:
            keys = _flat(path)
            found.append(((*keys, str(key)), _advice(str(key), fields, keys)))
        elif sub is not None:
            if isinstance(item, dict):
                _mapping(item, sub, (path, key), found)
            elif isinstance(item, list):
                _walk(item, sub, (path, key), found)


def _flat(path: _Path) -> tuple[str | int, ...]:
    keys: list[str | int] = []
    while path:
        path, key = path
        keys.append(key)
    return tuple(reversed(keys))


def _advice(key: str, fields: dict[str, Any], path: tuple[str | int, ...]) -> str:
    """Where the key is a field instead, or the sibling it is closest to."""
    elsewhere = [".".join(("domain", *p)) for p in _where(key, DOMAIN, ())]
    if elsewhere:
        return f"it is a field of {' and '.join(elsewhere[:2])}"
    import difflib  # here, not at the top: ~2 ms of every manifest check's start, for a rare slip

    close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.8)
    return f"did you mean {close[0]}?" if close else ""


def _where(key: str, fields: dict[str, Any], path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    for name, sub in fields.items():
        if name == key:
            yield (*path, name)
        if isinstance(sub, dict):
            yield from _where(key, sub, (*path, name))
