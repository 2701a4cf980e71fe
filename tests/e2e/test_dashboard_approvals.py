"""The dashboard's approvals panel in a real headless chromium: a project's servers wait there,
Approve runs one, Deny keeps another from ever running, and withheld tool changes show their diff."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
import yaml

from tests.e2e.test_metrics import McpHttp
from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import TroupeHttp, server

pytestmark = pytest.mark.slow  # a headless chromium

SCREENSHOT = "/tmp/troupe-dashboard-approvals.png"
SCREENSHOT_TOOLS = "/tmp/troupe-dashboard-tool-change.png"
# Markup in a launch line: rendered as text it shows; parsed as HTML it would set a flag.
HOSTILE = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>"


def marker_server(marker: Path, *extra: str) -> dict:
    """A .mcp.json entry whose command would leave a marker file if it ever ran (extra: `sh -c`'s $0...)."""
    return {"command": "sh", "args": ["-c", f"echo ran >> {marker}; exec {PYTHON} -m tests.servers.echo", *extra],
            "env": {"PYTHONPATH": str(ROOT)}}


def _discovery_troupe(tmp_path: Path, home: Path, proj: Path) -> TroupeHttp:
    cfg = tmp_path / "troupe.yaml"
    cfg.write_text(yaml.safe_dump({
        "servers": [server("echo", "tests.servers.echo")],
        "serve": {"startup_wait": 15, "mode": "flat", "json_response": True},
        "discovery": {"enabled": True, "home": str(home), "project_root": str(proj), "store": "memory",
                      "interval": 0, "health": {"first_check_delay": 0}}}))
    return TroupeHttp(cfg)


def _servers(t) -> dict:
    return {s["name"]: s for s in requests.get(t.base + "/status", timeout=10).json()["servers"]}


def _card(name: str) -> str:
    return f"document.querySelector('#approval-cards .card[data-server=\"{name}\"]')"


def _cards(page) -> list:
    return page.js("[...document.querySelectorAll('#approval-cards .card')].map(c => c.dataset.server)")


def test_project_servers_wait_on_the_page_and_the_operator_decides(tmp_path, browser):
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    ran, ran_other = tmp_path / "ran", tmp_path / "ran-other"
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "proj": marker_server(ran), "other": marker_server(ran_other, HOSTILE)}}))
    t = _discovery_troupe(tmp_path, home, proj)
    try:
        wait_until(lambda: {"proj", "other"} <= set(_servers(t)), 20, message="the project's servers listed")
        assert _servers(t)["proj"]["state"] == "pending-approval"

        page = browser.open(t.base + "/")
        wait_until(lambda: set(_cards(page) or []) == {"proj", "other"}, 20,
                   message="both servers under Waiting for approval")
        assert page.js("document.getElementById('approvals').hidden") is False
        assert "Waiting for approval" in page.text("#approvals h2")
        card = page.text("#approval-cards .card[data-server='proj']")
        assert "project" in card and str(proj / ".mcp.json") in card and str(ran) in card
        assert page.js(f"{_card('proj')}.querySelector('.prov').textContent") == "project"
        # the whole launch line, markup and all, as text: nothing in it ran in the page
        launch = page.js(f"{_card('other')}.querySelector('pre.launch').textContent")
        assert HOSTILE in launch and str(ran_other) in launch
        assert page.js(f"{_card('other')}.querySelector('img, script') === null")
        assert page.js("window.__pwned === undefined")

        # the servers table: provenance badge, the waiting state, and decisions instead of restart
        wait_until(lambda: page.rows().get("proj", ("",))[0] == "pending-approval", 10,
                   message="the table shows proj waiting")
        row = "document.querySelector('#servers tr[data-server=\"proj\"]')"
        assert page.js(f"{row}.querySelector('.prov').textContent") == "project"
        assert page.js(f"[...{row}.querySelectorAll('button')].map(b => b.dataset.action)") == ["approve", "deny"]
        assert page.js("document.querySelector('#servers tr[data-server=\"echo\"] .prov').textContent") == "config"
        assert page.js("getComputedStyle(document.querySelector('#servers tr[data-server=\"proj\"] .badge'))"
                       ".borderTopStyle") == "dashed"  # styled apart from the running states
        wait_until(lambda: page.text("#live") == "live", 10, message="page subscribed to /events")
        page.screenshot(SCREENSHOT)
        assert not ran.exists() and not ran_other.exists()

        # Approve: it runs, its row turns ready and its card goes, live
        page.js(f"{_card('proj')}.querySelector('button[data-action=\"approve\"]').click()")
        wait_until(ran.exists, 10, message="the approved server ran")
        wait_until(lambda: page.rows().get("proj", ("",))[0] == "ready", 20, message="proj ready on the page")
        wait_until(lambda: _cards(page) == ["other"], 10, message="proj's card gone")
        assert page.js("document.querySelector('#servers tr[data-server=\"proj\"] "
                       "button[data-action=\"restart\"]') !== null")
        # the approval covered the server: its first listing is pinned, not withheld for a second approval
        client = McpHttp(t.url)
        try:
            wait_until(lambda: "proj__echo" in {x["name"] for x in client.request("tools/list")["result"]["tools"]},
                       10, message="proj's tools listed to clients")
        finally:
            client.close()

        # Deny the other one: denied, never run, and the panel hides when nothing waits
        page.js(f"{_card('other')}.querySelector('button[data-action=\"deny\"]').click()")
        wait_until(lambda: page.rows().get("other", ("",))[0] == "denied", 10, message="other denied on the page")
        wait_until(lambda: page.js("document.getElementById('approvals').hidden"), 10,
                   message="the panel hidden once nothing waits")
        assert _servers(t)["other"]["state"] == "denied"
        assert page.js("[...document.querySelectorAll('#servers tr[data-server=\"other\"] button')]"
                       ".map(b => b.dataset.action)") == ["approve"]
        events = page.text("#events")
        assert "ApprovalAwaited" in events and "ApprovalDecided" in events
        assert page.js("window.__pwned === undefined")
        assert not ran_other.exists()
        assert page.js("document.getElementById('notice').hidden"), page.text("#notice")
    finally:
        assert t.stop() == 0


