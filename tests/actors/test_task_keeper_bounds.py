"""The TaskKeeper's rules for the calls it makes on a task's behalf, against scripted stand-in
Connections: each names its own caller and carries its client's token, logLevel and deadline;
a minted task never outlives max_duration, even while it waits on its client's input; a task
whose id never reached its client is cancelled, as are an ended anonymous session's; what a
server reports of its own task is cleaned and bounded before troupe keeps it; a finished task's
second end, a 2025-11-25 cancel of a finished task and a forged tasks/list cursor change nothing."""
from __future__ import annotations

import pykka
import pytest

from actors.messages import NOT_A_CALLER, CancelForward, Forward, ServerRequest, ServerRequestCancelled, UpstreamError
from actors.protocol import jsonrpc
from actors.protocol.request_state import StateSealer
from actors.settings.model import TasksConfig
from actors.tasks import keeper as keeper_module
from actors.tasks import relayed, wire
from actors.tasks.ids import TaskIds
from actors.tasks.keeper import TaskKeeper
from actors.tasks.messages import TaskCall, TaskOp, Tick, WatchTasks
from actors.tasks.records import Record, Records
from actors.tasks.session_side import SESSION_OWNER
from tests.actors.test_task_keeper import Standin
from tests.support import wait_until

OK = {"content": [{"type": "text", "text": "ok"}]}
IDS = TaskIds(StateSealer(lambda: b"k" * 32), 3600)
CREATED = {"resultType": "task", "taskId": "up-1", "status": "working", "createdAt": "2026-01-01T00:00:00Z",
           "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttlMs": 60_000, "pollIntervalMs": 100}


class Watcher(pykka.ThreadingActor):
    """A Session that only keeps what the keeper tells it."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list = []

    def on_receive(self, message):
        self.told.append(message)


@pytest.fixture
def rig(monkeypatch):
    monkeypatch.setattr(keeper_module, "SWEEP_S", 0.0)  # every tick sweeps: max_duration is checked at once
    conn = Standin.start()

    def keeper(**config):
        return TaskKeeper.start(TasksConfig(**config), IDS)
    yield keeper, conn, conn.proxy()
    pykka.ActorRegistry.stop_all()


def _call(conn, answers: list, *, form="", mint_after=0.0, owner="client:a", token=1, max_duration=60.0,
          client="alice", origin="session-1") -> TaskCall:
    return TaskCall("srv", form, {"name": "slow", "arguments": {}}, conn, owner, owner or "anon", False, mint_after,
                    None, max_duration, {"elicitation": {}}, client, "debug", answers.append, origin, token)


def _op(method, task_id, answers, *, owner="client:a", target=None, params=None, legacy=False,
        client="alice") -> TaskOp:
    ref = IDS.open(task_id, owner)
    assert ref is not None
    return TaskOp(method, ref, {"taskId": task_id, **(params or {})}, target, owner, legacy, answers.append,
                  "session-1", 9, client)


def _get(keeper, task_id, **kw) -> dict | UpstreamError:
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got, **kw))
    wait_until(lambda: got, 5)
    return got[0]


def _minted(keeper, conn, proxy, **kw) -> tuple[str, Forward]:
    answers: list = []
    before = len(proxy.got.get())
    keeper.tell(_call(conn, answers, **kw))
    wait_until(lambda: answers and len(proxy.got.get()) > before, 5)
    assert answers[0]["resultType"] == "task", answers
    return answers[0]["taskId"], proxy.got.get()[before]


def _relayed(keeper, conn, proxy, answers: list, created: dict = CREATED) -> str:
    """A modern server's own task, created through the keeper: its sealed id."""
    keeper.tell(_call(conn, answers, form=wire.MODERN))
    wait_until(lambda: proxy.got.get(), 5)
    proxy.got.get()[0].on_reply(created)
    wait_until(lambda: answers, 5)
    return answers[0]["taskId"]


