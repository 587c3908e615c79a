"""Declarative policies: which rules apply to which domains, with what severity and parameters."""
