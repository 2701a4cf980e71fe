"""A Session's client: who it is (a serve.clients entry, or none) and the part of the
catalogue that client's profile shows. Every handler reads the catalogue through `catalogue()`,
never the Runtime's whole one, so a tool, prompt or resource outside the profile is unknown to
the client in lists, search, calls, reads and completion alike."""
from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from actors.catalogue import views
from actors.downstream import routing
from actors.catalogue.snapshot import Catalogue
from actors.workflows.tools import with_workflows

if TYPE_CHECKING:
    from actors.downstream.context import SessionContext

class ClientView:
    """Who a Session's client is (a serve.clients entry, or none) and the part of the catalogue
    that client's profile shows, fixed for the Session's life. Owned by one Session and used only
    from its greenlet."""

    def __init__(self, ctx: SessionContext, client) -> None:
        self._ctx = ctx
        self.client_name: str | None = client.name if client is not None else None
        self.profile: views.Profile | None = ctx.profile_of(client)
        self._composed: tuple | None = None  # (view, workflow set, the two joined): the last catalogue()

    @property
    def restricted(self) -> bool:
        return self.profile is not None and not self.profile.everything

    def catalogue(self) -> Catalogue:
        """The catalogue as this client may see it, its workflows included (as tools). The view is
        the Registry's; joining it with the WorkflowKeeper's snapshot is this Session's own work,
        kept in its own state until either snapshot is replaced."""
        view, workflows = views.view(self._ctx.catalogue(), self.profile), self._ctx.workflows()
        if not workflows.workflows:
            return view
        last = self._composed
        if last is not None and last[0] is view and last[1] is workflows:
            return last[2]
        joined = with_workflows(view, workflows, self.profile)
        self._composed = (view, workflows, joined)
        return joined

    def passthrough_server(self) -> str | None:
        """Flat mode's one server, if unlisted names may pass to it: never when the profile hides
        any of its tools (a hidden tool must stay unknown)."""
        server = self._ctx.passthrough_server()
        return server if self.profile is None or self.profile.passes_through(server) else None

    def resource_owner(self, uri) -> tuple[str, str] | None:
        """(server, its own URI) of the resource this client knows as `uri`, or None."""
        return routing.resource_owner(self.catalogue(), self.passthrough_server(), uri)

    def sign_ins_in_view(self) -> list[dict]:
        """The servers this client's profile shows that wait for an OAuth sign-in: troupe's own,
        and those with `auth: per_client` this client has not signed in to (with its own link)."""
        profile = self.profile
        sees = profile.sees_server if profile is not None else (lambda name: True)
        waiting = [w for w in self._ctx.sign_ins() if sees(w["name"])]
        if self.client_name is not None:
            waiting += self._ctx.client_sign_ins(self.client_name, sees)
        return waiting

    def sees_core(self, tool: dict[str, Any]) -> bool:
        """troupe's core_* tools report on (and some act on) every server: a profile that hides
        anything hides them too, unless its allow list names them by a glob that starts with
        `core_` (a `*` meant for servers' tools does not), and, if read-only, they only read."""
        if not self.restricted:
            return True
        profile = self.profile
        assert profile is not None
        name = tool["name"]
        if not any(glob.startswith("core_") and fnmatch.fnmatchcase(name, glob) for glob in profile.allow) \
                or any(fnmatch.fnmatchcase(name, glob) for glob in profile.deny):
            return False
        return not profile.read_only or bool((tool.get("annotations") or {}).get("readOnlyHint"))
