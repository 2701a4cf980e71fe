"""Service identity: launch lines and URLs normalised, never a bare runner or a URL's tail."""
from __future__ import annotations

import os

import pytest

from actors.settings.config import HttpSpec, ServerConfig, StdioSpec
from actors.discovery.identity import (FALLBACK_NAME, identity_of, normalise_url, redact_identity, redact_url,
                                       sanitise_name, unique_name, which_on)


def stdio(command, *args):
    return ServerConfig(name="x", transport="stdio", stdio=StdioSpec(command, tuple(args)))


def http(url):
    return ServerConfig(name="x", transport="streamable-http", http=HttpSpec(url))


def test_npx_yes_flag_and_latest_do_not_change_identity():
    a = identity_of(stdio("npx", "-y", "@modelcontextprotocol/server-filesystem@latest", "/data"))
    b = identity_of(stdio("npx", "@modelcontextprotocol/server-filesystem", "/data"))
    c = identity_of(stdio("npx", "--yes", "@modelcontextprotocol/server-filesystem", "/data"))
    assert a == b == c == "stdio:npx @modelcontextprotocol/server-filesystem /data"


def test_every_arg_counts_and_the_runner_alone_is_not_the_server():
    fs = identity_of(stdio("npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"))
    other_dir = identity_of(stdio("npx", "-y", "@modelcontextprotocol/server-filesystem", "/other"))
    github = identity_of(stdio("npx", "-y", "@modelcontextprotocol/server-github"))
    assert len({fs, other_dir, github}) == 3
    assert identity_of(stdio("uvx", "mcp-server-git@latest")) == identity_of(stdio("uvx", "mcp-server-git"))
    assert identity_of(stdio("uvx", "mcp-server-git")) != identity_of(stdio("uvx", "mcp-server-time"))


def test_latest_is_stripped_only_for_package_runners():
    assert identity_of(stdio("node", "tag@latest")) == "stdio:node tag@latest"


def test_absolute_path_of_the_binary_on_path_is_its_basename(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "mcp-server-x"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    which = which_on(str(bin_dir))
    assert identity_of(stdio(str(tool), "--flag"), which) == identity_of(stdio("mcp-server-x", "--flag"), which)
    # a symlink elsewhere to the same binary is the same server
    link = tmp_path / "link-to-x"
    os.symlink(tool, link)
    assert identity_of(stdio(str(link)), which) == identity_of(stdio(str(tool)), which)


def test_absolute_path_of_another_binary_with_that_name_stays_distinct(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "elsewhere").mkdir()
    for d in ("bin", "elsewhere"):
        f = tmp_path / d / "mcp-server-x"
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755)
    which = which_on(str(tmp_path / "bin"))
    assert identity_of(stdio(str(tmp_path / "elsewhere" / "mcp-server-x")), which) != \
        identity_of(stdio("mcp-server-x"), which)


@pytest.mark.parametrize("a,b", [
    ("https://API.Example.com:443/mcp/", "https://api.example.com/mcp"),
    ("HTTP://localhost:80/sse", "http://localhost/sse"),
    ("http://localhost:8080/mcp#frag", "http://localhost:8080/mcp"),
])
def test_equivalent_urls_share_an_identity(a, b):
    assert identity_of(http(a)) == identity_of(http(b))


def test_urls_differing_before_the_last_segment_or_in_port_or_query_differ():
    base = identity_of(http("https://a.example.com/team1/mcp"))
    assert base != identity_of(http("https://a.example.com/team2/mcp"))
    assert base != identity_of(http("https://b.example.com/team1/mcp"))
    assert base != identity_of(http("https://a.example.com:8443/team1/mcp"))
    assert base != identity_of(http("https://a.example.com/team1/mcp?tenant=2"))


def test_normalise_url_keeps_non_default_port_and_ipv6():
    assert normalise_url("http://[::1]:8080/mcp/") == "http://[::1]:8080/mcp"


def test_redaction_hides_passwords_and_every_query_value():
    shown = redact_url("https://user:hunter2@host/mcp?api_key=abc&tenant=7&token=xyz")
    assert "hunter2" not in shown and "abc" not in shown and "xyz" not in shown
    assert "tenant=***" in shown and "user:" in shown
    assert "hunter2" not in redact_identity("url:https://user:hunter2@host/mcp")


@pytest.mark.parametrize("raw,clean", [
    ("github", "github"), ("my server", "my-server"), ("@scope/pkg", "scope-pkg"),
    ("--weird--", "weird"), ("", FALLBACK_NAME), ("日本", FALLBACK_NAME), ("a" * 80, "a" * 64),
])
def test_sanitise_name(raw, clean):
    assert sanitise_name(raw) == clean


def test_unique_name_suffixes_and_stays_short():
    assert unique_name("fs", {"x"}) == "fs"
    assert unique_name("fs", {"fs", "fs-2"}) == "fs-3"
    long = "a" * 64
    assert unique_name(long, {long}) == "a" * 62 + "-2"
