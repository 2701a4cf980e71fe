"""The HTTP front door's Guard: Host and Origin by equality, dashboard actions, token, exposure."""
from __future__ import annotations

import pytest

from actors.settings.config import ConfigError, ServeConfig, from_data
from actors.loopback import is_loopback
from actors.serve.security import Guard, exposure_refusal

PORT = 8765


def guard(bound_host: str = "127.0.0.1", port: int | None = PORT, **serve) -> Guard:
    return Guard(ServeConfig(**serve), bound_host, port)


def env(host: str | None = f"127.0.0.1:{PORT}", method: str = "POST", path: str = "/mcp", **headers) -> dict:
    out = {"REQUEST_METHOD": method, "PATH_INFO": path}
    if host is not None:
        out["HTTP_HOST"] = host
    out.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    return out


def status(g: Guard, environ: dict) -> str | None:
    refusal = g.check(environ)
    return None if refusal is None else refusal[0][:3]


# ---------------------------------------------------------------- Host

@pytest.mark.parametrize("host", [
    f"127.0.0.1.evil.com:{PORT}", f"127.attacker.example:{PORT}", f"[::1]evil.com:{PORT}", "[::1]evil.com",
    f"127.0.0.2:{PORT}", f"localhost.evil.com:{PORT}", f"evil.com:{PORT}", "evil.com", f"localhost:{PORT + 1}",
    f"localhost:{PORT}.evil.com", f"127.0.0.1:{PORT}:1", "127.0.0.1", "localhost", "[::1]", f" :{PORT}", "",
])
def test_rebinding_hosts_are_refused(host):
    assert status(guard(), env(host)) == "403"


def test_a_missing_host_is_refused():
    assert status(guard(), env(None)) == "403"


@pytest.mark.parametrize("host", [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}", f"LocalHost:{PORT}"])
def test_loopback_names_on_the_bound_port_are_let_in(host):
    assert status(guard(), env(host)) is None


def test_a_bare_name_only_when_bound_to_port_80():
    assert status(guard(port=80), env("localhost")) is None
    assert status(guard(port=80), env("localhost:80")) is None
    assert status(guard(port=80, allowed_hosts=("box.lan",)), env("box.lan")) is None
    assert status(guard(port=8080), env("localhost")) == "403"


def test_allowed_hosts_name_means_the_bound_port_and_name_port_means_exactly_that():
    g = guard(allowed_hosts=("box.lan", "proxy.example:443", "[fe80::1]"))
    assert status(g, env(f"box.lan:{PORT}")) is None
    assert status(g, env(f"BOX.lan:{PORT}")) is None
    assert status(g, env("box.lan:9999")) == "403"
    assert status(g, env("proxy.example:443")) is None
    assert status(g, env(f"proxy.example:{PORT}")) == "403"
    assert status(g, env(f"[fe80::1]:{PORT}")) is None
    assert status(g, env(f"box.lan.evil.com:{PORT}")) == "403"
    assert status(g, env(f"sub.box.lan:{PORT}")) == "403"


def test_the_bound_address_is_a_name_but_a_wildcard_bind_is_not():
    assert status(guard("192.168.1.5"), env(f"192.168.1.5:{PORT}")) is None
    assert status(guard("::1"), env(f"[::1]:{PORT}")) is None
    for wildcard in ("0.0.0.0", "::", ""):
        assert status(guard(wildcard), env(f"0.0.0.0:{PORT}")) == "403"
        assert status(guard(wildcard), env(f"127.0.0.1:{PORT}")) is None


def test_embedded_without_a_bound_port_the_request_port_stands_in():
    g = guard(port=None)  # a host app's server: troupe did not bind
    assert status(g, {**env("127.0.0.1:5000"), "SERVER_PORT": "5000"}) is None
    assert status(g, {**env("127.0.0.1:5001"), "SERVER_PORT": "5000"}) == "403"
    assert status(g, {**env("127.0.0.1.evil.com:5000"), "SERVER_PORT": "5000"}) == "403"
    assert status(g, env("127.0.0.1:5000")) == "403"  # no port known at all: only exact allowed_hosts


# ---------------------------------------------------------------- Origin

@pytest.mark.parametrize("origin", [
    f"http://127.0.0.1.evil.com:{PORT}", f"http://127.attacker.example:{PORT}", f"http://[::1]evil.com:{PORT}",
    "http://localhost:3000", f"http://localhost:{PORT}.evil.com", f"https://localhost:{PORT}", "http://evil.example",
    "null", "", f"http://localhost:{PORT}/path", f"ftp://localhost:{PORT}",
])
def test_foreign_origins_are_refused(origin):
    assert status(guard(), env(Origin=origin)) == "403"


@pytest.mark.parametrize("origin", [f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}", f"http://[::1]:{PORT}",
                                    f"http://LOCALHOST:{PORT}/"])
