"""GET /oauth/callback: where an upstream's authorization server sends the browser back after a
sign-in. It passes without troupe's bearer token (a browser follows it), but does something only
for a state the AuthKeeper is waiting on; anything else is a 400. Its `iss` (RFC 9207) goes to the
AuthKeeper with the code, which refuses a code from another issuer."""
from __future__ import annotations

import html
from urllib.parse import parse_qs

import pykka
from loguru import logger

PATH = "/oauth/callback"
_HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
            ("Referrer-Policy", "no-referrer")]  # the code in this URL goes nowhere else


def _page(status: str, text: str):
    body = (f"<!doctype html><meta charset=utf-8><title>troupe sign-in</title>"
            f"<p>{html.escape(text)}</p>").encode()
    return status, list(_HEADERS), body


def make_route(runtime):
    def callback(environ):
        # blank values kept: an empty `iss` is a present one that names no issuer (RFC 9207)
        query = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=10, keep_blank_values=True)
        state, code = (query.get("state") or [""])[0], (query.get("code") or [""])[0]
        iss = (query.get("iss") or [None])[0]
        if not state or not code:
            error = (query.get("error") or [""])[0]
            return _page("400 Bad Request", f"sign-in not completed{': ' + error[:100] if error else ''}")
        try:
            name = runtime.complete_sign_in(state, code, iss)
        except KeyError:
            return _page("400 Bad Request", "unknown or already used sign-in; start again with `troupe auth NAME`")
        except pykka.Timeout:
            return _page("504 Gateway Timeout", "the sign-in took too long; try again")
        except Exception as exc:  # SignInError: the authorization server refused the code
            logger.warning("oauth callback: {}", exc)
            return _page("502 Bad Gateway", f"sign-in failed: {exc}")
        return _page("200 OK", f"signed in to {name}, you can close this tab")
    return callback


def install(app) -> None:
    app.extra_routes[("GET", PATH)] = make_route(app.rt)
