"""The README's run command: troupe on its embedded default config, on a machine with nothing else."""
from __future__ import annotations

import json
import os
import subprocess

from tests.support import PYTHON, ROOT


def test_default_config_serves_the_workspace_server(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.md").write_text("# Notes\nthe quick brown fox\n")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_tools", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "call_tool", "arguments": {
            "name": "workspace__search_text", "arguments": {"query": "brown fox"}}}},
    ]
    proc = subprocess.Popen([PYTHON, "-m", "actors.main"], cwd=work, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers = {}
    try:
        for msg in messages:
            proc.stdin.write(json.dumps(msg).encode() + b"\n")
            proc.stdin.flush()
            if "id" in msg:
                while True:
                    line = proc.stdout.readline()
                    assert line, proc.stderr.read().decode()[-3000:]
                    answer = json.loads(line)
                    if answer.get("id") == msg["id"]:
                        answers[msg["id"]] = answer
                        break
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    tools = json.loads(answers[2]["result"]["content"][0]["text"])["tools"]
    assert {"workspace__list_files", "workspace__read_file", "workspace__search_text"} <= {t["name"] for t in tools}
    found = answers[3]["result"]["content"][0]["text"]
    assert "notes.md:2" in found and "brown fox" in found
