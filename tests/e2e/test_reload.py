"""Config reload without restart: on a file change or SIGHUP; unchanged servers keep their calls."""
from __future__ import annotations

import json
import os
import signal
import threading

import pytest
import requests

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.troupe import TroupeHttp, server, write_config

ECHO = "tests.servers.echo"
SECRET = "env-s3cret-value"


@pytest.fixture
def troupe(tmp_path):
    started = []

    def make(servers):
        t = TroupeHttp(write(tmp_path, servers))
        started.append(t)
        return t
    yield make
    for t in started:
        assert t.stop() == 0


def write(tmp_path, servers):
    return write_config(tmp_path, servers, mode="flat", json_response=True)


def servers_of(t) -> dict:
    return {s["name"]: s for s in requests.get(t.base + "/status", timeout=10).json()["servers"]}


def settled(t, names: set) -> dict | None:
    """The servers when exactly `names` are configured and all of them are ready."""
    now = servers_of(t)
    return now if set(now) == names and all(s["state"] == "ready" for s in now.values()) else None


def test_reload_adds_changes_and_removes_while_a_call_is_in_flight(troupe, tmp_path):
    t = troupe([server("keep", ECHO, "--name", "keep"), server("change", ECHO, "--name", "change"),
                server("drop", ECHO, "--name", "drop"), server("timed", ECHO, "--name", "timed")])
    before = wait_until(lambda: settled(t, {"keep", "change", "drop", "timed"}), 20, message="all ready")

    outcome = {}
    calling = threading.Thread(target=lambda: outcome.update(
        reply=McpHttp(t.url).call("keep__sleep", {"seconds": 5})), daemon=True)
    calling.start()
    wait_until(lambda: servers_of(t)["keep"]["in_flight"] == 1, 10, message="a call in flight on keep")

    changed = server("change", ECHO, "--name", "change")
    changed["transport"]["stdio"]["env"] = {"TROUPE_TEST_MARK": SECRET}  # env changed
    write(tmp_path, [server("keep", ECHO, "--name", "keep"), changed,
                     server("timed", ECHO, "--name", "timed", timeout=12.5),  # only the timeout changed
                     server("added", ECHO, "--name", "added")])
    after = wait_until(lambda: (now := settled(t, {"keep", "change", "timed", "added"}))
                       and now["change"]["pid"] != before["change"]["pid"]
                       and now["timed"]["pid"] != before["timed"]["pid"] and now, 20, interval=0.05,
                       message="added started, drop stopped, change and timed restarted")
    # The unchanged server was never touched: same process, no restart, its call still running.
    assert after["keep"]["pid"] == before["keep"]["pid"] and after["keep"]["restarts"] == 0
    assert after["keep"]["since"] == before["keep"]["since"]
    assert after["keep"]["in_flight"] == 1 and calling.is_alive()
    calling.join(20)
    assert outcome["reply"]["result"]["content"][0]["text"] == "slept"
    assert servers_of(t)["keep"]["calls"] == 1

    client = McpHttp(t.url)
    names = {tool["name"] for tool in client.request("tools/list")["result"]["tools"]}
    assert {"keep__echo", "change__echo", "added__echo"} <= names and "drop__echo" not in names
    assert client.call("added__echo", {"text": "hi"})["result"]["content"][0]["text"] == "hi"
    events = json.loads(client.call("core_events", {"limit": 200})["result"]["content"][0]["text"])["events"]
    reloads = [e for e in events if e["type"] == "ConfigReloaded"]
    assert reloads and reloads[-1]["added"] == ["added"] and reloads[-1]["removed"] == ["drop"]
    assert sorted(reloads[-1]["changed"]) == ["change", "timed"]
    log = "".join(t.stderr)
    assert "config reloaded" in log and SECRET not in log


def test_bad_config_is_rejected_with_every_problem_and_sighup_reloads(troupe, tmp_path):
    t = troupe([server("keep", ECHO, "--name", "aaaa")])
    before = wait_until(lambda: settled(t, {"keep"}), 20, message="ready")
    path = tmp_path / "troupe.yaml"
    good = path.read_text()

    path.write_text("servers:\n  - name: keep\n    transport: {type: carrier-pigeon}\n  - name: 7 7\n"
                    "    transport: {type: stdio}\nserve: {port: high}\n")
    wait_until(lambda: "config reload rejected" in "".join(t.stderr), 10, message="rejection logged")
    wait_until(lambda: "serve.port" in "".join(t.stderr), 5, message="every problem logged")
    log = "".join(t.stderr)
    assert f"{path}:3: servers[0].transport.type" in log and f"{path}:4: servers[1].name" in log
    assert f"{path}:6: serve.port" in log
    assert servers_of(t)["keep"]["pid"] == before["keep"]["pid"]  # kept running on the old config

    # Back to the good file: nothing to do (same servers), keep is untouched.
    path.write_text(good)
    wait_until(lambda: "".join(t.stderr).count("config file") >= 2, 10, message="second change seen")
    assert servers_of(t)["keep"]["pid"] == before["keep"]["pid"]

    # A same-size edit with the old mtime: the poller cannot see it, SIGHUP applies it.
    edited = good.replace("aaaa", "bbbb")
    assert len(edited) == len(good) and edited != good
    st = os.stat(path)
    with open(path, "r+") as f:
        f.write(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    seen_changes = "".join(t.stderr).count("config file")
    t.proc.send_signal(signal.SIGHUP)
    after = wait_until(lambda: (now := settled(t, {"keep"})) and now["keep"]["pid"] != before["keep"]["pid"]
                       and now, 20, message="SIGHUP restarted the changed server")
    assert after["keep"]["launch"]["args"][-1] == "bbbb"
    assert "".join(t.stderr).count("config file") == seen_changes  # the signal did it, not the poller
    assert t.proc.poll() is None


def test_a_server_disabled_from_the_dashboard_stays_disabled_across_unrelated_edits(troupe, tmp_path):
    t = troupe([server("quiet", ECHO, "--name", "quiet"), server("other", ECHO, "--name", "other")])
    wait_until(lambda: settled(t, {"quiet", "other"}), 20, message="ready")
    assert requests.post(t.base + "/api/servers/quiet/disable", headers={"Origin": t.base}, timeout=10).status_code == 200
    write(tmp_path, [server("quiet", ECHO, "--name", "quiet"), server("other", ECHO, "--name", "other"),
                     server("new", ECHO, "--name", "new")])
    now = wait_until(lambda: (s := servers_of(t)).get("new", {}).get("state") == "ready" and s, 20,
                     message="new server started")
    assert now["quiet"]["state"] == "stopped" and now["quiet"]["enabled"] is False
    # Its own entry changing in the file is an instruction: it is applied (and starts it).
    write(tmp_path, [server("quiet", ECHO, "--name", "quiet2"), server("other", ECHO, "--name", "other"),
                     server("new", ECHO, "--name", "new")])
    wait_until(lambda: servers_of(t)["quiet"]["state"] == "ready", 20, message="quiet started by its edit")
