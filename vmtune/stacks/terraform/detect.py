"""Whether a file is the Terraform front end's: a `.tf` file (its name is the test, as for
Terraform itself). Apart from the front end, so asking loads no HCL parser."""

from __future__ import annotations


def wants(data: bytes, name: str) -> bool:
    return name.lower().endswith(".tf")
