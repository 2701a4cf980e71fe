"""Client config formats: locations, parsing (JSON and JSONC), limits, entry → ServerConfig."""
from __future__ import annotations

from pathlib import Path

import pytest

from actors.discovery.settings import ALL_PROVIDERS, parse
from actors.discovery.sources import (MAX_FILE_BYTES, Location, SourceError, entries, entry_to_config, locations,
                                      parse_json, read_limited)


def test_locations_cover_every_client_at_user_and_project_level(tmp_path):
    home, proj = tmp_path / "h", tmp_path / "p"
    found = {(loc.provider, str(loc.path.relative_to(home if loc.scope == "user" else proj)))
             for loc in locations(home, proj, env={}) if loc.scope != "managed"}
    expected = {
        ("claude_desktop", ".config/Claude/claude_desktop_config.json"),
        ("claude_desktop", "Library/Application Support/Claude/claude_desktop_config.json"),
        ("claude_desktop", "AppData/Roaming/Claude/claude_desktop_config.json"),
        ("claude_code", ".claude.json"), ("claude_code", ".mcp.json"), ("claude_code", ".claude/settings.json"),
        ("cline", ".cline/data/settings/cline_mcp_settings.json"), ("codex", ".codex/config.toml"),
        ("continue", ".continue/config.yaml"), ("continue", ".continue/mcpServers/*.yaml"),
        ("zed", ".config/zed/settings.json"), ("zed", ".zed/settings.json"), ("goose", ".config/goose/config.yaml"),
        ("gemini", ".gemini/settings.json"), ("gemini", ".gemini/extensions/*/gemini-extension.json"),
        ("opencode", ".config/opencode/opencode.json"), ("opencode", "opencode.jsonc"), ("roo", ".roo/mcp.json"),
        ("kiro", ".kiro/settings/mcp.json"), ("copilot", ".copilot/mcp-config.json"), ("lmstudio", ".lmstudio/mcp.json"),
        ("junie", ".junie/mcp/mcp.json"), ("vscode", ".config/Code/User/profiles/*/mcp.json"),
        ("vscode", ".config/Code - Insiders/User/mcp.json"), ("vscode", ".config/Code/User/settings.json"),
        ("cursor", ".cursor/mcp.json"), ("vscode", ".vscode/mcp.json"),
        ("windsurf", ".codeium/windsurf/mcp_config.json"), ("troupe", ".config/troupe/registry.json"),
    }
    assert expected <= found


def test_windows_claude_desktop_uses_appdata(tmp_path):
    locs = locations(tmp_path / "h", None, appdata=str(tmp_path / "roaming"))
    assert any(loc.path == tmp_path / "roaming" / "Claude" / "claude_desktop_config.json" for loc in locs)


def test_claude_json_yields_user_and_current_project_servers_only(tmp_path):
    p1, p2 = tmp_path / "p1", tmp_path / "p2"
    data = {"mcpServers": {"a": {"command": "a"}},
            "projects": {str(p1): {"mcpServers": {"b": {"command": "b"}}},
                         str(p2): {"mcpServers": {"c": {"command": "c"}}}}}
    here = Location("claude_code", tmp_path / ".claude.json", "user", "claude_json", current=str(p1))
    got = list(entries(here, data))
    assert [(e.name, e.config.stdio.work_dir) for e in got] == [("a", None), ("b", str(p1))]
    assert f"project:{p1}" in got[1].tags
    # another project's local servers are never read, and with no current project none are
    elsewhere = Location("claude_code", tmp_path / ".claude.json", "user", "claude_json", current=str(tmp_path))
    assert [e.name for e in entries(elsewhere, data)] == ["a"]
    assert [e.name for e in entries(Location("claude_code", tmp_path / ".claude.json", "user", "claude_json"),
                                    data)] == ["a"]


def test_vscode_reads_servers_key_not_mcpservers(tmp_path):
    loc = Location("vscode", tmp_path / "mcp.json", "project", "vscode", project=str(tmp_path))
    got = list(entries(loc, {"servers": {"v": {"command": "v"}}, "mcpServers": {"no": {"command": "n"}}}))
    assert [e.name for e in got] == ["v"]


def test_top_level_that_is_not_an_object_is_an_error(tmp_path):
    with pytest.raises(SourceError):
        list(entries(Location("cursor", tmp_path / "x", "user", "mcpServers"), ["not", "a", "dict"]))


def test_jsonc_comments_and_trailing_commas_are_accepted_but_strings_are_kept(tmp_path):
    text = '{\n // note\n "url": "http://x//y", /* block */ "a": [1, 2,],\n}'
    assert parse_json(tmp_path / "x.json", text.encode()) == {"url": "http://x//y", "a": [1, 2]}


def test_broken_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.json"
    with pytest.raises(SourceError, match=r"bad\.json:4:\d+: not valid JSON"):
        parse_json(path, b'{\n /* a\n comment */ "mcpServers": {\n "x": oops\n}}')


