"""Placement: where each server of a cluster runs, as the Supervisor knows it from the lease keeper.

A `single` server (by default every stdio server) runs on the instance holding its lease; on every
other instance its Connection is a relay to the owner: modern MCP over HTTP to the owner's /mcp,
naming the server in a header, with the cluster's token. The relay keeps the server's identity,
so approvals and tool pins apply to it as to the server itself. A `replicated` server (by default
every HTTP upstream) runs everywhere. A troupe alone (no cluster) places everything here.
"""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from actors.cluster.leases import LeaseChanged
from actors.cluster.settings import default_placement
from actors.settings.model import HttpSpec, ServerConfig
from actors.trust import provenance as trust

RELAY_HEADER = "X-Troupe-Relay"  # names the server a call between instances is for
CLIENT_HEADER = "X-Troupe-Client"  # on a relayed call: the serve.clients name it is made for (auth: per_client)
TOKEN_HEADER = "X-Troupe-Cluster-Token"  # the cluster's shared secret (not the clients' bearer token)


class Placement:
    """The Supervisor's book of leases (it alone reads and writes it): each `single` server's
    last LeaseChanged, and the launch config that follows from it."""

    def __init__(self, clustered: bool, eras=None) -> None:
        self.clustered = clustered
        self.eras = eras  # the cluster's shared era verdicts (shared.EraBook), or None
        self.token: str | None = None  # the cluster secret relays present; set once the cluster is joined
        self.auth_token: str | None = None  # the clients' bearer token, which a relay must also carry
        self.leases: dict[str, LeaseChanged] = {}

    def single(self, config_or_child) -> bool:
        """True for a `single` server in a cluster (given its config, or its Child)."""
        config = getattr(config_or_child, "config", config_or_child)
        return self.clustered and (config.placement or default_placement(config.transport)) == "single"

    def update(self, change: LeaseChanged) -> bool:
        """Record a lease change; True if where the server runs changed."""
        before = self.leases.get(change.server)
        self.leases[change.server] = change
        return before is None or (before.owner, before.url, before.mine) != (change.owner, change.url, change.mine)

    def era(self, child) -> str | None:
        """The era to open `child` in: its own last verdict, else the cluster's (None: probe)."""
        known = child.known_era()
        if known is None and self.eras is not None:
            known = self.eras.get(trust.identity_key(child.config))
        return known

    def learned(self, child, era: str) -> None:
        """`child`'s server showed its era: remembered on the child, and told to the cluster."""
        identity = trust.identity_key(child.config)  # once: it reads the file system (realpath, PATH)
        before = child.known_era(identity)
        child.era = (identity, era)
        if self.eras is not None and before != era:
            self.eras.put(identity, era)

    def owner(self, name: str) -> str | None:
        lease = self.leases.get(name)
        return lease.owner if lease is not None else None

    def launch_config(self, config: ServerConfig) -> ServerConfig | None:
        """What to start for `config` here: itself, a relay to its owner, or None while its owner
        is not known (or the cluster secret is not yet)."""
        if not self.single(config):
            return config
        lease = self.leases.get(config.name)
        if lease is None or lease.owner is None:
            return None
        if lease.mine:
            return config
        if lease.url is None or self.token is None:
            return None
        headers = {RELAY_HEADER: config.name, TOKEN_HEADER: self.token}
        if self.auth_token:
            headers["Authorization"] = f"Bearer {self.auth_token}"
        return replace(config, transport="streamable-http", stdio=None,
                       http=HttpSpec(url=lease.url.rstrip("/") + "/mcp", headers=MappingProxyType(headers)),
                       identity=trust.identity_key(config), placement="single")
