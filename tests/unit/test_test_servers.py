"""The standalone MCP test servers under tests/servers behave as their docstrings promise."""
from __future__ import annotations

import itertools
import os
import queue
import signal
import subprocess
import threading
import time

import anyio
import orjson
import pytest

from tests.support import PYTHON, ROOT, wait_until
from tests.support.ports import announced_port
from tests.support.schema import validate_message

TIMEOUT = 10.0


class Server:
    """A test server subprocess driven by hand: raw lines in, raw lines out, stderr drained."""

    def __init__(self, name: str, *args: str, drain_stderr: bool = True):
        self.proc = subprocess.Popen(
            [PYTHON, "-m", f"tests.servers.{name}", *args], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so cleanup can kill the whole tree
        )
        self.lines: queue.Queue = queue.Queue()
        self.stderr = bytearray()
        self.seen: list[dict] = []  # messages read while waiting for something else
        self._ids = itertools.count(1)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        if drain_stderr:
            threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)
        self.lines.put(None)  # EOF

    def _read_stderr(self):
        while chunk := os.read(self.proc.stderr.fileno(), 65536):
            self.stderr += chunk

    def send(self, msg: dict) -> None:
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = TIMEOUT) -> bytes | None:
        """Next raw stdout line, or None at EOF."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no stdout line within {timeout}s") from None

    def message(self, timeout: float = TIMEOUT, strict: bool = True) -> dict | None:
        """Next JSON-RPC message; with strict=False, junk lines are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            raw = self.line(max(0.01, deadline - time.monotonic()))
            if raw is None:
                return None
            try:
                msg = orjson.loads(raw)
            except orjson.JSONDecodeError:
                msg = None
            if isinstance(msg, dict) and msg.get("jsonrpc") == "2.0":
                return msg
            assert not strict, f"non JSON-RPC line on stdout: {raw[:200]!r}"

    def request(self, method: str, params: dict | None = None, timeout: float = TIMEOUT,
                strict: bool = True) -> dict:
        """Send a request and return its response, checked against the schema."""
        id_ = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        while True:
            msg = self.message(max(0.01, deadline - time.monotonic()), strict)
            assert msg is not None, f"server closed stdout before answering {method}"
            if msg.get("id") == id_ and "method" not in msg:
                validate_message(msg, method=method if "result" in msg else None)
                return msg
            self.seen.append(msg)

    def call(self, tool: str, arguments: dict | None = None, **kw) -> dict:
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)["result"]

    def handshake(self, version: str = "2025-11-25", **kw) -> dict:
        result = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                             "clientInfo": {"name": "troupe-test", "version": "0"}}, **kw)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result["result"]

    def tool_names(self, **kw) -> list[str]:
        names, cursor = [], None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {}, **kw)["result"]
            names += [t["name"] for t in result["tools"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                return names

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(TIMEOUT)


@pytest.fixture
def spawn():
    started: list[Server] = []

    def start(name: str, *args: str, **kw) -> Server:
        started.append(Server(name, *args, **kw))
        return started[-1]

    yield start
    for server in started:
        server.kill()


def text(result: dict) -> str:
    return result["content"][0]["text"]


def test_echo_tools_and_protocol(spawn):
    s = spawn("echo")
    init = s.handshake("2025-06-18")
    assert init["protocolVersion"] == "2025-06-18"
    assert init["capabilities"] == {"tools": {"listChanged": True}}
    assert init["serverInfo"]["name"] == "echo"
    assert s.request("ping")["result"] == {}
    assert s.tool_names() == ["echo", "add", "sleep", "fail", "pid", "notify_change"]
    assert text(s.call("echo", {"text": "héllo ✓"})) == "héllo ✓"
    added = s.call("add", {"a": 2, "b": 0.5})
    assert text(added) == "2.5" and added["structuredContent"] == {"sum": 2.5}
    assert s.call("fail") == {"content": [{"type": "text", "text": "boom"}], "isError": True}
    assert int(text(s.call("pid"))) == s.proc.pid
    assert s.call("echo", {})["isError"] is True  # missing argument is a tool error
    assert s.request("tools/call", {"name": "nope"})["error"]["code"] == -32602
    assert s.request("no/such/method")["error"]["code"] == -32601
    # Calls run concurrently: a quick echo overtakes a pending sleep.
    s.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 0.3}}})
    assert text(s.call("echo", {"text": "fast"})) == "fast"
    assert s.message()["id"] == "slow"


def test_echo_flags_pagination_and_list_changed(spawn):
    s = spawn("echo", "--tools", "25", "--page-size", "7", "--name", "alpha", "--prefix-tools", "a_")
    init = s.handshake("1999-01-01")
    assert init["protocolVersion"] == "2025-11-25"  # unknown version: the server's latest
    assert init["serverInfo"]["name"] == "alpha"
    names = s.tool_names()
    assert len(names) == 31 and len(set(names)) == 31
    assert names[:2] == ["a_echo", "a_add"] and names[-1] == "a_t0024"
    assert s.request("tools/list", {"cursor": "bogus"})["error"]["code"] == -32602
    assert text(s.call("a_notify_change")) == "changed"
    changed = [m for m in s.seen if m.get("method") == "notifications/tools/list_changed"]
    assert changed, "list_changed should arrive before the reply"
    validate_message(changed[0])
    assert "a_late_tool" in s.tool_names()
    assert text(s.call("a_late_tool")) == "late"