def test_oversized_file_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(SourceError, match="limit"):
        read_limited(path, MAX_FILE_BYTES)
    assert read_limited(path, MAX_FILE_BYTES + 10) == b" " * (MAX_FILE_BYTES + 1)


def test_entry_keeps_env_cwd_headers_and_type(tmp_path):
    cfg = entry_to_config("s", {"command": "srv", "args": ["--x"], "env": {"K": "v"}, "cwd": "/tmp"}, "f.json")
    assert (cfg.transport, cfg.stdio.command, cfg.stdio.args, dict(cfg.stdio.env), cfg.stdio.work_dir) == \
        ("stdio", "srv", ("--x",), {"K": "v"}, "/tmp")
    sse = entry_to_config("r", {"type": "sse", "url": "http://h/sse", "headers": {"A": "b"}}, "f.json")
    assert (sse.transport, sse.http.url, dict(sse.http.headers)) == ("sse", "http://h/sse", {"A": "b"})
    assert entry_to_config("h", {"type": "http", "url": "http://h/mcp"}, "f").transport == "streamable-http"
    assert entry_to_config("w", {"serverUrl": "http://h/mcp"}, "f").transport == "streamable-http"
    assert entry_to_config("d", {"command": "x", "disabled": True}, "f").enabled is False


def test_project_servers_run_in_the_project_unless_cwd_is_given(tmp_path):
    assert entry_to_config("s", {"command": "x"}, "f", project=str(tmp_path)).stdio.work_dir == str(tmp_path)
    assert entry_to_config("s", {"command": "x", "cwd": "/tmp"}, "f", project=str(tmp_path)).stdio.work_dir == "/tmp"


def test_vscode_workspace_folder_is_substituted_and_an_input_is_needed(tmp_path):
    loc = Location("vscode", tmp_path / "mcp.json", "project", "vscode", dialect="vscode", project="/proj")
    doc = {"servers": {"n": {"command": "node", "args": ["${workspaceFolder}/a.js", "${input:key}"]}}}
    [entry] = entries(loc, doc, env={})
    assert entry.config.stdio.args == ("/proj/a.js", "${input:key}")
    assert entry.needs == ("${input:key}",)


@pytest.mark.parametrize("spec", [{"args": ["x"]}, {"command": 3}, {"url": "ftp://x"}, "nope"])
def test_invalid_entry_is_a_value_error_naming_the_file(spec):
    with pytest.raises(ValueError, match="cfg.json: bad"):
        entry_to_config("bad", spec, "cfg.json")


def test_invalid_env_value_error_never_echoes_the_value():
    with pytest.raises(ValueError) as err:
        entry_to_config("s", {"command": "x", "env": {"TOKEN": {"nested": "sekrit"}}}, "f")
    assert "sekrit" not in str(err.value)


def test_settings_defaults_and_overrides(tmp_path):
    s = parse({}, home=str(tmp_path), project_root=str(tmp_path / "p"))
    assert s.providers == ALL_PROVIDERS and s.store == "memory" and s.path_auto_connect is False
    assert s.path_enabled is False  # running what PATH holds is opt-in
    assert s.path_timeout == 2.0 and s.max_file_bytes == MAX_FILE_BYTES and s.health.interval == 60.0
    s = parse({"home": "/from/settings", "store": "sqlite", "store_path": "~/x.db",
               "path_probe": {"allowlist": ["my-server"], "auto_connect": True}}, project_root="/p")
    assert s.home == "/from/settings" and s.store_path == str(Path("/from/settings/x.db"))
    assert s.path_allowlist == ("my-server",) and s.path_auto_connect is True


@pytest.mark.parametrize("bad", [{"store": "redis"}, {"providers": ["nope"]}, {"interval": "soon"},
                                 {"path_probe": {"allowlist": [1]}}, {"health": []}])
def test_bad_settings_are_clear_errors(bad):
    with pytest.raises(ValueError, match="discovery"):
        parse(bad, home="/h", project_root="/p")


def test_parsing_in_a_worker_thread_imports_nothing(tmp_path):
    """A FileProvider parses in the hub's worker threads, where a first import can deadlock
    against gevent (it hung one client's scan at start-up): every format, a BOM and every
    error path must find its modules imported already."""
    import subprocess
    import sys
    import textwrap
    files = {"a.json": b'\xef\xbb\xbf{"mcpServers": {}}', "b.json": b'{"x": 1, // c\n}', "c.json": b"{bad",
             "d.toml": b'[mcp_servers.x]\ncommand = "y"\n', "e.toml": b"a = ", "f.yaml": b"a: [1, 2]\n",
             "g.yaml": b"a: ["}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from actors.discovery.providers.files import load
        from actors.discovery.sources import Location
        before = set(sys.modules)
        for name in {sorted(files)!r}:
            fmt = {{"json": "json", "toml": "toml", "yaml": "yaml"}}[name.rsplit(".", 1)[1]]
            load(Location("x", Path({str(tmp_path)!r}) / name, "user", fmt=fmt), 1 << 20)
        print(sorted(set(sys.modules) - before))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
