"""OAuth discovery by the spec's security rules (issue 26, item 6), against a real troupe: the
upstream and every server its metadata names are recorders (tests/support/recorder.py) on their
own loopback ports, so each test can say what troupe fetched or posted where, and that nothing
the rules forbid ever reached a recorder or a client-visible value (/status, list_tools)."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from tests.e2e.test_upstream_oauth import McpHttp
from tests.support import wait_until
from tests.support.recorder import Answer, Recorder
from tests.support.troupe import TroupeHttp, write_config

PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
ASM_PATH = "/.well-known/oauth-authorization-server"


@pytest.fixture
def mcp():
    """The protected upstream: every POST /mcp is a 401."""
    recorder = Recorder()
    yield recorder
    recorder.close()


@pytest.fixture
def evil():
    """A recorder troupe must never reach: whatever the upstream names it for, it answers as if it were
    the real thing, so a request to it could only come from troupe breaking a rule."""
    recorder = Recorder()
    for path in (PRM_PATH, ASM_PATH, "/prm", "/.well-known/oauth-protected-resource"):
        recorder.routes[("GET", path)] = Answer(200, {"resource": "x", "authorization_servers": [recorder.origin]})
    for path in ("/register", "/internal/admin/delete-all", "/token"):
        recorder.routes[("POST", path)] = Answer(201, {"client_id": "evil-client-id"})
    yield recorder
    recorder.close()


def _challenge(mcp: Recorder, resource_metadata: str | None = None) -> None:
    header = f'Bearer resource_metadata="{resource_metadata}"' if resource_metadata else "Bearer"
    mcp.routes[("POST", "/mcp")] = Answer(401, {}, (("WWW-Authenticate", header),))


def _good(mcp: Recorder, **as_extra) -> dict:
    """The upstream as its own authorization server on its own loopback origin (allowed)."""
    o = mcp.origin
    _challenge(mcp, o + PRM_PATH)
    mcp.routes[("GET", PRM_PATH)] = Answer(200, {"resource": o + "/mcp", "authorization_servers": [o + "/"]})
    meta = {"issuer": o + "/", "authorization_endpoint": o + "/authorize", "token_endpoint": o + "/token",
            "registration_endpoint": o + "/register", "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"], **as_extra}
    mcp.routes[("GET", ASM_PATH)] = Answer(200, meta)
    mcp.routes[("POST", "/register")] = Answer(201, {"client_id": "good-client-id",
                                                     "token_endpoint_auth_method": "none"})
    return meta


def _entry(t: TroupeHttp) -> dict:
    return next(s for s in requests.get(t.base + "/status", timeout=10).json()["servers"] if s["name"] == "guarded")


def _troupe(tmp_path, mcp: Recorder) -> TroupeHttp:
    servers = [{"name": "guarded", "transport": {"type": "streamable-http",
                                                 "streamable_http": {"url": mcp.origin + "/mcp"}}}]
    return TroupeHttp(write_config(tmp_path, servers))


def _refused(tmp_path, mcp: Recorder) -> tuple[dict, str, list]:
    """Run troupe until its sign-in for the upstream is refused: the status entry, the whole
    /status text, and list_tools' needs_authentication."""
    t = _troupe(tmp_path, mcp)
    try:
        entry = wait_until(lambda: (e := _entry(t)).get("auth_error") and e, timeout=20, message="an auth_error")
        assert entry["state"] == "needs-auth" and "auth_url" not in entry, entry
        assert entry["restarts"] == 0
        status = requests.get(t.base + "/status", timeout=10).text
        listed = json.loads(McpHttp(t.url).tool("list_tools")["content"][0]["text"])
        assert _entry(t)["state"] == "needs-auth" and _entry(t)["restarts"] == 0  # no crash loop
    finally:
        assert t.stop() == 0
    assert listed["needs_authentication"] == [{"name": "guarded", "auth_error": entry["auth_error"]}]
    return entry, status + json.dumps(listed), t.stderr


def _only(recorder: Recorder, *allowed: tuple[str, str]) -> None:
    got = {(s.method, s.path) for s in recorder.requests()}
    assert got <= set(allowed), got - set(allowed)


def _never_shown(shown: str, *values: str) -> None:
    for value in values:
        assert value not in shown, value


def test_resource_metadata_on_another_port_is_never_fetched(tmp_path, mcp, evil):
    _challenge(mcp, evil.origin + "/prm")
    entry, shown, _ = _refused(tmp_path, mcp)
    assert "resource metadata on another origin" in entry["auth_error"]
    assert evil.requests() == []
    _only(mcp, ("POST", "/mcp"))  # the 401's URL is the spec's: refused, it is not swapped for another
    _never_shown(shown, str(evil.port))


def test_an_http_authorization_server_on_another_port_is_never_asked(tmp_path, mcp, evil):
    _good(mcp)
    mcp.routes[("GET", PRM_PATH)] = Answer(200, {"resource": mcp.origin + "/mcp",
                                                 "authorization_servers": [evil.origin + "/"]})
    entry, shown, _ = _refused(tmp_path, mcp)
    assert "authorization server is not https" in entry["auth_error"]
    assert evil.requests() == []
    _only(mcp, ("POST", "/mcp"), ("GET", PRM_PATH))
    _never_shown(shown, str(evil.port))


