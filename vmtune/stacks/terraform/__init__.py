"""Terraform: `libvirt_domain` resources of terraform-provider-libvirt. The front end's declaration
(vmtune.stacks.registry); its parts: detect.py, frontend.py, and hcl.py / hcledit.py, which read
and edit HCL."""

from __future__ import annotations

from vmtune.stacks.registry import FrontEnd

FRONTEND = FrontEnd("terraform", title="Terraform", stack_title="Terraform", walked=(".tf",), named=(".json",),
                    own_format=(".tf",), editor="hcledit",
                    notes={"STK002": ("frontend._render_one", "frontend._render_planned", "workspace._not_read"),
                           "STK003": ("frontend._render_one",)})
