"""Rate-limit buckets shared by every instance of a cluster: one Lua script in Redis takes a token
from each of a call's buckets at once (all or none), on Redis's own clock, so a limit is one
limit for the whole gateway however many instances its clients' calls land on.

The script runs on the calling Session's greenlet, on a link of its own whose commands give up
after REDIS_TIMEOUT_S: a slow or absent Redis costs one call that long at most, and the
RateLimiter then lets calls through (fail open, counted) without asking Redis for QUIET_S."""
from __future__ import annotations

from typing import Sequence

from actors.cluster.link import LinkDown, RedisLink
from actors.settings.rate_section import Rate

REDIS_TIMEOUT_S = 0.05  # a bucket check that Redis does not answer this fast lets its call through
QUIET_S = 1.0  # after a failed check, calls go through unchecked this long before Redis is asked again

# KEYS: the buckets; ARGV: for each, its rate in tokens per millisecond and its burst. A missing
# bucket is full. Every bucket is refilled to Redis's own TIME (one clock for every instance);
# when each has a token, one is taken from each; answer: {1 taken | 0 refused, then for each
# bucket its tokens left and the milliseconds until it has one, as strings}. A bucket's key
# expires once it would be full again: an idle client costs Redis nothing.
SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local tokens, waits, refused = {}, {}, false
for i = 1, #KEYS do
  local per_ms, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local held = redis.call('HMGET', KEYS[i], 't', 'ts')
  local t, ts = tonumber(held[1]), tonumber(held[2])
  if t == nil or ts == nil then t, ts = burst, now end
  if now > ts then t = t + (now - ts) * per_ms end
  if t > burst then t = burst end
  tokens[i] = t
  if t < 1 then
    waits[i] = (1 - t) / per_ms
    refused = true
  else
    waits[i] = 0
  end
end
local out = {refused and 0 or 1}
for i = 1, #KEYS do
  local per_ms, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  if not refused then tokens[i] = tokens[i] - 1 end
  redis.call('HSET', KEYS[i], 't', tostring(tokens[i]), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[i], math.ceil((burst - tokens[i]) / per_ms) + 1000)
  out[#out + 1] = tostring(tokens[i])
  out[#out + 1] = tostring(waits[i])
end
return out
"""


class SharedBuckets:
    """The cluster's buckets in Redis, under the cluster's prefix (`<prefix>:rate:<scope>:<name>`).
    Holds no bucket state itself: Redis is the bucket. `take` is called from Session greenlets,
    several at once, each on a connection of the link's pool."""

    def __init__(self, url: str, prefix: str, timeout: float = REDIS_TIMEOUT_S) -> None:
        self.link = RedisLink(url, prefix, timeout=timeout)
        self._script = self.link.client.register_script(SCRIPT)

    def take(self, buckets: Sequence[tuple[str, str, Rate]]) -> tuple[bool, list[tuple[float, float]]]:
        """Take a token from each of `buckets` ((scope, name, limit) each), or from none: (taken,
        [(tokens left, seconds until one) for each]). LinkDown when Redis does not answer in time."""
        keys = [self.link.key("rate", scope, name) for scope, name, _ in buckets]
        argv: list[str] = []
        for _, _, rate in buckets:
            argv += [repr(rate.per_second / 1000.0), str(rate.burst)]
        reply = self.link.run(lambda r: self._script(keys=keys, args=argv, client=r))
        try:
            figures = [(float(reply[i]), float(reply[i + 1]) / 1000.0) for i in range(1, 2 * len(buckets), 2)]
            return int(reply[0]) == 1, figures
        except (TypeError, ValueError, IndexError):
            raise LinkDown(f"the rate script answered {str(reply)[:80]}") from None

    def status(self) -> dict:
        return self.link.status()

    def close(self) -> None:
        self.link.close()
