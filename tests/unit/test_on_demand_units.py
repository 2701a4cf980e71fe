"""Servers on demand, the pure parts: `start:`/`idle_stop:`/`discovery.start` parsing, the kept
listing in the approvals file and its snapshot, when a Session's call waits for a start, what a
woken server's call is refused for, and the RSS figures read from /proc."""
from __future__ import annotations

import subprocess
import sys
from types import MappingProxyType

import orjson
import pytest

from actors.catalogue.snapshot import Catalogue, Entry, Withheld
from actors.discovery import settings as discovery_settings
from actors.downstream import waking
from actors.messages import UpstreamError
from actors.settings import config
from actors.settings.model import ServerConfig, StdioSpec
from actors.supervision import memory
from actors.supervision.directory import Directory, ServerView
from actors.supervision.states import ServerState
from actors.trust import ledger
from tests.support import wait_until

ENTRY = "servers:\n  - name: a\n    transport: {type: stdio, stdio: {command: x}}\n"


def load(tmp_path, extra: str):
    path = tmp_path / "c.yaml"
    path.write_text(ENTRY.replace("    transport", extra + "    transport"))
    return path, config.load(path).servers[0]


def test_start_defaults_to_always_and_idle_stop_alone_implies_on_demand(tmp_path):
    _, plain = load(tmp_path, "")
    assert (plain.start, plain.on_demand, plain.idle_stop) == ("always", False, 300.0)
    _, od = load(tmp_path, "    start: on_demand\n")
    assert (od.on_demand, od.idle_stop) == (True, 300.0)
    _, implied = load(tmp_path, "    idle_stop: 45\n")
    assert (implied.start, implied.idle_stop) == ("on_demand", 45.0)


@pytest.mark.parametrize("extra, problem", [
    ("    start: lazily\n", "servers[0].start: 'lazily' is not one of always, on_demand"),
    ("    idle_stop: 0\n", "servers[0].idle_stop: must be > 0 seconds, got 0"),
    ("    idle_stop: soon\n", "servers[0].idle_stop: must be > 0 seconds, got 'soon'"),
    ("    start: always\n    idle_stop: 5\n", "servers[0].idle_stop: is for `start: on_demand` servers"),
])
def test_bad_start_settings_are_clear_errors_naming_file_and_line(tmp_path, extra, problem):
    path = tmp_path / "c.yaml"
    path.write_text(ENTRY.replace("    transport", extra + "    transport"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert problem in "\n".join(err.value.problems) and str(path) in "\n".join(err.value.problems)


def test_discovery_start_is_checked():
    discovery_settings.parse({"start": "on_demand"}, home="/tmp", project_root="/tmp")
    with pytest.raises(ValueError, match="discovery.start: 'sometimes'"):
        discovery_settings.parse({"start": "sometimes"}, home="/tmp", project_root="/tmp")


def test_a_kept_listing_survives_the_file_and_encodes_as_the_registry_does():
    data: dict = {"servers": {}}
    listing = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "resources": [], "templates": [],
               "prompts": [], "capabilities": {"tools": {}}, "instructions": "hi"}
    ledger.keep_listing(data, "stdio:x", "a", listing)
    written = orjson.loads(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))  # as the file holds it
    kept = ledger.snapshot(written, 1).listings["stdio:x"]
    assert orjson.loads(kept) == listing  # the time it was kept is not part of what is compared
    assert kept == orjson.dumps(listing, option=orjson.OPT_SORT_KEYS)  # unchanged: not kept again


@pytest.mark.parametrize("damage", [
    {"tools": "not a list"}, {"tools": ["a string, not a tool"]}, {"prompts": {"p": 1}},
    {"capabilities": ["tools"]}, {"instructions": {"text": "x"}},
])
def test_a_kept_listing_damaged_in_the_file_is_not_served(damage):
    data: dict = {"servers": {}}
    good = {"tools": [{"name": "t"}], "resources": [], "templates": [], "prompts": [], "capabilities": {},
            "instructions": ""}
    ledger.keep_listing(data, "stdio:good", "good", good)
    ledger.keep_listing(data, "stdio:bad", "bad", {**good, **damage})
    data["servers"]["stdio:raw"] = {"name": "raw", "listing": "not an object"}
    kept = ledger.snapshot(data, 1).listings
    assert set(kept) == {"stdio:good"}  # the damaged ones are learned again at start; the rest stand


def view(state: ServerState, on_demand: bool = True, ref=None) -> ServerView:
    cfg = ServerConfig("a", "stdio", stdio=StdioSpec("x"), start="on_demand" if on_demand else "always")
    return ServerView("a", cfg, state, "", ref, 1, True, (1, 0, 0))


def test_which_calls_wait_for_a_start():
    assert waking.waits(view(ServerState.IDLE), 0) and waking.waits(view(ServerState.STARTING), 0)
    assert not waking.waits(view(ServerState.BACKOFF), 0)  # answered at once, as for any server
    assert not waking.waits(view(ServerState.IDLE, on_demand=False), 0)
    assert not waking.waits(view(ServerState.IDLE), waking.MAX_WAKES)
    unsent = UpstreamError(-32000, "stopping", link_lost=True, link="unsent")
    assert waking.resent(view(ServerState.READY), unsent, 0)
    assert not waking.resent(view(ServerState.READY), UpstreamError(-32000, "lost", link_lost=True), 0)


