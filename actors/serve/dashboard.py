"""The dashboard's routes: GET / (the page), GET /dashboard/<asset>, POST /api/servers/<name>/<action>."""
from __future__ import annotations

from importlib import resources

import orjson
import pykka

from actors.events import kinds as events
from actors.ops import acts
from actors.serve.security import ACTION_PREFIX

ASSETS = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8",
          "index.html": "text/html; charset=utf-8"}
ACTIONS = ("restart", "stop", "start", "enable", "disable")
ASSET_PREFIX = "/dashboard/"
# Under the guarded prefix: the Guard lets actions in only from the dashboard's own origin.
API_PREFIX = ACTION_PREFIX + "servers/"
# Everything the page loads is its own: a hostile server name or error text cannot run script.
PAGE_HEADERS = [("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
                ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-cache")]


def _asset(name: str) -> bytes:
    # Read per request: tiny files, and an edited page shows without restarting troupe.
    return resources.files("actors").joinpath("dashboard", name).read_bytes()


def event_kinds() -> list[str]:
    """Every bus event class loaded now; EventSource needs each SSE event name to listen for it."""
    out, todo = set(), [events.Event]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.add(sub.__name__)
            todo.append(sub)
    return sorted(out)


def page(environ):
    body = _asset("index.html").replace(b"{{EVENT_KINDS}}", ",".join(event_kinds()).encode())
    return "200 OK", [("Content-Type", ASSETS["index.html"]), *PAGE_HEADERS], body


def asset(environ):
    name = environ.get("PATH_INFO", "")[len(ASSET_PREFIX):]
    if name not in ASSETS or name == "index.html":  # a fixed list: no path ever reaches the filesystem
        return _json({"error": f"no dashboard asset {name!r}"}, "404 Not Found")
    return "200 OK", [("Content-Type", ASSETS[name]), *PAGE_HEADERS], _asset(name)


def make_control(runtime):
    def control(environ):
        """POST /api/servers/<name>/<action>: the same supervisor operation core_service_* uses."""
        rest = environ.get("PATH_INFO", "")[len(API_PREFIX):].rstrip("/")
        name, _, action = rest.rpartition("/")
        if not name or action not in ACTIONS:
            return _json({"error": f"use POST {API_PREFIX}<name>/<{'|'.join(ACTIONS)}>"}, "400 Bad Request")
        if runtime.servers.current.get(name) is None:  # a typo is answered here and never reaches the supervisor
            return _json({"error": f"unknown server {name!r}"}, "404 Not Found")
        try:
            done = runtime.control(action, name)
            acts.record(runtime.observer, action, name, acts.http_actor(environ, bool(runtime.config.serve.auth_token)),
                        acts.HTTP)
            return _json(done)
        except KeyError:
            return _json({"error": f"unknown server {name!r}"}, "404 Not Found")
        except PermissionError as exc:  # waits for approval or denied: only a decision moves it
            return _json({"error": str(exc)}, "403 Forbidden")
        except ValueError as exc:
            return _json({"error": str(exc)}, "400 Bad Request")
        except pykka.Timeout:
            return _json({"error": f"{action} {name}: the supervisor did not answer in time"},
                         "504 Gateway Timeout")
    return control


def install(app) -> None:
    """Register the dashboard on an http.App."""
    app.extra_routes[("GET", "/")] = page
    app.extra_routes[("GET", "/index.html")] = page
    app.prefix_routes.append(("GET", ASSET_PREFIX, asset))
    app.prefix_routes.append(("POST", API_PREFIX, make_control(app.rt)))


def _json(value, status: str = "200 OK"):
    return status, [("Content-Type", "application/json"), ("Cache-Control", "no-store")], orjson.dumps(value)
