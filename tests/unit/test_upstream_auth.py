"""Upstream OAuth pieces without a network: challenge and metadata parsing, the discovery URLs
in the spec's order, the `auth:` config entry, and the token store (0600, atomic, no secret shown)."""
from __future__ import annotations

import json
import os
import stat

import pytest
from loguru import logger

from actors.auth import metadata
from actors.auth.access import AuthSnapshot, grant_key, split_key
from actors.auth.flow import Pending
from actors.auth.tokens import Grant, TokenStore, default_path, fingerprint
from actors.settings import config

SECRET = "access-SECRET-123"


def _grant(**extra) -> Grant:
    return Grant("https://as.example/token", "https://mcp.example/mcp", "client-1", "client_secret_post",
                 "http://127.0.0.1:1/oauth/callback", access_token=SECRET, refresh_token="refresh-SECRET-456",
                 expires_at=2000.0, issued_at=1000.0, client_secret="client-SECRET-789", **extra)


def test_challenge_params():
    header = 'Bearer error="invalid_token", resource_metadata="https://mcp.example/.well-known/x", scope="a b"'
    assert metadata.challenge_params(header) == {"error": "invalid_token", "scope": "a b",
                                                 "resource_metadata": "https://mcp.example/.well-known/x"}
    assert metadata.challenge_params("Basic realm=x") == {}
    assert metadata.challenge_params(None) == {}
    assert metadata.challenge_params('Bearer realm=troupe') == {"realm": "troupe"}


def test_resource_metadata_urls_in_the_spec_order():
    assert metadata.resource_metadata_urls("https://mcp.example/v1/mcp", {"resource_metadata": "https://m/x"}) == [
        "https://m/x", "https://mcp.example/.well-known/oauth-protected-resource/v1/mcp",
        "https://mcp.example/.well-known/oauth-protected-resource"]
    assert metadata.resource_metadata_urls("https://mcp.example/", {}) == [
        "https://mcp.example/.well-known/oauth-protected-resource"]


def test_authorization_metadata_urls_with_and_without_a_path():
    assert metadata.authorization_metadata_urls("https://as.example/") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]
    assert metadata.authorization_metadata_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]


def test_authorization_metadata_must_offer_the_code_flow_with_s256():
    good = {"authorization_endpoint": "https://as/authorize", "token_endpoint": "https://as/token",
            "code_challenge_methods_supported": ["S256"]}
    assert metadata.parse_authorization_metadata(good, "https://as") is good
    with pytest.raises(metadata.DiscoveryError, match="token_endpoint"):
        metadata.parse_authorization_metadata({"authorization_endpoint": "https://as/a"}, "https://as")
    with pytest.raises(metadata.DiscoveryError, match="authorization_endpoint"):
        metadata.parse_authorization_metadata({**good, "authorization_endpoint": "javascript:alert(1)"}, "https://as")
    with pytest.raises(metadata.DiscoveryError, match="S256"):
        metadata.parse_authorization_metadata({**good, "code_challenge_methods_supported": ["plain"]}, "https://as")


def test_canonical_resource():
    assert metadata.canonical_resource("HTTPS://MCP.Example:8443/Path?q=1#f") == "https://mcp.example:8443/Path"


def test_auth_config_entry_short_and_long_forms():
    def servers(auth):
        return config.from_data({"servers": [{"name": "a", "auth": auth, "transport": {
            "type": "streamable-http", "streamable_http": {"url": "https://mcp.example/mcp"}}}]}).servers
    assert servers("oauth")[0].auth is not None and servers("oauth")[0].auth.client_id is None
    auth = servers({"type": "oauth", "client_id": "cid", "client_secret": "csecret", "scopes": ["r", "w"]})[0].auth
    assert auth.client_id == "cid" and auth.secret() == "csecret" and auth.scopes == ("r", "w")
    assert "csecret" not in repr(auth)
    with pytest.raises(config.ConfigError, match="auth.bogus"):
        servers({"bogus": 1})
    assert servers("per_client")[0].auth.per_client and not servers("oauth")[0].auth.per_client
    assert servers({"per_client": True, "client_id": "cid"})[0].auth.per_client
    with pytest.raises(config.ConfigError, match="auth.per_client"):
        servers({"per_client": "yes"})
    with pytest.raises(config.ConfigError, match="OAuth is for HTTP servers"):
        config.from_data({"servers": [{"name": "a", "auth": "oauth", "transport": {
            "type": "stdio", "stdio": {"command": "echo"}}}]})


