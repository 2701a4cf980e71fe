"""Tasks on the operator's side: /status, /metrics and `troupe status` count tasks by state and
kind (minted by troupe, relayed from a server), and a call past serve.tasks.max_per_client is
refused and counted. Raw 2026-07-28 requests over HTTP, troupe minting around echo's `sleep`."""
from __future__ import annotations

import subprocess

import requests

from tests.e2e.test_metrics import scrape, value
from tests.support import PYTHON, ROOT, wait_until
from tests.support.tasks_client import ModernHttp
from tests.support.troupe import server

SLEEP = "echo__sleep"
# Long enough that both tasks are still working while the test looks (it never waits for this).
LONG_S = 6.0


def start_task(client: ModernHttp, seconds: float) -> dict:
    """A sleep call that troupe answers with a task of its own (mint_after 0)."""
    answer = client.call_tool(SLEEP, {"seconds": seconds})
    assert answer["result"]["resultType"] == "task", answer
    assert answer["result"]["status"] == "working", answer
    return answer["result"]


def tasks_of(t) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()["tasks"]


def test_status_metrics_and_cli_count_tasks_and_refusals_at_the_cap(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat",
                    tasks={"mint_after": 0, "max_per_client": 2})
    wait_until(lambda: requests.get(t.base + "/status", timeout=10).json()["ready"], 20, message="troupe ready")
    before = tasks_of(t)
    assert before["by_state"] == dict.fromkeys(("working", "input_required", "completed", "failed", "cancelled"), 0)
    assert before["refused_at_cap"] == 0 and before["max_per_client"] == 2

    client = ModernHttp(t.url)  # an anonymous caller declaring the tasks extension in each request
    first, second = start_task(client, LONG_S), start_task(client, LONG_S)
    assert first["taskId"] != second["taskId"]
    refused = client.call_tool(SLEEP, {"seconds": 0})
    assert refused["result"].get("isError") is True, refused
    assert "too many live tasks" in refused["result"]["content"][0]["text"]

    now = tasks_of(t)
    assert now["by_state"]["working"] == 2 and now["by_state"]["completed"] == 0
    assert now["by_kind_state"]["minted"]["working"] == 2 and now["by_kind_state"]["relayed"]["working"] == 0
    assert now["held"] == {"minted": 2, "relayed": 0}
    assert now["created"] == {"minted": 2, "relayed": 0}
    assert now["refused_at_cap"] == 1
    metrics = scrape(t.base)
    assert value(metrics, "troupe_tasks", state="working", kind="minted") == 2
    assert value(metrics, "troupe_tasks", state="completed", kind="minted") == 0
    assert value(metrics, "troupe_tasks", state="working", kind="relayed") == 0
    assert value(metrics, "troupe_tasks_created_total", kind="minted") == 2
    assert value(metrics, "troupe_tasks_refused_total", reason="max_per_client") == 1
    assert value(metrics, "troupe_task_result_bytes") == 0

    wait_until(lambda: tasks_of(t)["by_state"]["completed"] == 2, LONG_S + 20, interval=0.2,
               message="both tasks completed")
    done = tasks_of(t)
    assert done["by_state"]["working"] == 0 and done["held"]["minted"] == 2
    assert done["result_bytes"] > 0
    metrics = scrape(t.base)
    assert value(metrics, "troupe_tasks", state="completed", kind="minted") == 2
    assert value(metrics, "troupe_tasks", state="working", kind="minted") == 0
    assert value(metrics, "troupe_task_result_bytes") == done["result_bytes"]
    assert value(metrics, "troupe_tasks_max_per_client") == 2

    # Finished tasks no longer count against the cap: the same client gets a task again.
    start_task(client, 0)
    assert tasks_of(t)["refused_at_cap"] == 1
    wait_until(lambda: tasks_of(t)["by_state"]["completed"] == 3, 20, interval=0.1, message="third task completed")

    table = subprocess.run([PYTHON, "-m", "actors.main", "status", "--url", t.base], cwd=ROOT,
                           capture_output=True, text=True, timeout=30)
    assert table.returncode == 0, table.stderr
    lines = [line for line in table.stdout.splitlines() if line.startswith("tasks: ")]
    assert lines == ["tasks: 0 working, 0 input_required, 3 completed, 0 failed, 0 cancelled "
                     "(3 minted, 0 relayed; cap 2 per client; 1 refused at the cap)"], table.stdout

