"""The URL rules of OAuth discovery (actors/auth/url_rules.py), one by one, and discovery keeping to
them with a fake HTTP session that answers from a table and records what it was asked."""
from __future__ import annotations

import json

import pytest

from actors.auth import metadata, url_rules
from actors.auth.flow import Pending
from actors.auth.tokens import Grant

LOOP = "http://127.0.0.1:4000/mcp"
REMOTE = "https://mcp.example.com/mcp"


def test_origin_fills_in_the_default_port_and_lower_cases():
    assert url_rules.origin("HTTPS://MCP.Example.COM/x") == ("https", "mcp.example.com", 443)
    assert url_rules.origin("http://[::1]:8080/") == ("http", "::1", 8080)
    for bad in ("javascript:alert(1)", "file:///etc/passwd", "http:///nohost", "http://h:99999/",
                "https://user:pw@as.example/", "ftp://as.example/", "not a url"):
        with pytest.raises(url_rules.Refused):
            url_rules.origin(bad)


def test_same_origin_means_scheme_host_and_port():
    assert url_rules.same_origin("https://a.example/x", "HTTPS://A.example:443/y?z")
    assert url_rules.same_origin("http://127.0.0.1:80/a", "http://127.0.0.1/b")
    assert not url_rules.same_origin("http://127.0.0.1:4000/", "http://127.0.0.1:4001/")
    assert not url_rules.same_origin("http://127.0.0.1:4000/", "https://127.0.0.1:4000/")
    assert not url_rules.same_origin("http://127.0.0.1:4000/", "http://localhost:4000/")  # another host name
    assert not url_rules.same_origin("http://a.example/", "javascript:x")


def test_loopback_hosts():
    for url in ("http://127.0.0.1:1/", "http://127.8.9.10/", "http://[::1]:5/", "http://LOCALHOST:3/"):
        assert url_rules.is_loopback(url), url
    for url in ("http://10.0.0.1/", "http://localhost.example.com/", "http://0.0.0.0/", "https://[::2]/"):
        assert not url_rules.is_loopback(url), url


def test_canonical_form():
    assert url_rules.canonical("HTTPS://MCP.Example:443/Path?q=1#f") == "https://mcp.example/Path"
    assert url_rules.canonical("http://127.0.0.1:80/mcp") == "http://127.0.0.1/mcp"
    assert url_rules.canonical("http://[::1]:8080/mcp") == "http://[::1]:8080/mcp"
    assert metadata.canonical_resource("https://mcp.example:8443/mcp") == "https://mcp.example:8443/mcp"


def test_resource_must_be_the_servers_url():
    assert url_rules.resource_matches("https://MCP.example.com:443/mcp", REMOTE)
    assert url_rules.resource_matches("https://mcp.example.com/mcp/", REMOTE)  # a trailing slash aside
    assert url_rules.resource_matches("https://mcp.example.com/mcp#x", REMOTE)
    assert url_rules.resource_matches("https://mcp.example.com/", REMOTE)  # a parent path, same origin
    assert url_rules.resource_matches("https://mcp.example.com", REMOTE)
    assert not url_rules.resource_matches("https://victim.example.com/mcp", REMOTE)
    assert not url_rules.resource_matches("https://victim.example.com/mcp", LOOP)
    assert not url_rules.resource_matches("http://mcp.example.com/mcp", REMOTE)
    assert not url_rules.resource_matches("https://mcp.example.com:8443/mcp", REMOTE)
    assert not url_rules.resource_matches("https://mcp.example.com/mc", REMOTE)  # not a path segment
    assert not url_rules.resource_matches("https://mcp.example.com/mcp/v2", REMOTE)  # a child is not it
    assert not url_rules.resource_matches("https://mcp.example.com/other", REMOTE)


def test_resource_metadata_only_from_the_own_origin_or_https():
    url_rules.check_resource_metadata_url("http://127.0.0.1:4000/.well-known/oauth-protected-resource", LOOP)
    url_rules.check_resource_metadata_url("https://elsewhere.example/prm", LOOP)
    for bad in ("http://127.0.0.1:4001/prm", "http://localhost:4000/prm", "http://mcp.example.com/prm",
                "file:///etc/passwd"):
        with pytest.raises(url_rules.Refused):
            url_rules.check_resource_metadata_url(bad, LOOP if "4001" in bad or "localhost" in bad else REMOTE)


def test_authorization_urls_https_or_the_loopback_servers_own_origin():
    url_rules.check_authorization_url("https://as.example/token", REMOTE, "token_endpoint")
    url_rules.check_authorization_url("https://as.example/token", LOOP, "token_endpoint")
    url_rules.check_authorization_url("http://127.0.0.1:4000/token", LOOP, "token_endpoint")
    refused = [("http://127.0.0.1:4001/token", LOOP),  # another port
               ("http://localhost:4000/token", LOOP),  # another host name of the same machine
               ("http://mcp.example.com/token", "http://mcp.example.com/mcp"),  # same origin, not loopback
               ("http://127.0.0.1:4000/token", REMOTE),
               ("javascript:alert(1)", LOOP)]
    for url, server in refused:
        with pytest.raises(url_rules.Refused, match="token_endpoint"):
            url_rules.check_authorization_url(url, server, "token_endpoint")


