"""The catalogue: the Registry actor and the immutable snapshot of every tool, resource and prompt."""