def test_loopback_origins_on_the_bound_port_are_let_in(origin):
    assert status(guard(), env(Origin=origin)) is None


def test_no_origin_is_not_a_browser_and_is_let_in():
    assert status(guard(), env()) is None


def test_allowed_origins_compare_for_equality_after_case_and_trailing_slash():
    g = guard(allowed_origins=("http://localhost:3000", "https://App.example/"))
    assert status(g, env(Origin="http://localhost:3000")) is None
    assert status(g, env(Origin="https://app.example")) is None
    assert status(g, env(Origin="https://app.example/")) is None
    assert status(g, env(Origin="https://app.example.evil.com")) == "403"
    assert status(g, env(Origin="http://localhost:30001")) == "403"
    assert status(g, env(Origin="https://sub.app.example")) == "403"


def test_origins_of_allowed_hosts_are_let_in():
    g = guard(allowed_hosts=("box.lan", "proxy.example:8443"))
    assert status(g, env(Origin=f"http://box.lan:{PORT}")) is None
    assert status(g, env(Origin="http://proxy.example:8443")) is None
    assert status(g, env(Origin="http://box.lan:9999")) == "403"


# ---------------------------------------------------------------- dashboard actions

def action(host: str = f"127.0.0.1:{PORT}", path: str = "/api/servers/echo/restart", **headers) -> dict:
    return env(host, "POST", path, **headers)


def test_dashboard_actions_need_their_own_origin():
    g = guard()
    assert status(g, action(Origin=f"http://127.0.0.1:{PORT}")) is None
    assert status(g, action(Origin=f"http://127.0.0.1:{PORT}", Sec_Fetch_Site="same-origin")) is None
    assert status(g, action()) == "403"  # no Origin: not from the page
    # another loopback name passes the Origin check, but it is not this page's origin
    assert status(g, action(Origin=f"http://localhost:{PORT}")) == "403"
    assert status(g, action(Origin="http://evil.example")) == "403"


@pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site"])
def test_dashboard_actions_refuse_cross_site_fetches(site):
    assert status(guard(), action(Origin=f"http://127.0.0.1:{PORT}", Sec_Fetch_Site=site)) == "403"


def test_the_rule_covers_every_route_under_api():
    g = guard()
    for path in ("/api/approvals/x/approve", "/api", "/api/"):
        assert status(g, action(path=path)) == "403", path
        assert status(g, action(path=path, Origin=f"http://127.0.0.1:{PORT}")) is None, path
    assert status(g, env(method="GET", path="/api/servers")) is None  # reads are not actions
    assert status(g, env(method="DELETE", path="/api/servers/x")) == "403"
    assert status(g, env(path="/apix")) is None
    assert status(g, env(path="/mcp")) is None  # MCP clients are not browsers: no Origin needed


def test_a_same_origin_action_still_needs_the_token():
    g = guard(auth_token="s3cret")
    same = {"Origin": f"http://127.0.0.1:{PORT}"}
    assert status(g, action(**same)) == "401"
    assert status(g, action(**same, Authorization="Bearer s3cret")) is None
    assert status(g, action(Authorization="Bearer s3cret")) == "403"


def test_token_is_checked_after_host_and_origin():
    g = guard(auth_token="s3cret")
    assert status(g, env()) == "401"
    assert status(g, env(Authorization="Bearer wrong")) == "401"
    assert status(g, env(Authorization="Bearer s3cret")) is None
    assert status(g, env("evil.com", Authorization="Bearer s3cret")) == "403"


