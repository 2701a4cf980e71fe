"""Parse at the boundary (issue 25): what a client or a server sends with a value of the wrong type,
or nested deeper than 128 levels, fails that one request with an error naming the field or the
limit, against a running troupe and real server processes; every other call goes on, troupe
keeps running (the stdio front does not exit) and no circuit opens."""
from __future__ import annotations

import threading

import orjson
import pytest
import requests

from tests.e2e.conftest import error_text
from tests.support import PYTHON, wait_until
from tests.support.ports import start_announced, stop
from tests.support.troupe import Troupe, TroupeHttp, server, text_of, write_config

MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "boundary-tests", "version": "1"}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIMIT = "128"


def _nested(levels: int) -> dict:
    """A value that is `levels` deep by itself (an object holding arrays)."""
    value: object = []
    for _ in range(levels - 2):
        value = [value]
    return {"v": value}


def _call_nested_total(rid, levels: int) -> bytes:
    """A tools/call whose whole message is `levels` deep: the envelope, params and arguments are three
    of them. Encoded by hand: orjson writes no more than 254 levels."""
    inner = levels - 3
    return (b'{"jsonrpc":"2.0","id":' + orjson.dumps(rid) + b',"method":"tools/call","params":{"name":"wrong__echo",'
            b'"arguments":{"text":"deep","v":' + b"[" * inner + b"]" * inner + b"}}}")


@pytest.fixture
def stdio_troupe(tmp_path):
    """troupe over stdio serving the wrong-typed server (and echo), initialized by a client that can
    answer elicitations; checked after the test to be still running, and closed."""
    started: list[Troupe] = []

    def start() -> Troupe:
        t = Troupe(write_config(tmp_path, [server("wrong", "tests.servers.wrong_types"),
                                           server("echo", "tests.servers.echo")], mode="flat"),
                   "--log-level", "DEBUG")
        started.append(t)
        assert "result" in t.request("initialize", INIT, timeout=30)
        t.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        t.request("tools/list", timeout=30)
        return t
    yield start
    for t in started:
        assert t.proc.poll() is None, "troupe exited:\n" + "".join(t.stderr[-30:])
        assert t.close() == 0


def _still_fine(t: Troupe) -> None:
    """Other calls to the same server work, and nothing restarted or opened a circuit."""
    assert text_of(t.call("wrong__echo", {"text": "still here"})) == "still here"
    assert text_of(t.call("echo__echo", {"text": "and here"})) == "and here"
    status = t.server_status("wrong")
    assert status["state"] == "ready" and status["restarts"] == 0, status
    assert "CircuitOpened" not in text_of(t.call("core_events", {"limit": 200}))


# ---------------------------------------------------------------- from a server


@pytest.mark.parametrize("tool,field", [("code_list", "error.code must be an integer, got array"),
                                        ("code_object", "error.code must be an integer, got object")])
def test_an_error_code_of_the_wrong_type_fails_only_its_call(stdio_troupe, tool, field):
    t = stdio_troupe()
    text = error_text(t.call(f"wrong__{tool}"))
    assert "server wrong" in text and field in text and "tools/call" in text, text
    _still_fine(t)


def test_resources_read_with_contents_five_is_a_clear_error(stdio_troupe):
    t = stdio_troupe()
    answer = t.request("resources/read", {"uri": "test://five"})
    error = answer["error"]
    assert error["code"] == -32603 and "server wrong" in error["message"], answer
    assert "result.contents must be an array, got integer" in error["message"], answer
    _still_fine(t)


@pytest.mark.parametrize("envelope", [True, False], ids=["modern-client", "legacy-client"])
def test_input_required_with_params_x_is_a_clear_error(stdio_troupe, envelope):
    t = stdio_troupe()
    params: dict = {"name": "wrong__input_bad", "arguments": {}}
    if envelope:
        params["_meta"] = ENVELOPE
    text = error_text(t.request("tools/call", params))
    assert "server wrong" in text and "result.inputRequests.q.params must be an object, got string" in text, text
    _still_fine(t)


@pytest.mark.parametrize("levels", [129, 300, 1100])
def test_an_answer_nested_too_deep_fails_only_its_call(stdio_troupe, levels):
    t = stdio_troupe()
    text = error_text(t.call("wrong__deep", {"levels": levels}))
    assert "server wrong" in text and f"deeper than {LIMIT} levels" in text, text
    _still_fine(t)


