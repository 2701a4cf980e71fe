"""What the status report, the dashboard, `troupe auth` and `list_tools` show of sign-ins: a
needs-auth server's authorization URL (or why there is none), never a token."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from actors.auth.access import AuthSnapshot, grant_key, split_key

NEEDS_AUTH_STATE = "needs-auth"


def sign_in_of(config: Any, snapshot: AuthSnapshot) -> dict:
    """{auth_url} or {auth_error} for a server's config, {} when no sign-in is waiting."""
    http = getattr(config, "http", None)
    found = snapshot.sign_ins.get(http.url) if http is not None else None
    return dict(found) if found else {}


def annotate(entries: Iterable[dict], servers: Any, snapshot: AuthSnapshot) -> None:
    """Add auth_url (or auth_error) to the status entries of needs-auth servers."""
    for entry in entries:
        view = servers.get(entry.get("name"))
        if entry.get("state") == NEEDS_AUTH_STATE and view is not None:
            entry.update(sign_in_of(view.config, snapshot))
        if view is not None and _per_client(view.config):
            url = view.config.http.url
            mine = [(client, key) for key in snapshot.bearers.keys() | snapshot.sign_ins.keys()
                    for u, client in [split_key(key)] if u == url and client is not None]
            entry["clients_signed_in"] = sorted(c for c, key in mine if key in snapshot.bearers)
            entry["client_sign_ins"] = {c: dict(snapshot.sign_ins[key]) for c, key in sorted(mine)
                                        if key in snapshot.sign_ins and key not in snapshot.bearers}


def waiting(servers: Any, snapshot: AuthSnapshot) -> list[dict]:
    """[{name, auth_url | auth_error}] for every server waiting for a sign-in (list_tools, CLI)."""
    return [{"name": name, **sign_in_of(view.config, snapshot)}
            for name, view in sorted(servers.servers.items()) if view.state == NEEDS_AUTH_STATE]


def client_waiting(servers: Any, snapshot: AuthSnapshot, client: str,
                   sees: Callable[[str], bool]) -> tuple[list[dict], list[Any]]:
    """For one client: [{name, auth_url | auth_error}] of the `auth: per_client` servers it sees
    and has no token for (troupe's own link must be up: a needs-auth server is listed by
    `waiting`), and the views whose link for this client is not being prepared yet."""
    entries, unprepared = [], []
    for name, view in sorted(servers.servers.items()):
        if not _per_client(view.config) or not sees(name) or view.state == NEEDS_AUTH_STATE:
            continue
        key = grant_key(view.config.http.url, client)
        if key in snapshot.bearers:
            continue
        found = snapshot.sign_ins.get(key)
        if found is None:
            unprepared.append(view)
        entries.append({"name": name, "client": client,
                        **(dict(found) if found else {"auth_error": "your sign-in link is being prepared: "
                                                                    "ask again in a moment"})})
    return entries, unprepared


def _per_client(config: Any) -> bool:
    auth = getattr(config, "auth", None)
    return bool(auth and auth.per_client and getattr(config, "http", None))
