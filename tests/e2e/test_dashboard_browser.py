"""The dashboard in a real headless chromium: lists servers, follows a killed backend live, actions, token."""
from __future__ import annotations

import json
import os
import signal

import pytest
import requests

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # a headless chromium

SCREENSHOT = "/tmp/troupe-dashboard.png"
TRAFFIC_SCREENSHOT = "/tmp/troupe-traffic.png"


def _status(t, **headers) -> dict:
    return requests.get(t.base + "/status", headers=headers, timeout=10).json()


def _pid(t, name: str) -> int | None:
    return next(s["pid"] for s in _status(t)["servers"] if s["name"] == name)


# Records every state the row of `name` shows, so a short backoff cannot slip between two looks.
WATCH = """(() => {
  window.__seen = [];
  const look = () => {
    const row = document.querySelector('#servers tr[data-server="%s"]');
    const state = row && row.querySelector('.badge').textContent;
    if (state && window.__seen[window.__seen.length - 1] !== state) window.__seen.push(state);
  };
  new MutationObserver(look).observe(document.getElementById('servers'),
                                     {subtree: true, childList: true, characterData: true});
  look();
  window.__loadedOnce = 'yes';
  return true;
})()"""


def test_dashboard_lists_servers_and_follows_a_killed_backend_live(http_troupe, browser):
    slow_restart = {"restart": {"min_backoff": 1.0, "max_backoff": 1.0}}
    t = http_troupe([server("alpha", "tests.servers.echo"),
                     server("beta", "tests.servers.echo", "--name", "beta", **slow_restart),
                     server("broken", "tests.servers.crash_on_start")], mode="flat", json_response=True)
    wait_until(lambda: _status(t)["ready"], 20, message="troupe ready")
    page = browser.open(t.base + "/")
    wait_until(lambda: page.rows().get("beta", ("",))[0] == "ready"
               and page.rows().get("alpha", ("",))[0] == "ready", 20, message="page lists alpha and beta ready")
    assert set(page.rows()) == {"alpha", "beta", "broken"}
    assert page.rows()["broken"][0] in ("backoff", "failed", "starting")
    wait_until(lambda: page.text("#live") == "live", 10, message="page subscribed to /events")
    assert "Discovery is off" in page.text("#discovery")
    assert "ServerStateChanged" in page.text("#events")
    assert page.js(WATCH % "beta")

    client = McpHttp(t.url)
    for i in range(5):
        client.call("alpha__echo", {"text": str(i)})
    client.call("beta__add", {"a": 1, "b": 2})
    client.close()

    old_pid = _pid(t, "beta")
    os.kill(old_pid, signal.SIGKILL)
    # The page shows beta leave ready and come back, with no reload (the marker survives).
    wait_until(lambda: page.js("window.__seen.length > 2 && window.__seen[window.__seen.length - 1] === 'ready'"),
               20, interval=0.1, message="page shows beta go down and come back")
    seen = page.js("window.__seen")
    assert seen[0] == "ready" and any(s in ("backoff", "starting") for s in seen[1:-1]), seen
    assert page.js("window.__loadedOnce") == "yes", "the page reloaded"
    assert _pid(t, "beta") not in (None, old_pid)
    wait_until(lambda: page.rows()["beta"][1] == "1", 10, message="restart count shown")
    events = page.text("#events")
    assert "ServerDisconnected" in events and "beta" in events
    assert page.rows()["alpha"][0] == "ready"
    assert page.rows()["alpha"][2] == "5"  # counters came with the refresh the events triggered

    # Actions go through the same supervisor operations as the core_service_* tools.
    page.js("document.querySelector('#servers tr[data-server=\"alpha\"] button[data-action=\"disable\"]').click()")
    wait_until(lambda: page.rows()["alpha"][0] == "stopped", 10, message="alpha disabled from the page")
    assert next(s for s in _status(t)["servers"] if s["name"] == "alpha")["enabled"] is False
    enable = "document.querySelector('#servers tr[data-server=\"alpha\"] button[data-action=\"enable\"]')"
    wait_until(lambda: page.js(f"!!{enable}"), 10, message="Enable offered for the disabled server")
    page.js(f"{enable}.click()")
    wait_until(lambda: page.rows()["alpha"][0] == "ready", 20, message="alpha enabled again from the page")
    assert page.js("window.__loadedOnce") == "yes"
    wait_until(lambda: page.js("!!document.querySelector('#servers tr[data-server=\"alpha\"] "
                               "button[data-action=\"disable\"]')"), 10, message="report refreshed")
    try:  # cosmetic: let the change flashes fade before the picture (broken keeps flashing)
        wait_until(lambda: not page.js("!!document.querySelector('tr.changed')"), 3, interval=0.1)
    except AssertionError:
        pass
    page.screenshot(SCREENSHOT)


