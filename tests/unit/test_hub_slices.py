"""Long CPU work yields to the hub: the catalogue build, the search index and a batch's members
run in slices (actors/slicing.py), measured with a greenlet ticker; and the limits that bound
that work (max_tools, max_tool_bytes, serve.max_batch) refuse what is over them, saying so."""
from __future__ import annotations

import gc
import time

import gevent
import pytest

from actors.catalogue import snapshot
from actors.catalogue.snapshot import ServerLists
from actors.downstream.batches import serve_batch
from actors.protocol import inbound, jsonrpc
from actors.settings import config as config_mod
from actors.slicing import Slices
from actors.upstream.listing import UpstreamLists
from actors.upstream.tool_limits import limited
from tests.servers.many_tools import ManyTools

TOOLS = 10_000
LONGEST_GAP = 0.050  # DESIGN.md: no CPU work holds the hub longer than ~50 ms


def _tools(n: int) -> tuple:
    server = ManyTools(synthetic=n)
    return tuple(server._synthetic(i) for i in range(n))


def _longest_gap(work) -> tuple[float, int]:
    """Run work() on a greenlet beside a ticker that sleeps 1 ms at a time: (the longest the ticker
    waited between two turns, its turns). Counted in this process's CPU time: what held the
    ticker is work on the hub, not the other processes of a shared machine taking the cores. The
    cycle collector is held off meanwhile: its full passes are the interpreter's, and this
    measures the slicing."""
    ticks: list[float] = []

    def ticker() -> None:
        while True:
            gevent.sleep(0.001)
            ticks.append(time.process_time())
    gc.collect()
    gc.disable()
    try:
        beat = gevent.spawn(ticker)
        gevent.sleep(0.01)
        gevent.spawn(work).join()
        after = len(ticks)
        for _ in range(1000):  # the ticker's next turn closes the gap the work's last stretch held
            if len(ticks) > after:
                break
            gevent.sleep(0.001)
        beat.kill()
    finally:
        gc.enable()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    return max(gaps), len(ticks)


def test_the_catalogue_and_its_search_index_are_built_in_slices():
    lists = {"big": ServerLists("big", "big", _tools(TOOLS))}
    built = {}

    def work() -> None:
        pause = Slices()
        built["cat"] = cat = snapshot.build(lists, "__", 1, between=pause)
        built["pauses"] = pause.pauses
        built["index"] = cat.search_index  # the lazy attribute, built in slices of its own
    gap, ticks = _longest_gap(work)
    print(f"sliced build and index of {TOOLS} tools: longest gap {gap * 1000:.1f} ms over {ticks} ticks")
    assert len(built["cat"].tools) == TOOLS and built["index"].size == TOOLS
    assert built["pauses"] > 0
    assert ticks > 20  # the ticker ran all along, not just once at the end
    assert gap < LONGEST_GAP, gap


def test_unsliced_work_would_be_seen_by_the_ticker():
    # The measure itself can fail: the same build without slices holds the ticker for its whole length.
    # Its length is the machine's (47 ms to over 100 ms for 10,000 tools): the ticker must see
    # nearly all of it as one gap, whatever it is.
    lists = {"big": ServerLists("big", "big", _tools(TOOLS))}
    spent = {}

    def work() -> None:
        started = time.process_time()
        snapshot.build(lists, "__", 1)  # without `between`: one turn (its search index slices itself)
        spent["cpu"] = time.process_time() - started
    gap, _ = _longest_gap(work)
    assert spent["cpu"] > 0.01 and gap > 0.8 * spent["cpu"], (gap, spent)


def test_a_batch_s_members_are_served_in_slices():
    answers = []

    def handle(message, sink) -> None:
        end = time.perf_counter() + 0.002  # 2 ms of CPU each: 200 ms for the batch
        while time.perf_counter() < end:
            pass
        sink(jsonrpc.result(message["id"], {}))
    batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(100)]
    gap, _ = _longest_gap(lambda: serve_batch(batch, answers.append, handle))
    assert len(answers) == 1 and len(answers[0]) == 100
    assert gap < LONGEST_GAP, gap


def test_a_batch_over_max_batch_gets_one_invalid_request_error():
    batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(101)]
    checked = inbound.check(batch, "test client", max_batch=100)
    assert checked.message is None and not checked.batch and len(checked.answers) == 1
    error = checked.answers[0]["error"]
    assert error["code"] == jsonrpc.INVALID_REQUEST and "101" in error["message"] and "serve.max_batch" in error["message"]
    within = inbound.check(batch[:100], "test client", max_batch=100)
    assert within.batch and len(within.message) == 100 and not within.answers


def test_max_tools_keeps_the_first_and_max_tool_bytes_drops_big_definitions_with_notes():
    tools = _tools(20) + ({"name": "huge", "description": "x" * 70_000, "inputSchema": {"type": "object"}},)
    kept, notes = limited(tools, 10, 64 * 1024)
    assert [t["name"] for t in kept] == [f"s{i:05d}" for i in range(10)]
    assert notes == ("listed 21 tools; only the first 10 are served (max_tools), 11 refused",)
    kept, notes = limited(tools, 100, 64 * 1024)
    assert len(kept) == 20 and "huge" not in {t["name"] for t in kept}
    assert len(notes) == 1 and "'huge'" in notes[0] and "max_tool_bytes" in notes[0]
    assert limited(tools[:5], 10, 64 * 1024) == (tools[:5], ())


def test_the_lists_keep_only_max_tools_but_count_every_tool_listed():
    pages = {None: ({"tools": list(_tools(5)), "nextCursor": "2"}), "2": {"tools": list(_tools(5))}}
    done = []
    lists = UpstreamLists(lambda method, params, reply: reply(pages[(params or {}).get("cursor")]),
                          lambda read, kinds, changed: done.append(read), keep={"tools": 3})
    lists.read(("tools",), {"tools": {}})
    assert len(done[0]["tools"]) == 4  # one over the limit: whoever applies it knows it was passed
    assert lists.listed["tools"] == 10


@pytest.mark.parametrize("text, problem", [
    ("servers:\n - {name: a, max_tools: 0, transport: {type: stdio, stdio: {command: x}}}\n",
     "servers[0].max_tools: must be an integer >= 1"),
    ("servers:\n - {name: a, max_tool_bytes: big, transport: {type: stdio, stdio: {command: x}}}\n",
     "servers[0].max_tool_bytes: must be an integer"),
    ("serve: {max_batch: 0}\n", "serve.max_batch: must be > 0"),
])
def test_limit_keys_are_checked_with_clear_errors(tmp_path, text, problem):
    path = tmp_path / "troupe.yaml"
    path.write_text(text)
    with pytest.raises(Exception) as failed:
        config_mod.load(path)
    assert problem in str(failed.value)


def test_limit_defaults(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text("servers:\n - {name: a, transport: {type: stdio, stdio: {command: x}}}\n")
    loaded = config_mod.load(path)
    assert loaded.serve.max_batch == 100
    assert (loaded.servers[0].max_tools, loaded.servers[0].max_tool_bytes) == (10_000, 64 * 1024)
