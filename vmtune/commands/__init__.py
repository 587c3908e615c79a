"""Command implementations: the glue between the CLI, files or libvirt, and reporters."""
