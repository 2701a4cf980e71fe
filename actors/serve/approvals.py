"""The operator's approval routes: GET /api/approvals, POST /api/approvals/<name>/<approve|deny>.

Behind the same guard as every /api/ route (Host, Origin, same-origin for POSTs, the
bearer token when one is set). Nothing on the MCP endpoint can reach these.
"""
from __future__ import annotations

import orjson
import pykka

from actors.ops import acts

PREFIX = "/api/approvals"
DECISIONS = {"approve": "approved", "deny": "denied"}


def _json(value, status: str = "200 OK"):
    return status, [("Content-Type", "application/json"), ("Cache-Control", "no-store")], orjson.dumps(value)


def make_routes(runtime):
    def listing(environ):
        return _json({"approvals": runtime.approvals()})

    def decide(environ):
        rest = environ.get("PATH_INFO", "")[len(PREFIX) + 1:].rstrip("/")
        name, _, action = rest.rpartition("/")
        if not name or action not in DECISIONS:
            return _json({"error": f"use POST {PREFIX}/<name>/<approve|deny>"}, "400 Bad Request")
        try:
            decided = runtime.decide(name, DECISIONS[action])
            acts.record(runtime.observer, action, name, acts.http_actor(environ, bool(runtime.config.serve.auth_token)),
                        acts.HTTP)
            return _json(decided)
        except KeyError:
            return _json({"error": f"unknown server {name!r}"}, "404 Not Found")
        except pykka.Timeout:
            return _json({"error": f"{action} {name}: no answer in time"}, "504 Gateway Timeout")
        except OSError as exc:
            return _json({"error": f"cannot record the decision: {exc}"}, "500 Internal Server Error")
    return listing, decide


def install(app) -> None:
    listing, decide = make_routes(app.rt)
    app.extra_routes[("GET", PREFIX)] = listing
    app.prefix_routes.append(("POST", PREFIX + "/", decide))
