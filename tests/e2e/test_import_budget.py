"""Lean start: a default stdio run (the embedded config: the bundled workspace server, discovery on)
imports none of the engines of the features it does not use, so the saving cannot quietly return.
Each is loaded where its feature begins (actors/optional_imports.py); the other tests use them."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT

# Not before a workflow is defined, a server needs OAuth, a cluster or redis cache is configured,
# the HTTP front is asked for, or a schema needs more than the quick check.
NOT_IMPORTED = ("jinja2", "authlib", "joserfc", "cryptography", "requests", "urllib3", "redis", "prometheus_client",
                "jsonschema", "actors.serve.http", "actors.serve.listener", "gevent.pywsgi", "actors.cluster.member",
                "actors.cluster.shared", "actors.auth.flow", "actors.workflows.definitions",
                "actors.workflows.templating", "actors.workflows.runner", "actors.workflows.watcher",
                # ssl (OpenSSL: ~4 MiB) until an HTTP server, redis or the OTLP exporter needs it; asyncio
                # (which loads ssl) at all: loguru's use of it stands in (actors/loguru_without_asyncio.py);
                # importlib.metadata: gevent's plugins are read from their files (actors/patching.py).
                "ssl", "_ssl", "asyncio", "importlib.metadata", "email",
                # OpenSSL's hashlib (~3.4 MiB): troupe's hashes are Python's own (actors/hashing_without_openssl.py)
                "_hashlib")

# troupe as `python -m actors.main` would run, writing the names of its modules at exit, and
# whether the cycle collector is on, with what troupe's start made frozen out of its way (actors/main.py).
RUNNER = ("import atexit, gc, json, runpy, sys\n"
          "out = sys.argv[1]; sys.argv = ['troupe']\n"
          "atexit.register(lambda: open(out, 'w').write(json.dumps({'modules': sorted(sys.modules),\n"
          "    'gc_enabled': gc.isenabled(), 'frozen': gc.get_freeze_count(),\n"
          "    'libcrypto': any('libcrypto' in line for line in open('/proc/self/maps'))})))\n"
          "runpy.run_module('actors.main', run_name='__main__', alter_sys=True)\n")


def _rpc(proc, message: dict) -> dict | None:
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    return json.loads(proc.stdout.readline())


def test_a_default_stdio_run_imports_only_what_it_uses(tmp_path):
    modules = tmp_path / "modules.txt"
    home = tmp_path / "home"
    home.mkdir()  # discovery reads no real client's files
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "TROUPE_CONFIG_DIR": str(tmp_path / "config")}
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(modules)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    try:
        init = _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "budget", "version": "1"}}})
        assert init is not None and init["result"]["serverInfo"]["name"]
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        # The workspace server's tools, then one call with good arguments (the quick schema check).
        listed = _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                             "params": {"name": "list_tools", "arguments": {}}})
        assert listed is not None and "workspace__" in json.dumps(listed)
        read = _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "call_tool", "arguments": {"name": "workspace__read_file", "arguments": {"path": "setup.py"}}}})
        assert read is not None and "setup(" in json.dumps(read), read
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    state = json.loads(modules.read_text())
    assert state["gc_enabled"] and state["frozen"] > 10_000  # on, and start-up kept out of its way
    assert not state["libcrypto"]  # OpenSSL is never mapped: neither ssl nor OpenSSL's hashlib
    loaded = set(state["modules"])
    assert "actors.serve.stdio" in loaded and "actors.runtime" in loaded  # it did serve
    found = sorted(m for m in loaded if any(m == name or m.startswith(name + ".") for name in NOT_IMPORTED))
    assert not found, f"a default stdio run imported {found}"


def test_a_schema_that_needs_more_than_the_quick_check_still_gets_jsonschema():
    # The other side of the budget: the engine is loaded when a schema needs it, and it checks.
    from actors.protocol.validation import _Quick, compile_validator, problems
    validator = compile_validator("t", {"type": "object", "properties": {"s": {"type": "string", "pattern": "^ab"}}})
    assert not isinstance(validator, _Quick)
    assert problems(validator, {"s": "x"}) is not None
