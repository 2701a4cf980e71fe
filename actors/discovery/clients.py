"""Every MCP client troupe reads, as data: where its files are, their shape, its variable dialect,
and what a url without a type means to it. Adding a client is one entry here and one fixture test.

Path templates: `~` is the home directory, `{project}` the project troupe runs in,
`{appsupport}` each OS's per-user application directory (`~/.config`, `~/Library/Application
Support`, `%APPDATA%`, the current OS's first), `{vscode}` each VS Code-family user directory
under it, `{system}` the system root (`/`; tests point it elsewhere), `{codex_home}`
`$CODEX_HOME` or `~/.codex`. One `*` component globs (profiles, extensions, block files).
"""
from __future__ import annotations

from dataclasses import dataclass

SSE, HTTP = "sse", "streamable-http"


@dataclass(frozen=True, slots=True)
class ClientFile:
    """One file (or glob) of a client: its path template, format, shape and scope."""

    path: str
    shape: str = "mcpServers"  # how entries sit in the document: see shapes.SHAPES
    fmt: str = "json"  # json (JSONC accepted) | toml | yaml
    scope: str = "user"  # user | project | managed (written by an administrator)


@dataclass(frozen=True, slots=True)
class Client:
    """One MCP client: its provider name, the files it reads, its variable dialect
    (variables.DIALECTS) and the transport it gives a url that names none."""

    name: str
    title: str
    files: tuple[ClientFile, ...]
    dialect: str = "claude"
    url_default: str = HTTP


def _user(path: str, shape: str = "mcpServers", fmt: str = "json") -> ClientFile:
    return ClientFile(path, shape, fmt, "user")


def _project(path: str, shape: str = "mcpServers", fmt: str = "json") -> ClientFile:
    return ClientFile("{project}/" + path, shape, fmt, "project")


def _managed(path: str, shape: str = "mcpServers", fmt: str = "json") -> ClientFile:
    return ClientFile(path, shape, fmt, "managed")


# VS Code's family shares one layout: extensions keep their settings in globalStorage.
VSCODE_FAMILY = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")


def _global_storage(extension: str, file: str) -> ClientFile:
    return _user("{vscode}/User/globalStorage/" + extension + "/settings/" + file)


CLIENTS: tuple[Client, ...] = (
    Client("claude_desktop", "Claude Desktop", (_user("{appsupport}/Claude/claude_desktop_config.json"),)),
    Client("claude_code", "Claude Code", (
        _user("~/.claude.json", "claude_json"),
        # settings.json never holds servers, but it holds the user's approval keys
        _user("~/.claude/settings.json", "approvals"),
        _project(".mcp.json"),
        _managed("{system}/etc/claude-code/managed-mcp.json"),
        _managed("{system}/Library/Application Support/ClaudeCode/managed-mcp.json"),
    )),
    Client("cursor", "Cursor", (_user("~/.cursor/mcp.json"), _project(".cursor/mcp.json")), dialect="cursor"),
    Client("vscode", "VS Code", (
        ClientFile("{appsupport}/Code/User/mcp.json", "vscode"),
        ClientFile("{appsupport}/Code - Insiders/User/mcp.json", "vscode"),
        ClientFile("{appsupport}/Code/User/profiles/*/mcp.json", "vscode"),
        ClientFile("{appsupport}/Code - Insiders/User/profiles/*/mcp.json", "vscode"),
        ClientFile("{appsupport}/Code/User/settings.json", "vscode_settings"),  # before mcp.json existed
        ClientFile("{appsupport}/Code - Insiders/User/settings.json", "vscode_settings"),
        _project(".vscode/mcp.json", "vscode"),
    ), dialect="vscode"),
    Client("windsurf", "Windsurf", (_user("~/.codeium/windsurf/mcp_config.json"),), dialect="cursor"),
    Client("cline", "Cline", (
        _user("~/.cline/data/settings/cline_mcp_settings.json"),
        _global_storage("saoudrizwan.claude-dev", "cline_mcp_settings.json"),
    ), dialect="none", url_default=SSE),
    Client("roo", "Roo Code", (
        _global_storage("rooveterinaryinc.roo-cline", "mcp_settings.json"),
        _project(".roo/mcp.json"),
    ), dialect="cursor", url_default=SSE),
    Client("continue", "Continue", (
        _user("~/.continue/config.yaml", "continue", "yaml"),
        _project(".continue/mcpServers/*.yaml", "continue", "yaml"),
        _project(".continue/mcpServers/*.yml", "continue", "yaml"),
        _project(".continue/mcpServers/*.json", "continue"),
    ), dialect="continue"),
    Client("zed", "Zed", (_user("~/.config/zed/settings.json", "zed"), _project(".zed/settings.json", "zed")),
           dialect="none"),
    Client("codex", "Codex CLI", (_user("{codex_home}/config.toml", "codex", "toml"),
                                  _project(".codex/config.toml", "codex", "toml")), dialect="none"),
    Client("gemini", "Gemini CLI", (
        _user("~/.gemini/settings.json"),
        _project(".gemini/settings.json"),
        _managed("{system}/etc/gemini-cli/settings.json"),
        _managed("{system}/Library/Application Support/GeminiCli/settings.json"),
        _user("~/.gemini/extensions/*/gemini-extension.json"),
    ), dialect="gemini", url_default=SSE),
    Client("goose", "Goose", (_user("~/.config/goose/config.yaml", "goose", "yaml"),), dialect="none"),
    Client("opencode", "opencode", (
        _user("~/.config/opencode/opencode.json", "opencode"),
        _user("~/.config/opencode/opencode.jsonc", "opencode"),
        _project("opencode.json", "opencode"),
        _project("opencode.jsonc", "opencode"),
    ), dialect="opencode"),
    Client("kiro", "Kiro", (_user("~/.kiro/settings/mcp.json"), _project(".kiro/settings/mcp.json"))),
    Client("copilot", "GitHub Copilot CLI", (_user("~/.copilot/mcp-config.json"),)),
    Client("lmstudio", "LM Studio", (_user("~/.lmstudio/mcp.json"),), dialect="cursor"),
    Client("junie", "JetBrains Junie", (_user("~/.junie/mcp/mcp.json"), _project(".junie/mcp/mcp.json"))),
    # servers registered through troupe's own core tool, kept in troupe's registry file
    Client("troupe", "troupe registry", (_user("~/.config/troupe/registry.json"),), dialect="none"),
)

BY_NAME = {c.name: c for c in CLIENTS}
FILE_PROVIDERS = tuple(c.name for c in CLIENTS)