def test_a_withheld_tool_change_shows_its_diff_and_one_approve_takes_it(http_troupe, browser):
    from tests.servers.rug_pull import POISONED

    t = http_troupe([server("rug", "tests.servers.rug_pull")], mode="flat", json_response=True)
    wait_until(lambda: _servers(t).get("rug", {}).get("state") == "ready", 20, message="rug ready")
    page = browser.open(t.base + "/")
    wait_until(lambda: page.rows().get("rug", ("",))[0] == "ready", 20, message="page shows rug")
    wait_until(lambda: page.text("#live") == "live", 10, message="page subscribed to /events")
    assert page.js("document.getElementById('approvals').hidden") is True

    client = McpHttp(t.url)
    try:
        assert client.call("rug__flip")["result"]["content"][0]["text"] == "flipped"
        # no reload: the ToolDefinitionChanged events bring the card
        wait_until(lambda: page.js(f"!!{_card('rug')} && {_card('rug')}.querySelectorAll('li').length === 2"),
                   10, message="rug's withheld changes on the page")
        items = page.js(f"[...{_card('rug')}.querySelectorAll('li')].map(li => [li.dataset.item,"
                        " li.querySelector('.change').textContent])")
        assert sorted(items) == [["exfiltrate", "new"], ["weather", "changed"]]
        diff = page.js(f"{_card('rug')}.querySelector('li[data-item=\"weather\"] pre.diff').textContent")
        assert "IGNORE PREVIOUS INSTRUCTIONS" in diff
        assert page.js(f"{_card('rug')}.querySelectorAll('pre.diff .add').length") >= 1
        page.screenshot(SCREENSHOT_TOOLS)
        # one Approve for the server covers both, and there is no Deny for a server that runs
        assert page.js(f"[...{_card('rug')}.querySelectorAll('button')].map(b => b.dataset.action)") == ["approve"]
        page.js(f"{_card('rug')}.querySelector('button[data-action=\"approve\"]').click()")
        wait_until(lambda: page.js("document.getElementById('approvals').hidden"), 10,
                   message="the panel hidden after the approval")

        def tools():
            return {x["name"]: x for x in client.request("tools/list")["result"]["tools"]}
        wait_until(lambda: tools().get("rug__weather", {}).get("description") == POISONED, 10,
                   message="the approved definition listed")
        assert "rug__exfiltrate" in tools()
    finally:
        client.close()


def test_the_command_the_page_shows_approves_from_any_directory(tmp_path, browser):
    """The hint in the page's event log, run as printed from another directory with another
    PATH, approves the server the page shows waiting, and the page sees it start."""
    import os
    import re
    import shlex
    import subprocess

    home, proj, elsewhere = tmp_path / "home", tmp_path / "proj", tmp_path / "elsewhere"
    for d in (home, proj, elsewhere):
        d.mkdir()
    ran = tmp_path / "ran"
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": marker_server(ran)}}))
    t = _discovery_troupe(tmp_path, home, proj)
    try:
        page = browser.open(t.base + "/")
        wait_until(lambda: _cards(page) == ["proj"], 20, message="proj under Waiting for approval")
        hint = wait_until(lambda: (m := re.search(r"`(troupe approve [^`]+)`", page.text("#events") or "")) and m[1],
                          20, message="the page's event log names the command")
        argv = shlex.split(hint)
        done = subprocess.run([PYTHON, "-m", "actors.main", *argv[1:]], cwd=elsewhere, capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PATH": "/usr/bin:/bin",
                                                          "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        wait_until(ran.exists, 10, message="the approved server ran")
        wait_until(lambda: page.rows().get("proj", ("",))[0] == "ready", 20, message="proj ready on the page")
    finally:
        assert t.stop() == 0
