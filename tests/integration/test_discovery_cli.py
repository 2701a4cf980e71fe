"""`discover` CLI entry as a real process: finds, merges, probes once, prints, exits."""
from __future__ import annotations

import json
import os
import subprocess

from tests.support import PYTHON, ROOT
from tests.unit.test_discovery_fixtures import SECRET_ENV, build_path, write_json

RUN_TIMEOUT = 60.0

SNIPPET = """
import json, sys
{patch}
from actors.settings.config import from_data
from actors.discovery.cli import run
args = json.loads(sys.argv[1])
config = from_data({{"discovery": args.pop("discovery")}})
sys.exit(run(config=config, **args))
"""


def discover(tree, *, json_out=True, probe=True, patch=True) -> subprocess.CompletedProcess:
    args = {"home": str(tree.home), "project_root": str(tree.project), "json": json_out, "probe": probe,
            "discovery": {"path_probe": {"enabled": True, "path": tree.path}, "health": {"timeout": 10}}}
    code = SNIPPET.format(patch="from gevent import monkey; monkey.patch_all()" if patch else "")
    return subprocess.run([PYTHON, "-c", code, json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def small_tree(tmp_path):
    tree = build_path(tmp_path)
    write_json(tree.home / ".cursor" / "mcp.json", {"mcpServers": {
        "echo": {"command": str(tree.bin / "mcp-server-echo"), "env": {"ECHO_TOKEN": SECRET_ENV}}}})
    (tree.home / ".codeium" / "windsurf").mkdir(parents=True)
    (tree.home / ".codeium" / "windsurf" / "mcp_config.json").write_text("{ not json")
    return tree


def test_json_report_with_health(tmp_path):
    tree = small_tree(tmp_path)
    proc = discover(tree)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    got = {s["name"]: s for s in doc["services"]}
    assert set(got) == {"echo", "weather-mcp"}
    echo = got["echo"]
    assert echo["healthy"] is True and echo["tools"] == 6 and echo["env_names"] == ["ECHO_TOKEN"]
    assert [s["provider"] for s in echo["sources"]] == ["cursor", "path"]
    # found on PATH: listed, but never executed (not even probed) until approved
    weather = got["weather-mcp"]
    assert weather["healthy"] is None and weather["auto_connect"] is False
    assert weather["provenance"] == "path" and weather["trust"] == "pending-approval"
    assert any("windsurf" in e for e in doc["errors"]) and doc["per_source"]["path"] == 2
    assert SECRET_ENV not in proc.stdout + proc.stderr
    assert list(tree.markers.iterdir()) == []


def test_text_report_says_where_and_how_merged(tmp_path):
    tree = small_tree(tmp_path)
    proc = discover(tree, json_out=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "echo  [stdio]  healthy" in out
    assert f"details from cursor: {tree.home / '.cursor' / 'mcp.json'} as 'echo'" in out
    assert f"merged from path: {tree.bin / 'mcp-server-echo'}" in out
    assert "env: ECHO_TOKEN" in out and SECRET_ENV not in out
    assert "problems:" in out and "windsurf" in out
    assert list(tree.markers.iterdir()) == []


def test_no_probe_runs_no_path_probe_and_no_health_check(tmp_path):
    tree = small_tree(tmp_path)
    proc = discover(tree, json_out=False, probe=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "echo  [stdio]  health unknown (not probed)" in out
    assert f"from cursor: {tree.home / '.cursor' / 'mcp.json'} as 'echo'" in out and "from path" not in out
    # config files are read, nothing is run: not even the PATH binaries' --help
    assert tree.runs_of("weather-mcp") == 0 and list(tree.markers.iterdir()) == []


def test_refuses_to_run_unpatched(tmp_path):
    proc = discover(small_tree(tmp_path), patch=False)
    assert proc.returncode == 2 and "monkey-patching is required" in proc.stderr
