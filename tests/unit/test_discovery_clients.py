"""One fixture per MCP client, written from that client's documented shape: what troupe reads from it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.discovery.clients import CLIENTS
from actors.discovery.sources import entries, locations, parse_file, read_limited

ENV = {"API_KEY": "k-123", "HOME_DIR": "/home/u", "CODEX_TOKEN": "tok-9"}


class Files:
    """A temp home, project and system root; writes one client file and reads it as troupe does."""

    def __init__(self, tmp: Path):
        self.home, self.project, self.system = tmp / "home", tmp / "proj", tmp / "sys"
        for d in (self.home, self.project, self.system):
            d.mkdir()

    def write(self, rel: str, content, root: Path | None = None) -> Path:
        path = (root or self.home) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    def read(self, provider: str, path: Path) -> dict:
        """name → Entry for every entry of the file at `path`, read through the location that covers it."""
        out = {}
        for pattern in locations(self.home, self.project, system_root=self.system, env=ENV):
            for loc in pattern.expand():
                if loc.provider == provider and loc.path == path:
                    doc = parse_file(loc, read_limited(loc.path, 1 << 20))
                    out.update({e.name: e for e in entries(loc, doc, home=str(self.home), env=ENV)})
                    return out
        raise AssertionError(f"no {provider} location covers {path}")


@pytest.fixture
def files(tmp_path):
    return Files(tmp_path)


def stdio(entry):
    return entry.config.stdio.command, list(entry.config.stdio.args), dict(entry.config.stdio.env)


def remote(entry):
    return entry.config.transport, entry.config.http.url, dict(entry.config.http.headers)


def test_every_client_has_a_fixture_here():
    tests = " ".join(name for name in globals() if name.startswith("test_") and "_reads" in name)
    assert [c.name for c in CLIENTS if c.name != "troupe" and c.name not in tests] == []


def test_claude_desktop_reads_mcp_servers(files):
    path = files.write(".config/Claude/claude_desktop_config.json",
                       {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}}}})
    got = files.read("claude_desktop", path)
    assert stdio(got["fs"]) == ("npx", ["-y", "srv"], {"K": "v"})


def test_claude_code_reads_defaults_and_the_managed_file(files):
    path = files.write(".mcp.json", {"mcpServers": {
        "api": {"type": "http", "url": "https://api.example/${REGION:-eu}/mcp", "headers": {"X": "${API_KEY}"}},
        "gone": {"command": "srv", "args": ["${MISSING_VAR}"]}}}, files.project)
    got = files.read("claude_code", path)
    assert remote(got["api"]) == ("streamable-http", "https://api.example/eu/mcp", {"X": "k-123"})
    assert got["gone"].needs == ("${MISSING_VAR}",)  # listed, never started with the literal text
    managed = files.write("etc/claude-code/managed-mcp.json", {"mcpServers": {"corp": {"command": "corp-mcp"}}},
                          files.system)
    entry = files.read("claude_code", managed)["corp"]
    assert "scope:managed" in entry.tags and stdio(entry)[0] == "corp-mcp"


def test_claude_code_settings_json_is_read_for_approvals_not_servers(files):
    path = files.write(".claude/settings.json", {"mcpServers": {"x": {"command": "x"}}, "enabledMcpjsonServers": ["a"]})
    assert files.read("claude_code", path) == {}


def test_cursor_reads_env_and_editor_variables(files):
    path = files.write(".cursor/mcp.json", {"mcpServers": {"c": {
        "command": "node", "args": ["${workspaceFolder}/s.js", "${userHome}/x"], "env": {"T": "${env:API_KEY}"}}}},
        files.project)
    got = files.read("cursor", path)
    assert stdio(got["c"]) == ("node", [f"{files.project}/s.js", f"{files.home}/x"], {"T": "k-123"})
    assert got["c"].needs == ()


def test_vscode_reads_profiles_insiders_and_legacy_settings(files):
    profile = files.write(".config/Code/User/profiles/abc123/mcp.json", {
        "inputs": [{"id": "tok", "type": "promptString"}],
        "servers": {"gh": {"type": "http", "url": "https://gh.example/mcp", "headers": {"A": "${input:tok}"}},
                    "e": {"command": "e", "envFile": "${workspaceFolder}/.env"}}})
    got = files.read("vscode", profile)
    assert got["gh"].needs == ("${input:tok}",)
    insiders = files.write(".config/Code - Insiders/User/mcp.json", {"servers": {"i": {"command": "ins"}}})
    assert stdio(files.read("vscode", insiders)["i"])[0] == "ins"
    legacy = files.write(".config/Code/User/settings.json",
                         '{\n  // JSONC\n  "mcp": {"servers": {"old": {"command": "old-mcp",},},},\n}')
    assert stdio(files.read("vscode", legacy)["old"])[0] == "old-mcp"


def test_vscode_env_file_is_read_relative_to_its_file_and_env_wins(files):
    files.write(".vscode/.env", "# comment\nA=from-file\nB='quoted'\nexport C=c\n", files.project)
    path = files.write(".vscode/mcp.json", {"servers": {"s": {"command": "s", "envFile": ".env", "env": {"A": "own"}}}},
                       files.project)
    assert stdio(files.read("vscode", path)["s"])[2] == {"A": "own", "B": "quoted", "C": "c"}


def test_windsurf_reads_server_url(files):
    path = files.write(".codeium/windsurf/mcp_config.json",
                       {"mcpServers": {"w": {"serverUrl": "https://w.example/mcp", "headers": {"K": "${env:API_KEY}"}}}})
    assert remote(files.read("windsurf", path)["w"]) == ("streamable-http", "https://w.example/mcp", {"K": "k-123"})


def test_cline_reads_disabled_and_a_url_without_type_as_sse(files):
    path = files.write(".cline/data/settings/cline_mcp_settings.json", {"mcpServers": {
        "a": {"url": "https://a.example/sse"},
        "b": {"type": "streamableHttp", "url": "https://b.example/mcp"},
        "c": {"command": "c", "disabled": True}}})
    got = files.read("cline", path)
    assert remote(got["a"])[0] == "sse" and remote(got["b"])[0] == "streamable-http"
    assert got["c"].disabled
    storage = files.write(".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
                          {"mcpServers": {"g": {"command": "g"}}})
    assert "g" in files.read("cline", storage)


def test_roo_reads_global_storage_and_project_file(files):
    path = files.write(".roo/mcp.json", {"mcpServers": {
        "r": {"type": "streamable-http", "url": "https://r.example/mcp", "headers": {"K": "${env:API_KEY}"}},
        "s": {"type": "sse", "url": "https://s.example/sse", "disabled": True}}}, files.project)
    got = files.read("roo", path)
    assert remote(got["r"]) == ("streamable-http", "https://r.example/mcp", {"K": "k-123"})
    assert remote(got["s"])[0] == "sse" and got["s"].disabled
    storage = files.write("Library/Application Support/Code/User/globalStorage/rooveterinaryinc.roo-cline/"
                          "settings/mcp_settings.json", {"mcpServers": {"m": {"command": "m"}}})
    assert "m" in files.read("roo", storage)


def test_continue_reads_the_yaml_list_block_files_and_secrets_need_input(files):
    path = files.write(".continue/config.yaml", """