def test_issuer_must_be_the_server_it_was_fetched_for():
    assert url_rules.issuer_matches("http://127.0.0.1:4000/", "http://127.0.0.1:4000")
    assert url_rules.issuer_matches("https://AS.example/tenant", "https://as.example/tenant/")
    assert not url_rules.issuer_matches("https://as.example/other", "https://as.example/tenant")
    assert not url_rules.issuer_matches("https://evil.example", "https://as.example")
    assert not url_rules.issuer_matches(None, "https://as.example")
    assert not url_rules.issuer_matches(["https://as.example"], "https://as.example")


def test_iss_of_an_authorization_response():
    assert url_rules.iss_refusal("https://as.example", "https://as.example", True) is None
    assert url_rules.iss_refusal(None, "https://as.example", False) is None  # not promised, not sent
    assert "no iss" in (url_rules.iss_refusal(None, "https://as.example", True) or "")
    assert "another issuer" in (url_rules.iss_refusal("https://evil.example", "https://as.example", False) or "")
    assert "another issuer" in (url_rules.iss_refusal("https://as.example/", "https://as.example", True) or "")
    assert "another issuer" in (url_rules.iss_refusal("", "https://as.example", True) or "")
    grant = Grant("https://as.example/token", REMOTE, "c", "none", "http://127.0.0.1:1/oauth/callback")
    pending = Pending("k", "https://as.example/authorize", grant, "s", "v", "https://as.example", True)
    assert pending.iss_refusal("https://as.example") is None and pending.iss_refusal(None)


def test_redirects_stay_on_their_origin():
    assert url_rules.check_redirect("/b", "http://127.0.0.1:4000/a") == "http://127.0.0.1:4000/b"
    for location in ("http://127.0.0.1:4001/b", "https://127.0.0.1:4000/b", "//evil.example/", None, ""):
        with pytest.raises(url_rules.Refused):
            url_rules.check_redirect(location, "http://127.0.0.1:4000/a")


def test_refusals_name_the_rule_not_the_url():
    for call in (lambda: url_rules.check_resource_metadata_url("http://127.0.0.1:4001/secret-path", LOOP),
                 lambda: url_rules.check_authorization_url("http://10.1.2.3/secret-path", LOOP, "x"),
                 lambda: url_rules.check_redirect("http://10.1.2.3/secret-path", LOOP)):
        with pytest.raises(url_rules.Refused) as caught:
            call()
        assert "secret-path" not in str(caught.value) and "10.1.2.3" not in str(caught.value)


class _Answer:
    def __init__(self, status: int, body=None, location: str | None = None) -> None:
        self.status_code, self.headers = status, ({"Location": location} if location else {})
        self.is_redirect = location is not None
        data = json.dumps(body).encode() if body is not None else b""
        self.raw = type("Raw", (), {"read": lambda _self, n, decode_content=True: data[:n]})()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


class FakeHttp:
    """Answers GETs from a table (404 otherwise) and records every URL asked."""

    def __init__(self, table: dict) -> None:
        self.table, self.asked = table, []

    def get(self, url, **kwargs):
        assert kwargs.get("allow_redirects") is False
        self.asked.append(url)
        return self.table.get(url, _Answer(404))


PRM = "http://127.0.0.1:4000/.well-known/oauth-protected-resource/mcp"
ASM = "http://127.0.0.1:4000/.well-known/oauth-authorization-server"
GOOD_AS = {"issuer": "http://127.0.0.1:4000/", "authorization_endpoint": "http://127.0.0.1:4000/authorize",
           "token_endpoint": "http://127.0.0.1:4000/token", "registration_endpoint": "http://127.0.0.1:4000/register",
           "code_challenge_methods_supported": ["S256"]}
GOOD_PRM = {"resource": LOOP, "authorization_servers": ["http://127.0.0.1:4000/"]}


def _discover(table: dict, challenge: dict | None = None):
    http = FakeHttp({url: answer if isinstance(answer, _Answer) else _Answer(200, answer)
                     for url, answer in table.items()})
    try:
        return metadata.discover(http, LOOP, challenge or {}), http.asked  # type: ignore[arg-type]
    except metadata.DiscoveryError as exc:
        return exc, http.asked


def test_discovery_on_the_loopback_servers_own_origin():
    found, asked = _discover({PRM: GOOD_PRM, ASM: GOOD_AS})
    assert isinstance(found, metadata.Discovered), found
    assert found.resource == LOOP and found.registration_endpoint == "http://127.0.0.1:4000/register"
    assert asked == [PRM, ASM] and not found.iss_required
    found, _ = _discover({PRM: GOOD_PRM, ASM: {**GOOD_AS, "authorization_response_iss_parameter_supported": True}})
    assert isinstance(found, metadata.Discovered) and found.iss_required and found.issuer == GOOD_AS["issuer"]


