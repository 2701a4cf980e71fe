"""What the status report, the dashboard, `troupe auth` and `list_tools` show of sign-ins: a
needs-auth server's authorization URL (or why there is none), never a token."""
from __future__ import annotations

from typing import Any, Iterable

from actors.auth.access import AuthSnapshot

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


def waiting(servers: Any, snapshot: AuthSnapshot) -> list[dict]:
    """[{name, auth_url | auth_error}] for every server waiting for a sign-in (list_tools, CLI)."""
    return [{"name": name, **sign_in_of(view.config, snapshot)}
            for name, view in sorted(servers.servers.items()) if view.state == NEEDS_AUTH_STATE]
