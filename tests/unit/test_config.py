"""Config loading: troupe YAML, Claude-style JSON, every problem with file, line and key."""
from __future__ import annotations

import json

import pytest

from actors.settings import config


def test_yaml_config_with_defaults_and_expansion(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "t0ken")
    path = tmp_path / "c.yaml"
    path.write_text("servers:\n  - name: a\n    transport:\n      type: stdio\n      stdio:\n"
                    "        command: run\n        args: [x]\n        env: {TOKEN: '${MY_TOKEN}'}\n"
                    "        work_dir: sub\n  - name: b\n    prefix: ''\n    transport:\n"
                    "      type: streamable-http\n      streamable_http: {url: 'http://127.0.0.1:9/mcp'}\n"
                    "serve: {mode: flat, port: 0}\n")
    cfg = config.load(path)
    a, b = cfg.servers
    assert a.stdio.env["TOKEN"] == "t0ken" and a.stdio.work_dir == str(tmp_path / "sub")
    assert a.effective_prefix == "a" and b.effective_prefix == ""
    assert cfg.serve.mode == "flat" and cfg.serve.port == 0 and cfg.serve.host == "127.0.0.1"
    assert "t0ken" not in repr(cfg)  # env values never in a repr (so never in a log line)


def test_claude_style_json(tmp_path):
    path = tmp_path / "claude.json"
    path.write_text(json.dumps({"mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "server-fs"], "env": {"K": "v"}},
        "remote": {"url": "https://example.org/sse", "type": "sse", "headers": {"Authorization": "Bearer x"}},
        "off": {"command": "x", "disabled": True}}}))
    cfg = config.load(path)
    by_name = {s.name: s for s in cfg.servers}
    assert by_name["fs"].transport == "stdio" and by_name["fs"].stdio.args == ("-y", "server-fs")
    assert by_name["remote"].transport == "sse" and by_name["remote"].http.headers["Authorization"] == "Bearer x"
    assert by_name["off"].enabled is False


def test_every_problem_is_reported_with_file_line_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("servers:\n  - name: ok\n    transport: {type: stdio, stdio: {command: x}}\n"
                    "  - name: ok\n    transport: {type: stdio, stdio: {command: y}}\n"
                    "  - name: two\n    timeout: -1\n    bogus: 1\n    transport: {type: sse, sse: {url: 'ftp://x'}}\n"
                    "serve: {auth_token: 12345, mode: sideways}\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    text = "\n".join(err.value.problems)
    assert f"{path}:4: servers[1].name: duplicate server name 'ok'" in text
    assert f"{path}:7: servers[2].timeout: must be > 0" in text
    assert f"{path}:8: servers[2].bogus: unknown key" in text
    assert "servers[2].transport.sse.url" in text
    assert "serve.mode" in text and "serve.auth_token: must be a string" in text
    assert "12345" not in text  # a secret is never echoed


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(tmp_path / "missing.yaml")
    bad = tmp_path / "broken.yaml"
    bad.write_text("servers: [\n  - {name: a\n")
    with pytest.raises(config.ConfigError, match=r"broken.yaml:\d+: not valid YAML/JSON"):
        config.load(bad)


def test_http_front_limits_have_defaults_and_must_be_positive(tmp_path):
    cfg = config.from_data({"servers": []})
    assert (cfg.serve.session_idle, cfg.serve.max_sessions, cfg.serve.header_timeout, cfg.serve.max_connections) \
        == (config.DEFAULT_SESSION_IDLE_S, config.DEFAULT_MAX_SESSIONS, config.DEFAULT_HEADER_TIMEOUT_S,
            config.DEFAULT_MAX_CONNECTIONS) == (600.0, 1000, 10.0, 512)
    small = config.from_data({"serve": {"session_idle": 1, "max_sessions": 5, "header_timeout": 0.5,
                                        "max_connections": 4}})
    assert (small.serve.session_idle, small.serve.max_sessions, small.serve.header_timeout,
            small.serve.max_connections) == (1.0, 5, 0.5, 4)
    path = tmp_path / "limits.yaml"
    path.write_text("serve:\n  session_idle: 0\n  max_sessions: -3\n  header_timeout: soon\n"
                    "  max_connections: 2.5\n")
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    text = "\n".join(err.value.problems)
    assert f"{path}:2: serve.session_idle: must be > 0 seconds, got 0.0" in text
    assert f"{path}:3: serve.max_sessions: must be > 0 sessions, got -3" in text
    assert f"{path}:4: serve.header_timeout: must be a number, got str 'soon'" in text
    assert f"{path}:5: serve.max_connections: must be an integer, got float 2.5" in text


def test_stream_buffer_bytes_defaults_to_4_mib_and_must_be_a_positive_integer(tmp_path):
    assert config.from_data({"servers": []}).serve.stream_buffer_bytes == 4 * 1024 * 1024
    assert config.from_data({"serve": {"stream_buffer_bytes": 65536}}).serve.stream_buffer_bytes == 65536
    path = tmp_path / "buffer.yaml"
    for bad, said in (("0", "must be > 0 bytes, got 0"), ("1.5", "must be an integer, got float 1.5"),
                      ("lots", "must be an integer, got str 'lots'")):
        path.write_text(f"serve:\n  stream_buffer_bytes: {bad}\n")
        with pytest.raises(config.ConfigError) as err:
            config.load(path)
        assert f"{path}:2: serve.stream_buffer_bytes: {said}" in "\n".join(err.value.problems)