name: my-assistant
mcpServers:
  - name: sqlite
    command: uvx
    args: [mcp-server-sqlite, --db-path, /tmp/db]
  - name: hub
    type: streamable-http
    url: https://hub.example/mcp
    requestOptions:
      headers:
        Authorization: "Bearer ${{ secrets.HUB_TOKEN }}"
  - command: nameless
""")
    got = files.read("continue", path)
    assert stdio(got["sqlite"])[:2] == ("uvx", ["mcp-server-sqlite", "--db-path", "/tmp/db"])
    assert got["hub"].needs == ("${{ secrets.HUB_TOKEN }}",)
    assert got["#2"].skipped == "has no `name`"
    block = files.write(".continue/mcpServers/tools.yaml", "mcpServers:\n  - name: t\n    command: t-mcp\n",
                        files.project)
    assert stdio(files.read("continue", block)["t"])[0] == "t-mcp"
    copied = files.write(".continue/mcpServers/claude.json", {"mcpServers": {"j": {"command": "j"}}}, files.project)
    assert "j" in files.read("continue", copied)


def test_zed_reads_context_servers_old_and_new_and_enabled(files):
    path = files.write(".config/zed/settings.json", """{
  // Zed settings are JSONC
  "context_servers": {
    "new": {"command": "new-mcp", "args": ["--x"], "env": {"A": "b"}},
    "old": {"source": "custom", "command": {"path": "old-mcp", "args": ["-v"], "env": {}}},
    "remote": {"url": "https://z.example/mcp", "headers": {"K": "v"}},
    "off": {"command": "off-mcp", "enabled": false},
    "ext": {"source": "extension", "settings": {}},
  },
}""")
    got = files.read("zed", path)
    assert stdio(got["new"]) == ("new-mcp", ["--x"], {"A": "b"})
    assert stdio(got["old"])[:2] == ("old-mcp", ["-v"])
    assert remote(got["remote"]) == ("streamable-http", "https://z.example/mcp", {"K": "v"})
    assert got["off"].disabled
    assert "Zed" in got["ext"].skipped


def test_codex_reads_toml_env_vars_and_header_vars(files):
    path = files.write(".codex/config.toml", """
[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]
env = { MODE = "ro" }
env_vars = ["API_KEY", "NOT_SET_ANYWHERE"]
cwd = "/srv"

[mcp_servers.gh]
url = "https://gh.example/mcp"
bearer_token_env_var = "CODEX_TOKEN"
http_headers = { "X-Team" = "core" }
env_http_headers = { "X-Key" = "API_KEY" }

[mcp_servers.locked]
url = "https://l.example/mcp"
bearer_token_env_var = "NO_SUCH_TOKEN"

