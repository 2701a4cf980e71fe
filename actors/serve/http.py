"""One HTTP server (lean_http): MCP (/mcp, /sse), status, events; bound to loopback by default."""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, Callable

import orjson
from loguru import logger

from actors.serve import metrics
from actors.serve import approvals, dashboard, oauth_callback, sse_framing as sse
from actors.serve.lean_http import LeanServer
from actors.serve.listener import FrontHandler, watch_hangup
from actors.serve.mcp_http import McpHttp
from actors.serve.security import Guard, exposure_refusal
from actors.serve.stream_buffer import EMPTY, StreamBuffer, shut_down_later

NoDelayHandler = FrontHandler  # the name hosts embedding troupe already import
_HUNG_UP = object()  # /events queue sentinel: the client went away, or the stream was closed for slowness
LOG_EVENT = "ServerLogged"  # the /events kind dropped first when its reader falls behind


class App:
    """The WSGI application; mountable in a host's own server (see actors.wsgi_app)."""

    def __init__(self, runtime, bound_host: str | None = None, bound_port: int | None = None):
        self.rt = runtime
        # No bound_port when a host app serves us: the guard then takes the port each request came in on.
        self.guard = Guard(runtime.config.serve, bound_host or runtime.config.serve.host, bound_port)
        if runtime.cluster is not None:  # proxied session requests from other instances carry its secret
            self.guard.member_token = lambda: runtime.cluster.token
        self.mcp = McpHttp(runtime)
        self.front: LeanServer | None = None  # set by listen(); None when a host's server serves us
        self.extra_routes: dict[tuple[str, str], Callable[[dict], Any]] = {}
        self.prefix_routes: list[tuple[str, str, Callable[[dict], Any]]] = []  # (method, path prefix, handler)
        metrics.install(self)
        dashboard.install(self)
        approvals.install(self)
        oauth_callback.install(self)

    def close(self) -> None:
        self.mcp.close()

    def __call__(self, environ, start_response):
        refusal = self.guard.check(environ)
        if refusal is not None:
            status, reason = refusal
            headers = [("Content-Type", "application/json")]
            if status.startswith("401"):
                headers.append(("WWW-Authenticate", 'Bearer realm="troupe"'))
            start_response(status, headers)
            return [orjson.dumps({"error": reason})]
        try:
            status, headers, body = self.route(environ)
        except Exception as exc:  # one bad request must not take the server down
            logger.exception("HTTP handler failed")
            status, headers, body = "500 Internal Server Error", [("Content-Type", "application/json")], \
                orjson.dumps({"error": f"{type(exc).__name__}: {exc}"})
        start_response(status, headers)
        return [body] if isinstance(body, bytes) else body

    def route(self, environ):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO") or "/"
        if path.endswith("/") and len(path) > 1:
            path = path.rstrip("/")
        if path == "/mcp":
            handler = {"POST": self.mcp.post, "GET": self.mcp.get, "DELETE": self.mcp.delete}.get(method)
            if handler is None:
                return "405 Method Not Allowed", [("Allow", "GET, POST, DELETE")], b""
            return handler(environ)
        if path == "/sse" and method == "GET":
            return self.mcp.legacy_stream(environ)
        if path in ("/messages", "/message") and method == "POST":
            return self.mcp.legacy_post(environ)
        if method == "GET" and path == "/status":
            return _json(self.status())
        if method == "GET" and path.startswith("/status/servers/"):
            name = path[len("/status/servers/"):]
            found = next((s for s in self.rt.status()["servers"] if s["name"] == name), None)
            if found is None:
                return _json({"error": f"unknown server {name!r}"}, "404 Not Found")
            return _json(found)
        if method == "GET" and path == "/api/history":  # the dashboard's traffic charts
            return _json(self.rt.history_report())
        if method == "GET" and path == "/events":
            return "200 OK", list(sse.HEADERS), self._events(environ)
        extra = self.extra_routes.get((method, path))
        if extra is not None:
            return extra(environ)
        for want, prefix, handler in self.prefix_routes:
            if method == want and path.startswith(prefix):
                return handler(environ)
        return _json({"error": f"no route for {method} {path}"}, "404 Not Found")

    def status(self) -> dict:
        """The status report plus what this app holds open: sessions and (when it listens) connections."""
        report = self.rt.status()
        report["sessions"] = {**self.mcp.sessions.summary(), "proxied": self.mcp.proxy.proxied}
        report["modern"] = self.mcp.modern.summary()
        report["clients"] = self.client_report()
        report["streams"] = self.mcp.streams.report()
        if self.front is not None:
            report["connections"] = self.front.figures()
        return report

    def client_report(self) -> dict:
        """Requests, tool calls and open sessions by client name (serve.clients), with each profile."""
        return self.mcp.clients.report(self.mcp.sessions.by_client(), self.mcp.sessions.quota_figures())

    def _events(self, environ):
        """The event bus as SSE: recent history first, then live events, at most
        serve.stream_buffer_bytes of them unsent; past that, log events are dropped, and when
        others do not fit either the stream ends with a `missed` event saying what it lost."""
        closer: list = []  # the socket's delayed shut-down, once closed for slowness

        def overflowed() -> None:  # the bus greenlet, once: the last word, then the end
            buffer.put(sse.event({"dropped_events": buffer.dropped + buffer.lost,
                                  "dropped_bytes": buffer.dropped_bytes + buffer.lost_bytes,
                                  "reason": "the reader fell behind serve.stream_buffer_bytes"}, name="missed"))
            buffer.put(_HUNG_UP)
            closer.append(shut_down_later(environ))
        buffer = StreamBuffer(self.rt.config.serve.stream_buffer_bytes, self.mcp.streams, "events", overflowed)
        token = object()
        watcher = watch_hangup(environ, lambda: buffer.put(_HUNG_UP))

        def deliver(event) -> None:  # bus greenlet: never block it; encoded here, so counted as sent
            buffer.offer(sse.event(event.to_json(), name=event.kind), "log" if event.kind == LOG_EVENT else None)
        self.rt.bus.subscribe(token, deliver)
        try:
            for past in self.rt.bus.history(50):
                yield sse.event(past.to_json(), name=past.kind)
            while True:
                item = buffer.get(timeout=sse.KEEPALIVE_S)
                if item is EMPTY:
                    yield sse.comment()
                    continue
                if item is _HUNG_UP:
                    return
                yield item
        finally:
            if watcher is not None:
                watcher.kill(block=False)
            for greenlet in closer:
                if greenlet is not None:
                    greenlet.kill(block=False)
            self.rt.bus.unsubscribe(token)
            buffer.close()  # the bus may still hold `deliver` for a moment: it holds nothing then


