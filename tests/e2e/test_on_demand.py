"""Servers on demand against real processes: 20 on-demand stdio servers (FastMCP and
server-everything) cost no process once listed and are all served at once; a first call starts
exactly its server, ten concurrent first calls start it once; idle stop loses no call at the
boundary; a tool changed at wake is withheld and a tool gone is a clear error; a crashing
on-demand server backs off as a permanent one does; an HTTP server's session is opened on
first use and closed (DELETE) when idle."""
from __future__ import annotations

import time

import orjson

import pytest

from tests.support import peer_bin, wait_until
from tests.support.ports import start_with_port_retry, stop
from tests.support.troupe import Troupe, children_of, json_of, server, text_of, write_config

FASTMCP = 6  # FastMCP servers among the 20 (a Python runtime each); the rest are server-everything


def everything(name: str, **extra) -> dict:
    entry = {"name": name, "transport": {"type": "stdio", "stdio": {"command": peer_bin("mcp-server-everything"),
                                                                    "args": ["stdio"]}}}
    entry.update(extra)
    return entry


def twenty(**extra) -> list[dict]:
    return [server(f"fm{i}", "tests.servers.fastmcp_demo", **extra) for i in range(FASTMCP)] + \
        [everything(f"ev{i}", **extra) for i in range(20 - FASTMCP)]


