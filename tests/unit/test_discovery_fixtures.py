"""Discovery fixtures: every client's config files in a temp home/project, and a temp PATH."""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tests.support import PYTHON, ROOT

SECRET_ENV = "sekrit-env-value-123"
SECRET_HEADER = "Bearer sekrit-header-value-456"
OVERSIZED_BYTES = 1024 * 1024 + 4096  # just over the 1 MB default limit
FS_ARGS = ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/data"]

# --help output that counts as an MCP server, and one that does not.
MCP_HELP = "usage: {name} [--port]\n{name}: a Model Context Protocol (MCP) server over stdio"
PLAIN_HELP = "usage: {name} [-v]\nconverts files"


@dataclass
class Tree:
    home: Path
    project: Path
    bin: Path  # first PATH directory
    bin2: Path  # second PATH directory (duplicates and symlinks)
    runs: Path  # each fake binary appends one line per run to runs/<name>
    markers: Path  # binaries that must never run create a file here

    @property
    def path(self) -> str:
        return os.pathsep.join([str(self.bin), str(self.bin2)])

    def runs_of(self, name: str) -> int:
        f = self.runs / name
        return len(f.read_text().splitlines()) if f.exists() else 0


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def script(path: Path, body: str, mode: int = 0o755) -> Path:
    path.write_text(f"#!{PYTHON}\n{body}")
    path.chmod(mode)
    return path


def fake_binary(tree: Tree, directory: Path, name: str, help_text: str) -> Path:
    """Prints help_text and records that it ran (to prove nothing runs twice)."""
    return script(directory / name, f"""import sys
with open({str(tree.runs / name)!r}, "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
print({help_text.format(name=name)!r})
""")


def forbidden_binary(tree: Tree, directory: Path, name: str, mode: int = 0o755) -> Path:
    """Must never be executed: running it leaves a marker file."""
    return script(directory / name, f"""open({str(tree.markers / name)!r}, "w").write("ran")
print("mcp server over stdio, Model Context Protocol")
""", mode)


def echo_server(directory: Path, name: str = "mcp-server-echo") -> Path:
    """A real tiny stdio MCP server (tests.servers.echo); `--help` prints its argparse help."""
    return script(directory / name, f"""import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.servers.echo import main
main()
""")


def build_path(tmp: Path) -> Tree:
    tree = Tree(home=tmp / "home", project=tmp / "project", bin=tmp / "bin", bin2=tmp / "bin2",
                runs=tmp / "runs", markers=tmp / "markers")
    for d in (tree.home, tree.project, tree.bin, tree.bin2, tree.runs, tree.markers):
        d.mkdir(parents=True, exist_ok=True)
    echo_server(tree.bin)
    fake_binary(tree, tree.bin, "weather-mcp", MCP_HELP)
    fake_binary(tree, tree.bin, "mcp-server-quiet", PLAIN_HELP)  # low confidence: not recorded
    # the same binary twice more: a shadowed copy by name, and a symlink under another MCP-like name
    fake_binary(tree, tree.bin2, "weather-mcp", MCP_HELP)
    os.symlink(tree.bin / "weather-mcp", tree.bin2 / "weather-mcp-server")
    # never to be run: names that do not look like MCP servers, and one not executable
    forbidden_binary(tree, tree.bin, "notmcp-tool")
    forbidden_binary(tree, tree.bin, "mcp-thing")
    forbidden_binary(tree, tree.bin2, "mcp-server-noexec", mode=0o644)
    return tree


def build_tree(tmp: Path) -> Tree:
    """Config files of every supported client, with duplicates, a malformed and an oversized one."""
    tree = build_path(tmp)
    home, proj = tree.home, tree.project
    echo_abs = str(tree.bin / "mcp-server-echo")
    write_json(home / ".config" / "Claude" / "claude_desktop_config.json", {"mcpServers": {
        "filesystem": {"command": "npx", "args": FS_ARGS},
        "echo": {"command": echo_abs},
        "old": {"command": "old-server", "disabled": True},
    }})
    write_json(home / ".claude.json", {
        "numStartups": 3,
        "mcpServers": {"fs": {"command": "npx", "args": ["@modelcontextprotocol/server-filesystem@latest",
                                                         "/tmp/data"]},
                       "linter": {"command": "uvx", "args": ["mcp-lint@latest", "--strict"], "cwd": "/tmp"}},
        "projects": {str(proj): {"mcpServers": {"github": {
            "type": "http", "url": "https://API.GitHub.com:443/mcp/",
            "headers": {"Authorization": SECRET_HEADER}}}}},
    })
    write_json(proj / ".mcp.json", {"mcpServers": {
        "filesystem": {"command": "npx", "args": FS_ARGS, "env": {"FS_TOKEN": SECRET_ENV}},
        "remote": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }})
    # a trap: Claude Code never reads servers from settings.json, so neither does troupe
    write_json(proj / ".claude" / "settings.json", {"mcpServers": {
        "settings-trap": {"command": "never-read", "args": ["--from-settings"]}}})
    write_json(home / ".cursor" / "mcp.json", {"mcpServers": {
        "gh": {"url": "https://api.github.com/mcp"}}})
    big = proj / ".cursor" / "mcp.json"
    big.parent.mkdir(parents=True, exist_ok=True)
    big.write_text(json.dumps({"mcpServers": {"huge": {"command": "huge"}}, "pad": "x" * OVERSIZED_BYTES}))
    vscode = proj / ".vscode" / "mcp.json"
    vscode.parent.mkdir(parents=True, exist_ok=True)
    vscode.write_text("""{
  // VS Code allows comments and trailing commas
  "inputs": [],
  "servers": {
    "echo-vs": {"type": "stdio", "command": "mcp-server-echo", "args": [],},
    "notes": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/notes.js"]},
  },
}""")
    (home / ".codeium" / "windsurf").mkdir(parents=True)
    (home / ".codeium" / "windsurf" / "mcp_config.json").write_text('{"mcpServers": {"broken": {')
    write_json(home / ".config" / "troupe" / "registry.json", {"mcpServers": {
        "filesystem": {"command": "node", "args": ["fs-server.js"]}}})
    return tree


# ---------------------------------------------------------------- the fixture itself

def test_tree_has_every_client_and_the_traps(tmp_path):
    tree = build_tree(tmp_path)
    for rel in (".config/Claude/claude_desktop_config.json", ".claude.json", ".cursor/mcp.json",
                ".codeium/windsurf/mcp_config.json", ".config/troupe/registry.json"):
        assert (tree.home / rel).is_file(), rel
    for rel in (".mcp.json", ".claude/settings.json", ".cursor/mcp.json", ".vscode/mcp.json"):
        assert (tree.project / rel).is_file(), rel
    assert (tree.project / ".cursor" / "mcp.json").stat().st_size > OVERSIZED_BYTES
    assert not os.access(tree.bin2 / "mcp-server-noexec", os.X_OK)
    assert stat.S_ISLNK(os.lstat(tree.bin2 / "weather-mcp-server").st_mode)
