"""Rate limits on a real troupe (actors/ratelimit): a burst past a profile's bucket is refused at
once with -32003 and when to retry, in a session and over stateless HTTP (429 + Retry-After);
another profile's clients and troupe's own listings are untouched; /status, /metrics and
`troupe status` count the refusals; an edit of the config file changes the limit live; and two
instances on one real Redis draw on one bucket."""
from __future__ import annotations

import json

import subprocess

import pytest
import requests
import yaml

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_metrics import McpHttp
from tests.support import PYTHON, ROOT, wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import Troupe, TroupeHttp, server, text_of, write_config

TOKENS = {"bot": "bot-token-4e1f0a", "alice": "alice-token-93bc27", "operator": "operator-token-7d5e60"}
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
RATE_LIMITED = -32003


def _config(tmp_path, bots_rate: dict, cluster: dict | None = None, placement: str | None = None):
    extra = {"placement": placement} if placement else {}
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", pin=False, **extra)],
                          mode="flat", json_response=True, auth_token=TOKENS["operator"],
                          clients=[{"name": "bot", "token": TOKENS["bot"], "profile": "bots"},
                                   {"name": "alice", "token": TOKENS["alice"], "profile": "people"}])
    data = yaml.safe_load(config.read_text())
    data["profiles"] = {"bots": {"rate": bots_rate}, "people": {"rate": {"per_minute": 600, "burst": 50}}}
    data["audit"] = {"file": str(tmp_path / "audit.jsonl")}  # each refusal is a line of the trail
    if cluster:
        data["cluster"] = cluster
    config.write_text(yaml.safe_dump(data))
    return config


