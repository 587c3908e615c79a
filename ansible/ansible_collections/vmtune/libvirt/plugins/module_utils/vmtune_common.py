# Copyright: (c) 2026, vmtune authors
# MIT License (see LICENSE in the vmtune repository)
"""What both modules share: importing vmtune and libvirt-python on the managed host, with a
message that says what to install instead of a traceback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

INSTALL = ("install vmtune on the hypervisor: pip install /path/to/vmtune-*.whl (built with `pip wheel .` "
           "in a vmtune checkout), or pip install 'git+<your mirror of vmtune>'; then set "
           "ansible_python_interpreter to that Python if it is not the system one")
LIBVIRT = "install libvirt-python on the hypervisor: pip install libvirt-python (needs libvirt-dev and pkg-config)"

COMMON_ARGS = dict(
    uri=dict(type="str", default="qemu:///system"),
    domains=dict(type="list", elements="str", default=[]),
    policy=dict(type="list", elements="str", default=[]),
    select=dict(type="list", elements="str", default=[]),
    ignore=dict(type="list", elements="str", default=[]),
)


def load_vmtune(module):
    """vmtune.live.fleet, or fail_json naming what is missing (never a traceback)."""
    try:
        from vmtune.live import fleet
    except ImportError:
        module.fail_json(msg="vmtune is not installed on this host: " + INSTALL)
    try:
        fleet.require()
    except Exception:  # VmtuneError: libvirt-python missing
        module.fail_json(msg=LIBVIRT)
    return fleet


def selection(fleet, params, fail_on=None):
    return fleet.Selection(policies=params["policy"], select=params["select"], ignore=params["ignore"],
                           fail_on=fail_on)


def call(module, action, *args, **kwargs):
    """Run a vmtune.live.fleet function; its one-line VmtuneError fails the task with that line."""
    from vmtune.errors import VmtuneError

    try:
        return action(*args, **kwargs)
    except VmtuneError as exc:
        module.fail_json(msg=str(exc))
