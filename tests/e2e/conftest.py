"""e2e tests use asyncio peers (the official SDK): they need an unpatched process."""
from gevent import monkey

if monkey.is_module_patched("threading"):
    raise RuntimeError("tests/e2e must run unpatched: `python -m tests`, or plain pytest on tests/e2e")