def test_the_wait_wakes_an_idle_server_and_ends_when_another_connection_is_up():
    states = iter([view(ServerState.IDLE), view(ServerState.STARTING), view(ServerState.READY, ref="dead"),
                   view(ServerState.READY, ref="new")])
    current = {"v": next(states)}
    woken, reported = [], []

    def directory():
        v = current["v"]
        current["v"] = next(states, v)
        return Directory(1, MappingProxyType({"a": v}))
    waking.wait_for_start("a", directory, lambda: None, "dead", lambda: woken.append(1), lambda: reported.append(1))
    assert woken == [1] and reported == [1]


def test_a_woken_servers_call_is_refused_only_for_a_tool_gone_or_withheld():
    kept = Entry("a__t", "a", "t", MappingProxyType({"name": "a__t"}))
    held = Withheld("a__w", "a", "w", "tools")
    cat = Catalogue(tools=(kept,), withheld=MappingProxyType({("tools", "a__w"): held}))
    assert waking.gone_tool(cat, "a", "tools/call", {"name": "t"}, None) is None
    assert "withholds it" in (waking.gone_tool(cat, "a", "tools/call", {"name": "w"}, None) or "")
    assert "no longer offered by server a" in (waking.gone_tool(cat, "a", "tools/call", {"name": "x"}, None) or "")
    assert waking.gone_tool(cat, "a", "resources/read", {"uri": "u"}, None) is None
    assert waking.gone_tool(cat, "a", "tools/call", {"name": "x"}, "a") is None  # the passthrough server


def fake_proc(root, pid: int, ppid: int, pgrp: int, pages: int, state: str = "S") -> None:
    (root / str(pid)).mkdir()
    rest = [state, str(ppid), str(pgrp)] + ["0"] * 18 + [str(pages)] + ["0"] * 5
    (root / str(pid) / "stat").write_text(f"{pid} (some name) " + " ".join(rest))


def test_rss_of_troupe_its_children_and_each_servers_process_group(tmp_path):
    fake_proc(tmp_path, 100, 1, 100, 10)  # troupe
    fake_proc(tmp_path, 200, 100, 200, 20)  # a server (its own group)
    fake_proc(tmp_path, 201, 200, 200, 30)  # the runtime its launcher started
    fake_proc(tmp_path, 300, 100, 300, 40)  # another server
    fake_proc(tmp_path, 301, 300, 300, 99, state="Z")  # a zombie holds nothing
    fake_proc(tmp_path, 400, 1, 400, 1000)  # not ours
    found = memory.usage((200, 300), me=100, proc=str(tmp_path))
    page = memory.PAGE
    assert found == {"troupe": 10 * page, "children": 90 * page, "total": 100 * page,
                     "groups": {200: 50 * page, 300: 40 * page}}


def test_the_status_report_gains_rss_per_running_server_and_in_all():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             start_new_session=True)  # a server as troupe starts one: its own group
    try:
        servers: list[dict] = [{"name": "up", "pid": child.pid}, {"name": "idle", "pid": None}]
        report: dict = {"servers": servers}

        def annotated() -> bool:  # a process just exec'd may show no pages yet on a busy machine
            memory.annotate(report)
            return bool(servers[0]["rss_bytes"])
        wait_until(annotated, 10, message="the child's pages counted")
        assert servers[0]["rss_bytes"] > 0 and servers[1]["rss_bytes"] is None
        mem = report["memory"]
        assert mem["total_rss_bytes"] == mem["troupe_rss_bytes"] + mem["children_rss_bytes"]
        assert mem["children_rss_bytes"] >= servers[0]["rss_bytes"]
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


def status_entry(name: str, state: str, **extra) -> dict:
    return {"name": name, "state": state, "since": 0, "transport": "stdio", "pid": None, "tools": 3,
            "resources": 0, "prompts": 0, "in_flight": 0, "restarts": 0, "start": "always", **extra}


def test_troupe_status_prints_rss_wakes_and_the_memory_line():
    from actors.commands import render_table
    report = {"ready": True, "mode": "flat", "servers": [
        status_entry("od", "idle", start="on_demand", wakes=2, idle_stop=60),
        status_entry("up", "ready", pid=42, rss_bytes=50 * 1048576)],
        "memory": {"total_rss_bytes": 120 * 1048576, "troupe_rss_bytes": 70 * 1048576,
                   "children_rss_bytes": 50 * 1048576}}
    table = render_table(report)
    head, od, up = table.splitlines()[1:4]
    assert "RSS" in head and "WAKES" in head
    assert od.split()[1] == "idle" and " 2 " in od and "50.0M" in up
    assert "memory: 120.0M RSS in all (troupe 70.0M, servers 50.0M); 1 on-demand server(s) idle" in table


def test_metrics_say_idle_wakes_and_rss():
    from actors.serve import metrics
    servers = [status_entry("od", "idle", start="on_demand", wakes=2), status_entry("up", "ready", rss_bytes=1000)]
    families = {f.name: f for f in metrics._servers(servers)}
    state = {(s.labels["server"], s.labels["state"]): s.value for s in families["troupe_server_state"].samples}
    assert state[("od", "idle")] == 1 and state[("up", "idle")] == 0
    assert [(s.labels["server"], s.value) for s in families["troupe_server_wakes"].samples
            if s.name.endswith("_total")] == [("od", 2)]
    assert [(s.labels["server"], s.value) for s in families["troupe_server_rss_bytes"].samples] == [("up", 1000)]
    top = {f.name: f.samples[0].value for f in metrics._troupe({"servers": servers, "memory": {
        "troupe_rss_bytes": 1, "children_rss_bytes": 2, "total_rss_bytes": 3}}) if f.samples}
    assert (top["troupe_process_rss_bytes"], top["troupe_children_rss_bytes"], top["troupe_total_rss_bytes"]) == \
        (1, 2, 3)