def test_dashboard_routes_and_token(http_troupe, browser):
    token = "dash-s3cret"
    t = http_troupe([server("echo", "tests.servers.echo")], auth_token=token)
    auth = {"Authorization": f"Bearer {token}"}
    wait_until(lambda: _status(t, **auth)["ready"], 20, message="ready")

    page_resp = requests.get(t.base + "/", timeout=10)  # the page holds no data: no token needed
    assert page_resp.status_code == 200 and page_resp.headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in page_resp.headers["Content-Security-Policy"]
    assert "ServerStateChanged" in page_resp.text  # event names the page listens for
    for asset, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        r = requests.get(f"{t.base}/dashboard/{asset}", timeout=10)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith(kind)
    assert requests.get(t.base + "/dashboard/..%2Fsetup.cfg", timeout=10).status_code == 404
    assert requests.get(t.base + "/dashboard/index.htm", timeout=10).status_code == 404

    assert requests.get(t.base + "/status", timeout=10).status_code == 401
    assert requests.get(t.base + "/metrics", timeout=10).status_code == 401
    assert requests.post(t.base + "/api/servers/echo/restart", headers={"Origin": t.base}, timeout=10).status_code == 401
    assert requests.get(t.base + "/events?access_token=wrong", timeout=10).status_code == 401
    assert requests.get(t.base + "/status?access_token=" + token, timeout=10).status_code == 401  # /events only
    with requests.get(f"{t.base}/events?access_token={token}", stream=True, timeout=10) as events:
        assert events.status_code == 200 and events.headers["Content-Type"].startswith("text/event-stream")
    page_origin = {**auth, "Origin": t.base}  # actions come from the dashboard's own page
    assert requests.post(t.base + "/api/servers/nope/restart", headers=page_origin, timeout=10).status_code == 404
    assert requests.post(t.base + "/api/servers/echo/explode", headers=page_origin, timeout=10).status_code == 400
    assert requests.post(t.base + "/api/servers/echo/restart", headers={**auth, "Origin": "http://evil.example"},
                         timeout=10).status_code == 403
    assert requests.post(t.base + "/api/servers/echo/restart", headers=auth, timeout=10).status_code == 403
    restarted = requests.post(t.base + "/api/servers/echo/restart", headers=page_origin, timeout=10)
    assert restarted.status_code == 200 and restarted.json()["restarts"] == 1

    # In the browser: the page asks for the token once, then shows the servers and goes live.
    page = browser.open(t.base + "/")
    wait_until(lambda: page.js("!document.getElementById('auth').hidden"), 10, message="token form shown")
    page.js(f"document.getElementById('token').value = {json.dumps(token)};"
            " document.getElementById('auth').requestSubmit(); true")
    wait_until(lambda: page.rows().get("echo", ("",))[0] == "ready", 20, message="servers shown after the token")
    wait_until(lambda: page.text("#live") == "live", 10, message="events stream with the token")
    assert page.js("sessionStorage.getItem('troupe-token')") == token
    assert token not in "".join(t.stderr)


def _task_counts(page) -> dict:
    return page.js("Object.fromEntries([...document.querySelectorAll('#tasks li[data-state]')]"
                   ".map((li) => [li.dataset.state, Number(li.querySelector('.n').textContent)]))")


