"""`troupe auth NAME [--client CLIENT] [--url URL] [--open]`: print (or open in a browser) the
sign-in URL of a server a running troupe holds in needs-auth, or of one client's own sign-in to an
`auth: per_client` server. The sign-in itself comes back to that troupe's
/oauth/callback; this command only fetches the link from its status report."""
from __future__ import annotations

import argparse
import os
import sys
import webbrowser
from urllib.parse import quote

from actors.commands import DEFAULT_URL


def run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="troupe auth", description="Sign troupe in to an OAuth-protected server.")
    p.add_argument("name", help="the server's name (as in `troupe status`)")
    p.add_argument("--url", default=DEFAULT_URL, help="a running troupe's HTTP base URL (or its /mcp URL)")
    p.add_argument("--client", help="an auth: per_client server: this serve.clients client's own sign-in")
    p.add_argument("--open", action="store_true", help="open the sign-in page in a browser")
    p.add_argument("--token", default=os.environ.get("TROUPE_AUTH_TOKEN"), help="troupe's bearer token, if set")
    args = p.parse_args(argv)
    import requests
    base = args.url.rstrip("/")
    for suffix in ("/mcp", "/sse", "/status"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        resp = requests.get(f"{base}/status/servers/{quote(args.name, safe='')}", headers=headers, timeout=10)
    except requests.RequestException as exc:
        print(f"troupe auth: cannot reach {base}: {type(exc).__name__}", file=sys.stderr)
        return 2
    if resp.status_code != 200:
        print(f"troupe auth: {base} answered {resp.status_code}: {resp.text[:200]}", file=sys.stderr)
        return 2
    entry = resp.json()
    if args.client is not None:
        return _client_link(args, entry)
    if entry.get("state") != "needs-auth":
        print(f"{args.name} is {entry.get('state')}: no sign-in needed", file=sys.stderr)
        return 0 if entry.get("state") in ("ready", "degraded") else 1
    url = entry.get("auth_url")
    if not url:
        print(f"troupe auth: {args.name} needs a sign-in but has no URL yet: "
              f"{entry.get('auth_error') or 'try again in a moment'}", file=sys.stderr)
        return 1
    return _show(args, url)


def _client_link(args, entry: dict) -> int:
    if "clients_signed_in" not in entry:
        print(f"troupe auth: {args.name} has no `auth: per_client`: its one sign-in is troupe's", file=sys.stderr)
        return 1
    if args.client in entry["clients_signed_in"]:
        print(f"client {args.client} is signed in to {args.name}", file=sys.stderr)
        return 0
    found = entry.get("client_sign_ins", {}).get(args.client) or {}
    if not found.get("auth_url"):
        why = found.get("auth_error") or f"its first call to a tool of {args.name} (or list_tools) prepares it"
        print(f"troupe auth: no sign-in link for client {args.client} yet: {why}", file=sys.stderr)
        return 1
    return _show(args, found["auth_url"])


def _show(args, url: str) -> int:
    if args.open and webbrowser.open(url):
        print(f"opened the sign-in page for {args.name} in a browser", file=sys.stderr)
    else:
        print(url)
    return 0
