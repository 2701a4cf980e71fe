"""The Troupe handle an embedding host holds: flat MCP calls through one Session of its own,
the status and events, servers registered and approved at runtime, and stop().

Made by actors.embed.start, which checks the process is patched first; like actors.embed this
module imports only light things at the top (a host may import it before it patches).
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterable

import gevent
import gevent.event
import gevent.pool
from loguru import logger

from actors.ops import acts
from actors.protocol import inbound, mcp
from actors.supervision.states import ServerState
from actors.trust.provenance import REGISTERED

SOURCE = "embedded"  # the supervisor's source label for servers registered through a handle
TIMEOUT_MARGIN = 5.0  # over the server's own timeout: the server's timeout answers first, this is a net
DEFAULT_SERVER_TIMEOUT = 30.0  # when the owning server is not known (yet)
LOCAL_TIMEOUT = 10.0  # requests the session answers itself (initialize, lists)
SESSION_STOP_WAIT = 3.0  # the handle's sessions stop in parallel within this
CALLBACK_KILL_WAIT = 1.0  # subscriber greenlets still running at stop() are killed within this
POLL_INTERVAL = 0.02  # register_server's wait for the new server to settle


class McpError(Exception):
    """A JSON-RPC error answer (unknown tool or prompt, bad params, server unavailable…)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} (code {code})")
        self.code, self.message, self.data = code, message, data


class ToolError(McpError):
    """A JSON-RPC error answering tools/call; a tool's own failure is an isError result instead."""


