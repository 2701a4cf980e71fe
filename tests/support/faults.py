"""The names of the faults tests/support/failing_troupe plants (importable without starting troupe:
that module patches gevent on import)."""
HANDLER_FAULT = "test_handler_fault"  # a tools/call of it raises inside its handler
SESSION_FAULT = "test_session_fail"  # a tools/call of it raises past every guard: the Session fails