def stays(condition, seconds: float) -> None:
    """condition() holds at every look for `seconds` (a bounded poll for what must not happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition()
        time.sleep(0.05)


def states(t: Troupe) -> dict:
    return {s["name"]: s for s in t.status()["servers"]}


def all_idle(t: Troupe) -> bool:
    return all(s["state"] == "idle" for s in states(t).values())


def started(t: Troupe, mode: str = "flat") -> Troupe:
    t.initialize()
    return t


@pytest.mark.slow
def test_twenty_on_demand_servers_run_only_while_used(tmp_path):
    servers = twenty(start="on_demand", idle_stop=120)
    first = started(Troupe(write_config(tmp_path, servers, mode="flat")))
    try:  # the first troupe learns every server's lists: each is started once and stopped
        names = {tool["name"] for tool in first.request("tools/list", timeout=90)["result"]["tools"]}
        assert all(any(n.startswith(s["name"] + "__") for n in names) for s in servers), names
        wait_until(lambda: all_idle(first), 60, interval=0.2, message="every server idle after learning")
        wait_until(lambda: not children_of(first.proc.pid), 20, message="no child process once listed")
        assert all(s["wakes"] == 0 for s in states(first).values())  # learning is not a wake
    finally:
        assert first.close() == 0
    (tmp_path / "meta").mkdir()
    t = started(Troupe(write_config(tmp_path / "meta", servers, mode="meta")))
    try:  # a new troupe serves the kept lists: no process at all, every server's tools at once
        assert not children_of(t.proc.pid)
        assert all_idle(t)
        found = json_of(t.call("filter_tools", {"limit": 1000}))
        tools = found["tools"] if isinstance(found, dict) else found
        listed = {entry["name"] for entry in tools}
        assert all(any(n.startswith(s["name"] + "__") for n in listed) for s in servers), listed
        assert not children_of(t.proc.pid)  # listing woke nothing

        # The first call to one server starts exactly that one, and is answered.
        began = time.monotonic()
        answer = t.call("call_tool", {"name": "fm0__greet", "arguments": {"name": "Ada"}}, timeout=60)
        assert "Hello, Ada!" in text_of(answer), answer
        now = states(t)
        assert now["fm0"]["state"] == "ready" and now["fm0"]["wakes"] == 1 and now["fm0"]["last_wake"] >= 0
        assert [n for n, s in now.items() if s["state"] != "idle"] == ["fm0"]
        assert now["fm0"]["rss_bytes"] > 0 and t.status()["memory"]["children_rss_bytes"] > 0
        assert time.monotonic() - began < 60

        # Ten concurrent first calls to one stopped server start it once; each is answered.
        rids = [t.send_request("tools/call", {"name": "call_tool", "arguments": {
            "name": "ev3__echo", "arguments": {"message": f"m{i}"}}}) for i in range(10)]
        for i, rid in enumerate(rids):
            assert f"m{i}" in text_of(t.wait_response(rid, timeout=60))
        now = states(t)
        assert now["ev3"]["wakes"] == 1 and now["ev3"]["state"] == "ready" and now["ev3"]["restarts"] == 0
        assert sorted(n for n, s in now.items() if s["state"] != "idle") == ["ev3", "fm0"]
    finally:
        assert t.close() == 0


def test_idle_stop_loses_no_call_at_the_boundary(tmp_path):
    """Calls spaced about one idle_stop apart: many land while the server stops or restarts."""
    idle = 0.4
    t = started(Troupe(write_config(tmp_path, [everything("ev", idle_stop=idle)], mode="flat")))
    try:
        t.request("tools/list", timeout=30)
        wait_until(lambda: all_idle(t), 30, message="idle after learning")
        answered = 0
        for i in range(24):
            gap = idle * (0.8 + 0.1 * (i % 5))  # 0.32 … 0.56 s: before, at and after the stop
            deadline = time.monotonic() + gap
            rids = [t.send_request("tools/call", {"name": "ev__echo", "arguments": {"message": f"c{i}-{k}"}})
                    for k in range(3)]
            for k, rid in enumerate(rids):
                reply = t.wait_response(rid, timeout=30)
                assert f"c{i}-{k}" in text_of(reply), reply
                answered += 1
            while time.monotonic() < deadline:
                time.sleep(0.01)
        assert answered == 72
        wakes = states(t)["ev"]["wakes"]
        assert wakes >= 3, wakes  # it really stopped and started between calls
        wait_until(lambda: all_idle(t), 10, message="idle at the end")
        wait_until(lambda: not children_of(t.proc.pid), 10, message="its process gone")
    finally:
        assert t.close() == 0


def test_a_tool_changed_at_wake_is_withheld_and_a_gone_one_is_a_clear_error(tmp_path):
    state = tmp_path / "state"
    state.write_text("v1")
    cfg = write_config(tmp_path, [server("sh", "tests.servers.shifting", "--state", str(state),
                                         start="on_demand", idle_stop=60)], mode="flat")
    t = started(Troupe(cfg))
    try:
        names = {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
        assert {"sh__weather", "sh__gone_soon"} <= names
        wait_until(lambda: all_idle(t), 20, message="idle after learning")
        state.write_text("v2")  # the server is updated while it is stopped
        # Both calls are accepted on the kept lists, and wait for the same start.
        rids = [t.send_request("tools/call", {"name": name, "arguments": args})
                for name, args in (("sh__weather", {"city": "Oslo"}), ("sh__gone_soon", {}))]
        changed, gone = (t.wait_response(rid, timeout=30) for rid in rids)
        assert changed["result"]["isError"] and "withholds it" in text_of(changed), changed
        assert gone["result"]["isError"] and "no longer offered by server sh" in text_of(gone), gone
        later = t.call("sh__gone_soon", {}, timeout=30)  # once the catalogue has the new lists
        assert "sh__gone_soon" in str(later) and ("error" in later or later["result"].get("isError")), later
        names = {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
        assert "sh__weather" not in names and "sh__gone_soon" not in names  # changed: withheld; gone: gone
        assert states(t)["sh"]["wakes"] == 1
    finally:
        assert t.close() == 0


def test_a_crashing_on_demand_server_backs_off_as_a_permanent_one_does(tmp_path):
    restart = {"intensity": 2, "period": 60, "min_backoff": 0.1, "max_backoff": 0.2}
    servers = [server("od", "tests.servers.crash_on_start", start="on_demand", idle_stop=5, restart=restart),
               server("perm", "tests.servers.crash_on_start", restart=restart)]
    t = started(Troupe(write_config(tmp_path, servers, mode="flat")))
    try:
        wait_until(lambda: all(s["state"] == "failed" for s in states(t).values()), 30,
                   message="both circuits open")
        now = states(t)
        assert now["od"]["restarts"] == now["perm"]["restarts"] == 2
        assert "circuit open" in now["od"]["last_error"] and now["od"]["wakes"] == 0
    finally:
        assert t.close() == 0


def test_an_http_server_on_demand_opens_its_session_on_first_use_and_closes_it_when_idle(tmp_path):
    """server-everything over Streamable HTTP (a legacy-era server: it keeps sessions) says on its
    output each session it opens and each DELETE that ends one."""
    log = tmp_path / "everything-http.log"
    proc, port = start_with_port_retry(
        lambda port: ([peer_bin("mcp-server-everything"), "streamableHttp"], {"PORT": str(port)}), log)
    opened = lambda: log.read_text().count("Session initialized with ID")  # noqa: E731
    closed = lambda: log.read_text().count("Received session termination request")  # noqa: E731
    try:
        http = {"name": "web", "start": "on_demand", "idle_stop": 0.5, "transport": {
            "type": "streamable-http", "streamable_http": {"url": f"http://127.0.0.1:{port}/mcp"}}}
        t = started(Troupe(write_config(tmp_path, [http], mode="flat")))
        try:
            assert "web__echo" in {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
            wait_until(lambda: all_idle(t) and closed() == 1, 20, message="the learning session closed")
            assert opened() == 1 and states(t)["web"]["era"] == "legacy"
            assert "hi" in text_of(t.call("web__echo", {"message": "hi"}, timeout=30))
            assert opened() == 2 and closed() == 1  # a new session on first use
            wait_until(lambda: all_idle(t) and closed() == 2, 20, message="its session closed (DELETE) when idle")
            assert states(t)["web"]["wakes"] == 1
        finally:
            assert t.close() == 0
    finally:
        stop(proc)


def test_servers_found_in_client_configs_default_to_on_demand(tmp_path):
    """discovery.start: on_demand: servers imported from a client's config cost no process until used
    (and the health checker never starts one to probe it)."""
    import json

    import yaml

    from tests.support import PYTHON, ROOT
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    project.mkdir()
    entries = {f"cur{i}": {"command": PYTHON, "args": ["-m", "tests.servers.echo", "--name", f"c{i}"],
                           "cwd": str(ROOT)} for i in range(3)}
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": entries}))
    config = tmp_path / "troupe.yaml"
    config.write_text(yaml.safe_dump({"servers": [], "serve": {"mode": "flat", "startup_wait": 20}, "discovery": {
        "enabled": True, "start": "on_demand", "home": str(home), "project_root": str(project),
        "path_probe": {"enabled": False}, "health": {"first_check_delay": 0.2, "interval": 0.5}}}))
    t = started(Troupe(config))
    try:
        wait_until(lambda: len(states(t)) == 3 and all_idle(t), 30, message="discovered servers idle once listed")
        wait_until(lambda: not children_of(t.proc.pid), 10, message="no process for them")
        assert all(s["start"] == "on_demand" and s["wakes"] == 0 for s in states(t).values())
        names = {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
        assert {"cur0__echo", "cur1__echo", "cur2__echo"} <= names
        stays(lambda: not children_of(t.proc.pid), 1.5)  # three health intervals: a probe would start one
        assert all_idle(t)
        assert text_of(t.call("cur1__echo", {"text": "found"}, timeout=30)) == "found"
        now = states(t)
        assert now["cur1"]["wakes"] == 1 and now["cur0"]["state"] == now["cur2"]["state"] == "idle"
    finally:
        assert t.close() == 0


def test_a_modern_listen_on_an_idle_servers_resource_starts_it_and_keeps_it_up(tmp_path):
    """A subscription is a use: a 2026-07-28 client's listen stream following a resource of an idle
    on-demand server starts it, hears the resource's updates, and keeps it up until it closes."""
    import asyncio

    from mcp import Client
    from mcp.client.subscriptions import ResourceUpdated

    from tests.support.troupe import stdio_params
    config = write_config(tmp_path, [server("modern", "tests.servers.modern_only", pin=False, start="on_demand",
                                            idle_stop=0.5)], mode="flat")
    learn = started(Troupe(config))  # the first troupe learns its lists (and stops it)
    try:
        learn.request("tools/list", timeout=30)
        wait_until(lambda: all_idle(learn), 20, message="idle after learning")
    finally:
        assert learn.close() == 0

    async def scenario():
        async with Client(stdio_params(config)) as client:
            status = orjson.loads((await client.call_tool("core_status", {})).content[0].text)
            assert status["servers"][0]["state"] == "idle"
            async with client.listen(resource_subscriptions=["modern://doc"]) as sub:
                assert sub.honored.resource_subscriptions == ["modern://doc"]
                await client.call_tool("modern__touch", {"uri": "modern://doc"})
                while await asyncio.wait_for(sub.__anext__(), 20) != ResourceUpdated(uri="modern://doc"):
                    pass
                await asyncio.sleep(1.5)  # three idle_stops with the stream open
                status = orjson.loads((await client.call_tool("core_status", {})).content[0].text)
                assert status["servers"][0]["state"] == "ready", status["servers"][0]
            for _ in range(100):  # closed: it idles again (bounded poll)
                status = orjson.loads((await client.call_tool("core_status", {})).content[0].text)
                if status["servers"][0]["state"] == "idle":
                    break
                await asyncio.sleep(0.1)
            assert status["servers"][0]["state"] == "idle"
    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_a_read_a_prompt_and_a_completion_each_wake_an_idle_server(tmp_path):
    """Every first use starts it, not only a tool call: resources/read, prompts/get and
    completion/complete on the kept lists of an idle server-everything."""
    t = started(Troupe(write_config(tmp_path, [everything("ev", idle_stop=0.3)], mode="flat")))
    try:
        t.request("tools/list", timeout=30)
        uris = [r["uri"] for r in t.request("resources/list", timeout=30)["result"]["resources"]]
        prompts = {p["name"] for p in t.request("prompts/list", timeout=30)["result"]["prompts"]}
        assert uris and "ev__simple-prompt" in prompts
        uses = [("resources/read", {"uri": uris[0]}, "contents"),
                ("prompts/get", {"name": "ev__simple-prompt"}, "messages"),
                ("completion/complete", {"ref": {"type": "ref/prompt", "name": "ev__completable-prompt"},
                                         "argument": {"name": "department", "value": "Eng"}}, "completion")]
        for wakes, (method, params, key) in enumerate(uses, start=1):
            wait_until(lambda: all_idle(t) and not children_of(t.proc.pid), 20, message=f"idle before {method}")
            answer = t.request(method, params, timeout=30)
            assert key in answer.get("result", {}), answer
            assert states(t)["ev"]["wakes"] == wakes, method
    finally:
        assert t.close() == 0


