"""Rate limits per client: token buckets on the requests that reach servers (see limiter.py)."""