def _json(value, status: str = "200 OK"):
    return status, [("Content-Type", "application/json")], orjson.dumps(value, option=orjson.OPT_INDENT_2)


def listen(runtime, host: str | None = None, port: int | None = None) -> tuple[LeanServer, App, str]:
    """Bind and start serving in the background; returns the server, the app and the URL."""
    serve_cfg = runtime.config.serve
    host = host or serve_cfg.host
    port = serve_cfg.port if port is None else port
    refusal = exposure_refusal(replace(serve_cfg, transport="http", host=host))
    if refusal is not None:
        raise ValueError(refusal)
    app = App(runtime, host)
    server = LeanServer((host, port), app, max_connections=serve_cfg.max_connections,
                        header_timeout=serve_cfg.header_timeout)
    server.start()
    app.front = server
    app.guard.bound_port = server.server_port  # known only now when port 0 picked a free one
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.server_port}/mcp"
    runtime.set_url(url)
    return server, app, url


def serve(runtime, stop) -> None:
    """`--transport http`: listen, announce the URL on stderr, run until `stop` is set."""
    server, app, url = listen(runtime)
    print(f"troupe: serving {url}", file=sys.__stderr__, flush=True)
    logger.info("serving MCP at {} (legacy SSE at {})", url, url[:-4] + "/sse")
    try:
        stop.wait()
    finally:
        app.close()
        server.stop(timeout=1.0)

