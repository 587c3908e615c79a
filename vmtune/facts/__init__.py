"""Facts derived once from a domain definition and from its host, for rules to read."""