@pytest.mark.parametrize("table, challenge, rule, never", [
    ({}, {"resource_metadata": "http://127.0.0.1:4001/prm"}, "another origin without https", "4001"),
    ({PRM: {**GOOD_PRM, "resource": "https://victim.example.com/mcp"}}, None, "RFC 9728", "victim"),
    ({PRM: {**GOOD_PRM, "resource": None}}, None, "RFC 9728", None),
    ({PRM: {**GOOD_PRM, "authorization_servers": ["http://127.0.0.1:4002/"]}}, None, "not https", "4002"),
    ({PRM: GOOD_PRM, ASM: {**GOOD_AS, "registration_endpoint": "http://127.0.0.1:4003/internal/admin/delete-all"}},
     None, "registration_endpoint is not https", "4003"),
    ({PRM: GOOD_PRM, ASM: {**GOOD_AS, "token_endpoint": "http://localhost:4000/token"}},
     None, "token_endpoint is not https", None),
    ({PRM: GOOD_PRM, ASM: {**GOOD_AS, "issuer": "https://as.example/"}}, None, "RFC 8414", None),
    ({PRM: _Answer(302, location="http://127.0.0.1:4004/prm")}, None, "another origin was not followed", "4004"),
])
def test_discovery_refuses_what_the_rules_forbid(table, challenge, rule, never):
    found, asked = _discover(table, challenge)
    assert isinstance(found, metadata.DiscoveryError) and rule in str(found), found
    assert str(found).startswith("sign-in refused: "), found
    if never:
        assert not [url for url in asked if never in url], asked
        assert never not in str(found)


def test_a_same_origin_redirect_is_followed_a_few_times():
    moved = "http://127.0.0.1:4000/moved"
    found, asked = _discover({PRM: _Answer(301, location="/moved"), moved: GOOD_PRM, ASM: GOOD_AS})
    assert isinstance(found, metadata.Discovered) and asked[:2] == [PRM, moved]
    loop = {PRM: _Answer(302, location=PRM)}
    found, asked = _discover(loop)
    assert isinstance(found, metadata.DiscoveryError) and "redirects" in str(found)
    assert len(asked) == metadata.MAX_REDIRECTS + 1


def test_the_first_authorization_server_that_passes_is_used():
    other = "https://as.example/.well-known/oauth-authorization-server"
    found, asked = _discover({PRM: {**GOOD_PRM, "authorization_servers": ["http://127.0.0.1:4002/",
                                                                           "https://as.example"]},
                              other: {**GOOD_AS, "issuer": "https://as.example", "authorization_endpoint":
                                      "https://as.example/a", "token_endpoint": "https://as.example/t",
                                      "registration_endpoint": "https://as.example/r"}})
    assert isinstance(found, metadata.Discovered) and found.token_endpoint == "https://as.example/t"
    assert not [url for url in asked if "4002" in url]


def test_scopes_from_fetched_values_are_scope_tokens_only():
    found, _ = _discover({PRM: {**GOOD_PRM, "scopes_supported": ["read", "bad scope", 'x"y', "w\n", 7]},
                          ASM: GOOD_AS})
    assert isinstance(found, metadata.Discovered) and found.scopes == ("read",)


def test_a_stored_grant_whose_token_endpoint_breaks_the_rules_is_not_refreshed():
    from actors.auth import flow
    grant = Grant("http://10.9.9.9/token", LOOP, "c", "none", "http://127.0.0.1:1/oauth/callback",
                  access_token="a", refresh_token="r")  # a token file written before the rules
    with pytest.raises(flow.SignInError, match="token endpoint is not https") as caught:
        flow.refresh(grant)
    assert caught.value.rejected and "10.9.9.9" not in str(caught.value)


class _Registrar:
    def __init__(self, answer: dict) -> None:
        self.answer, self.posted = answer, []

    def post(self, url, **kwargs):
        assert kwargs.get("allow_redirects") is False
        self.posted.append(url)
        body = json.dumps(self.answer).encode()
        return type("R", (_Answer,), {"json": lambda _self: json.loads(body)})(201, self.answer)


def test_registration_posts_only_to_the_checked_endpoint_and_checks_the_client_id():
    from actors.auth import registration
    found = metadata.Discovered(LOOP, "http://127.0.0.1:4000/", "http://127.0.0.1:4000/authorize",
                                "http://127.0.0.1:4000/token", "http://127.0.0.1:4000/register")
    http = _Registrar({"client_id": "cid-1", "token_endpoint_auth_method": "private_key_jwt"})
    client = registration.register(http, found, "http://127.0.0.1:1/oauth/callback")  # type: ignore[arg-type]
    assert client["client_id"] == "cid-1" and client["auth_method"] == "client_secret_basic"  # not theirs: RFC 8414's default
    assert http.posted == ["http://127.0.0.1:4000/register"]
    for bad in ("x" * 513, "line\nbreak", ""):
        with pytest.raises(metadata.DiscoveryError, match="client_id"):
            registration.register(_Registrar({"client_id": bad}), found, "http://127.0.0.1:1/cb")  # type: ignore[arg-type]