@pytest.mark.slow  # a headless chromium
def test_the_dashboard_shows_idle_wakes_and_rss(http_troupe, browser):
    from tests.e2e.test_metrics import McpHttp, scrape, value
    t = http_troupe([server("od", "tests.servers.echo", idle_stop=0.5), server("up", "tests.servers.echo")],
                    mode="flat", json_response=True)
    page = browser.open(t.base + "/")
    cell = "document.querySelector('#servers tr[data-server=\"%s\"] td.where').innerText"
    wait_until(lambda: page.rows().get("od", ("",))[0] == "idle", 20, message="the page shows od idle")
    assert "on demand · 0 wakes" in page.js(cell % "od")
    wait_until(lambda: "MiB RSS" in page.js(cell % "up"), 20, message="a running server's RSS")
    assert "RSS in all" in page.text("#summary")
    client = McpHttp(t.url)
    try:
        assert client.call("od__echo", {"text": "hi"})["result"]["content"][0]["text"] == "hi"
    finally:
        client.close()
    wait_until(lambda: "1 wakes" in page.js(cell % "od") and page.rows()["od"][0] == "idle", 20,
               message="the page shows the wake, then idle again")
    events = page.text("#events")
    assert "woken by tools/call" in events and "idle; its lists stay served" in events
    metrics = scrape(t.base)
    assert value(metrics, "troupe_server_state", server="od", state="idle") == 1
    assert value(metrics, "troupe_server_wakes_total", server="od") == 1
    assert value(metrics, "troupe_server_rss_bytes", server="up") > 0
    assert value(metrics, "troupe_total_rss_bytes") > value(metrics, "troupe_process_rss_bytes") > 0
