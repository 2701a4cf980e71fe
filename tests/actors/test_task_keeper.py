"""The TaskKeeper against scripted stand-in Connections: a call answered within mint_after is a
plain result, a slower one a task troupe serves to the end; a server's own task is relayed under
a sealed id; questions, cancels, withdrawn calls, the per-client cap and the result budget each
end as the spec and troupe's rules say, every call answered once."""
from __future__ import annotations

import pykka
import pytest

from actors.messages import CancelForward, Forward, ServerRequest, UpstreamError
from actors.protocol import jsonrpc
from actors.protocol.request_state import StateSealer
from actors.settings.model import TasksConfig
from actors.tasks import wire
from actors.tasks.ids import TaskIds
from actors.tasks.keeper import TaskKeeper
from actors.tasks.messages import TaskCall, TaskOp
from tests.support import wait_until

OK = {"content": [{"type": "text", "text": "ok"}]}
IDS = TaskIds(StateSealer(lambda: b"k" * 32), 3600)


class Standin(pykka.ThreadingActor):
    """A Connection that keeps every Forward (answered later by the test, through its on_reply)
    and every CancelForward."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[Forward] = []
        self.cancels: list[CancelForward] = []

    def on_receive(self, message):
        if isinstance(message, Forward):
            self.got.append(message)
        elif isinstance(message, CancelForward):
            self.cancels.append(message)


@pytest.fixture
def rig():
    conn = Standin.start()
    made: list = []

    def keeper(**config):
        ref = TaskKeeper.start(TasksConfig(**config), IDS)
        made.append(ref)
        return ref
    yield keeper, conn, conn.proxy()
    pykka.ActorRegistry.stop_all()


def _call(conn, answers: list, *, form="", mint_after=0.05, owner="client:a", legacy=False, token=1) -> TaskCall:
    return TaskCall("srv", form, {"name": "slow", "arguments": {}}, conn, owner, owner or "anon", legacy, mint_after,
                    None, 60.0, {"elicitation": {}}, None, None, answers.append, "session-1", token)


def _op(method, task_id, answers, *, owner="client:a", target=None, params=None, legacy=False) -> TaskOp:
    ref = IDS.open(task_id, owner)
    assert ref is not None
    return TaskOp(method, ref, {"taskId": task_id, **(params or {})}, target, owner, legacy, answers.append,
                  "session-1", 9)


def _task(keeper, conn, proxy, answers, **kw) -> str:
    keeper.tell(_call(conn, answers, **kw))
    wait_until(lambda: answers, 5)
    assert answers[0]["resultType"] == "task", answers
    return answers[0]["taskId"]


def test_a_call_answered_within_mint_after_is_its_plain_result(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    keeper.tell(_call(conn, answers, mint_after=30))
    wait_until(lambda: proxy.got.get(), 5)
    proxy.got.get()[0].on_reply(OK)
    wait_until(lambda: answers, 5)
    assert answers == [OK]
    assert keeper.proxy().stats().get()["created"]["minted"] == 0


def test_a_slow_call_becomes_troupes_task_and_ends_with_its_result(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    task_id = _task(keeper, conn, proxy, answers)
    sent = proxy.got.get()[0]
    assert sent.origin == keeper and sent.timeout == 60.0  # the task's own limit, not the server's timeout
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got))
    wait_until(lambda: got, 5)
    assert got[0]["status"] == "working" and got[0]["resultType"] == "complete"
    sent.on_reply(OK)
    wait_until(lambda: (keeper.tell(_op("tasks/get", task_id, got)), got[-1]["status"] == "completed")[1], 5)
    assert got[-1]["result"] == OK
    assert len(answers) == 1  # the call itself was answered once, with the task


def test_another_clients_id_never_opens(rig):
    make, conn, proxy = rig
    task_id = _task(make(), conn, proxy, [])
    assert IDS.open(task_id, "client:b") is None and IDS.open(task_id, "client:a") is not None


def test_a_servers_question_is_the_tasks_input_required_and_its_answer_goes_back(rig):
    make, conn, proxy = rig
    keeper, answers, replies = make(), [], []
    keeper.tell(_call(conn, answers, mint_after=30))
    wait_until(lambda: proxy.got.get(), 5)
    sent = proxy.got.get()[0]
    keeper.tell(ServerRequest("srv", 7, "elicitation/create", {"message": "name?"}, replies.append, sent.origin_request))
    wait_until(lambda: answers, 5)  # a question: a task at once, whatever mint_after says
    task_id = answers[0]["taskId"]
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got))
    wait_until(lambda: got, 5)
    assert got[0]["status"] == "input_required"
    (key, request), = got[0]["inputRequests"].items()
    assert request == {"method": "elicitation/create", "params": {"message": "name?"}}
    done: list = []
    keeper.tell(_op("tasks/update", task_id, done, params={"inputResponses": {
        key: {"action": "accept", "content": {"name": "Ada"}}, "never-asked": {"action": "decline"}}}))
    wait_until(lambda: done and replies, 5)
    assert done == [{}] and replies == [{"action": "accept", "content": {"name": "Ada"}}]


def test_a_question_the_client_cannot_take_is_refused_upstream(rig):
    make, conn, proxy = rig
    keeper, answers, replies = make(), [], []
    keeper.tell(_call(conn, answers, mint_after=30))
    wait_until(lambda: proxy.got.get(), 5)
    keeper.tell(ServerRequest("srv", 7, "sampling/createMessage", {}, replies.append, proxy.got.get()[0].origin_request))
    wait_until(lambda: replies, 5)
    assert isinstance(replies[0], UpstreamError) and replies[0].code == -32021
    assert not answers  # no task for it: the call goes on


def test_a_cancel_reaches_the_server_and_a_late_answer_changes_nothing(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    task_id = _task(keeper, conn, proxy, answers)
    done: list = []
    keeper.tell(_op("tasks/cancel", task_id, done))
    wait_until(lambda: done and proxy.cancels.get(), 5)
    assert done == [{}] and proxy.cancels.get()[0].origin == keeper
    proxy.got.get()[0].on_reply(OK)
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got))
    wait_until(lambda: got, 5)
    assert got[0]["status"] == "cancelled" and "result" not in got[0]


def test_a_call_withdrawn_before_it_became_a_task_is_cancelled_upstream_and_forgotten(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    keeper.tell(_call(conn, answers, mint_after=30, token=5))
    wait_until(lambda: proxy.got.get(), 5)
    keeper.tell(CancelForward("session-1", 5, "cancelled by client"))
    wait_until(lambda: proxy.cancels.get(), 5)
    proxy.got.get()[0].on_reply(OK)
    stats = keeper.proxy().stats().get()
    assert not answers and stats["live_by_client"] == 0


def test_a_client_at_its_cap_is_refused_before_anything_runs(rig):
    make, conn, proxy = rig
    keeper = make(max_per_client=2)
    for token in (1, 2):
        _task(keeper, conn, proxy, [], token=token)
    refused: list = []
    keeper.tell(_call(conn, refused, token=3))
    wait_until(lambda: refused, 5)
    assert isinstance(refused[0], UpstreamError) and "too many live tasks" in refused[0].message
    assert len(proxy.got.get()) == 2  # the third never reached the server
    other: list = []
    _task(keeper, conn, proxy, other, owner="client:b", token=4)  # another client is not held back


def test_a_result_over_the_budget_fails_its_task_with_a_clear_error(rig):
    make, conn, proxy = rig
    keeper, answers = make(max_result_bytes=100), []
    task_id = _task(keeper, conn, proxy, answers)
    proxy.got.get()[0].on_reply({"content": [{"type": "text", "text": "x" * 500}]})
    got: list = []
    wait_until(lambda: (keeper.tell(_op("tasks/get", task_id, got)), got and got[-1]["status"] == "failed")[1], 5)
    assert "max_result_bytes" in got[-1]["error"]["message"]


def test_a_servers_own_task_is_relayed_under_a_sealed_id(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    keeper.tell(_call(conn, answers, form=wire.MODERN))
    wait_until(lambda: proxy.got.get(), 5)
    proxy.got.get()[0].on_reply({"resultType": "task", "taskId": "up-1", "status": "working",
                                 "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
                                 "ttlMs": 1000, "pollIntervalMs": 100})
    wait_until(lambda: answers, 5)
    task_id = answers[0]["taskId"]
    assert task_id.startswith("troupe1.") and "up-1" not in answers[0].values()
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got, target=conn))
    wait_until(lambda: len(proxy.got.get()) == 2, 5)
    asked = proxy.got.get()[1]
    assert (asked.method, asked.params) == ("tasks/get", {"taskId": "up-1"})
    asked.on_reply({"taskId": "up-1", "status": "completed", "createdAt": "2026-01-01T00:00:00Z",
                    "lastUpdatedAt": "2026-01-01T00:00:01Z", "ttlMs": 1000, "result": OK})
    wait_until(lambda: got, 5)
    assert got[0]["taskId"] == task_id and got[0]["result"] == OK
    assert keeper.proxy().stats().get()["by_state"]["completed"] == 1


def test_a_malformed_task_from_a_server_fails_the_call_with_a_clear_error(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    keeper.tell(_call(conn, answers, form=wire.MODERN))
    wait_until(lambda: proxy.got.get(), 5)
    proxy.got.get()[0].on_reply({"resultType": "task", "taskId": 12, "status": "working"})
    wait_until(lambda: answers, 5)
    assert isinstance(answers[0], UpstreamError) and answers[0].code == jsonrpc.INTERNAL_ERROR
    assert "malformed task" in answers[0].message
