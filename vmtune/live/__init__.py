"""Live domains through libvirt: connections, checks, apply, backups, rollback.

libvirt-python is an optional extra; everything here imports it lazily.
"""