def test_each_task_call_names_its_own_caller_and_carries_its_client(rig):
    make, conn, proxy = rig
    keeper = make()
    _a, first = _minted(keeper, conn, proxy, token=1)
    _b, second = _minted(keeper, conn, proxy, owner="client:b", client="bob", token=2)
    # one origin (the keeper) for both clients' tasks, but two callers: a server's question during
    # either is never taken for the other's (RequestTable.asker)
    assert first.origin == second.origin and first.caller != second.caller
    assert first.caller[0] == "task" and second.caller[0] == "task"
    assert (first.client, second.client) == ("alice", "bob") and first.log_level == "debug"


def test_a_next_input_round_goes_as_its_clients_call_within_the_tasks_deadline(rig):
    make, conn, proxy = rig
    keeper = make()
    task_id, sent = _minted(keeper, conn, proxy, max_duration=30.0)
    sent.on_reply({"resultType": "input_required", "requestState": "s1",
                   "inputRequests": {"their": {"method": "elicitation/create", "params": {"message": "name?"}}}})
    wait_until(lambda: _get(keeper, task_id)["status"] == "input_required", 5)
    (key, _request), = _get(keeper, task_id)["inputRequests"].items()
    done: list = []
    keeper.tell(_op("tasks/update", task_id, done, params={"inputResponses": {key: {"action": "decline"}}}))
    wait_until(lambda: len(proxy.got.get()) == 2, 5)
    again = proxy.got.get()[1]
    assert again.params["inputResponses"] == {"their": {"action": "decline"}} and again.params["requestState"] == "s1"
    assert again.client == "alice" and again.log_level == "debug" and again.caller == sent.caller
    assert again.timeout is not None and 0 < again.timeout <= 30.0


def test_a_round_with_nothing_to_answer_fails_the_task_rather_than_waiting_forever(rig):
    make, conn, proxy = rig
    keeper = make()
    task_id, sent = _minted(keeper, conn, proxy)
    sent.on_reply({"resultType": "input_required", "inputRequests": {"a": "not a request", "b": {"params": {}}}})
    wait_until(lambda: _get(keeper, task_id)["status"] == "failed", 5)
    assert "no usable inputRequests" in _get(keeper, task_id)["error"]["message"]


def test_a_minted_task_waiting_on_input_fails_at_its_max_duration(rig):
    make, conn, proxy = rig
    keeper = make()
    task_id, sent = _minted(keeper, conn, proxy, max_duration=0.5)
    sent.on_reply({"resultType": "input_required",
                   "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "?"}}}})
    wait_until(lambda: _get(keeper, task_id)["status"] == "failed", 10)
    failed = _get(keeper, task_id)
    assert failed["error"]["code"] == jsonrpc.REQUEST_TIMEOUT and "max_duration" in failed["error"]["message"]
    assert keeper.proxy().stats().get()["live_by_client"] == 0


def test_a_task_whose_id_never_reached_its_client_is_cancelled_and_forgotten(rig):
    make, conn, proxy = rig
    keeper = make()
    task_id, sent = _minted(keeper, conn, proxy, token=7)
    # the Session's deadline passed before the handle arrived: it withdraws the call it still holds
    keeper.tell(CancelForward("session-1", 7, "troupe's deadline passed"))
    wait_until(lambda: proxy.cancels.get(), 5)
    assert proxy.cancels.get()[0].origin_request == sent.origin_request
    gone = _get(keeper, task_id)
    assert isinstance(gone, UpstreamError) and gone.code == jsonrpc.INVALID_PARAMS
    assert keeper.proxy().stats().get()["live_by_client"] == 0


def test_an_ended_anonymous_sessions_tasks_end_with_it_and_a_named_clients_live_on(rig):
    make, conn, proxy = rig
    keeper = make()
    owner = SESSION_OWNER + "abc"
    anonymous, _ = _minted(keeper, conn, proxy, owner=owner, token=1)
    named, _ = _minted(keeper, conn, proxy, token=2)
    keeper.tell(CancelForward("session-1", None, "the client went away"))
    wait_until(lambda: proxy.cancels.get(), 5)
    assert isinstance(_get(keeper, anonymous, owner=owner), UpstreamError)
    assert _get(keeper, named)["status"] == "working"


def test_a_relayed_tasks_report_is_cleaned_and_bounded_before_it_is_kept(rig):
    make, conn, proxy = rig
    keeper, answers = make(max_result_bytes=200), []
    task_id = _relayed(keeper, conn, proxy, answers)
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got, target=conn))
    wait_until(lambda: len(proxy.got.get()) == 2, 5)
    asked = proxy.got.get()[1]
    assert asked.client == "alice" and asked.caller is NOT_A_CALLER
    asked.on_reply({**CREATED, "status": "completed", "result": {
        "content": [{"type": "text", "text": "x" * 500}],
        "_meta": {wire.RELATED_TASK: {"taskId": "up-1"}}}})
    wait_until(lambda: got, 5)
    assert got[0]["status"] == "completed" and "_meta" not in got[0]["result"]  # passed on, its server's id gone
    # what troupe keeps of it (for a 2025-11-25 client's tasks/result) is bounded: too big, it failed
    stats = keeper.proxy().stats().get()
    assert stats["by_state"]["failed"] == 1 and stats["result_bytes"] < 200