def _auth(name: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", headers=_auth("operator"), timeout=10).json()


def _bucket(t: TroupeHttp, scope: str, name: str) -> dict:
    return next(b for b in _status(t)["rates"]["buckets"] if (b["scope"], b["name"]) == (scope, name))


def _stateless(url: str, who: str, rid: int, text: str = "hi", **extra) -> requests.Response:
    return requests.post(url, json={"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "echo__echo", "arguments": {"text": text}, "_meta": META, **extra}}, timeout=10,
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo__echo",
                 **_auth(who)})


@pytest.fixture
def troupe(tmp_path):
    t = TroupeHttp(_config(tmp_path, {"per_minute": 1, "burst": 3}))  # a token a minute: none comes back here
    try:
        wait_until(lambda: all(s["state"] == "ready" for s in _status(t)["servers"]), 30, message="echo ready")
        yield t
    finally:
        t.stop()


def test_a_burst_past_the_bucket_is_refused_and_other_profiles_go_on(troupe, tmp_path):
    bot, alice = McpHttp(troupe.url, _auth("bot")), McpHttp(troupe.url, _auth("alice"))
    try:
        for i in range(3):
            assert text_of(bot.call("echo__echo", {"text": f"b{i}"})) == f"b{i}"
        refused = bot.call("echo__echo", {"text": "one too many"})
        error = refused["error"]
        assert error["code"] == RATE_LIMITED, refused
        assert error["message"].startswith("rate limit reached for profile 'bots' (1/min, burst 3): retry in ")
        data = error["data"]
        assert data["scope"] == "profile" and data["name"] == "bots"
        assert data["limit"] == {"per_minute": 1, "burst": 3}
        assert 50 < data["retry_after_s"] <= 60  # one token a minute, a few ms of it gone
        # listings and troupe's own answers do not reach a server: they never count
        assert "echo__echo" in {t["name"] for t in bot.request("tools/list")["result"]["tools"]}
        # the other profile's client calls as before
        for i in range(10):
            assert text_of(alice.call("echo__echo", {"text": f"a{i}"})) == f"a{i}"
        # stateless (2026-07-28): HTTP says it too, with Retry-After in whole seconds
        resp = _stateless(troupe.url, "bot", 41)
        assert resp.status_code == 429, resp.text
        assert 50 < int(resp.headers["Retry-After"]) <= 60
        body = resp.json()
        assert body["id"] == 41 and body["error"]["code"] == RATE_LIMITED and body["error"]["data"]["name"] == "bots"
        # a "retry" that resumes nothing troupe parked (answers with no requestState) is a new call: counted
        dodge = _stateless(troupe.url, "bot", 43, "dodge", inputResponses={})
        assert dodge.status_code == 429 and dodge.json()["error"]["code"] == RATE_LIMITED, dodge.text
        ok = _stateless(troupe.url, "alice", 42, "modern")
        assert ok.status_code == 200 and text_of(ok.json()) == "modern"
        bots, people = _bucket(troupe, "profile", "bots"), _bucket(troupe, "profile", "people")
        assert (bots["allowed"], bots["refused"], bots["limit"]) == (3, 3, {"per_minute": 1, "burst": 3})
        assert bots["tokens"] < 1
        assert (people["allowed"], people["refused"]) == (11, 0) and people["tokens"] > 38
        metrics = scrape_with(troupe)
        assert metrics[("troupe_rate_limited_total", _labels("profile", "bots"))] == 3
        assert metrics[("troupe_rate_limited_total", _labels("profile", "people"))] == 0
        assert metrics[("troupe_rate_limit_per_minute", _labels("profile", "bots"))] == 1
        assert metrics[("troupe_rate_allowed_total", _labels("profile", "people"))] == 11
        shown = subprocess.run([PYTHON, "-m", "actors.main", "status", "--url", troupe.base,
                                "--token", TOKENS["operator"]], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert "rates: profile bots 1/min burst 3" in shown.stdout and "3 refused" in shown.stdout, shown.stdout
        assert all(token not in shown.stdout + "".join(troupe.stderr) for token in TOKENS.values())
        # each refusal is in the audit trail and among the dashboard's last failures, named and coded
        trail = tmp_path / "audit.jsonl"

        def refusals() -> list[dict]:
            lines = [json.loads(line) for line in trail.read_text().splitlines()] if trail.exists() else []
            return [line for line in lines if line.get("outcome") == "rate_limited"]
        wait_until(lambda: len(refusals()) == 3, 10, message="three rate_limited lines in the audit trail")
        assert {(r["client"], r["profile"], r["server"], r["target"], r["code"]) for r in refusals()} == {
            ("bot", "bots", "echo", "echo", RATE_LIMITED)}
        assert "one too many" not in trail.read_text()
        failures = requests.get(troupe.base + "/api/history", headers=_auth("operator"), timeout=10).json()["failures"]
        assert [(f["client"], f["outcome"], f["code"]) for f in failures if f["outcome"] == "rate_limited"] == [
            ("bot", "rate_limited", RATE_LIMITED)] * 3
    finally:
        bot.close()
        alice.close()


def scrape_with(t: TroupeHttp) -> dict:
    """{(sample name, frozenset(labels)): value} from /metrics, with the operator's token (clients
    are named, so it is shut without one)."""
    resp = requests.get(t.base + "/metrics", headers=_auth("operator"), timeout=10)
    assert resp.status_code == 200, resp.text
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(resp.text) for sample in family.samples}


def _labels(scope: str, name: str) -> frozenset:
    return frozenset({"scope": scope, "name": name}.items())


def test_an_edit_of_the_config_changes_the_limit_live(troupe, tmp_path):
    bot = McpHttp(troupe.url, _auth("bot"))
    try:
        for i in range(3):
            assert text_of(bot.call("echo__echo", {"text": f"b{i}"})) == f"b{i}"
        assert bot.call("echo__echo", {"text": "refused"})["error"]["code"] == RATE_LIMITED
        pid = _status(troupe)["servers"][0]["pid"]
        path = tmp_path / "troupe.yaml"
        data = yaml.safe_load(path.read_text())
        data["profiles"]["bots"]["rate"] = {"per_minute": 60000, "burst": 5}  # a token each millisecond
        path.write_text(yaml.safe_dump(data))
        wait_until(lambda: _bucket(troupe, "profile", "bots")["limit"] == {"per_minute": 60000, "burst": 5}, 15,
                   message="the new limit in /status")
        for i in range(3):  # each comes a millisecond or more after the last: a token is back each time
            wait_until(lambda i=i: "result" in bot.call("echo__echo", {"text": f"again{i}"}), 5,
                       message="a call under the new limit")
        echo = _status(troupe)["servers"][0]
        assert (echo["state"], echo["pid"]) == ("ready", pid)  # a limit's change restarts nothing
        data["profiles"]["bots"].pop("rate")  # no limit at all
        path.write_text(yaml.safe_dump(data))
        wait_until(lambda: all(b["name"] != "bots" for b in _status(troupe)["rates"]["buckets"]), 15,
                   message="the limit gone from /status")
        for i in range(20):
            assert text_of(bot.call("echo__echo", {"text": f"free{i}"})) == f"free{i}"
    finally:
        bot.close()


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


def _joined(t: TroupeHttp) -> McpHttp | None:
    """A bot session with the instance once it has joined its cluster (until then: None)."""
    try:
        return McpHttp(t.url, _auth("bot"))
    except (AssertionError, ValueError):  # not joined yet
        return None


@pytest.mark.slow  # two troupes and a redis-server
def test_two_instances_share_one_bucket_through_redis(tmp_path, redis):
    config = _config(tmp_path, {"per_minute": 1, "burst": 4}, cluster={"redis": redis.url, "lease": 3},
                     placement="replicated")  # each instance its own echo: no relay hop
    troupes = [TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path / f"conf{i}")}) for i in range(2)]
    clients: list[McpHttp] = []
    try:
        for t in troupes:
            wait_until(lambda t=t: all(s["state"] == "ready" for s in _status(t)["servers"]), 30,
                       message="echo ready on each instance")
            clients.append(wait_until(lambda t=t: _joined(t), 30, interval=0.2, message="the cluster joined"))
        a, b = clients
        for t in troupes:  # each instance's link to Redis opened and the script loaded, on alice's bucket
            people = McpHttp(t.url, _auth("alice"))
            try:
                assert text_of(people.call("echo__echo", {"text": "warm"})) == "warm"
            finally:
                people.close()
        answers = [c.call("echo__echo", {"text": str(i)}) for i, c in enumerate((a, b, a, b, a, b))]
        assert ["result" in r for r in answers] == [True, True, True, True, False, False], answers
        assert {r["error"]["code"] for r in answers[4:]} == {RATE_LIMITED}
        assert all(r["error"]["data"]["name"] == "bots" for r in answers[4:])
        # the stateless front of either instance draws on the same bucket
        assert _stateless(troupes[0].url, "bot", 7).status_code == 429
        for t in troupes:
            rates = _status(t)["rates"]
            assert rates["shared"] and rates["redis"]["up"]
            bots = next(x for x in rates["buckets"] if x["name"] == "bots")
            assert bots["allowed"] == 2 and bots["refused"] >= 1 and bots["fail_open"] == 0
        people = McpHttp(troupes[1].url, _auth("alice"))  # the other profile's bucket is its own
        try:
            assert text_of(people.call("echo__echo", {"text": "unaffected"})) == "unaffected"
        finally:
            people.close()
    finally:
        for c in clients:
            c.close()
        for t in troupes:
            t.stop()


