#!/usr/bin/python
# Copyright: (c) 2026, vmtune authors
# MIT License (see LICENSE in the vmtune repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tune
short_description: Apply vmtune's fixes to libvirt domain definitions, or roll them back
description:
  - Fixes each domain's persistent definition as C(vmtune apply --yes) does - backup, concurrency
    guard, define, verify - with vmtune's safe fixes (unsafe ones with I(unsafe_fixes)).
  - Idempotent - a second run reports C(changed=false). Check mode computes the change and defines
    nothing; with C(--diff) each changed domain's definition is shown before and after.
  - With I(rollback), restores each domain's definition from before vmtune's last change.
  - Domains that OpenStack nova or KubeVirt manage are skipped unless I(force).
version_added: "0.1.0"
author: vmtune authors
extends_documentation_fragment:
  - vmtune.libvirt.common
options:
  unsafe_fixes:
    description: Also apply fixes vmtune marks unsafe.
    type: bool
    default: false
  live:
    description: Also re-pin the vCPU, emulator and I/O threads of running domains now.
    type: bool
    default: false
  force:
    description: Redefine domains that nova or KubeVirt manage.
    type: bool
    default: false
  rollback:
    description: Restore the definitions vmtune last replaced instead of fixing.
    type: bool
    default: false
  state_dir:
    description: Where backups live on the managed host (default C(/var/lib/vmtune) as root).
    type: path
"""

EXAMPLES = r"""
- name: See what would change
  vmtune.libvirt.tune:
  check_mode: true
  diff: true

- name: Apply the safe fixes
  vmtune.libvirt.tune:

- name: Undo vmtune's last change of win10
  vmtune.libvirt.tune:
    domains: [win10]
    rollback: true
"""

RETURN = r"""
domains:
  description: Per domain - name, changed, the fixes applied (or that would be), why it was skipped, messages.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.vmtune.libvirt.plugins.module_utils.vmtune_common import (  # noqa: E402
    COMMON_ARGS,
    call,
    load_vmtune,
    selection,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(COMMON_ARGS, unsafe_fixes=dict(type="bool", default=False),
                           live=dict(type="bool", default=False), force=dict(type="bool", default=False),
                           rollback=dict(type="bool", default=False), state_dir=dict(type="path")),
        supports_check_mode=True,
    )
    fleet = load_vmtune(module)
    params = module.params
    if params["rollback"]:
        changes = call(module, fleet.rollback, params["uri"], params["domains"], check_mode=module.check_mode,
                       state_dir=params["state_dir"])
    else:
        changes = call(module, fleet.tune, params["uri"], params["domains"], selection(fleet, params),
                       unsafe=params["unsafe_fixes"], live=params["live"], force=params["force"],
                       check_mode=module.check_mode, state_dir=params["state_dir"])
    result = dict(changed=any(c.changed for c in changes), domains=[c.as_dict() for c in changes])
    if module._diff:
        result["diff"] = [dict(before_header=c.domain, after_header=c.domain, before=c.before, after=c.after)
                          for c in changes if c.changed]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