def test_dashboard_tasks_panel_shows_the_counts_of_status_and_follows_them(http_troupe, browser):
    from tests.e2e.test_task_status import start_task, tasks_of
    from tests.support.tasks_client import ModernHttp

    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", tasks={"mint_after": 0})
    wait_until(lambda: _status(t)["ready"], 20, message="troupe ready")
    client = ModernHttp(t.url)
    start_task(client, 0)
    long = start_task(client, 120)  # cancelled below, never waited for
    wait_until(lambda: tasks_of(t)["by_state"]["completed"] == 1, 20, interval=0.1, message="short task completed")

    page = browser.open(t.base + "/")
    wait_until(lambda: page.js("!document.getElementById('tasks-panel').hidden"), 20, message="tasks panel shown")
    wait_until(lambda: _task_counts(page).get("working") == 1, 10, message="one working task shown")
    counts = _task_counts(page)
    assert counts == {"working": 1, "input_required": 0, "completed": 1, "failed": 0, "cancelled": 0}, counts
    assert page.text('#tasks dd[data-key="held"]') == "2 minted · 0 relayed"
    assert "at most 100 live" in page.text('#tasks dd[data-key="cap"]')
    wait_until(lambda: page.text("#live") == "live", 10, message="page subscribed to /events")
    # The refreshes that subscribing and its replayed events bring are over (each 150 ms after its burst).
    wait_until(lambda: page.js("performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/status'))"
                               ".every((e) => e.responseEnd > 0) && performance.now() - Math.max(...performance"
                               ".getEntriesByType('resource').map((e) => e.startTime)) > 500"), 10, interval=0.1,
               message="page settled")
    assert page.js(WATCH % "echo")  # the marker: the change below comes without a reload

    # Tasks change without bus events: while one is live the page re-reads /status by itself.
    cancel = client.tasks_cancel(long["taskId"])
    assert "result" in cancel, cancel
    wait_until(lambda: _task_counts(page).get("cancelled") == 1, 15, interval=0.1, message="cancel shown")
    assert _task_counts(page)["working"] == 0
    assert page.js("window.__loadedOnce") == "yes", "the page reloaded"


def test_traffic_charts_show_each_servers_calls_and_latency(tmp_path, browser):
    """/api/history gains a point per server each sample (0.5 s here): calls/s and p50/p95 of the
    calls since the last one; the page draws one chart per server that had calls, behind the token."""
    token = "traffic-s3cret"
    config = write_config(tmp_path, [server("echo", "tests.servers.echo"), server("idle", "tests.servers.echo")],
                          mode="flat", json_response=True, auth_token=token)
    t = TroupeHttp(config, env={"TROUPE_HISTORY_SAMPLE_S": "0.5"})
    auth = {"Authorization": f"Bearer {token}"}
    try:
        wait_until(lambda: _status(t, **auth)["ready"], 20, message="troupe ready")
        assert requests.get(t.base + "/api/history", timeout=10).status_code == 401
        client = McpHttp(t.url, headers=auth)

        def busy() -> bool:
            for i in range(5):
                client.call("echo__echo", {"text": str(i)})
            points = requests.get(t.base + "/api/history", headers=auth, timeout=10).json()["servers"].get("echo", [])
            return any(p[1] > 0 and p[3] is not None for p in points)
        wait_until(busy, 20, message="a point with echo's calls/s and p50")
        client.call("echo__fail", {"secret": "do-not-show-4d1f"})  # a tool error: among the last failures
        client.close()
        history = requests.get(t.base + "/api/history", headers=auth, timeout=10).json()
        assert history["sample_s"] == 0.5 and history["window_s"] == 900
        busiest = max(history["servers"]["echo"], key=lambda p: p[1])
        assert busiest[1] > 0 and 0 < busiest[3] <= busiest[4]  # calls/s, p50 ≤ p95 (ms)
        assert all(p[1] == 0 for p in history["servers"].get("idle", []))
        failed = history["failures"][0]
        assert (failed["server"], failed["name"], failed["outcome"]) == ("echo", "fail", "is_error"), failed
        assert "do-not-show-4d1f" not in json.dumps(history)

        page = browser.open(t.base + "/")
        wait_until(lambda: page.js("!document.getElementById('auth').hidden"), 10, message="token form shown")
        page.js(f"document.getElementById('token').value = {json.dumps(token)};"
                " document.getElementById('auth').requestSubmit(); true")
        wait_until(lambda: page.js("!!document.querySelector('#traffic .chart[data-server=\"echo\"] svg path.calls')"),
                   20, message="the page draws echo's chart")
        assert "calls/s" in page.text("#traffic") and "p95" in page.text("#traffic")
        wait_until(lambda: page.js("!!document.querySelector('#failures tr[data-outcome=\"is_error\"]')"), 20,
                   message="the page lists the failed call")
        failures = page.text("#failures")
        assert "echo" in failures and "fail" in failures and "do-not-show-4d1f" not in failures
        page.screenshot(TRAFFIC_SCREENSHOT)
    finally:
        assert t.stop() == 0