def test_over_stdio_serve_rate_limits_the_anonymous_client_and_its_meta_tools(tmp_path):
    """stdio's one client is named by no serve.clients entry: serve.rate is its limit, and in meta
    mode call_tool and get_prompt count while list_tools and core_status do not. A server's own
    limit (servers[].rate) holds as well."""
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", pin=False),
                                     server("other", "tests.servers.echo", pin=False,
                                            rate={"per_minute": 1, "burst": 1})],
                          mode="meta", rate={"per_minute": 1, "burst": 3})
    t = Troupe(config)
    try:
        t.initialize()
        assert "result" in t.request("tools/call", {"name": "list_tools", "arguments": {}})
        first = t.request("tools/call", {"name": "call_tool", "arguments": {
            "name": "other__echo", "arguments": {"text": "one"}}})
        assert text_of(first) == "one"
        by_server = t.request("tools/call", {"name": "call_tool", "arguments": {
            "name": "other__echo", "arguments": {"text": "two"}}})  # other's own bucket is empty
        assert by_server["error"]["code"] == RATE_LIMITED
        assert by_server["error"]["data"]["scope"] == "server" and by_server["error"]["data"]["name"] == "other"
        for text in ("a", "b"):  # the anonymous bucket had 3: one went to other, the refused call took none
            answer = t.request("tools/call", {"name": "call_tool", "arguments": {
                "name": "echo__echo", "arguments": {"text": text}}})
            assert text_of(answer) == text
        refused = t.request("tools/call", {"name": "call_tool", "arguments": {
            "name": "echo__echo", "arguments": {"text": "c"}}})
        data = refused["error"]["data"]
        assert refused["error"]["code"] == RATE_LIMITED and (data["scope"], data["name"]) == ("anonymous", "anonymous")
        assert data["limit"] == {"per_minute": 1, "burst": 3} and data["retry_after_s"] > 50
        rates = {(b["scope"], b["name"]): b for b in t.status()["rates"]["buckets"]}  # core_status never counts
        assert rates[("anonymous", "anonymous")]["refused"] == 1 and rates[("anonymous", "anonymous")]["allowed"] == 3
        assert (rates[("server", "other")]["allowed"], rates[("server", "other")]["refused"]) == (1, 1)
        assert set(rates) == {("anonymous", "anonymous"), ("server", "other")}  # echo has no limit of its own
    finally:
        t.close()
