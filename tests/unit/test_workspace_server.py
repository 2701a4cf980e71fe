"""The bundled workspace MCP server, driven over real stdio as a subprocess."""
from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import threading
from datetime import datetime
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tests.support import PYTHON, ROOT

pytestmark = pytest.mark.timeout(120)  # a backstop only: every read below has its own timeout

TIMEOUT = 15.0
COMMAND = [PYTHON, "-m", "actors.bundled.workspace", "--root"]


class StdioPeer:
    """The server as a child process; stdout lines arrive on a queue so every read is bounded."""

    def __init__(self, root: Path):
        self.proc = subprocess.Popen(COMMAND + [str(root)], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[bytes] = []
        self.ids = itertools.count(1)
        self.pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put, True), daemon=True),
                      threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True)]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream, sink, mark_eof: bool = False) -> None:
        for line in stream:
            sink(line)
        if mark_eof:
            sink(None)  # lets recv() report a dead server at once instead of timing out

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def recv(self, timeout: float = TIMEOUT) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout}s; stderr: {b''.join(self.stderr)!r}") from None
        assert line is not None, f"server closed stdout; stderr: {b''.join(self.stderr)!r}"
        assert line.endswith(b"\n")
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> dict:
        """Send one request and return its whole response (result or error)."""
        id_ = next(self.ids)
        message = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        reply = self.recv()
        assert reply["jsonrpc"] == "2.0" and reply["id"] == id_, reply
        return reply

    def call(self, tool: str, **arguments) -> dict:
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in reply, reply
        return reply["result"]

    def close(self) -> int:
        """Close stdin (the MCP stdio shutdown signal) and return the exit code; kill on a hang."""
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
            raise AssertionError("server did not exit after stdin closed") from None
        finally:
            for pump in self.pumps:  # the pipes reach EOF once the process is gone
                pump.join(timeout=TIMEOUT)
            self.proc.stdout.close()
            self.proc.stderr.close()


def text_of(result: dict) -> str:
    return "\n".join(block["text"] for block in result["content"])


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("ws")
    (base / "secret.txt").write_text("top secret hello\n")
    root = base / "root"
    files = {
        "README.md": "# Demo\nhello world\n",
        "src/app.py": "import os\n\n\ndef main():\n    print('Hello')\n",
        "src/util.py": "def helper():\n    return 42\n",
        "src/long.txt": "".join(f"line {n}\n" for n in range(1, 31)),
        "docs/notes.txt": "Hello again",
        ".git/config": "hello from git\n",
        "node_modules/pkg/index.js": "hello from npm\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "data.bin").write_bytes(b"\x00\x01hello binary\x00")
    (root / "link_out.txt").symlink_to(base / "secret.txt")
    return root


@pytest.fixture(scope="module")
def server(tree):
    peer = StdioPeer(tree)
    peer.init_reply = peer.request("initialize", {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}})
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield peer
    assert peer.close() == 0


