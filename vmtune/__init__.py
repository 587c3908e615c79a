"""vmtune: find the libvirt domain settings that make virtual machines slow, and fix them."""

import os as _os

__version__ = "0.2.0"

# A developer's in-place build: its compiled modules run from their source once it is edited
# (vmtune.compiled). Installed from a wheel, there is no marker, and this is one failed stat.
if _os.path.exists(_os.path.join(_os.path.dirname(__file__), "_compiled_inplace.txt")):
    from vmtune import compiled as _compiled

    _compiled.guard(_os.path.dirname(__file__))
