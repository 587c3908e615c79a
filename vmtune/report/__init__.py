"""Turning findings into text, JSON and the other output formats."""
