"""A server's question inside a task reaches the task's own client, or nobody (issue 28 with the
isolation rule). Two named 2026-07-28 clients, alice and bob, each hold a task troupe minted at
once around a call of a stdio server without tasks (tests/servers/question_asker.py), which asks
elicitation/create in the middle of `ask`. Every task call reaches that server from troupe's
TaskKeeper, so the server's link cannot tell whose task asked from where the call came:

- alice's task alone in flight: her task turns input_required with the question, and her answer
  through tasks/update is what the server gets (on her own `share: per_client` upstream too);
- alice's asking task while bob's slow task is in flight: the question is refused upstream, and
  neither task ever shows it (before, it went to the newest task call: bob's).
"""
from __future__ import annotations

import pytest
import yaml

from tests.support.tasks_client import TERMINAL, ModernHttp, wait_until
from tests.support.troupe import TroupeHttp, server, write_config

BOUND = 30.0
TOKENS = {"alice": "alice-questions-token-0123456789", "bob": "bob-questions-token-0123456789"}
ELICITS = {"elicitation": {}}


@pytest.fixture(scope="module")
def troupe(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("task-questions")
    config = write_config(tmp, [server("asker", "tests.servers.question_asker", pin=False),
                                server("askerp", "tests.servers.question_asker", pin=False, share="per_client")],
                          mode="flat",
                          tasks={"mint_after": 0},
                          clients=[{"name": name, "token": token, "profile": "all"} for name, token in TOKENS.items()])
    data = yaml.safe_load(config.read_text())
    data["profiles"] = {"all": {}}
    config.write_text(yaml.safe_dump(data))
    t = TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp)})
    yield t
    assert t.stop() == 0


def _client(troupe, name: str) -> ModernHttp:
    return ModernHttp(troupe.url, capabilities=ELICITS, token=TOKENS[name])


def _start(client: ModernHttp, tool: str, arguments: dict) -> str:
    answer = client.call_tool(tool, arguments)
    result = answer.get("result") or {}
    assert result.get("resultType") == "task", answer
    return result["taskId"]


def _follow(client: ModernHttp, task_id: str, seen: list, until) -> dict:
    """Poll the task until `until(task)`; every status seen is kept in `seen`."""
    def look():
        task = client.tasks_get(task_id)["result"]
        seen.append(task["status"])
        return task if until(task) else None
    return wait_until(look, BOUND, f"task {task_id} to reach the state the test waits for")


def _text(task: dict) -> str:
    return " ".join(c.get("text", "") for c in task["result"]["content"])


@pytest.mark.parametrize("name", ["asker", "askerp"])
def test_a_question_in_a_task_alone_in_flight_is_that_tasks_input_required(troupe, name):
    """On a shared upstream, and on alice's own (`share: per_client`), whose questions go to her
    tasks through the keeper, not to her Session as if a call of its own asked."""
    alice = _client(troupe, "alice")
    task_id = _start(alice, f"{name}__ask", {"tag": "of-alice", "delay": 0.2})
    asked = _follow(alice, task_id, [], lambda t: t["status"] == "input_required" or t["status"] in TERMINAL)
    assert asked["status"] == "input_required", asked
    (key, request), = asked["inputRequests"].items()
    assert request["method"] == "elicitation/create" and request["params"]["message"] == "question of-alice"
    assert "error" not in alice.tasks_update(task_id, {key: {"action": "accept", "content": {"answer": "alice"}}})
    done = _follow(alice, task_id, [], lambda t: t["status"] in TERMINAL)
    assert done["status"] == "completed" and _text(done) == "answer: alice"


def test_with_two_clients_tasks_in_flight_the_question_reaches_neither(troupe):
    alice, bob = _client(troupe, "alice"), _client(troupe, "bob")
    ask_id = _start(alice, "asker__ask", {"tag": "of-alice", "delay": 1.5})  # asks 1.5 s in
    slow_id = _start(bob, "asker__slow", {"seconds": 4})  # bob's: the newest task call when alice's asks
    alice_seen: list = []
    done = _follow(alice, ask_id, alice_seen, lambda t: t["status"] in TERMINAL)
    assert done["status"] == "completed"
    text = _text(done)
    assert text.startswith("refused:") and "cannot tell whose call asked" in text, text
    bob_seen: list = []
    slow = _follow(bob, slow_id, bob_seen, lambda t: t["status"] in TERMINAL)
    assert slow["status"] == "completed" and _text(slow) == "slow done"
    assert "input_required" not in alice_seen and "input_required" not in bob_seen, (alice_seen, bob_seen)
