"""A plain tools/call (no task asked) answered with a server's task handle: an error result
saying so, never a server's own task id the client cannot follow; every other answer unchanged."""
from __future__ import annotations

from actors.downstream.replies import plain_tool_outcome, tool_outcome

PLAIN = {"content": [{"type": "text", "text": "ok"}]}


def test_a_task_handle_for_a_plain_call_becomes_an_error_result():
    for handle in ({"resultType": "task", "taskId": "server-own-1", "status": "working"},
                   {"task": {"taskId": "server-own-2", "status": "working"}}):
        answer = plain_tool_outcome(7, handle)
        result = answer["result"]
        assert answer["id"] == 7 and result["isError"] is True
        assert "asked for none" in result["content"][0]["text"] and "server-own" not in str(result)


def test_every_other_answer_is_what_tool_outcome_makes_of_it():
    assert plain_tool_outcome(1, PLAIN) == tool_outcome(1, PLAIN)
    with_task_field = {"content": [], "task": "a tool's own output field"}
    assert plain_tool_outcome(2, with_task_field) == tool_outcome(2, with_task_field)
