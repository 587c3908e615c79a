# Copyright: (c) 2026, vmtune authors
# MIT License (see LICENSE in the vmtune repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options both modules take (module_utils/vmtune_common.py COMMON_ARGS)."""

    DOCUMENTATION = r"""
options:
  uri:
    description: libvirt URI on the managed host.
    type: str
    default: qemu:///system
  domains:
    description: Domain names or UUIDs; empty means every domain.
    type: list
    elements: str
    default: []
  policy:
    description: Policies (built-in names or files on the managed host); empty means C(default).
    type: list
    elements: str
    default: []
  select:
    description: Only these rules (codes, prefixes or names); in C(tune) an info rule named here has its fix applied.
    type: list
    elements: str
    default: []
  ignore:
    description: Skip these rules.
    type: list
    elements: str
    default: []
requirements:
  - vmtune and libvirt-python on the managed host
"""