# ---------------------------------------------------------------- exposure and config

@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_binds(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.5", "10.0.0.1", "example.com", "127.0.0.1.evil.com"])
def test_other_binds_are_not_loopback(host):
    assert not is_loopback(host)


def test_serving_beyond_loopback_needs_a_token():
    refusal = exposure_refusal(ServeConfig(transport="http", host="0.0.0.0"))
    assert refusal and "auth_token" in refusal and "TROUPE_AUTH_TOKEN" in refusal and "\n" not in refusal
    assert exposure_refusal(ServeConfig(transport="http", host="0.0.0.0", auth_token="t")) is None
    assert exposure_refusal(ServeConfig(transport="http", host="127.0.0.1")) is None
    assert exposure_refusal(ServeConfig(transport="stdio", host="0.0.0.0")) is None


def test_config_refuses_patterns_in_allowed_hosts_and_origins():
    ok = from_data({"serve": {"allowed_hosts": ["box.lan", "box.lan:8080", "[::1]:9000"],
                              "allowed_origins": ["http://localhost:3000", "https://app.example/"]}})
    assert ok.serve.allowed_hosts == ("box.lan", "box.lan:8080", "[::1]:9000")
    with pytest.raises(ConfigError) as bad:
        from_data({"serve": {"allowed_hosts": ["*.example.com", "http://box.lan", 7],
                             "allowed_origins": ["*", "localhost:3000", "http://a.example/path"]}})
    text = "\n".join(bad.value.problems)
    for where in ("allowed_hosts[0]", "allowed_hosts[1]", "allowed_hosts[2]",
                  "allowed_origins[0]", "allowed_origins[1]", "allowed_origins[2]"):
        assert where in text, text


# ---------------------------------------------------------------- serve.clients

def _clients_guard(operator: str | None = None) -> Guard:
    from actors.settings.model import ClientEntry
    return guard(auth_token=operator, clients=(ClientEntry("alice", "tok-a", "r"), ClientEntry("bob", "tok-b")))


def test_a_client_token_opens_the_mcp_endpoints_and_names_its_client():
    g = _clients_guard()
    for path in ("/mcp", "/sse", "/messages"):
        environ = env(path=path, authorization="Bearer tok-b")
        assert status(g, environ) is None and environ["troupe.client"].name == "bob"
    assert status(g, env(path="/mcp")) == "401"
    assert status(g, env(path="/mcp", authorization="Bearer tok-x")) == "401"


def test_the_operator_routes_take_the_operators_token_alone():
    g = _clients_guard(operator="op")
    assert status(g, env(method="GET", path="/status", authorization="Bearer tok-a")) == "401"
    assert status(g, env(method="GET", path="/status", authorization="Bearer op")) is None
    assert status(g, env(path="/api/approvals/x/approve", authorization="Bearer tok-a",
                         origin=f"http://127.0.0.1:{PORT}")) == "401"
    operator_mcp = env(path="/mcp", authorization="Bearer op")
    assert status(g, operator_mcp) is None and "troupe.client" not in operator_mcp
    assert status(g, env(method="GET", path="/events") | {"QUERY_STRING": "access_token=tok-b"}) == "401"
    assert status(g, env(method="GET", path="/events") | {"QUERY_STRING": "access_token=op"}) is None
    # without an operator token they stay shut while clients are named: a client never approves
    g = _clients_guard()
    for path in ("/status", "/metrics", "/events"):
        assert status(g, env(method="GET", path=path, authorization="Bearer tok-a")) == "401", path
    assert "operator" in g.check(env(method="GET", path="/status", authorization="Bearer tok-a"))[1]


def test_clients_count_as_a_token_for_a_non_loopback_bind():
    from actors.settings.model import ClientEntry
    assert exposure_refusal(ServeConfig(transport="http", host="0.0.0.0")) is not None
    assert exposure_refusal(ServeConfig(transport="http", host="0.0.0.0", clients=(ClientEntry("a", "t"),))) is None
