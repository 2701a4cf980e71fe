"""Requests upstream servers send to a client (sampling, elicitation, roots), alone: refused
at once without the capability or a stream, routed back by troupe's own id, and answered at
most once from here whether by the client, the deadline, a cancellation or the client leaving."""
import gevent.event

from actors.downstream.client_requests import ClientRequests
from actors.messages import ServerRequest, UpstreamError
from actors.protocol import jsonrpc

CAPS = {"sampling": {}, "elicitation": {}, "roots": {}}


def _request(method="sampling/createMessage", server="llm", uid=41, params=None):
    answers: list = []
    return ServerRequest(server, uid, method, params or {"messages": []}, answers.append), answers


def _sent():
    out: list = []
    return out, out.append


def test_a_request_goes_to_the_client_under_troupes_id_and_the_answer_back_to_its_server():
    table, (out, sink) = ClientRequests(), _sent()
    req, answers = _request()
    our_id = table.send(req, CAPS, sink)
    assert our_id is not None and our_id.startswith("troupe-")
    assert out == [jsonrpc.request(our_id, "sampling/createMessage", {"messages": []})]
    assert table.answer({"jsonrpc": "2.0", "id": our_id, "result": {"content": "hi"}}) is True
    assert answers == [{"content": "hi"}]
    assert table.answer({"jsonrpc": "2.0", "id": our_id, "result": {}}) is False  # once only
    assert answers == [{"content": "hi"}] and len(table) == 0


def test_ids_are_unique_and_answers_reach_their_own_request():
    table, (_, sink) = ClientRequests(), _sent()
    first, a1 = _request(uid=1)
    second, a2 = _request(server="other", uid=1)
    id1, id2 = table.send(first, CAPS, sink), table.send(second, CAPS, sink)
    assert id1 != id2
    table.answer({"jsonrpc": "2.0", "id": id2, "error": {"code": -1, "message": "user declined", "data": 3}})
    assert a1 == [] and a2 == [UpstreamError(-1, "user declined", 3, server="other")]
    table.answer({"jsonrpc": "2.0", "id": id1, "result": "not an object"})
    assert a1 == [{}]  # a non-object result is passed on as an empty one


def test_a_response_with_an_unknown_or_foreign_id_is_not_routed():
    table, (_, sink) = ClientRequests(), _sent()
    req, answers = _request()
    table.send(req, CAPS, sink)
    assert table.answer({"jsonrpc": "2.0", "id": "troupe-999", "result": {}}) is False
    assert table.answer({"jsonrpc": "2.0", "id": 1, "result": {}}) is False
    assert answers == [] and len(table) == 1


def test_without_the_capability_or_a_stream_the_server_is_answered_at_once():
    table, (out, sink) = ClientRequests(), _sent()
    req, answers = _request(method="elicitation/create")
    assert table.send(req, {"sampling": {}}, sink) is None
    assert out == [] and answers[0].code == jsonrpc.METHOD_NOT_FOUND and "elicitation" in answers[0].message
    req, answers = _request()
    assert table.send(req, CAPS, None) is None
    assert answers[0].code == jsonrpc.INTERNAL_ERROR and "no open stream" in answers[0].message
    assert len(table) == 0


def test_an_elicitation_names_the_asking_server():
    table, (out, sink) = ClientRequests(), _sent()
    req, _ = _request(method="elicitation/create", server="shop", params={"message": "Your size?"})
    table.send(req, CAPS, sink)
    assert out[0]["params"]["message"] == "[shop] Your size?"
    assert req.params == {"message": "Your size?"}  # the server's own request is left as it was


def test_a_cancelled_request_is_forgotten_unanswered_and_named_for_the_client():
    table, (_, sink) = ClientRequests(), _sent()
    req, answers = _request(server="llm", uid=7)
    other, other_answers = _request(server="llm", uid=8)
    our_id = table.send(req, CAPS, sink)
    table.send(other, CAPS, sink)
    assert table.cancelled("llm", 7) == [our_id]
    assert table.cancelled("llm", 7) == []
    assert table.answer({"jsonrpc": "2.0", "id": our_id, "result": {}}) is False  # the late answer goes nowhere
    assert answers == [] and other_answers == [] and len(table) == 1


def test_the_deadline_answers_once_with_a_timeout_through_the_sessions_mailbox():
    due: list[str] = []
    fired = gevent.event.Event()

    def on_deadline(our_id):  # what the Session does: a tell to itself, handled later
        due.append(our_id)
        fired.set()
    table, (_, sink) = ClientRequests(on_deadline, deadline=0.01), _sent()
    req, answers = _request()
    our_id = table.send(req, CAPS, sink)
    assert fired.wait(timeout=5) and due == [our_id]
    assert answers == []  # the timer only tells; the table is touched from the session's greenlet
    assert table.expire(our_id) is True
    assert len(answers) == 1 and answers[0].code == jsonrpc.REQUEST_TIMEOUT
    assert table.expire(our_id) is False
    assert table.answer({"jsonrpc": "2.0", "id": our_id, "result": {}}) is False
    assert len(answers) == 1


def test_an_answered_request_has_its_deadline_dropped():
    due: list[str] = []
    fired = gevent.event.Event()

    def on_deadline(our_id):
        due.append(our_id)
        fired.set()
    answered, _ = _request(uid=1)
    table, (_, sink) = ClientRequests(on_deadline, deadline=0.01), _sent()
    our_id = table.send(answered, CAPS, sink)
    table.answer({"jsonrpc": "2.0", "id": our_id, "result": {}})
    # a later deadline (a table of its own): once it fires, the dropped one would have fired first
    witness, _ = _request(uid=2)
    later_id = ClientRequests(on_deadline, deadline=0.05, prefix="witness-").send(witness, CAPS, sink)
    assert fired.wait(timeout=5)
    assert due == [later_id]


def test_closing_answers_every_open_request_once():
    table, (_, sink) = ClientRequests(lambda _: None), _sent()
    (r1, a1), (r2, a2) = _request(uid=1), _request(uid=2)
    id1 = table.send(r1, CAPS, sink)
    table.send(r2, CAPS, sink)
    table.answer({"jsonrpc": "2.0", "id": id1, "result": {"ok": True}})
    table.close("the client went away")
    assert a1 == [{"ok": True}]
    assert len(a2) == 1 and a2[0].code == jsonrpc.INTERNAL_ERROR and a2[0].message == "the client went away"
    table.close()
    assert len(a2) == 1 and len(table) == 0
