"""These tests run troupe's actors in-process: the process must be gevent-patched."""
from gevent import monkey

if not monkey.is_module_patched("threading"):
    raise RuntimeError("run these suites patched: `python -m tests`, or TROUPE_TEST_GEVENT=1 pytest -p no:anyio ...")