@pytest.mark.parametrize("where", ["another port", "another host name"])
def test_a_registration_endpoint_on_another_origin_gets_no_post(tmp_path, mcp, evil, where):
    target = (evil.origin if where == "another port" else f"http://localhost:{mcp.port}") + "/internal/admin/delete-all"
    _good(mcp, registration_endpoint=target)
    mcp.routes[("POST", "/internal/admin/delete-all")] = Answer(201, {"client_id": "deleted-everything"})
    entry, shown, _ = _refused(tmp_path, mcp)
    assert "registration_endpoint is not https" in entry["auth_error"]
    assert evil.requests() == []
    _only(mcp, ("POST", "/mcp"), ("GET", PRM_PATH), ("GET", ASM_PATH))  # no POST to /internal/…
    _never_shown(shown, "delete-all", "deleted-everything", str(evil.port), "localhost:")


def test_a_redirect_to_another_port_is_not_followed(tmp_path, mcp, evil):
    _good(mcp)
    mcp.routes[("GET", PRM_PATH)] = Answer(302, b"", (("Location", evil.origin + PRM_PATH),))
    entry, shown, _ = _refused(tmp_path, mcp)
    assert "redirect to another origin was not followed" in entry["auth_error"]
    assert evil.requests() == []
    _only(mcp, ("POST", "/mcp"), ("GET", PRM_PATH))
    _never_shown(shown, str(evil.port))


def test_a_registration_that_redirects_is_not_followed(tmp_path, mcp, evil):
    _good(mcp)
    mcp.routes[("POST", "/register")] = Answer(307, b"", (("Location", evil.origin + "/register"),))
    entry, shown, _ = _refused(tmp_path, mcp)
    assert entry["auth_error"] == "client registration refused: HTTP 307"
    assert evil.requests() == []
    _never_shown(shown, str(evil.port), "evil-client-id")


def test_metadata_for_another_resource_is_refused(tmp_path, mcp, evil):
    _good(mcp)
    mcp.routes[("GET", PRM_PATH)] = Answer(200, {"resource": "https://victim.example.com/mcp",
                                                 "authorization_servers": [mcp.origin + "/"]})
    entry, shown, _ = _refused(tmp_path, mcp)
    assert "for another resource than this server's URL" in entry["auth_error"]
    _only(mcp, ("POST", "/mcp"), ("GET", PRM_PATH))  # not even the authorization server is asked
    _never_shown(shown, "victim", "good-client-id")


def test_authorization_metadata_naming_another_issuer_is_refused(tmp_path, mcp):
    _good(mcp, issuer="https://as.example.com/")
    entry, shown, _ = _refused(tmp_path, mcp)
    assert "names another issuer" in entry["auth_error"] and "RFC 8414" in entry["auth_error"]
    _only(mcp, ("POST", "/mcp"), ("GET", PRM_PATH), ("GET", ASM_PATH))  # no registration
    _never_shown(shown, "as.example.com")


def _link(t: TroupeHttp, not_this: str | None = None) -> str:
    return wait_until(lambda: (u := _entry(t).get("auth_url")) and u != not_this and u, timeout=20,
                      message="a (new) auth_url")


def _callback(t: TroupeHttp, auth_url: str, **extra: str) -> requests.Response:
    state = parse_qs(urlsplit(auth_url).query)["state"][0]
    return requests.get(t.base + "/oauth/callback", params={"state": state, "code": "the-code", **extra}, timeout=20)


def test_the_same_origin_loopback_sign_in_and_its_iss(tmp_path, mcp, evil):
    """Allowed: everything on the loopback upstream's own origin. The AS promises `iss` (RFC 9207):
    a callback without it or with another issuer is refused before the code goes anywhere."""
    meta = _good(mcp, authorization_response_iss_parameter_supported=True)
    mcp.routes[("POST", "/token")] = Answer(307, b"", (("Location", evil.origin + "/token"),))
    t = _troupe(tmp_path, mcp)
    try:
        link = _link(t)
        query = parse_qs(urlsplit(link).query)
        assert link.startswith(mcp.origin + "/authorize?")
        assert query["resource"] == [mcp.origin + "/mcp"] and query["client_id"] == ["good-client-id"]
        assert query["redirect_uri"] == [t.base + "/oauth/callback"]
        assert mcp.paths("POST").count("/register") == 1

        for extra in ({}, {"iss": evil.origin + "/"}, {"iss": ""}):
            page = _callback(t, link, **extra)
            assert page.status_code == 502 and "RFC 9207" in page.text, page.text
            assert "/token" not in mcp.paths("POST")  # the code went nowhere
            link = _link(t, not_this=link)  # a fresh sign-in, not a dead one

        page = _callback(t, link, iss=meta["issuer"])  # the right issuer: the code goes to /token …
        assert page.status_code == 502 and "token request failed" in page.text, page.text
        assert mcp.paths("POST").count("/token") == 1
        assert evil.requests() == []  # … whose redirect to another port is not followed

        link = _link(t, not_this=link)
        mcp.routes[("POST", "/token")] = Answer(200, {"access_token": "tok-1", "token_type": "Bearer",
                                                      "expires_in": 3600})
        page = _callback(t, link, iss=meta["issuer"])
        assert page.status_code == 200 and "signed in to guarded" in page.text, page.text
        token = [s for s in mcp.requests() if s.method == "POST" and s.path == "/token"][-1]
        form = parse_qs(token.body.decode())
        assert form["resource"] == [mcp.origin + "/mcp"] and form["code"] == ["the-code"]
        wait_until(lambda: any(s.headers.get("Authorization") == "Bearer tok-1" for s in mcp.requests()),
                   timeout=20, message="the upstream called with the new token")
    finally:
        assert t.stop() == 0
    _only(mcp, ("POST", "/mcp"), ("GET", PRM_PATH), ("GET", ASM_PATH), ("POST", "/register"), ("POST", "/token"),
          ("GET", "/mcp"), ("DELETE", "/mcp"))
    assert evil.requests() == []
