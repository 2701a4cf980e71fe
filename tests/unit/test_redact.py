"""Launch lines and URLs as shown: every query value, passwords and secret-flag values starred."""
from __future__ import annotations

import pytest

from actors.settings.config import HttpSpec, ServerConfig, StdioSpec
from actors.discovery.identity import identity_of, redact_identity
from actors.redact import REDACTED, launch_facts, redact_args, redact_url


@pytest.mark.parametrize("url,shown", [
    ("https://h/mcp?api_key=abc", "https://h/mcp?api_key=***"),
    # not only credential-looking keys: a gateway cannot know which value is one
    ("https://h/mcp?tenant=7&x=abc", "https://h/mcp?tenant=***&x=***"),
    ("https://h/mcp?abc123", "https://h/mcp?***"),
    ("https://h/mcp?a=1;b=2&c=", "https://h/mcp?a=***;b=***&c=***"),
    ("https://user:hunter2@h:8443/mcp", "https://user:***@h:8443/mcp"),
    # a lone user is how tokens usually ride in a URL (https://TOKEN@host)
    ("https://ghp_abc@h/mcp", "https://***@h/mcp"),
    ("https://h/mcp#access_token=abc", "https://h/mcp#***"),
    ("http://127.0.0.1:9/mcp", "http://127.0.0.1:9/mcp"),
    ("http://[::1/mcp?k=v", REDACTED),
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown


@pytest.mark.parametrize("args,shown", [
    (["--api-key=abc", "--port", "8080"], ["--api-key=***", "--port", "8080"]),
    (["--token", "abc", "serve"], ["--token", "***", "serve"]),
    (["--API_KEY", "abc"], ["--API_KEY", "***"]),
    (["--client-secret=s", "--password", "p", "--passwd=q", "--auth", "a", "--credentials", "c"],
     ["--client-secret=***", "--password", "***", "--passwd=***", "--auth", "***", "--credentials", "***"]),
    (["--apikey", "abc"], ["--apikey", "***"]),
    (["-api-key=abc", "-token", "abc"], ["-api-key=***", "-token", "***"]),  # Go's flag package
    (["-k", "abc", "-t=abc"], ["-k", "abc", "-t=abc"]),  # one letter says nothing
    (["--token", "--verbose"], ["--token", "--verbose"]),  # a flag is not the value
    (["--token"], ["--token"]),
    (["API_KEY=abc", "GITHUB_TOKEN=x", "PORT=1"], ["API_KEY=***", "GITHUB_TOKEN=***", "PORT=1"]),
    (["--header", "Authorization: Bearer abc", "X-Trace: 1"],
     ["--header", "Authorization: ***", "X-Trace: 1"]),
    (["--env=MY_SECRET=abc"], ["--env=MY_SECRET=***"]),
    (["mcp-remote", "https://h/sse?key=abc"], ["mcp-remote", "https://h/sse?key=***"]),
    (["--url=https://h/mcp?x=abc"], ["--url=https://h/mcp?x=***"]),
    (["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
     ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]),
])
def test_redact_args(args, shown):
    assert redact_args(args) == shown


def test_redacting_twice_changes_nothing_more():
    args = ["--token", "abc", "--api-key=x", "https://u:p@h/?a=b"]
    assert redact_args(redact_args(args)) == redact_args(args)


def test_launch_facts_star_args_and_url():
    assert launch_facts("srv", ("--token", "abc")) == {"command": "srv", "args": ["--token", "***"]}
    assert launch_facts(None, url="https://h/?k=v") == {"url": "https://h/?k=***"}
    assert launch_facts(None) == {"url": None}


def test_server_config_shows_redacted_but_keeps_the_whole_launch_line():
    stdio = ServerConfig("s", "stdio", stdio=StdioSpec("srv", ("--api-key=abc", "--token", "xyz")))
    http = ServerConfig("h", "streamable-http", http=HttpSpec("https://h/mcp?api_key=abc"))
    assert stdio.launch_facts() == {"command": "srv", "args": ["--api-key=***", "--token", "***"]}
    assert http.launch_facts() == {"url": "https://h/mcp?api_key=***"}
    assert http.shown_url == "https://h/mcp?api_key=***" and stdio.shown_url is None
    for cfg in (stdio, http):
        assert "abc" not in repr(cfg) and "xyz" not in repr(cfg)
    # the identity merges and approvals key on stays whole; only its shown form is starred
    assert "--api-key=abc" in identity_of(stdio) and "api_key=abc" in identity_of(http)
    assert redact_identity(identity_of(stdio)) == "stdio:srv '--api-key=***' --token '***'"
    assert redact_identity(identity_of(http)) == "url:https://h/mcp?api_key=***"