def test_a_clients_grant_has_its_own_key():
    url = "https://mcp.example/v1/mcp?tenant=a"
    assert grant_key(url) == url and split_key(url) == (url, None)
    assert split_key(grant_key(url, "alice")) == (url, "alice")
    assert grant_key(url, "alice") != grant_key(url, "bob") != grant_key(url)
    assert split_key(grant_key(url, "team a")) == (url, "team a")  # a client name may hold a space


def test_a_client_sees_its_own_missing_sign_ins_only():
    from types import MappingProxyType, SimpleNamespace

    from actors.auth import report
    from actors.settings.upstream_auth import UpstreamAuth
    http = SimpleNamespace(url="https://mcp.example/mcp")

    def view(auth, state="ready"):
        return SimpleNamespace(config=SimpleNamespace(auth=auth, http=http), state=state)
    servers = SimpleNamespace(servers={"mine": view(UpstreamAuth(per_client=True)), "shared": view(UpstreamAuth()),
                                       "down": view(UpstreamAuth(per_client=True), "needs-auth")})
    signed = AuthSnapshot(bearers=MappingProxyType({grant_key(http.url, "alice"): SECRET}),
                          sign_ins=MappingProxyType({grant_key(http.url, "bob"): {"auth_url": "https://as/x"}}))
    assert report.client_waiting(servers, signed, "alice", lambda name: True) == ([], [])
    entries, unprepared = report.client_waiting(servers, signed, "bob", lambda name: True)
    assert entries == [{"name": "mine", "client": "bob", "auth_url": "https://as/x"}] and unprepared == []
    entries, unprepared = report.client_waiting(servers, signed, "carol", lambda name: True)
    assert [e["name"] for e in entries] == ["mine"] and "auth_error" in entries[0] and len(unprepared) == 1
    assert report.client_waiting(servers, signed, "carol", lambda name: name != "mine") == ([], [])
    status = [{"name": "mine", "state": "ready"}]
    report.annotate(status, servers.servers, signed)
    assert status[0]["clients_signed_in"] == ["alice"]
    assert status[0]["client_sign_ins"] == {"bob": {"auth_url": "https://as/x"}}
    assert SECRET not in repr(status)


def test_auth_client_secret_from_the_environment(monkeypatch):
    monkeypatch.setenv("MY_SECRET", "from-env")
    auth = config.from_data({"servers": [{"name": "a", "auth": {"client_id": "c", "client_secret_env": "MY_SECRET"},
                                          "transport": {"type": "streamable-http",
                                                        "streamable_http": {"url": "https://m/mcp"}}}]}).servers[0].auth
    assert auth.secret() == "from-env"


def test_token_store_is_0600_atomic_and_round_trips(tmp_path):
    store = TokenStore(str(tmp_path / "cfg" / "oauth-tokens.json"))
    assert store.load() == {}
    store.save({"https://mcp.example/mcp": _grant()})
    path = tmp_path / "cfg" / "oauth-tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert store.load() == {"https://mcp.example/mcp": _grant()}
    store.save({})
    assert store.load() == {}
    assert [p.name for p in path.parent.iterdir()] == ["oauth-tokens.json"]  # no temporary file left


def test_a_broken_token_file_is_an_empty_store(tmp_path):
    path = tmp_path / "oauth-tokens.json"
    path.write_text("{not json")
    assert TokenStore(str(path)).load() == {}
    path.write_text(json.dumps({"servers": {"u": {"unknown": 1}}}))
    assert TokenStore(str(path)).load() == {}


