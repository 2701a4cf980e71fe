"""How a span ends, in two steps: what an answer or an outcome says of it, read on the call path
(`answer_facts`, `outcome_facts`: codes and marks only, never a message's text, which may quote
arguments), and those facts written on the span later, off the call path (`finish`, a job of
actors/ops/trace_later.py run by actors/ops/tracing.py)."""
from __future__ import annotations

import time
from typing import Any

from actors.messages import UpstreamError
from actors.ops.spans import RecordedSpan

CACHE_META = "troupe/cache"  # a cached answer's _meta mark (actors/caching/session_side.py)

# How a span ended, as answer_facts and outcome_facts read it on the call path: (outcome, error
# code, cache age, events) with outcome one of these; finish writes it on the span later.
OK, TOOL_ERROR, INPUT_REQUIRED, ERROR = "ok", "tool_error", "input_required", "error"
CANCELLED = ("cancelled", None, None, ())
TIMED_OUT = ("timeout", None, None, ())  # a workflow step troupe stopped waiting for at its deadline
NO_AGE = -1.0  # a cache hit whose age is not a number


def answer_facts(message: Any) -> tuple:
    """How the JSON-RPC answer `message` ends a span: an error's code, a tool's isError, a round
    asking for input, a cache hit. Only codes and marks: no message text (it may quote arguments)."""
    if type(message) is dict and "error" in message:
        error = message.get("error")
        return ERROR, error.get("code") if type(error) is dict else None, None, ()
    result = message.get("result") if type(message) is dict else None
    if type(result) is not dict:
        return OK, None, None, ()
    age = None
    meta = result.get("_meta")
    if type(meta) is dict:
        mark = meta.get(CACHE_META)
        if type(mark) is dict and mark.get("hit") is True:
            age = mark.get("age_s")
            age = float(age) if isinstance(age, (int, float)) and not isinstance(age, bool) else NO_AGE
    return result_kind(result), None, age, ()


def outcome_facts(outcome: Any) -> tuple:
    """How an upstream request's outcome ends its CLIENT span: `outcome` is the upstream's result,
    an UpstreamError, or why troupe stopped waiting (a str)."""
    if isinstance(outcome, str):
        return CANCELLED
    if isinstance(outcome, UpstreamError):
        lost = (("troupe.upstream.lost", {"troupe.server": outcome.server or ""}, time.time_ns()),) \
            if outcome.link_lost else ()
        return ERROR, outcome.code, None, lost
    return result_kind(outcome), None, None, ()


def result_kind(result: Any) -> str:
    if type(result) is dict:
        if result.get("isError") is True:
            return TOOL_ERROR
        if result.get("resultType") == "input_required":  # modern.input_required, inline
            return INPUT_REQUIRED
    return OK


def finish(span: RecordedSpan | None, facts: tuple, at_ns: int | None) -> None:
    """End `span` as `facts` say (ended at `at_ns`, when the call path took the time)."""
    if span is None:
        return
    outcome, code, age, events = facts
    span.events.extend(events)
    if age is not None:
        span.events.append(("troupe.cache.hit", {"troupe.cache.age_s": age} if age != NO_AGE else {},
                            at_ns or time.time_ns()))
    if outcome == ERROR:
        if isinstance(code, int) and not isinstance(code, bool):
            span.set_attribute("rpc.response.status_code", str(code))
            span.set_attribute("rpc.jsonrpc.error_code", code)
            span.set_attribute("error.type", str(code))
        else:
            span.set_attribute("error.type", "_OTHER")
        span.set_error()
    elif outcome == TOOL_ERROR or outcome == TIMED_OUT[0]:
        span.set_attribute("error.type", outcome)
        span.set_error()
    span.set_attribute("troupe.outcome", outcome)
    span.end(at_ns)