def test_an_answer_128_deep_passes(stdio_troupe):
    t = stdio_troupe()
    result = t.call("wrong__deep", {"levels": 128})["result"]
    assert "deep" in result and not result.get("isError"), result
    _still_fine(t)


def test_wrong_types_and_deep_answers_over_streamable_http(tmp_path):
    """The same server over Streamable HTTP: the transport and the Connection check alike."""
    upstream, port = start_announced([PYTHON, "-m", "tests.servers.wrong_types", "--http", "0"], tmp_path / "wrong.log")
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        t = Troupe(write_config(tmp_path, [{"name": "wrong", "transport": {
            "type": "streamable-http", "streamable_http": {"url": url}}}], mode="flat"))
        try:
            t.initialize()
            t.request("tools/list", timeout=30)
            assert "error.code must be an integer, got array" in error_text(t.call("wrong__code_list"))
            assert f"deeper than {LIMIT} levels" in error_text(t.call("wrong__deep", {"levels": 300}))
            assert "result.contents must be an array" in t.request("resources/read", {"uri": "test://five"})[
                "error"]["message"]
            assert text_of(t.call("wrong__echo", {"text": "fine"})) == "fine"
            status = t.server_status("wrong")
            assert status["state"] == "ready" and status["restarts"] == 0, status
            assert t.proc.poll() is None
        finally:
            assert t.close() == 0
    finally:
        stop(upstream)


# ---------------------------------------------------------------- from a client, over stdio


def test_a_malformed_answer_to_an_elicitation_fails_that_question_alone(stdio_troupe):
    t = stdio_troupe()
    rid = t.send_request("tools/call", {"name": "wrong__ask", "arguments": {}})
    asked = t.notifications.get(timeout=20)
    while asked.get("method") != "elicitation/create":
        asked = t.notifications.get(timeout=20)
    t.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": [1], "message": "no"}})
    text = text_of(t.wait_response(rid))
    # the server that asked heard an error naming what was wrong, and answered its call with it
    assert text.startswith("error -32603") and "error.code must be an integer, got array" in text, text
    _still_fine(t)


@pytest.mark.parametrize("message,code,expected_id,text", [
    ({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "x"}, -32602, 7,
     "params must be an object, got string"),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, -32600, None,
     "id must be a string or an integer, got object"),
    ({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "wrong__echo", "arguments": [1]}},
     -32602, 8, "params.arguments must be an object, got array"),
    ({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "wrong__echo", "arguments": {"text": "x"}, "requestState": "caf\u00e9", "_meta": ENVELOPE}},
     -32602, 9, "params.requestState must be printable ASCII"),
], ids=["params-string", "id-object", "arguments-array", "request-state-non-ascii"])
def test_a_malformed_request_over_stdio_fails_alone(stdio_troupe, message, code, expected_id, text):
    t = stdio_troupe()
    before = len(t.received)
    t.send(message)
    answer = wait_until(lambda: next((m for m in t.received[before:] if "error" in m), None), 10,
                        message="the refusal")
    assert answer["error"]["code"] == code and text in answer["error"]["message"], answer
    assert answer.get("id") == expected_id, answer
    t.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}})  # dropped
    _still_fine(t)


@pytest.mark.parametrize("levels", [129, 300, 1100])
def test_a_request_nested_too_deep_over_stdio_is_refused_at_parse(stdio_troupe, levels):
    t = stdio_troupe()
    t.send(_call_nested_total(41, levels))
    answer = wait_until(lambda: next((m for m in t.received if m.get("error", {}).get("code") == -32600), None), 10,
                        message="the refusal")
    assert f"deeper than {LIMIT} levels" in answer["error"]["message"], answer
    assert answer.get("id") == (41 if levels <= 1024 else None), answer  # orjson reads 1,024 levels
    _still_fine(t)


def test_a_request_128_deep_passes(stdio_troupe):
    t = stdio_troupe()
    t.send(_call_nested_total(42, 128))
    assert text_of(t.wait_response(42)) == "deep"


