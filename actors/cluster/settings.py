"""The config's `cluster:` section (or `--redis URL`): where Redis is, who this instance is, how it
is reached, how long a lease lasts, and the secret instances present to each other."""
from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

DEFAULT_LEASE_S = 10.0
PLACEMENTS = ("single", "replicated")
_INSTANCE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_PREFIX = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One instance's view of its cluster. `instance` and `advertise` may be None until troupe
    knows the address it serves on (they default to host+port and the served URL); `token`
    None means the shared secret is created in Redis by the first instance and read by the rest."""

    redis: str
    instance: str | None = None
    advertise: str | None = None
    lease: float = DEFAULT_LEASE_S
    prefix: str = "troupe"
    token: str | None = None

    def __repr__(self) -> str:  # the Redis URL may carry a password, the token is a secret
        return (f"ClusterConfig(redis={shown_redis(self.redis)!r}, instance={self.instance!r}, "
                f"advertise={self.advertise!r}, lease={self.lease!r}, token={'set' if self.token else 'shared'})")

    def named(self, served_url: str) -> "ClusterConfig":
        """This config with instance and advertise filled in from the URL troupe serves on."""
        parts = urlsplit(served_url)
        instance = self.instance or f"{socket.gethostname()}:{parts.port}"
        return ClusterConfig(self.redis, instance, self.advertise or served_url.rstrip("/").removesuffix("/mcp"),
                             self.lease, self.prefix, self.token)


def shown_redis(url: str) -> str:
    """The Redis URL without its password, for logs and /status."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username + ':' if parts.username else ':'}***@{host}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def parse(data: Any, fail: Callable[[str, str], None], expand: Callable[[str], str]) -> ClusterConfig | None:
    """The `cluster:` section checked, each problem reported through `fail(path, message)`."""
    if data is None:
        return None
    if not isinstance(data, dict):
        fail("cluster", "must be a mapping with at least `redis: redis://HOST:PORT/DB`")
        return None
    for key in set(data) - {"redis", "instance", "advertise", "lease", "prefix", "token"}:
        fail(f"cluster.{key}", "unknown key")
    redis = data.get("redis")
    if not isinstance(redis, str) or urlsplit(expand(redis)).scheme not in ("redis", "rediss", "unix"):
        fail("cluster.redis", "must be a URL like redis://127.0.0.1:6379/0")
        return None
    instance, advertise, prefix = data.get("instance"), data.get("advertise"), data.get("prefix", "troupe")
    if instance is not None and (not isinstance(instance, str) or not _INSTANCE.match(instance)):
        fail("cluster.instance", "must be 1-64 of A-Z a-z 0-9 _ . : -")
    if advertise is not None and (not isinstance(advertise, str)
                                  or urlsplit(advertise).scheme not in ("http", "https")):
        fail("cluster.advertise", "must be an http(s) URL other instances reach this one at")
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        fail("cluster.prefix", "must be 1-32 of A-Z a-z 0-9 _ . : -")
    lease = data.get("lease", DEFAULT_LEASE_S)
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not 1.0 <= lease <= 300.0:
        fail("cluster.lease", "must be a number of seconds from 1 to 300")
        lease = DEFAULT_LEASE_S
    token = data.get("token")
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        fail("cluster.token", "must be a string of at least 16 characters")  # a secret: never echoed
        token = None
    token = expand(token) if token else os.environ.get("TROUPE_CLUSTER_TOKEN") or None
    return ClusterConfig(expand(redis), instance if isinstance(instance, str) else None,
                         advertise.rstrip("/") if isinstance(advertise, str) else None, float(lease),
                         prefix if isinstance(prefix, str) else "troupe", token)


def with_redis(cluster: ClusterConfig | None, redis: str, transport: str) -> ClusterConfig:
    """`--redis URL` on top of the file's cluster section (or alone); ValueError lists the problems."""
    problems: list[str] = []
    fields = {} if cluster is None else {k: v for k, v in (
        ("instance", cluster.instance), ("advertise", cluster.advertise), ("lease", cluster.lease),
        ("prefix", cluster.prefix), ("token", cluster.token)) if v is not None}
    joined = parse({**fields, "redis": redis}, lambda path, why: problems.append(f"--redis: {why}"), lambda t: t)
    if transport != "http":
        problems.append("--redis: instances reach each other over HTTP: add --transport http")
    if problems or joined is None:
        raise ValueError(*(problems or ["--redis: not a Redis URL"]))
    return joined


def placement(value: str | None, path: str, fail: Callable[[str, str], None]) -> str | None:
    """A server's `placement:`, checked (None: decided by its transport)."""
    if value is not None and value not in PLACEMENTS:
        fail(f"{path}.placement", f"{value!r} is not one of {', '.join(PLACEMENTS)}")
        return None
    return value


def default_placement(transport: str) -> str:
    """A stdio server runs once in the cluster; an HTTP upstream is reached from every instance."""
    return "single" if transport == "stdio" else "replicated"
