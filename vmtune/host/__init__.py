"""Host-level reasoning: the inventory of a host's domains, the CPU placement planner, host checks."""
