"""A storm of tools/list_changed from one server (issue 26, item 2): troupe re-lists about once per
round trip (one re-list in flight and one pending), the catalogue ends on the server's latest
list, and another server's calls stay as fast as they were before the storm."""
from __future__ import annotations

import statistics
import time

import pytest

from actors.catalogue.registry import REPUBLISH_AFTER
from tests.support import wait_until
from tests.support.troupe import Troupe, json_of, server, text_of

pytestmark = pytest.mark.slow  # a storm of thousands of notifications against 2,000 tools
TOOLS = 2000
STORM = 5000  # notifications, as fast as the server can send them
PACED = 3000  # notifications over PACED_SECONDS: a storm that lasts while calls are timed
PACED_SECONDS = 3.0
CALM_CALLS = 300
CALM_SECONDS = 2.0
WINDOW = 4.0  # seconds of calls timed from a burst's start: the burst and what it leaves behind
SLOWER = 1.5  # the bound on another server's p50 during the storm
# A call over stdio takes well under a millisecond here; on a 2-core machine shared with other
# test runs a p50 moves by a few tenths of one between two calm runs. Before coalescing, calls
# during such a storm waited for many seconds.
JITTER = 0.0003
# Each re-list of 2,000 tools is a round trip of several ms (the server builds and encodes them,
# troupe decodes and compares them): a storm sent at once costs a handful, one paced at 1,000/s
# one per round trip.
MAX_RELIST_SHARE = 0.05
MAX_PACED_SHARE = 0.25


def _timed(t: Troupe, text: str) -> float:
    started = time.monotonic()
    assert text_of(t.call("echo__echo", {"text": text}, timeout=10)) == text
    return time.monotonic() - started


def _p50_over(t: Troupe, seconds: float, at_least: int) -> tuple[float, int]:
    samples: list[float] = []
    started = time.monotonic()
    while len(samples) < at_least or time.monotonic() - started < seconds:
        samples.append(_timed(t, str(len(samples))))
    return statistics.median(samples), len(samples)


def _latest_listed(t: Troupe, version: int) -> bool:
    tools = t.request("tools/list", timeout=30)["result"]["tools"]
    first = next((tool for tool in tools if tool["name"] == "storm__s0000"), None)
    return first is not None and first["description"] == f"Storm tool 0, version {version}."


def _notices(t: Troupe) -> int:
    return sum(1 for m in list(t.received) if m.get("method") == "notifications/tools/list_changed")


def _storm(t: Troupe, count: int, seconds: float) -> dict:
    """Run a changing storm while timing echo calls, with a calm run just before it."""
    calm, calls = _p50_over(t, CALM_SECONDS, CALM_CALLS)
    before, relists_before = json_of(t.call("storm__lists")), t.server_status("storm")["relists"]
    notices, started = _notices(t), time.monotonic()
    assert text_of(t.call("storm__storm", {"count": count, "seconds": seconds, "change": True})) \
        == f"storming {count}"
    during, _ = _p50_over(t, seconds or WINDOW, 30)  # a paced storm: only while it lasts
    wait_until(lambda: json_of(t.call("storm__lists"))["sent"] == before["sent"] + count, 30,
               message="storm sent")
    version = json_of(t.call("storm__lists"))["version"]
    # No lost update: the catalogue ends on the list of the last notification.
    wait_until(lambda: _latest_listed(t, version), 20, interval=0.2, message="latest list")
    # The catalogue was rebuilt (and clients told) at most once per hold, not once per re-list.
    told, spell = _notices(t) - notices, time.monotonic() - started
    after, _ = _p50_over(t, CALM_SECONDS, CALM_CALLS)  # no backlog of re-lists left behind
    served = json_of(t.call("storm__lists"))["relists"] - before["relists"]
    counted = t.server_status("storm")["relists"] - relists_before
    print(f"storm: {count} list_changed {f'over {seconds:g}s' if seconds else 'at once'} -> {served} re-lists "
          f"({served / count:.2%}), clients told {told} times in {spell:.1f}s; echo p50 calm "
          f"{calm * 1000:.2f} ms ({calls} calls), during {during * 1000:.2f} ms ({during / calm:.2f}x), "
          f"after {after * 1000:.2f} ms ({after / calm:.2f}x)")
    assert 1 <= told <= spell / REPUBLISH_AFTER[0] + 2
    assert counted == served  # troupe's count in /status is what the server saw
    return {"served": served, "calm": calm, "during": during, "after": after}


def _unslowed(run: dict) -> bool:
    bound = run["calm"] * SLOWER + JITTER
    return run["during"] < bound and run["after"] < bound


@pytest.mark.parametrize("count, seconds, share", [(STORM, 0, MAX_RELIST_SHARE),
                                                   (PACED, PACED_SECONDS, MAX_PACED_SHARE)],
                         ids=["burst", "paced"])
def test_a_list_changed_storm_costs_few_relists_and_slows_no_other_server(make, count, seconds, share):
    t = make([server("storm", "tests.servers.storm", "--tools", str(TOOLS), pin=False),
              server("echo", "tests.servers.echo")])
    for i in range(20):  # warm both paths
        _timed(t, f"warm {i}")
    run = _storm(t, count, seconds)
    assert 1 <= run["served"] < count * share
    if not _unslowed(run):
        # Other test runs share this machine's two cores: a spell of their load within the
        # storm's seconds is not the storm's doing. A second storm, with its own calm run, must
        # miss too (before coalescing, calls stalled for seconds every time).
        run = _storm(t, count, seconds)
    assert _unslowed(run), run


def test_an_unchanged_relist_rebuilds_nothing_and_tells_no_client(make):
    t = make([server("storm", "tests.servers.storm", "--tools", "50", pin=False)])
    notices_before = _notices(t)
    assert text_of(t.call("storm__storm", {"count": 200, "change": False})) == "storming 200"
    wait_until(lambda: json_of(t.call("storm__lists"))["sent"] == 200, 20, message="storm sent")
    served = json_of(t.call("storm__lists"))["relists"]
    wait_until(lambda: t.server_status("storm")["relists"] == served - 1, 10, message="re-lists counted")
    notices = _notices(t)
    print(f"unchanged storm: 200 list_changed -> {served - 1} re-lists, {notices - notices_before} notices")
    assert notices == notices_before  # nothing changed: clients hear nothing
