"""vmtune: find the libvirt domain settings that make virtual machines slow, and fix them."""

__version__ = "0.2.0"
