"""troupe's own names are troupe's (issue 25, item 7): an unprefixed upstream listing `core_status`,
`call_tool` and `list_tools` gets them renamed in both modes, troupe's tools answer under those
names, the upstream's answer under their new ones, and the collisions show in the status report."""
from __future__ import annotations

from collections import Counter

import pytest
import requests

from tests.servers.impostor import IMPOSTORS
from tests.support import wait_until
from tests.support.troupe import Troupe, TroupeHttp, json_of, server, text_of, write_config


@pytest.fixture
def impostor_troupe(tmp_path):
    """troupe over stdio in `mode` with the impostor server as its one unprefixed backend (flat
    mode's passthrough server), initialized."""
    started: list[Troupe] = []

    def start(mode: str) -> Troupe:
        t = Troupe(write_config(tmp_path, [server("imp", "tests.servers.impostor", prefix="")], mode=mode))
        started.append(t)
        t.initialize()
        return t

    yield start
    for t in started:
        t.close()


def _renamed(status: dict) -> dict[str, str]:
    """original → new name, read from the status report's collision lines."""
    out = {}
    for line in status["collisions"]:
        for name in IMPOSTORS:
            if line.startswith(f"tool '{name}' of imp renamed '") and "troupe's own tool keeps it" in line:
                out[name] = line.split("renamed '", 1)[1].split("'", 1)[0]
    return out


def _is_troupes_status(response: dict) -> bool:
    report = json_of(response)
    return isinstance(report, dict) and {"ready", "servers", "collisions"} <= set(report)


@pytest.mark.parametrize("mode", ["flat", "meta"])
def test_upstream_tools_named_like_troupes_own_are_renamed(impostor_troupe, mode):
    t = impostor_troupe(mode)
    listed = [tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]]
    counts = Counter(listed)
    assert all(n == 1 for n in counts.values()), counts  # nothing listed twice
    if mode == "meta":  # the meta-tools alone: the core tools are listed by list_tools
        assert {"call_tool", "list_tools"} <= set(listed) and len(listed) == 11
    else:
        assert counts["core_status"] == 1

    status = t.status()  # tools/call core_status: troupe's own report, not "impostor:core_status"
    renamed = _renamed(status)
    assert set(renamed) == set(IMPOSTORS), status["collisions"]
    for original, new in renamed.items():
        assert new != original and new.startswith(original + "_")

    if mode == "flat":
        server_tools = set(listed)
        assert set(renamed.values()) <= server_tools and "call_tool" not in server_tools
        for original, new in renamed.items():  # the upstream's, under its new name
            assert text_of(t.call(new)) == f"impostor:{original}"
        # flat mode passes unlisted names to its one unprefixed server, but never troupe's own names
        for name in ("call_tool", "list_tools"):
            error = t.call(name)["error"]
            assert "meta-tool" in error["message"] and renamed[name] in error["message"]
        assert _is_troupes_status(t.call("core_status"))
        assert "error" in t.call("not_listed")  # passed through: the server answers it does not know it
    else:
        listing = json_of(t.call("list_tools", {"limit": 1000}))
        upstream = {tool["name"]: tool["server"] for tool in listing["tools"]}
        assert {renamed[n]: "imp" for n in IMPOSTORS}.items() <= upstream.items()
        assert not {name for name, owner in upstream.items() if owner == "imp"} & set(IMPOSTORS)
        assert upstream["core_status"] == "(troupe)"  # troupe's own, listed once, marked as troupe's
        described = json_of(t.call("describe_tool", {"name": "core_status"}))
        assert described["server"] == "(troupe)" and described["original_name"] == "core_status"
        assert "status report" in described["tool"]["description"]
        upstream_one = json_of(t.call("describe_tool", {"name": renamed["core_status"]}))
        assert upstream_one["server"] == "imp" and upstream_one["original_name"] == "core_status"
        for original, new in renamed.items():
            answer = t.call("call_tool", {"name": new})
            assert text_of(answer) == f"impostor:{original}"
        assert _is_troupes_status(t.call("call_tool", {"name": "core_status"}))
        nested = t.call("call_tool", {"name": "list_tools"})["result"]
        assert nested["isError"] is True and "meta-tool" in nested["content"][0]["text"]
        assert text_of(t.call("list_tools", {"limit": 1})).startswith("{")  # troupe's own answers

    # Exactly the calls made under the new names reached the server (flat mode adds not_listed).
    asked = t.call("received") if mode == "flat" else t.call("call_tool", {"name": "received"})
    received = text_of(asked).split(",")
    expected = sorted(list(IMPOSTORS) + (["not_listed"] if mode == "flat" else []))
    assert sorted(received) == expected


def test_the_collisions_show_in_status_over_http(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [server("imp", "tests.servers.impostor", prefix="")], mode="meta"))
    try:
        def collisions():
            return requests.get(t.base + "/status", timeout=10).json()["collisions"]
        wait_until(lambda: len(_renamed({"collisions": collisions()})) == 3, 20, message="collisions in /status")
        assert all("troupe's own tool keeps it" in line for line in collisions())
    finally:
        assert t.stop() == 0
