"""How a Session's call waits for an on-demand server to start: pure functions of the published
Directory and catalogue, and the wait a call's greenlet runs. The Session owns the wait: the
call keeps its own deadline (set when it was accepted), so a server that does not start in time
answers the call with a timeout naming it, once, from the Session.
"""
from __future__ import annotations

from typing import Any, Callable

import gevent

from actors.downstream.calls import WAKING, Call, ServerBack
from actors.supervision.states import ServerState
from actors.tells import tell

# A call waits for a start while its on-demand server is in one of these: idle (it wakes it) or
# starting (that start is shared). In backoff or failed it is answered at once, as for any server.
WAKE_STATES = (ServerState.IDLE, ServerState.STARTING)
# A call answered "unsent" by a Connection that was stopping goes to the next start; a server that
# keeps stopping under calls is not chased forever.
MAX_WAKES = 3
POLL_S = 0.05  # only without a waitable Directory (a Session built on its own, in a test)


def waits(view, wakes: int) -> bool:
    """Should a call that found no connection of this server wait for its start?"""
    return view is not None and view.config.on_demand and view.state in WAKE_STATES and wakes < MAX_WAKES


def resent(view, outcome, wakes: int) -> bool:
    """A call answered as never sent (its Connection was stopping for idleness, or had stopped) goes
    to the server's next start."""
    return (view is not None and view.config.on_demand and wakes < MAX_WAKES
            and getattr(outcome, "link", "") == "unsent")


def wait_for_start(server: str, directory: Callable[[], Any], changed: Callable[[], Any], dead,
                   wake: Callable[[], None], report: Callable[[], None]) -> None:
    """A waking call's work (its deadline kills it): wake the server each time it is seen idle (a
    Supervisor that was still stopping it ignored the earlier wake), wait for a Directory in which
    it is callable through another connection than `dead`, or no longer starting, then `report()`."""
    while True:
        event = changed()  # taken before the read: a publish in between still wakes the wait
        view = directory().get(server)
        if view is None or view.state not in (*WAKE_STATES, *_UP):
            break
        if view.callable and view.ref is not dead:
            break
        if view.state == ServerState.IDLE:
            wake()
        if event is None:
            gevent.sleep(POLL_S)
        else:
            event.wait(timeout=1.0)
    report()


_UP = (ServerState.READY, ServerState.DEGRADED)


def gone_tool(cat, server: str, method: str, params, passthrough: str | None) -> str | None:
    """Why a woken server cannot take this tools/call, or None: the tool it listed before it
    stopped is gone from what it listed at its start, or changed and is withheld until approved."""
    if method != "tools/call" or server == passthrough or not isinstance(params, dict):
        return None
    name = params.get("name")
    if any(entry.server == server and entry.original == name for entry in cat.tools):
        return None
    for held in cat.withheld.values():
        if held.server == server and held.original == name and held.kind == "tools":
            return held.message()
    return (f"tool {name!r} is no longer offered by server {server}: it did not list it when it started "
            "on demand (call list_tools again)")


class WakingCalls:
    """The Forwarder's waking calls (mixed into it; its greenlet only): `_wake` puts a call in the
    WAKING phase with a wait for its server's start, `_woken` sends it once the wait reports."""

    _ctx: Any
    _me: Any
    answer: Callable[..., None]
    send: Callable[[Call], None]

    def _wake(self, call: Call, dead) -> None:
        """Its on-demand server is idle (or stopping, or starting for another call): the call waits
        in the table, under the deadline it has, for the start it shares with every other waiter."""
        me, token, server, method = self._me, call.token, call.server, call.method
        call.phase, call.ref = WAKING, None
        call.wakes += 1
        ctx = self._ctx
        call.work = gevent.spawn(wait_for_start, server, ctx.servers, ctx.server_changes, dead,
                                 lambda: ctx.wake(server, method), lambda: tell(me, ServerBack(token)))

    def _woken(self, call: Call) -> None:
        """Its server started (or will not): the call goes now, unless its tool is gone or withheld."""
        call.work = None
        gone = gone_tool(self._ctx.catalogue(), call.server, call.method, call.params, self._ctx.passthrough_server())
        if gone is not None:
            # as a withheld tool's call is answered: a tool error the model can read (not the server's)
            self.answer(call.token, {"content": [{"type": "text", "text": gone}], "isError": True})
            return
        self.send(call)