def test_crash_on_start(spawn):
    s = spawn("crash_on_start")
    assert s.wait_exit() == 3
    assert s.line() is None  # nothing on stdout
    wait_until(lambda: s.stderr, message="stderr output")


def test_crash_after(spawn):
    s = spawn("crash_after", "--calls", "2")
    s.handshake()
    assert text(s.call("echo", {"text": "one"})) == "one"
    s.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "two"}}})
    assert s.message() is None  # EOF, no reply
    assert s.wait_exit() == 1


def test_hang_records_cancel_and_keeps_serving(spawn):
    s = spawn("hang")
    s.handshake()
    assert sorted(s.tool_names()) == ["echo", "hang"]
    s.send({"jsonrpc": "2.0", "id": "h1", "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
    assert text(s.call("echo", {"text": "still here"})) == "still here"
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "h1"}})
    wait_until(lambda: b"cancelled h1" in s.stderr, message="cancel logged")
    assert s.request("ping")["result"] == {}
    assert all(m.get("id") != "h1" for m in s.seen)


def test_garbage_around_valid_replies(spawn):
    s = spawn("garbage")
    s.handshake(strict=False)
    assert text(s.call("echo", {"text": "ok"}, strict=False)) == "ok"
    s.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
    junk = []
    while (raw := s.line()) is not None:
        try:
            msg = orjson.loads(raw)
        except orjson.JSONDecodeError:
            msg = raw.rstrip(b"\n")
        if isinstance(msg, dict) and msg.get("id") == "last":
            break
        junk.append(msg)
    assert b"this line is not json" in junk and b"" in junk
    assert any(isinstance(m, bytes) and m.startswith(b'{"jsonrpc"') for m in junk)  # partial JSON
    assert ["a", "json", "array"] in junk
    assert any(isinstance(m, dict) and "jsonrpc" not in m for m in junk)


def test_huge_line(spawn):
    s = spawn("huge_line", "--mb", "2")
    s.handshake()
    s.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "huge", "arguments": {}}})
    raw = s.line()
    assert len(raw) > 2 * 1024 * 1024 and raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert len(text(orjson.loads(raw)["result"])) == 2 * 1024 * 1024
    assert text(s.call("echo", {"text": "after"})) == "after"


def test_stderr_flood(spawn):
    s = spawn("stderr_flood", "--mb", "2")
    s.handshake()  # the start flood precedes this reply; a client that did not drain would hang here
    assert text(s.call("echo", {"text": "x"})) == "x"
    wait_until(lambda: len(s.stderr) >= 4 * 1024 * 1024, message="4 MiB of stderr")


def _gone(pid: int) -> bool:
    """Dead or a zombie (an orphan may wait for a reaper that never comes)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_ignore_sigterm_and_grandchild(spawn):
    s = spawn("ignore_sigterm")
    s.handshake()
    grandchild = int(text(s.call("grandchild_pid")))
    assert os.getpgid(grandchild) == os.getpgid(s.proc.pid) == s.proc.pid
    s.proc.send_signal(signal.SIGTERM)
    assert s.request("ping")["result"] == {}  # still alive and answering
    os.killpg(s.proc.pid, signal.SIGTERM)
    assert s.proc.poll() is None and not _gone(grandchild)  # neither dies of SIGTERM
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.wait_exit()
    wait_until(lambda: _gone(grandchild), message="grandchild killed with its group")


def test_slow_start(spawn):
    started = time.monotonic()
    s = spawn("slow_start", "--delay", "0.5")
    s.handshake()
    assert time.monotonic() - started >= 0.5
    assert text(s.call("echo", {"text": "late"})) == "late"


def test_exit_during_init(spawn):
    s = spawn("exit_during_init")
    s.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert s.message() is None
    assert s.wait_exit() == 1


async def _exercise_demo(client) -> None:
    assert client.server_info.name == "demo"
    assert sorted(t.name for t in (await client.list_tools()).tools) == ["greet", "multiply"]
    assert (await client.call_tool("greet", {"name": "Ann"})).content[0].text == "Hello, Ann!"
    assert (await client.call_tool("multiply", {"a": 2, "b": 3.5})).structured_content == {"result": 7.0}
    assert (await client.read_resource("demo://readme")).contents[0].text
    assert (await client.read_resource("demo://item/42")).contents[0].text == "Item 42"
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["demo://item/{item_id}"]
    prompt = await client.get_prompt("summarize", {"topic": "bees"})
    assert "bees" in prompt.messages[0].content.text


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_fastmcp_demo_stdio_and_http(spawn):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def over_stdio():
        params = StdioServerParameters(command=PYTHON, args=["-m", "tests.servers.fastmcp_demo"], cwd=str(ROOT))
        async with Client(params, mode="legacy") as client:
            await _exercise_demo(client)

    anyio.run(over_stdio)
    demo = spawn("fastmcp_demo", "--http", "0")  # any free port, announced on stderr: no race for it
    port = wait_until(lambda: announced_port(demo.stderr), timeout=20, message="fastmcp_demo HTTP port")

    async def over_http():
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await _exercise_demo(client)

    anyio.run(over_http)
