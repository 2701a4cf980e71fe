"""troupe with two faults planted in its Session, for tests of what a failing Session does, run as
`python -m tests.support.failing_troupe <troupe's own arguments>`:

- a tools/call of HANDLER_FAULT raises inside its handler, as a bug in one request's handling would:
  that request alone is answered with an internal error and the Session serves on;
- a tools/call of SESSION_FAULT raises past every guard, as a bug in the guards themselves would:
  the Session fails, answers every call it holds, and the front carries on without it.
"""
from actors import main as troupe  # first: it patches gevent before anything else is imported
from actors.downstream import session as session_mod
from actors.downstream import tool_calls
from tests.support.faults import HANDLER_FAULT, SESSION_FAULT


class PlantedFault(Exception):
    """The planted bug."""


_dispatch, _contain, _tools_call = session_mod.Session._dispatch, session_mod.Session._contain, \
    tool_calls.ToolRequests.tools_call


def _named(message, name: str) -> bool:
    msg = getattr(message, "message", None)
    params = msg.get("params") if isinstance(msg, dict) else None
    return isinstance(params, dict) and msg.get("method") == "tools/call" and params.get("name") == name


def dispatch(self, message):
    if _named(message, SESSION_FAULT):
        raise PlantedFault("a planted fault past every guard")
    return _dispatch(self, message)


def contain(self, message, exc):
    if isinstance(exc, PlantedFault):
        raise exc  # past the guard too: the Session fails
    return _contain(self, message, exc)


def tools_call(self, rid, params, sink, msg):
    if params.get("name") == HANDLER_FAULT:
        raise RuntimeError("a planted fault in one request's handler")
    return _tools_call(self, rid, params, sink, msg)


session_mod.Session._dispatch = dispatch
session_mod.Session._contain = contain
tool_calls.ToolRequests.tools_call = tools_call

if __name__ == "__main__":
    troupe.main()
