"""The upstream HTTP transports' requests.Session reads the environment once: proxy variables
(and no_proxy) still apply to a server's URL, a CA bundle variable still sets verification, and
no per-request lookup remains (trust_env off, so ~/.netrc is never read into a request)."""
from __future__ import annotations

from actors.transports.http_base import lean_session


def test_proxies_and_ca_bundle_come_from_the_environment_once(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/custom.pem")
    session = lean_session("https://api.example/mcp")
    assert session.trust_env is False
    assert session.proxies.get("https") == "http://proxy.example:3128"
    assert session.verify == "/etc/ssl/custom.pem"
    assert lean_session("https://internal.example/mcp").proxies == {}  # no_proxy honoured


def test_without_variables_nothing_is_set(monkeypatch):
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy",
                 "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    session = lean_session("http://127.0.0.1:9/mcp")
    assert session.proxies == {} and session.verify is True and session.trust_env is False
