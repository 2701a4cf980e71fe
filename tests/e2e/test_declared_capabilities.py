"""What troupe declares to an upstream does not depend on which client connects first: a server
lists the same tools whoever came first, so its pin is the same, and a question a client cannot
take is refused upstream with an error naming the capability, never left waiting."""
from __future__ import annotations

from tests.support import peer_bin, wait_until
from tests.support.troupe import Troupe, write_config

# server-everything registers these only for a client that declared roots, elicitation, sampling.
CONDITIONAL = {"get-roots-list", "trigger-elicitation-request", "trigger-sampling-request"}
ALL_CAPABILITIES = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}


def _config(tmp_path):
    return write_config(tmp_path, [{"name": "everything", "timeout": 10, "transport": {"type": "stdio", "stdio": {
        "command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}}], mode="flat")


def _client(config, capabilities: dict) -> Troupe:
    t = Troupe(config, "--log-level", "info")
    t.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                             "clientInfo": {"name": "caps-test", "version": "1"}})
    t.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return t


def _tools(t: Troupe) -> set[str]:
    return {tool["name"] for tool in t.request("tools/list")["result"]["tools"]}


def _everything_tools(t: Troupe) -> set[str]:
    """The server's tools once its conditional ones are listed (it adds them after initialized)."""
    names = wait_until(lambda: (n := _tools(t)) >= {f"everything__{c}" for c in CONDITIONAL} and n,
                       timeout=30, interval=0.2, message="server-everything's conditional tools listed")
    return {n for n in names if n.startswith("everything__")}


def test_a_first_client_without_capabilities_pins_what_a_later_one_with_all_sees(tmp_path):
    config = _config(tmp_path)
    first = _client(config, {})
    try:
        seen_first = _everything_tools(first)
        # the pin is written when troupe stops: what a later run screens against
    finally:
        assert first.close() == 0
    later = _client(config, ALL_CAPABILITIES)
    try:
        assert _everything_tools(later) == seen_first
        status = later.server_status("everything")
        assert status["state"] == "ready" and status["tools"] == len(seen_first)
    finally:
        assert later.close() == 0
    for run in (first, later):
        assert not any("withheld" in line for line in run.stderr), "".join(run.stderr)


def test_a_client_without_a_capability_gets_an_error_naming_it(tmp_path):
    """Over stdio, one client declaring nothing: the server asks, troupe refuses upstream, and
    the call ends with the server's error (which repeats troupe's reason), promptly."""
    t = _client(_config(tmp_path), {})
    try:
        _everything_tools(t)
        sampled = t.call("everything__trigger-sampling-request", {"prompt": "x", "maxTokens": 5}, timeout=15)
        assert sampled["result"]["isError"] is True
        assert "did not declare the sampling capability" in str(sampled["result"])
        roots = t.call("everything__get-roots-list", {}, timeout=15)
        # server-everything catches the refusal and answers that it has no roots: no hang, no roots
        assert "result" in roots and "file://" not in str(roots["result"])
        for need in ("sampling", "roots"):  # and troupe says whom it refused, and why
            said = f"the client did not declare {need}"
            wait_until(lambda said=said: any(said in line for line in t.stderr), timeout=5,
                       message=f"the {need} refusal logged")
    finally:
        assert t.close() == 0
