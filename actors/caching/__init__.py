"""The response cache: which answers may be cached (policy), under what key (keys), the byte-bounded
store (store, redis_store), the CacheKeeper actor that owns it (keeper), and the Session's side of
a cached call (session_side)."""