[mcp_servers.off]
command = "off"
enabled = false
""")
    got = files.read("codex", path)
    assert stdio(got["docs"]) == ("docs-mcp", ["--stdio"], {"MODE": "ro", "API_KEY": "k-123"})
    assert got["docs"].config.stdio.work_dir == "/srv"
    assert remote(got["gh"]) == ("streamable-http", "https://gh.example/mcp",
                                 {"X-Team": "core", "X-Key": "k-123", "Authorization": "Bearer tok-9"})
    assert got["locked"].needs == ("$NO_SUCH_TOKEN",)
    assert got["off"].disabled


def test_codex_home_moves_the_user_file(files, tmp_path):
    elsewhere = tmp_path / "codexhome"
    locs = [loc for loc in locations(files.home, None, env={"CODEX_HOME": str(elsewhere)}) if loc.provider == "codex"]
    assert [loc.path for loc in locs] == [elsewhere / "config.toml"]


def test_gemini_reads_url_as_sse_http_url_as_streamable_and_extensions(files):
    path = files.write(".gemini/settings.json", {"mcpServers": {
        "s": {"url": "https://s.example/sse", "headers": {"K": "$API_KEY"}},
        "h": {"httpUrl": "https://h.example/mcp"},
        "c": {"command": "c", "args": ["${HOME_DIR}/x"], "cwd": "./sub"}}})
    got = files.read("gemini", path)
    assert remote(got["s"]) == ("sse", "https://s.example/sse", {"K": "k-123"})
    assert remote(got["h"])[0] == "streamable-http"
    assert stdio(got["c"])[1] == ["/home/u/x"]
    ext = files.write(".gemini/extensions/weather/gemini-extension.json",
                      {"name": "weather", "mcpServers": {"w": {"command": "node", "args": ["${extensionPath}/w.js"]}}})
    assert stdio(files.read("gemini", ext)["w"])[1] == [f"{ext.parent}/w.js"]
    system = files.write("etc/gemini-cli/settings.json", {"mcpServers": {"corp": {"command": "corp"}}}, files.system)
    assert "corp" in files.read("gemini", system)


def test_goose_reads_extensions_and_skips_builtins(files):
    path = files.write(".config/goose/config.yaml", """
extensions:
  developer:
    enabled: true
    type: builtin
    name: developer
  fetch:
    enabled: true
    type: stdio
    cmd: uvx
    args: [mcp-server-fetch]
    envs: {PROXY: "p"}
  remote:
    enabled: false
    type: sse
    uri: https://g.example/sse
  stream:
    type: streamable_http
    uri: https://g.example/mcp
    headers: {K: v}
""")
    got = files.read("goose", path)
    assert "inside Goose" in got["developer"].skipped
    assert stdio(got["fetch"]) == ("uvx", ["mcp-server-fetch"], {"PROXY": "p"})
    assert remote(got["remote"])[0] == "sse" and got["remote"].disabled
    assert remote(got["stream"]) == ("streamable-http", "https://g.example/mcp", {"K": "v"})


def test_opencode_reads_local_and_remote(files):
    path = files.write("opencode.jsonc", """{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "local": {"type": "local", "command": ["bunx", "my-mcp", "--flag"], "environment": {"K": "{env:API_KEY}"},
              "enabled": true},
    "remote": {"type": "remote", "url": "https://o.example/mcp", "headers": {"A": "{env:MISSING}"}},
    "off": {"type": "local", "command": ["x"], "enabled": false}, // trailing comma next
  },
}""", files.project)
    got = files.read("opencode", path)
    assert stdio(got["local"]) == ("bunx", ["my-mcp", "--flag"], {"K": "k-123"})
    assert remote(got["remote"])[0] == "streamable-http" and got["remote"].needs == ("{env:MISSING}",)
    assert got["off"].disabled


@pytest.mark.parametrize("provider,rel,project", [
    ("kiro", ".kiro/settings/mcp.json", False), ("kiro", ".kiro/settings/mcp.json", True),
    ("copilot", ".copilot/mcp-config.json", False), ("lmstudio", ".lmstudio/mcp.json", False),
    ("junie", ".junie/mcp/mcp.json", False), ("junie", ".junie/mcp/mcp.json", True)])
def test_kiro_copilot_lmstudio_junie_reads_mcp_servers(files, provider, rel, project):
    path = files.write(rel, {"mcpServers": {"s": {"command": "s-mcp", "args": ["a"]},
                                            "d": {"command": "d", "disabled": True}}},
                       files.project if project else None)
    got = files.read(provider, path)
    assert stdio(got["s"])[:2] == ("s-mcp", ["a"]) and got["d"].disabled
    assert (f"scope:{'project' if project else 'user'}") in got["s"].tags


def test_an_unusable_entry_is_skipped_with_its_reason_and_the_rest_are_kept(files):
    path = files.write(".kiro/settings/mcp.json", {"mcpServers": {
        "ok": {"command": "ok"}, "nothing": {"args": ["x"]}, "weird": {"type": "carrier-pigeon", "url": "https://x"}}})
    got = files.read("kiro", path)
    assert got["ok"].config is not None
    assert got["nothing"].config is None and "needs `command`" in got["nothing"].skipped
    assert "unknown transport type" in got["weird"].skipped
