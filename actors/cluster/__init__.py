"""Several troupe instances acting as one gateway, on Redis: the link to Redis, the registry of live
instances, the leases that place each `single` server on exactly one of them, and the calls that
reach a server's owner from any instance. A troupe without a `cluster:` section uses none of it."""
