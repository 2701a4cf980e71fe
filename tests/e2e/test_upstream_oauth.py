"""troupe signing in to an OAuth-protected upstream (the MCP authorization spec): a real FastMCP
server behind FastMCP's in-memory OAuth provider, whose /authorize approves at once, so following
troupe's auth_url with requests is the browser step."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.support import PYTHON, ROOT, wait_until
from tests.support.ports import start_announced, stop
from tests.support.troupe import TroupeHttp, write_config

TOKEN_TTL = 4  # seconds: short, so the test sees refreshes
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class McpHttp:
    """A minimal legacy-session MCP client over troupe's /mcp."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url, self.http, self.next_id = url, requests.Session(), 0
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"
        answer = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                             "clientInfo": {"name": "oauth-test", "version": "1"}})
        assert "result" in answer, answer
        self.http.post(self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                       headers=ACCEPT, timeout=10).close()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        resp = self.http.post(self.url, json={"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                              "params": params}, headers=ACCEPT, timeout=30)
        if "Mcp-Session-Id" in resp.headers:
            self.http.headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
        if resp.headers["Content-Type"].startswith("application/json"):
            return resp.json()
        data = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])

    def tool(self, name: str, arguments: dict | None = None) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}})["result"]


def _text(result: dict) -> str:
    return result["content"][0]["text"]


@pytest.fixture
def oauth_server(tmp_path):
    proc, port = start_announced([PYTHON, "-m", "tests.servers.fastmcp_oauth", "--port", "0",
                                  "--token-ttl", str(TOKEN_TTL)], tmp_path / "oauth-server.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def _entry(t: TroupeHttp, name: str = "guarded", operator: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {operator}"} if operator else {}
    servers = requests.get(t.base + "/status", headers=headers, timeout=10).json()["servers"]
    return next(s for s in servers if s["name"] == name)


def _sign_in(t: TroupeHttp, operator: str | None = None) -> None:
    entry = wait_until(lambda: (e := _entry(t, operator=operator)).get("auth_url") and e, timeout=20,
                       message="an auth_url")
    assert entry["state"] == "needs-auth"
    page = requests.get(entry["auth_url"], timeout=20)  # authorize → 302 → troupe's /oauth/callback
    assert page.status_code == 200 and "signed in to guarded" in page.text, page.text
    again = requests.get(page.url, timeout=10)  # the same state twice: refused
    assert again.status_code == 400
    wait_until(lambda: _entry(t, operator=operator)["state"] == "ready", timeout=20, message="ready after the sign-in")


def _tokens_file() -> Path:
    return Path(os.environ["TROUPE_CONFIG_DIR"]) / "oauth-tokens.json"


def _stored() -> dict:
    return next(iter(json.loads(_tokens_file().read_text())["servers"].values()))


