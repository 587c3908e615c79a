"""Device model facts shared by rules."""

from __future__ import annotations

# libvirt's virtio model names: 'virtio', and since libvirt 5.2 'virtio-transitional' and
# 'virtio-non-transitional' (KubeVirt's default), the same virtio device with a fixed PCI
# identity. A rule that asks "is this virtio?" must count all of them.
VIRTIO_MODELS = frozenset({"virtio", "virtio-transitional", "virtio-non-transitional"})


def is_virtio(model: str | None) -> bool:
    return model in VIRTIO_MODELS


# what a SCSI controller's model is when it is virtio-scsi: 'virtio-scsi' or a (non-)transitional variant
VIRTIO_SCSI_MODELS = frozenset({"virtio-scsi", *VIRTIO_MODELS - {"virtio"}})


def is_virtio_scsi(controller_model: str | None) -> bool:
    """A SCSI controller model that is virtio-scsi: 'virtio-scsi' or a (non-)transitional variant."""
    return controller_model in VIRTIO_SCSI_MODELS
