"""Supervision: the Supervisor actor, its policy as data, and the Directory snapshot it publishes."""
