"""Supervision: the Supervisor actor, its child records and status report, its policy as data,
the states a server can be in, and the Directory snapshot it publishes."""
