import os, time
import tests.integration.test_http_transports as T

def fdmap():
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try: out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError: pass
    return out

def test_dbg():
    made = []
    before = fdmap()
    try:
        T.test_sse_endpoint_checks_and_stream_loss(made)
    except AssertionError as e:
        after = fdmap()
        extra = {k: v for k, v in after.items() if before.get(k) != v}
        print("EXTRA", extra)
        socks = {v for v in extra.values()}
        for line in open("/proc/net/tcp").read().splitlines()[1:]:
            parts = line.split()
            if f"socket:[{parts[9]}]" in socks: print(parts[1], parts[2], parts[3])
        raise
