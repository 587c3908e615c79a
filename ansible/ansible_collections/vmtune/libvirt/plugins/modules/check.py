#!/usr/bin/python
# Copyright: (c) 2026, vmtune authors
# MIT License (see LICENSE in the vmtune repository)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: check
short_description: Report the libvirt domain settings that make VMs slow (vmtune check)
description:
  - Runs vmtune's rules over the persistent definitions of the local libvirt's domains and returns
    the findings with the same fields as C(vmtune check --format json).
  - Never changes anything.
version_added: "0.1.0"
author: vmtune authors
extends_documentation_fragment:
  - vmtune.libvirt.common
options:
  fail_on:
    description:
      - Fail the host when a finding has at least this severity. By default the module never fails
        on findings, only on errors.
    type: str
    choices: [info, warning, error]
notes:
  - Supports check mode (it changes nothing either way).
"""

EXAMPLES = r"""
- name: Check every domain of the hypervisor
  vmtune.libvirt.check:
  register: vmtune

- name: Fail hosts with errors in two domains
  vmtune.libvirt.check:
    domains: [db01, db02]
    policy: [latency]
    fail_on: error
"""

RETURN = r"""
findings:
  description: The findings, each with the fields of C(vmtune check --format json).
  returned: always
  type: list
  elements: dict
summary:
  description: Counts (domains, findings per severity, fixable, errors).
  returned: always
  type: dict
errors:
  description: Domains that could not be read or checked.
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
        argument_spec=dict(COMMON_ARGS, fail_on=dict(type="str", choices=["info", "warning", "error"])),
        supports_check_mode=True,
    )
    fleet = load_vmtune(module)
    params = module.params
    report = call(module, fleet.check, params["uri"], params["domains"], selection(fleet, params, params["fail_on"]))
    result = dict(changed=False, findings=report["findings"], summary=report["summary"], errors=report["errors"],
                  skipped=report["skipped"])
    if report["errors"]:
        module.fail_json(msg="vmtune could not check %d domain(s)" % len(report["errors"]), **result)
    if params["fail_on"] and report["failing"]:
        module.fail_json(msg="findings at or above %s" % params["fail_on"], **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