def test_a_relayed_tasks_error_and_questions_reach_the_client_clean(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    task_id = _relayed(keeper, conn, proxy, answers)
    got: list = []
    keeper.tell(_op("tasks/get", task_id, got, target=conn))
    wait_until(lambda: len(proxy.got.get()) == 2, 5)
    proxy.got.get()[1].on_reply({**CREATED, "status": "input_required", "inputRequests": {
        "k": {"method": "elicitation/create", "params": {"message": "?", "_meta": {wire.RELATED_TASK: {"taskId": "up-1"}}}},
        "junk": 5}})
    wait_until(lambda: got, 5)
    assert got[0]["inputRequests"] == {"k": {"method": "elicitation/create", "params": {"message": "?"}}}
    keeper.tell(_op("tasks/get", task_id, got, target=conn))
    wait_until(lambda: len(proxy.got.get()) == 3, 5)
    proxy.got.get()[2].on_reply({**CREATED, "status": "failed", "error": {"code": "boom", "message": ["x"]}})
    wait_until(lambda: len(got) == 2, 5)
    assert got[1]["error"] == {"code": jsonrpc.INTERNAL_ERROR, "message": "the task failed"}


def test_a_watched_relayed_task_has_one_poll_in_flight_at_a_time(rig, monkeypatch):
    monkeypatch.setattr(relayed, "MIN_POLL_S", 0.0)  # with pollIntervalMs 0, every tick may poll
    make, conn, proxy = rig
    keeper, answers = make(), []
    task_id = _relayed(keeper, conn, proxy, answers, {**CREATED, "pollIntervalMs": 0})
    watcher = Watcher.start()
    keeper.tell(WatchTasks(watcher, (task_id,)))
    for _ in range(5):
        keeper.tell(Tick())
    keeper.proxy().stats().get()  # a turn after those ticks: each has run
    polls = proxy.got.get()[1:]
    assert len(polls) == 1  # unanswered, it is the only one however many ticks pass
    assert polls[0].method == "tasks/get" and polls[0].caller is NOT_A_CALLER and polls[0].client == "alice"
    polls[0].on_reply({**CREATED, "status": "working", "pollIntervalMs": 0, "statusMessage": "half way"})
    keeper.tell(Tick())
    wait_until(lambda: len(proxy.got.get()) == 3, 5)  # answered: the next tick polls again
    proxy.got.get()[2].on_reply({**CREATED, "status": "completed", "result": OK})
    wait_until(lambda: any(getattr(m, "task", {}).get("status") == "completed" for m in watcher.proxy().told.get()), 5)


def test_a_cancelled_question_of_another_connection_withdraws_nothing(rig):
    make, conn, proxy = rig
    keeper, replies = make(), []
    task_id, sent = _minted(keeper, conn, proxy)
    keeper.tell(ServerRequest("srv", 7, "elicitation/create", {"message": "?"}, replies.append, sent.origin_request))
    wait_until(lambda: _get(keeper, task_id)["status"] == "input_required", 5)
    keeper.tell(ServerRequestCancelled("srv", 7, lambda _outcome: None))  # same server and id, another link's
    assert _get(keeper, task_id)["status"] == "input_required"
    keeper.tell(ServerRequestCancelled("srv", 7, replies.append))
    wait_until(lambda: _get(keeper, task_id)["status"] == "working", 5)


def test_a_finished_tasks_second_end_counts_nothing_twice():
    records = Records(60.0, 10_000, 3600.0)
    record = Record("r1", "srv", "", "client:a", "client:a", minted=True)
    records.add(record)
    record.result = OK
    record.touch("completed")
    records.finished(record)
    size = records.bytes
    records.finished(record)
    assert records.bytes == size and records.live.get("client:a", 0) == 0
    records.forget(record)
    assert records.bytes == 0 and records.live.get("client:a", 0) == 0


def test_a_2025_11_25_cancel_of_a_finished_task_is_refused_and_a_forged_cursor_too(rig):
    make, conn, proxy = rig
    keeper = make()
    task_id, sent = _minted(keeper, conn, proxy)
    sent.on_reply(OK)
    wait_until(lambda: _get(keeper, task_id)["status"] == "completed", 5)
    refused: list = []
    keeper.tell(_op("tasks/cancel", task_id, refused, legacy=True))
    wait_until(lambda: refused, 5)
    assert isinstance(refused[0], UpstreamError) and refused[0].code == jsonrpc.INVALID_PARAMS
    acked: list = []
    keeper.tell(_op("tasks/cancel", task_id, acked))  # SEP-2663: a finished task's cancel is acknowledged
    wait_until(lambda: acked, 5)
    assert acked == [{}]
    listed: list = []
    keeper.tell(TaskOp("tasks/list", None, {"cursor": "../../etc"}, None, "client:a", True, listed.append,
                       "session-1", 10))
    wait_until(lambda: listed, 5)
    assert isinstance(listed[0], UpstreamError) and listed[0].code == jsonrpc.INVALID_PARAMS


def test_a_2025_11_25_clients_task_call_answered_plainly_is_a_finished_task_not_a_bare_result(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    session = Watcher.start()  # a legacy session hears its tasks' changes
    call = _call(conn, answers, form=wire.MODERN, origin=session)
    keeper.tell(TaskCall(*[True if f == "legacy_client" else getattr(call, f) for f in TaskCall.__dataclass_fields__]))
    wait_until(lambda: proxy.got.get(), 5)
    proxy.got.get()[0].on_reply(OK)  # the server made no task of it
    wait_until(lambda: answers, 5)
    task = answers[0]["task"]
    assert task["status"] == "completed" and task["taskId"].startswith("troupe1.")
    result: list = []
    keeper.tell(_op("tasks/result", task["taskId"], result, legacy=True))
    wait_until(lambda: result, 5)
    assert result[0]["content"] == OK["content"]


def test_over_the_result_budget_the_client_holding_the_most_bytes_loses_its_oldest_first():
    records = Records(600.0, 1_000, 3600.0)

    def finish(local: str, cap_key: str, size: int) -> Record:
        record = Record(local, "srv", "", cap_key, cap_key, minted=True)
        records.add(record)
        record.result = {"content": [{"type": "text", "text": "x" * size}]}
        record.touch("completed")
        records.finished(record)
        return record
    bobs = finish("b1", "client:bob", 200)
    for n in range(10):  # alice floods: her own results make the room for her next ones
        finish(f"a{n}", "client:alice", 200)
    assert records.local("b1") is bobs and records.bytes <= 1_000
    assert records.dropped >= 6 and records.bytes_by["client:bob"] == bobs.size


def test_a_relayed_tasks_update_with_malformed_responses_is_refused_before_the_server_hears_it(rig):
    make, conn, proxy = rig
    keeper, answers = make(), []
    task_id = _relayed(keeper, conn, proxy, answers)
    refused: list = []
    keeper.tell(_op("tasks/update", task_id, refused, target=conn, params={"inputResponses": {"k": 3}}))
    wait_until(lambda: refused, 5)
    assert isinstance(refused[0], UpstreamError) and refused[0].code == jsonrpc.INVALID_PARAMS
    assert "inputResponses.k" in refused[0].message and len(proxy.got.get()) == 1