def test_a_batch_keeps_its_good_entries_and_answers_the_bad_in_its_array(tmp_path):
    t = Troupe(write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat"))
    try:
        assert "result" in t.request("initialize", {**INIT, "protocolVersion": "2025-03-26"}, timeout=30)
        t.request("tools/list", timeout=30)
        before = len(t.received)
        t.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "x"},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "echo__echo", "arguments": {"text": "b"}}}])
        answers = wait_until(lambda: next((m for m in t.received[before:] if isinstance(m, list)), None), 20,
                             message="the batch's answer")
        by_id = {a["id"]: a for a in answers}
        assert set(by_id) == {1, 2, 3}
        assert by_id[2]["error"]["code"] == -32602 and "params must be an object" in by_id[2]["error"]["message"]
        assert text_of(by_id[3]) == "b" and by_id[1]["result"] == {}
    finally:
        assert t.close() == 0


# ---------------------------------------------------------------- from clients, over HTTP


def _modern_headers(method: str, name: str | None = None) -> dict:
    headers = {**ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def test_over_http_a_malformed_or_deep_request_fails_alone_while_another_client_calls(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [server("wrong", "tests.servers.wrong_types")], mode="flat"))
    try:
        with requests.Session() as b:  # client B: a legacy session with a slow call in flight throughout
            init = b.post(t.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                          headers={**ACCEPT, "Accept": "application/json"}, timeout=30)
            sid = init.headers["Mcp-Session-Id"]
            slow: dict = {}

            def call_slow() -> None:
                slow["answer"] = b.post(t.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "wrong__sleep", "arguments": {"seconds": 2}}},
                    headers={**ACCEPT, "Accept": "application/json", "Mcp-Session-Id": sid}, timeout=60).json()
            caller = threading.Thread(target=call_slow)
            caller.start()
            # client A: stateless (modern) requests of the wrong shape, and deep ones, each refused alone
            refused = [
                (_modern_headers("tools/call", "wrong__echo"), orjson.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                 "params": {"name": "wrong__echo", "arguments": {"text": "x"}, "requestState": "\u00e9t\u00e9",
                            "_meta": ENVELOPE}}), 5, -32602, "params.requestState must be printable ASCII"),
                (_modern_headers("tools/call"), orjson.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                 "params": "x"}), 6, -32602, "params must be an object, got string"),
                (_modern_headers("tools/list"), orjson.dumps({"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list",
                 "params": {"_meta": ENVELOPE}}), None, -32600, "id must be a string or an integer, got object"),
                (_modern_headers("tools/call", "wrong__echo"), _call_nested_total(7, 129), 7, -32600,
                 f"deeper than {LIMIT} levels"),
                ({**ACCEPT, "Mcp-Session-Id": sid}, _call_nested_total(8, 300), 8, -32600, f"deeper than {LIMIT} levels"),
            ]
            for headers, body, rid, code, text in refused:
                answer = requests.post(t.url, data=body, headers=headers, timeout=30)
                assert answer.status_code == 400, (answer.status_code, answer.text)
                error = answer.json()["error"]
                assert answer.json().get("id") == rid and error["code"] == code and text in error["message"], \
                    answer.json()
            # legacy /messages: the refusal is a 400 with the JSON-RPC error (and travels on its stream)
            with requests.get(t.base + "/sse", headers={"Accept": "text/event-stream"}, stream=True, timeout=30) as sse:
                lines = sse.iter_lines()
                endpoint = next(line for line in lines if line.startswith(b"data: "))[6:].decode()
                posted = requests.post(t.base + endpoint, data=_call_nested_total(9, 300),
                                       headers={"Content-Type": "application/json"}, timeout=30)
                assert posted.status_code == 400 and posted.json()["id"] == 9, posted.text
                assert f"deeper than {LIMIT} levels" in posted.json()["error"]["message"]
                streamed = next(line for line in lines if line.startswith(b"data: "))
                assert orjson.loads(streamed[6:])["id"] == 9
            caller.join(60)
            assert text_of(slow["answer"]) == "slept", slow
            # a well-formed modern call from A works, and B's session still serves
            ok = requests.post(t.url, json={"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {
                "name": "wrong__echo", "arguments": {"text": "fine"}, "_meta": ENVELOPE}},
                headers=_modern_headers("tools/call", "wrong__echo"), timeout=30)
            assert ok.status_code == 200 and ok.json()["result"]["content"][0]["text"] == "fine", ok.text
            again = b.post(t.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "wrong__echo", "arguments": {"text": "b"}}},
                headers={**ACCEPT, "Accept": "application/json", "Mcp-Session-Id": sid}, timeout=30)
            assert text_of(again.json()) == "b"
        assert t.proc.poll() is None
    finally:
        assert t.stop() == 0
