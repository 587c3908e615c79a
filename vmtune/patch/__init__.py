"""Turning fixes into minimal, format-preserving byte edits."""