def test_handshake(server):
    result = server.init_reply["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {}, "resources": {}}
    assert result["serverInfo"]["name"] == "troupe-workspace" and result["serverInfo"]["version"]
    assert "read_file" in result["instructions"]
    again = server.request("initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})
    assert again["result"]["protocolVersion"] == "2025-11-25"
    assert server.request("ping")["result"] == {}


def test_tools_list_schemas(server):
    tools = {t["name"]: t for t in server.request("tools/list")["result"]["tools"]}
    assert set(tools) == {"list_files", "read_file", "search_text", "file_info"}
    for tool in tools.values():
        schema = tool["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert len(tool["description"]) > 40
        assert {k: tool["annotations"][k] for k in ("readOnlyHint", "idempotentHint", "openWorldHint")} == {
            "readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    assert tools["read_file"]["inputSchema"]["required"] == ["path"]
    assert tools["search_text"]["inputSchema"]["required"] == ["query"]
    Draft202012Validator(tools["list_files"]["inputSchema"]).validate({"pattern": "*.py", "recursive": True})


def test_list_files(server, tree):
    top = server.call("list_files")
    assert not top.get("isError")
    lines = text_of(top).splitlines()
    assert f"file\t{(tree / 'README.md').stat().st_size}\tREADME.md" in lines
    assert "dir\t-\tsrc" in lines and "link\t-\tlink_out.txt" in lines
    assert [line.split("\t")[2] for line in lines] == sorted(line.split("\t")[2] for line in lines)

    py = server.call("list_files", pattern="*.py", recursive=True)
    assert [line.split("\t")[2] for line in text_of(py).splitlines()] == ["src/app.py", "src/util.py"]

    everything = text_of(server.call("list_files", recursive=True, limit=2000))
    assert "docs/notes.txt" in everything and ".git" not in everything and "node_modules" not in everything

    sub = text_of(server.call("list_files", path="src"))
    assert sub.splitlines()[0].endswith("\tsrc/app.py")

    cut = text_of(server.call("list_files", recursive=True, limit=2)).splitlines()
    assert len(cut) == 3 and "truncated" in cut[-1]

    not_dir = server.call("list_files", path="README.md")
    assert not_dir["isError"] is True and "not a directory" in text_of(not_dir)


def test_read_file(server):
    whole = server.call("read_file", path="src/app.py")
    assert not whole.get("isError")
    assert whole["content"] == [{"type": "text", "text": "import os\n\n\ndef main():\n    print('Hello')\n"}]

    window = server.call("read_file", path="src/long.txt", offset=5, limit=3)
    assert window["content"][0]["text"] == "line 5\nline 6\nline 7\n"
    assert "offset=8" in window["content"][1]["text"] and "of 30" in window["content"][1]["text"]

    binary = server.call("read_file", path="data.bin")
    assert binary["isError"] is True and "binary" in text_of(binary)

    missing = server.call("read_file", path="nope/missing.txt")
    assert missing["isError"] is True and "not found" in text_of(missing)

    is_dir = server.call("read_file", path="src")
    assert is_dir["isError"] is True


def test_search_text(server):
    found = text_of(server.call("search_text", query="hello"))
    assert found.splitlines() == ["README.md:2: hello world", "docs/notes.txt:1: Hello again",
                                  "src/app.py:5:     print('Hello')"]

    exact = text_of(server.call("search_text", query="Hello", case_sensitive=True, path="src"))
    assert exact.splitlines() == ["src/app.py:5:     print('Hello')"]

    regex = text_of(server.call("search_text", query=r"^def \w+\(", regex=True, glob="*.py"))
    assert regex.splitlines() == ["src/app.py:4: def main():", "src/util.py:1: def helper():"]

    limited = text_of(server.call("search_text", query="line", path="src/long.txt", limit=2)).splitlines()
    assert limited[:2] == ["src/long.txt:1: line 1", "src/long.txt:2: line 2"] and "limit" in limited[2]

    none = server.call("search_text", query="zzz-not-there")
    assert not none.get("isError") and "no matches" in text_of(none)

    bad = server.call("search_text", query="(", regex=True)
    assert bad["isError"] is True and "regular expression" in text_of(bad)


def test_file_info(server, tree):
    info = server.call("file_info", path="src/long.txt")
    data = json.loads(text_of(info))
    assert data["type"] == "file" and data["size"] == (tree / "src/long.txt").stat().st_size
    assert data["lines"] == 30 and data["path"] == "src/long.txt"
    assert datetime.fromisoformat(data["modified"]).tzinfo is not None
    assert info["structuredContent"] == data
    assert json.loads(text_of(server.call("file_info", path="docs")))["type"] == "directory"
    assert json.loads(text_of(server.call("file_info", path="data.bin")))["binary"] is True


@pytest.mark.parametrize("tool,args", [
    ("read_file", {"path": "../secret.txt"}),
    ("read_file", {"path": "link_out.txt"}),
    ("file_info", {"path": "SECRET_ABS"}),
    ("list_files", {"path": ".."}),
    ("search_text", {"query": "secret", "path": "src/../../"}),
])
def test_path_escape_refused(server, tree, tool, args):
    args = {k: str(tree.parent / "secret.txt") if v == "SECRET_ABS" else v for k, v in args.items()}
    result = server.call(tool, **args)
    assert result["isError"] is True and "outside the workspace root" in text_of(result)
    assert "top secret" not in text_of(result)


def test_symlink_out_is_not_searched(server):
    assert "top secret" not in text_of(server.call("search_text", query="secret"))


def test_bad_arguments_are_tool_errors(server):
    # Argument mistakes come back as isError so the model can read them and retry.
    unknown = server.call("read_file", path="README.md", bogus=1)
    assert unknown["isError"] is True and "bogus" in text_of(unknown)
    wrong_type = server.call("list_files", limit="many")
    assert wrong_type["isError"] is True and "integer" in text_of(wrong_type)
    missing = server.call("file_info")
    assert missing["isError"] is True and "path" in text_of(missing)


def test_unknown_tool_and_method(server):
    tool = server.request("tools/call", {"name": "rm_rf", "arguments": {}})
    assert tool["error"]["code"] == -32602 and "rm_rf" in tool["error"]["message"]
    method = server.request("sampling/doSomething", {})
    assert method["error"]["code"] == -32601 and "sampling/doSomething" in method["error"]["message"]
    no_params = server.request("tools/call", {"arguments": {}})
    assert no_params["error"]["code"] == -32602


def test_malformed_lines_then_keeps_working(server):
    server.send_raw(b"{this is not json\n")
    reply = server.recv()
    assert "id" not in reply and reply["error"]["code"] == -32700  # id unreadable: omitted, never null
    server.send_raw(b"[1, 2]\n")
    assert server.recv()["error"]["code"] == -32600
    server.send_raw(b"\n")  # blank lines are skipped, not answered
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    assert server.request("ping")["result"] == {}
    assert server.lines.empty()


def test_resources(server, tree):
    resources = server.request("resources/list")["result"]["resources"]
    by_name = {r["name"]: r for r in resources}
    assert set(by_name) == {"README.md", "data.bin"}  # top-level regular files only
    readme = by_name["README.md"]
    assert readme["uri"] == (tree / "README.md").as_uri() and readme["mimeType"] == "text/markdown"

    contents = server.request("resources/read", {"uri": readme["uri"]})["result"]["contents"]
    assert contents == [{"uri": readme["uri"], "mimeType": "text/markdown", "text": "# Demo\nhello world\n"}]
    nested = server.request("resources/read", {"uri": (tree / "src/util.py").as_uri()})
    assert nested["result"]["contents"][0]["text"].startswith("def helper")
    blob = server.request("resources/read", {"uri": by_name["data.bin"]["uri"]})["result"]["contents"][0]
    assert "blob" in blob and "text" not in blob

    outside = server.request("resources/read", {"uri": (tree.parent / "secret.txt").as_uri()})
    assert outside["error"]["code"] == -32002 and "top secret" not in json.dumps(outside)
    assert server.request("resources/read", {"uri": "https://example.com/x"})["error"]["code"] == -32602

    templates = server.request("resources/templates/list")["result"]["resourceTemplates"]
    assert templates[0]["uriTemplate"] == tree.as_uri() + "/{path}"


def test_exits_cleanly_on_eof(tree):
    peer = StdioPeer(tree)
    assert peer.request("ping")["result"] == {}
    assert peer.close() == 0


def test_bad_root_fails_fast(tmp_path):
    proc = subprocess.run(COMMAND + [str(tmp_path / "missing")], cwd=ROOT, capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 2 and proc.stdout == b"" and b"not a directory" in proc.stderr


def test_official_sdk_client(tree, tmp_path):
    anyio = pytest.importorskip("anyio")
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=PYTHON, args=COMMAND[1:] + [str(tree)], cwd=str(ROOT))

    async def session_run():
        with anyio.fail_after(TIMEOUT * 2), open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    tools = await session.list_tools()
                    result = await session.call_tool("read_file", {"path": "README.md"})
                    escaped = await session.call_tool("read_file", {"path": "../secret.txt"})
                    return init, tools, result, escaped

    init, tools, result, escaped = anyio.run(session_run)
    assert init.server_info.name == "troupe-workspace"
    assert init.protocol_version == "2025-11-25"
    assert {t.name for t in tools.tools} == {"list_files", "read_file", "search_text", "file_info"}
    assert all(t.annotations.read_only_hint for t in tools.tools)
    assert not result.is_error and result.content[0].text == "# Demo\nhello world\n"
    assert escaped.is_error and "outside" in escaped.content[0].text


def test_runs_from_any_cwd_with_default_root(tree):
    # The default root is the working directory; the package must still import from the project.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([PYTHON, "-m", "actors.bundled.workspace"], cwd=tree, env=env, timeout=TIMEOUT,
                          input=b'{"jsonrpc":"2.0","id":1,"method":"resources/list"}\n', capture_output=True)
    assert proc.returncode == 0
    names = {r["name"] for r in json.loads(proc.stdout)["result"]["resources"]}
    assert "README.md" in names
