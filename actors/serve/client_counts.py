"""What each client of serve.clients has asked troupe's HTTP front, for /status and /metrics:
requests and tool calls since start, by client name (never by token). Owned by the front's
McpHttp; its handler greenlets (one thread, no yield in between) are the only writers."""
from __future__ import annotations

from collections import Counter

ANONYMOUS = "-"  # a request that named no client (the operator's token, or a troupe without clients)


class ClientCounts:
    """Counters by client name; `note` is called once per JSON-RPC request the front receives."""

    def __init__(self, clients) -> None:
        self.profiles = {c.name: c.profile for c in clients}
        self.requests: Counter = Counter()
        self.tool_calls: Counter = Counter()

    def note(self, client, message) -> None:
        name = client.name if client is not None else ANONYMOUS
        for msg in message if isinstance(message, list) else (message,):
            if isinstance(msg, dict) and "method" in msg and "id" in msg:
                self.requests[name] += 1
                if msg["method"] == "tools/call":
                    self.tool_calls[name] += 1

    def report(self, sessions: dict[str, int], quota: dict[str, dict] | None = None) -> dict:
        """Every configured client (and anonymous traffic, if any) with its profile and counts;
        `sessions` is the open sessions by client name, `quota` its sessions evicted and
        initializes refused (SessionTable.quota_figures)."""
        quota = quota or {}
        names = list(self.profiles) + sorted({*self.requests, *sessions, *quota} - set(self.profiles))
        return {name: {"profile": self.profiles.get(name), "requests": self.requests[name],
                       "tool_calls": self.tool_calls[name], "sessions": sessions.get(name, 0),
                       "sessions_evicted": quota.get(name, {}).get("evicted", 0),
                       "sessions_refused": quota.get(name, {}).get("refused", 0)}
                for name in names}
