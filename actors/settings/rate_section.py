"""The config's rate limits (actors/ratelimit): `profiles.NAME.rate` (every client in that profile
together), `servers[].rate` (every client's calls to that server together) and `serve.rate` (the
clients no serve.clients entry names). Each is `{per_minute: N, burst: M}`; unset means no limit.

Kept apart from the servers and profiles themselves: a changed limit reloads live without
restarting the server it names (a changed ServerConfig restarts it). Checked with the config
loader's `fail(path, message)`, so every problem names its file, line and key."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

Fail = Callable[[str, str], None]
MAX_PER_MINUTE = 10_000_000.0  # far past anything a server answers; a bigger number is a typo
MAX_BURST = 1_000_000


@dataclass(frozen=True, slots=True)
class Rate:
    """One limit: `per_minute` tokens come back each minute (evenly, a fraction at a time), and a
    bucket holds at most `burst` (what an idle client may send at once)."""

    per_minute: float
    burst: int

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0

    def shown(self) -> dict:
        """The limit as status, errors and metrics show it."""
        per_minute = int(self.per_minute) if float(self.per_minute).is_integer() else self.per_minute
        return {"per_minute": per_minute, "burst": self.burst}


@dataclass(frozen=True, slots=True)
class RateConfig:
    """Every configured limit: by profile name, by server name, and the anonymous clients' one
    (None: no limit there)."""

    profiles: Mapping[str, Rate] = field(default_factory=lambda: MappingProxyType({}))
    servers: Mapping[str, Rate] = field(default_factory=lambda: MappingProxyType({}))
    anonymous: Rate | None = None

    @property
    def empty(self) -> bool:
        return not self.profiles and not self.servers and self.anonymous is None


def rate(data: Any, path: str, fail: Fail) -> Rate | None:
    """One `rate:` mapping checked: per_minute a number in (0, 10,000,000], burst an integer in
    [1, 1,000,000], both required; None when absent (or wrong: reported)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        fail(path, "must be a mapping {per_minute: N, burst: M}")
        return None
    for key in data:
        if key not in ("per_minute", "burst"):
            fail(f"{path}.{key}", "unknown key (allowed: burst, per_minute)")
    per_minute, burst = data.get("per_minute"), data.get("burst")
    good_rate = isinstance(per_minute, (int, float)) and not isinstance(per_minute, bool) and \
        math.isfinite(per_minute) and 0 < per_minute <= MAX_PER_MINUTE
    good_burst = isinstance(burst, int) and not isinstance(burst, bool) and 1 <= burst <= MAX_BURST
    if not good_rate:
        fail(f"{path}.per_minute", "is required" if per_minute is None else
             f"must be a number of calls per minute, > 0 and <= {MAX_PER_MINUTE:.0f}, "
             f"got {type(per_minute).__name__} {per_minute!r}")
    if not good_burst:
        fail(f"{path}.burst", "is required" if burst is None else
             f"must be an integer from 1 to {MAX_BURST} (calls at once), got {type(burst).__name__} {burst!r}")
    if isinstance(per_minute, (int, float)) and isinstance(burst, int) and good_rate and good_burst:
        return Rate(float(per_minute), burst)
    return None


def parse(data: Mapping, fail: Fail) -> RateConfig:
    """Every `rate:` of a loaded file's top-level mapping. The sections' own shapes are checked by
    their own parsers; a section of the wrong shape is skipped here (it is reported there)."""
    profiles: dict[str, Rate] = {}
    raw_profiles = data.get("profiles")
    if isinstance(raw_profiles, dict):
        for name, body in raw_profiles.items():
            if isinstance(body, dict) and (found := rate(body.get("rate"), f"profiles.{name}.rate", fail)):
                profiles[str(name)] = found
    servers: dict[str, Rate] = {}
    raw_servers = data.get("servers")
    if isinstance(raw_servers, list):
        for i, item in enumerate(raw_servers):
            if isinstance(item, dict) and isinstance(item.get("name"), str) and \
                    (found := rate(item.get("rate"), f"servers[{i}].rate", fail)):
                servers[item["name"]] = found
    serve = data.get("serve")
    anonymous = rate(serve.get("rate"), "serve.rate", fail) if isinstance(serve, dict) else None
    return RateConfig(MappingProxyType(profiles), MappingProxyType(servers), anonymous)
