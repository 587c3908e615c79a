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
  - With I(rollback), undoes what earlier runs of this module changed - exactly the backups in I(undo),
    the C(record) those runs returned (the C(tune.yml) playbook keeps it) - or, for the I(domains)
    named, the change vmtune made last. A domain changed since the recorded run is left alone.
    Rolling back without I(undo) or I(domains) is refused.
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
    description:
      - Restore definitions instead of fixing - those in I(undo), else the I(domains) named (to before
        vmtune's last change). One of the two is required.
    type: bool
    default: false
  undo:
    description:
      - With I(rollback), what earlier tune runs changed on this host - the C(record) they returned,
        with keys C(uri) and C(domains), each domain name mapping to its C(uuid), C(backup) and
        C(definition_sha256). Exactly those backups are restored, each only while the domain still has
        the definition the run left.
    type: dict
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

- name: Tune, then undo exactly what that run changed
  vmtune.libvirt.tune:
  register: tuned
- vmtune.libvirt.tune:
    rollback: true
    undo: "{{ tuned.record }}"
"""

RETURN = r"""
domains:
  description:
    - Per domain - name, uuid, changed, the fixes applied (or that would be), why it was skipped, messages,
      the id of the backup made before changing it (C(backup)), and the C(error) that stopped it. A domain
      that fails does not stop the others; the task fails after them, with this list and C(record).
  returned: always
  type: list
  elements: dict
record:
  description:
    - What this run changed, for a later I(rollback) with I(undo) - the URI, and per changed domain its
      uuid, the backup made and a sha256 of the definition left (without secrets).
  returned: when fixing, not in check mode
  type: dict
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
                           rollback=dict(type="bool", default=False), undo=dict(type="dict"),
                           state_dir=dict(type="path")),
        supports_check_mode=True,
    )
    fleet = load_vmtune(module)
    params = module.params
    if params["rollback"]:
        changes = call(module, fleet.rollback, params["uri"], params["domains"], undo=params["undo"],
                       check_mode=module.check_mode, state_dir=params["state_dir"])
    else:
        changes = call(module, fleet.tune, params["uri"], params["domains"], selection(fleet, params),
                       unsafe=params["unsafe_fixes"], live=params["live"], force=params["force"],
                       check_mode=module.check_mode, state_dir=params["state_dir"])
    result = dict(changed=any(c.changed for c in changes), domains=[c.as_dict() for c in changes])
    if not params["rollback"] and not module.check_mode:
        result["record"] = fleet.run_record(params["uri"], changes)
    failed = [c for c in changes if getattr(c, "error", None)]
    if failed:  # after the others were tuned; the result (and its record) goes with the failure
        module.fail_json(msg="vmtune could not tune %d domain(s): %s" % (len(failed), failed[0].error), **result)
    if module._diff:
        result["diff"] = [dict(before_header=c.domain, after_header=c.domain, before=c.before, after=c.after)
                          for c in changes if c.changed]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