def test_sign_in_refresh_and_revocation(tmp_path, oauth_server):
    servers = [{"name": "guarded", "transport": {"type": "streamable-http",
                                                 "streamable_http": {"url": oauth_server + "/mcp"}}}]
    t = TroupeHttp(write_config(tmp_path, servers))  # no `auth:` entry: a 401 with metadata is enough
    try:
        # 1. Refused at first: needs-auth with a sign-in URL, and list_tools says so.
        entry = wait_until(lambda: (e := _entry(t)).get("auth_url") and e, timeout=20, message="an auth_url")
        assert entry["state"] == "needs-auth" and entry["restarts"] == 0
        assert "code_challenge_method=S256" in entry["auth_url"] and "resource=" in entry["auth_url"]
        client = McpHttp(t.url)
        listed = json.loads(_text(client.tool("list_tools")))
        assert listed["needs_authentication"] == [{"name": "guarded", "auth_url": entry["auth_url"]}]

        # 2. The browser step: signed in, ready, and a call goes through.
        _sign_in(t)
        assert "signed in: hi" in _text(client.tool("call_tool", {"name": "guarded__whoami",
                                                                  "arguments": {"message": "hi"}}))
        assert "needs_authentication" not in json.loads(_text(client.tool("list_tools")))
        mode = stat.S_IMODE(_tokens_file().stat().st_mode)
        assert mode == 0o600, oct(mode)

        # 3. The access token lives TOKEN_TTL seconds: it is refreshed before it expires, no call fails.
        seen = {_stored()["access_token"]}
        deadline = time.monotonic() + 3 * TOKEN_TTL
        while time.monotonic() < deadline:
            result = client.tool("call_tool", {"name": "guarded__whoami", "arguments": {"message": "again"}})
            assert not result.get("isError"), result
            seen.add(_stored()["access_token"])
            time.sleep(0.2)  # a pace for the calls, not a wait for a condition
        assert len(seen) >= 3, "expected at least two refreshes"
        entry = _entry(t)
        assert entry["state"] == "ready" and entry["restarts"] == 0
        tokens = _stored()

        # 4. The provider revokes troupe's grant: the next refresh is refused and the server goes back
        #    to needs-auth with no call made, not into a crash loop; a call then says why at once.
        assert requests.post(oauth_server + "/test/revoke-all", timeout=10).json()["revoked"] >= 1
        entry = wait_until(lambda: (e := _entry(t)).get("auth_url") and e, timeout=20,
                           message="needs-auth after the revocation")
        refused = client.tool("call_tool", {"name": "guarded__whoami", "arguments": {"message": "revoked"}})
        assert refused.get("isError") and "needs-auth" in _text(refused), refused
        assert entry["state"] == "needs-auth" and entry["restarts"] == 0
        first = entry["since"]
        time.sleep(2.0)  # nothing should happen in this window: no restarts, no circuit
        entry = _entry(t)
        assert entry["state"] == "needs-auth" and entry["restarts"] == 0 and entry["since"] == first
        assert not _stored().get("access_token")

        # 5. `troupe auth NAME --url` prints the same link; signing in again brings the server back.
        cli = subprocess.run([PYTHON, "-m", "actors.main", "auth", "guarded", "--url", t.url], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert cli.returncode == 0 and cli.stdout.strip() == entry["auth_url"], cli.stderr
        _sign_in(t)
        assert "signed in: back" in _text(client.tool("call_tool", {"name": "guarded__whoami",
                                                                    "arguments": {"message": "back"}}))
        cli = subprocess.run([PYTHON, "-m", "actors.main", "auth", "guarded", "--url", t.base], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert cli.returncode == 0 and "no sign-in needed" in cli.stderr and not cli.stdout
    finally:
        assert t.stop() == 0
    log = "".join(t.stderr)
    for secret in (tokens["access_token"], tokens["refresh_token"], tokens["client_secret"]):
        assert secret not in log
    assert "test_access_token_" not in log and "test_refresh_token_" not in log


def test_dashboard_offers_the_sign_in_link(tmp_path, oauth_server, browser):
    servers = [{"name": "guarded", "auth": "oauth", "transport": {
        "type": "streamable-http", "streamable_http": {"url": oauth_server + "/mcp"}}}]
    t = TroupeHttp(write_config(tmp_path, servers))
    try:
        entry = wait_until(lambda: (e := _entry(t)).get("auth_url") and e, timeout=20, message="an auth_url")
        page = browser.open(t.base + "/")
        link = "(document.querySelector('#servers tr[data-server=\"guarded\"] a.signin') || {}).href || ''"
        wait_until(lambda: page.js(link), 20, message="a Sign in link on the dashboard")
        assert page.js(link) == entry["auth_url"]
        assert page.rows()["guarded"][0] == "needs-auth"
    finally:
        assert t.stop() == 0


def test_sign_in_to_a_legacy_sse_server(tmp_path):
    proc, port = start_announced([PYTHON, "-m", "tests.servers.fastmcp_oauth", "--port", "0", "--transport", "sse"],
                                 tmp_path / "oauth-sse.log")
    try:
        servers = [{"name": "guarded", "transport": {"type": "sse", "sse": {"url": f"http://127.0.0.1:{port}/sse"}}}]
        t = TroupeHttp(write_config(tmp_path, servers))
        try:
            _sign_in(t)
            client = McpHttp(t.url)
            assert "signed in: sse" in _text(client.tool("call_tool", {"name": "guarded__whoami",
                                                                      "arguments": {"message": "sse"}}))
            assert _entry(t)["restarts"] == 0
        finally:
            assert t.stop() == 0
    finally:
        stop(proc)


CLIENTS = {"alice": "alice-secret-token", "bob": "bob-secret-token"}
OPERATOR = "operator-secret-token"


def _grant_of(client: McpHttp) -> dict:
    return client.tool("call_tool", {"name": "guarded__grant", "arguments": {}})


def test_per_client_sign_in(tmp_path, oauth_server):
    """auth: per_client: troupe signs in once for itself (lists), each client signs in for its own
    calls, and a client's calls carry its own token, never troupe's or another client's."""
    servers = [{"name": "guarded", "auth": "per_client", "transport": {
        "type": "streamable-http", "streamable_http": {"url": oauth_server + "/mcp"}}}]
    config = write_config(tmp_path, servers, auth_token=OPERATOR,
                          clients=[{"name": name, "token": token} for name, token in CLIENTS.items()])
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "audit": {"file": "audit.jsonl"}}))
    t = TroupeHttp(config)
    try:
        _sign_in(t, operator=OPERATOR)  # troupe's own grant: the server is ready, its tools are listed
        alice, bob = McpHttp(t.url, CLIENTS["alice"]), McpHttp(t.url, CLIENTS["bob"])

        # 1. Alice has no token of her own: her call is refused with her own sign-in link.
        refused = _grant_of(alice)
        assert refused.get("isError"), refused
        link = re.search(r"open (\S+)", _text(refused))
        assert link and "client alice must sign in" in _text(refused), _text(refused)
        page = requests.get(link.group(1), timeout=20)
        assert page.status_code == 200 and "as client alice" in page.text, page.text
        assert _entry(t, operator=OPERATOR)["clients_signed_in"] == ["alice"]

        # 2. Her calls now carry her grant (a client registration of its own), not troupe's.
        alice_grant = _text(wait_until(lambda: (r := _grant_of(alice)) and not r.get("isError") and r,
                                       timeout=10, message="alice's call with her token"))
        stored = json.loads(_tokens_file().read_text())["servers"]
        troupe_key = next(k for k in stored if " client=" not in k)
        assert alice_grant == stored[f"{troupe_key} client=alice"]["client_id"]
        assert alice_grant != stored[troupe_key]["client_id"]

        # 3. Bob is still refused (alice's token is not his); list_tools shows him his own link.
        assert _grant_of(bob).get("isError")
        listed = json.loads(_text(bob.tool("list_tools")))
        waiting = wait_until(lambda: [w for w in json.loads(_text(bob.tool("list_tools"))).get(
            "needs_authentication", []) if w.get("auth_url")], timeout=10, message="bob's link in list_tools")
        assert "guarded__grant" in {tool["name"] for tool in listed["tools"]}
        assert waiting[0]["name"] == "guarded" and waiting[0]["client"] == "bob"
        assert requests.get(waiting[0]["auth_url"], timeout=20).status_code == 200
        bob_grant = _text(_grant_of(bob))
        assert bob_grant not in (alice_grant, stored[troupe_key]["client_id"], "no token")
        assert _text(_grant_of(alice)) == alice_grant
        entry = _entry(t, operator=OPERATOR)
        assert entry["clients_signed_in"] == ["alice", "bob"] and entry["state"] == "ready"
        assert "needs_authentication" not in json.loads(_text(alice.tool("list_tools")))
    finally:
        assert t.stop() == 0
    log = "".join(t.stderr)
    audit = (tmp_path / "audit.jsonl").read_text()
    for grant in json.loads(_tokens_file().read_text())["servers"].values():
        assert grant.get("access_token") and grant["access_token"] not in log
        assert grant["access_token"] not in audit
        assert not grant.get("client_id") or grant["client_id"] not in audit
    # each sign-in is an operator act in the audit trail: troupe's own, then each client's
    acts = [json.loads(line) for line in audit.splitlines() if '"kind":"act"' in line]
    assert [(a["act"], a["server"], a["by"], a["via"]) for a in acts] == \
        [("sign-in", "guarded", None, "oauth"), ("sign-in", "guarded", "alice", "oauth"),
         ("sign-in", "guarded", "bob", "oauth")]
    assert not any(token in audit for token in CLIENTS.values())