class Troupe:
    """One embedded troupe. Every call blocks only the calling greenlet, always with a timeout.

    Tools are called flat (qualified names such as `echo__add`), whatever `serve.mode` says;
    that mode only shapes what MCP clients of `wsgi_app` see.
    """

    def __init__(self, runtime):
        from actors.downstream.session import Session
        self.runtime = runtime
        self._ids = itertools.count(1)
        self._apps: list = []
        self._callbacks = gevent.pool.Group()
        self._registered: dict = {}  # name → ServerConfig added through this handle (no discovery)
        self._pending: dict[int, gevent.event.AsyncResult] = {}  # calls in flight, failed at once by stop()
        self._stopped = False
        self._session = Session.start(runtime, notify=None, key="embedded", mode="flat")
        try:
            self._request("initialize", {"protocolVersion": mcp.LATEST, "capabilities": {},
                                         "clientInfo": {"name": "troupe-embedded", "version": "1"}}, LOCAL_TIMEOUT)
        except BaseException:
            self._session.stop(block=False)
            raise
        self._notify("notifications/initialized", {})

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"{len(self.runtime.servers.current.servers)} servers"
        return f"<Troupe {state}>"

    def __enter__(self) -> "Troupe":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- requests through the session

    def _request(self, method: str, params: dict, timeout: float, error: type = McpError) -> dict:
        from actors.messages import ClientMessage
        from actors.tells import tell
        if self._stopped:
            raise RuntimeError("this troupe handle is stopped")
        rid = next(self._ids)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        refused = inbound.check(message, "embedding host").answers  # as every front checks its clients
        if refused:
            raise error(refused[0]["error"]["code"], refused[0]["error"]["message"], None)
        answer = gevent.event.AsyncResult()

        def sink(message: dict) -> None:  # runs in an actor's greenlet: only hand the answer over
            if "method" not in message and not answer.ready():
                answer.set(message)
        if not tell(self._session, ClientMessage(message, sink)):
            raise RuntimeError("this troupe handle is stopped")
        self._pending[rid] = answer
        try:
            answer.wait(timeout)
        finally:
            self._pending.pop(rid, None)
            if not answer.ready():  # timed out, or the host's own gevent.Timeout/kill hit us
                self._notify("notifications/cancelled", {"requestId": rid, "reason": "caller gave up"})
        if not answer.ready():
            raise TimeoutError(f"troupe: no answer to {method} within {timeout:g}s")
        reply = answer.get()
        assert reply is not None  # set with an answer or _STOPPED, never empty
        if reply is _STOPPED:
            raise RuntimeError(f"this troupe handle was stopped during {method}")
        if "error" in reply:
            err = reply["error"]
            raise error(err.get("code", 0), err.get("message", ""), err.get("data"))
        return reply["result"]

    def _notify(self, method: str, params: dict) -> None:
        from actors.messages import ClientMessage
        from actors.tells import tell
        # A notification to a stopped handle's Session has nobody to reach: dropped, as a closed client's.
        tell(self._session, ClientMessage({"jsonrpc": "2.0", "method": method, "params": params}, _ignore))

    def _server_timeout(self, server: str | None) -> float:
        view = self.runtime.servers.current.get(server)
        if view is not None:
            return view.config.timeout
        known = [v.config.timeout for v in self.runtime.servers.current.servers.values()]
        return max(known, default=DEFAULT_SERVER_TIMEOUT)

    def _timeout(self, server: str | None = None) -> float:
        """The server's own timeout plus a margin, plus the start-up wait while servers still start."""
        wait = 0.0 if self.runtime.settled.is_set() else self.runtime.config.serve.startup_wait
        return self._server_timeout(server) + wait + TIMEOUT_MARGIN

    # ---------------------------------------------------------------- the catalogue

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every auto-start server is ready or failed (default: serve.startup_wait)."""
        return self.runtime.settled.wait(self.runtime.config.serve.startup_wait if timeout is None else timeout)

    def list_tools(self) -> list[dict]:
        """Every tool under its qualified name (core_* included), once start-up has settled."""
        self.wait_ready()
        return self._request("tools/list", {}, LOCAL_TIMEOUT)["tools"]

    def call_tool(self, name: str, arguments: dict | None = None, *, timeout: float | None = None) -> dict:
        """The tool's result dict as the server sent it; a failing tool gives `isError: true`, not an exception.

        Raises ToolError for a JSON-RPC error (unknown tool, arguments that are not an object…)
        and TimeoutError after `timeout` (default: the server's timeout plus a margin).
        """
        if timeout is None:
            entry = self.runtime.catalogue().tool(name)
            timeout = self._timeout(entry.server if entry is not None else None)
        return self._request("tools/call", {"name": name, "arguments": arguments or {}}, timeout, ToolError)

    def list_resources(self) -> list[dict]:
        self.wait_ready()
        return self._request("resources/list", {}, LOCAL_TIMEOUT)["resources"]

    def list_resource_templates(self) -> list[dict]:
        self.wait_ready()
        return self._request("resources/templates/list", {}, LOCAL_TIMEOUT)["resourceTemplates"]

    def read_resource(self, uri: str, *, timeout: float | None = None) -> dict:
        """{"contents": […]}; McpError if no server owns the URI."""
        owner = self.runtime.catalogue().resource_owner(uri)
        return self._request("resources/read", {"uri": uri}, timeout or self._timeout(owner and owner[0]))

    def list_prompts(self) -> list[dict]:
        self.wait_ready()
        return self._request("prompts/list", {}, LOCAL_TIMEOUT)["prompts"]

    def get_prompt(self, name: str, arguments: dict | None = None, *, timeout: float | None = None) -> dict:
        """{"messages": […], …}; McpError for an unknown prompt."""
        entry = self.runtime.catalogue().prompt(name)
        params = {"name": name, "arguments": arguments or {}}  # MCP prompt arguments are strings
        return self._request("prompts/get", params, timeout or self._timeout(entry.server if entry else None))

    # ---------------------------------------------------------------- operating it

    def status(self) -> dict:
        """The supervisor's status report (what GET /status shows)."""
        return self.runtime.status()

    def events(self, limit: int = 100) -> list[dict]:
        """Recent bus events, oldest first."""
        return self.runtime.events(limit)

    def subscribe(self, event_types: str | Iterable[str] | None, callback: Callable[[Any], None]) -> object:
        """Call `callback(event)` for each bus event of these types (None or empty = all).

        Each call runs in its own greenlet (the bus never waits for host code); an exception
        there is logged. `event.kind` is its type name, `event.to_json()` a plain dict.
        Returns a token for `unsubscribe`.
        """
        from actors.events import kinds as events
        types = (event_types,) if isinstance(event_types, str) else tuple(event_types or ())
        known = _event_names(events.Event)
        unknown = sorted(set(types) - known)
        if unknown:
            raise ValueError(f"unknown event types {unknown}; known: {', '.join(sorted(known))}")
        token, group = object(), self._callbacks

        def deliver(event) -> None:  # runs in the bus greenlet: never block it
            group.spawn(_run_callback, callback, event)
        self.runtime.bus.subscribe(token, deliver, types)
        return token

    def unsubscribe(self, token: object) -> None:
        self.runtime.bus.unsubscribe(token)

    def register_server(self, name: str, *, command: str | None = None, args: Iterable[str] = (),
                        env: dict | None = None, cwd: str | None = None, url: str | None = None,
                        headers: dict | None = None, type: str | None = None, wait: bool = True) -> dict:
        """Add a server at runtime (stdio `command` or HTTP `url`); returns its status entry.

        A registration is `registered` provenance: it waits in state `pending-approval`, never
        executed, until `approve(name)` (or `troupe approve NAME`). With discovery on it is a
        passive registration (persisted in its store); without it the server lives as long as
        this handle. `wait` waits, at most serve.startup_wait, until it is ready (its tools in
        the catalogue), has failed, or waits for approval.
        """
        spec: dict[str, Any] = {}
        if command is not None:
            spec.update(command=command, args=list(args))
            if cwd:
                spec["cwd"] = cwd
        if url is not None:
            spec["url"] = url
        for key, value in (("env", env), ("headers", headers), ("type", type)):
            if value:
                spec[key] = value
        if self.runtime.discovery is not None:
            self.runtime.register_server({"name": name, **spec})
        else:
            self._apply_registration(name, spec)
        if wait:
            self._wait_settled(name, self.runtime.config.serve.startup_wait)
        return self._server_status(name)

    def _apply_registration(self, name: str, spec: dict) -> None:
        from dataclasses import replace
        from actors.settings import config as config_mod
        if self.runtime.config.server(name) is not None:
            raise ValueError(f"name {name!r} is used by a server in the main config")
        server = config_mod.from_data({"mcpServers": {name: spec}}).servers[0]
        self._registered[name] = replace(server, source=SOURCE, provenance=REGISTERED, origin_file="embed")
        # ApplyServers reconciles every server of a source: send the whole set each time.
        self.runtime.apply_servers(tuple(self._registered.values()), source=SOURCE)

    def approve(self, name: str, *, wait: bool = True) -> dict:
        """The operator's approval of one server: its exact launch line, and its current tool
        and prompt definitions. Returns its status entry (after it settles, with `wait`)."""
        self.runtime.decide(name, "approved")
        acts.record(self.runtime.observer, "approve", name, None, acts.EMBEDDED)
        if wait:
            self._wait_settled(name, self.runtime.config.serve.startup_wait, approved=True)
        return self._server_status(name)

    def deny(self, name: str) -> dict:
        """The operator's denial: the server is stopped if running and never started again."""
        decided = self.runtime.decide(name, "denied")
        acts.record(self.runtime.observer, "deny", name, None, acts.EMBEDDED)
        return decided

    def approvals(self) -> list[dict]:
        """What waits for approval: servers and withheld tool or prompt definitions (with diffs)."""
        return self.runtime.approvals()

    def unregister_server(self, name: str) -> bool:
        """Stop and forget a server added with register_server; False if it was not one."""
        if self.runtime.discovery is not None:
            return bool(self.runtime.unregister_server(name))
        if self._registered.pop(name, None) is None:
            return False
        self.runtime.apply_servers(tuple(self._registered.values()), source=SOURCE)
        return True

    def _wait_settled(self, name: str, timeout: float, approved: bool = False) -> None:
        deadline = time.monotonic() + timeout
        # just approved: the supervisor hears of it a moment later, so "pending" is not settled yet
        unsettled = (ServerState.STARTING, ServerState.PENDING_APPROVAL) if approved else (ServerState.STARTING,)
        while time.monotonic() < deadline:
            view = self.runtime.servers.current.get(name)
            if view is not None and view.settled and view.state not in unsettled:
                # The registry publishes the lists a moment after the supervisor hears "ready".
                if not view.callable or not any(view.counts) or name in self.runtime.catalogue().servers:
                    return
            gevent.sleep(POLL_INTERVAL)

    def _server_status(self, name: str) -> dict:
        found = next((s for s in self.status()["servers"] if s["name"] == name), None)
        return found if found is not None else {"name": name, "state": "pending"}

    def stop(self) -> None:
        """Stop every actor and child process of this troupe; the host keeps running. Idempotent."""
        import pykka
        if self._stopped:
            return
        self._stopped = True
        for answer in list(self._pending.values()):  # no caller waits out its timeout on a stopped troupe
            if not answer.ready():
                answer.set(_STOPPED)
        sessions = [self._session]
        for app in self._apps:
            sessions += app.mcp.sessions.refs()
            app.close()  # ends its streams and its reaper greenlet
        futures = [ref.stop(block=False) for ref in sessions]
        try:
            pykka.get_all(futures, timeout=SESSION_STOP_WAIT)
        except Exception as exc:
            logger.warning("embedded troupe: sessions did not all stop: {}", exc)
        self.runtime.stop()
        # Deferred requests wait on `settled` for up to startup_wait; release them now.
        self.runtime.settled.set()
        self._callbacks.kill(block=True, timeout=CALLBACK_KILL_WAIT)


_STOPPED = object()  # the answer stop() gives every call still in flight


def _ignore(message: dict) -> None:
    pass


def _run_callback(callback: Callable, event) -> None:
    try:
        callback(event)
    except Exception:  # host code: log it, keep delivering the next events
        logger.exception("troupe event subscriber {!r} failed on {}", callback, event.kind)


def _event_names(base: type) -> set[str]:
    out, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.add(sub.__name__)
            todo.append(sub)
    return out
