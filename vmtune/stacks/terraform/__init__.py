"""Terraform: `libvirt_domain` resources of terraform-provider-libvirt. The front end's declaration
(vmtune.stacks.registry); its parts: detect.py, frontend.py, and hcl.py / hcledit.py, which read
and edit HCL."""

from __future__ import annotations

from typing import Any

from vmtune.stacks.registry import FrontEnd


class Settings:
    """What the command line tells the Terraform front end: the variable values of
    --tf-var-file and --tf-var (`terraform plan -var-file/-var`), resolved, later ones winning."""

    __slots__ = ("given", "problems")

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        self.given: dict[str, Any] = given or {}
        # a file that does not parse, a tfvars or module that cannot be read: said, while the
        # run's other files go on (vmtune.stacks.frontend._taken_problems says them)
        self.problems: list[Any] = []


def settings(request: Any) -> Settings:
    if not request.tf_var_files and not request.tf_vars:
        return Settings()  # no HCL parser loaded for a run without them
    from vmtune.stacks.terraform.workspace import command_line_vars

    return Settings(command_line_vars(request.tf_var_files, request.tf_vars))


FRONTEND = FrontEnd("terraform", title="Terraform", stack_title="Terraform", walked=(".tf",), named=(".json",),
                    own_format=(".tf",), editor="hcledit", settings=settings,
                    notes={"STK002": ("frontend._render_one", "frontend._render_planned", "workspace._not_read"),
                           "STK003": ("frontend._render_one",)})