def test_nothing_secret_in_reprs_or_logs(tmp_path):
    grant = _grant()
    pending = Pending("u", "https://as/authorize?x", grant, state="STATE-SECRET", verifier="VERIFIER-SECRET")
    snapshot = AuthSnapshot(bearers={"u": SECRET})
    lines: list[str] = []
    sink = logger.add(lines.append, format="{message}")
    try:
        logger.info("grant {} {!r} pending {!r} snapshot {!r}", grant, grant, pending, snapshot)
    finally:
        logger.remove(sink)
    shown = "".join(lines) + repr(grant) + str(grant) + repr(pending) + repr(snapshot)
    for secret in (SECRET, "refresh-SECRET-456", "client-SECRET-789", "STATE-SECRET", "VERIFIER-SECRET"):
        assert secret not in shown


def test_grant_with_token_keeps_the_refresh_token_a_refresh_omits():
    renewed = _grant().with_token({"access_token": "new", "expires_in": 60}, now=5000.0)
    assert renewed.access_token == "new" and renewed.refresh_token == "refresh-SECRET-456"
    assert renewed.expires_at == 5060.0 and renewed.issued_at == 5000.0


def test_fingerprint_and_default_path(tmp_path):
    assert fingerprint(None) is None and fingerprint("a") != fingerprint("b") and len(fingerprint("a") or "") == 16
    assert default_path(str(tmp_path / "approvals.json")) == str(tmp_path / "oauth-tokens.json")
    assert os.path.basename(default_path()) == "oauth-tokens.json"


@pytest.mark.parametrize("headers, oauth", [({}, True), ({"authorization": "Bearer mine"}, False),
                                            ({"X-Troupe-Relay": "s"}, False)])
def test_oauth_only_for_servers_without_their_own_authorization(headers, oauth):
    from actors.transports.factory import make_transport
    server = config.from_data({"servers": [{"name": "a", "transport": {
        "type": "streamable-http", "streamable_http": {"url": "https://m/mcp", "headers": headers}}}]}).servers[0]
    marker = object()
    transport = make_transport(server, lambda m: None, lambda r: None, auth=marker)
    assert (transport._auth is marker) is oauth  # pyright: ignore[reportAttributeAccessIssue]


def test_a_clients_request_carries_its_own_token_or_none():
    from actors.transports.streamable_http import StreamableHttpTransport

    class Access:
        def bearer(self, url, client=None):
            return {None: "troupe-token", "alice": "alice-token"}.get(client)
    plain = StreamableHttpTransport("s", "http://127.0.0.1:9/mcp", {}, lambda m: None, lambda r: None, auth=Access())
    relay = StreamableHttpTransport("s", "http://127.0.0.1:9/mcp", {"X-Troupe-Relay": "s"}, lambda m: None,
                                    lambda r: None, client_header="X-Troupe-Client")
    try:
        for n, client in enumerate(("alice", "bob", None)):
            message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {}}
            plain._clients[n] = relay._clients[n] = client  # as send(message, client=...) records it
            if client is None:
                del plain._clients[n], relay._clients[n]
            sent = plain._with_bearer({}, message)
            assert sent.get("Authorization") == {"alice": "Bearer alice-token", "bob": None,
                                                 None: "Bearer troupe-token"}[client]  # never troupe's for bob
            assert relay._with_bearer({}, message).get("X-Troupe-Client") == client
            plain._sent(message)
            assert n not in plain._clients
    finally:
        plain.close()
        relay.close()


def test_a_clients_refused_token_refreshed_meanwhile_needs_no_sign_in():
    from types import MappingProxyType

    from actors.auth.access import UpstreamAuthAccess, auth_snapshot
    url = "https://mcp.example/mcp"
    box, writer = auth_snapshot()
    access = UpstreamAuthAccess(box, keeper=None)
    writer.publish(AuthSnapshot(bearers=MappingProxyType({grant_key(url, "alice"): "new-token"})))
    assert access.sign_in_link(url, "alice", 0.5, sent="Bearer old-token") == {"refreshed": True}
    assert access.sign_in_link(url, "alice", 0.05, sent="Bearer new-token") == {}  # the same one: no news
    writer.publish(AuthSnapshot(sign_ins=MappingProxyType({grant_key(url, "bob"): {"auth_url": "https://as/b"}})))
    assert access.sign_in_link(url, "bob", 0.5) == {"auth_url": "https://as/b"}
