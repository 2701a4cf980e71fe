"""What tool search reads beyond a tool's own text: its server's initialize instructions, a
client's profile view; and that a ranking is the same in every process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from actors.catalogue import snapshot as catalogue
from actors.catalogue.views import Profile, view
from actors.downstream import metatools
from actors.protocol import handshake, mcp
from tests.support import ROOT


def _tool(name: str, description: str) -> dict:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


# Two servers whose tools say nothing of stays or homes: only the instructions tell them apart.
LODGING = catalogue.ServerLists("lodging", "lodging", (_tool("search", "Search listings by place and dates."),
                                                       _tool("details", "Details of one listing.")),
                                instructions="Find homestays and apartments to rent for a holiday.")
JOBS = catalogue.ServerLists("jobs", "jobs", (_tool("search", "Search listings by place and salary."),
                                              _tool("apply", "Apply to one listing.")),
                             instructions="Job offers from company career pages.")


def _ranked(cat, query: str) -> list[str]:
    answer = metatools.handle("filter_tools", {"query": query, "limit": 10}, cat)
    return [t["name"] for t in json.loads(answer["content"][0]["text"])["tools"]]


def test_the_handshake_keeps_the_servers_instructions_in_both_eras():
    legacy = handshake.accept({"protocolVersion": mcp.SUPPORTED_VERSIONS[0], "instructions": "Use search first."})
    assert legacy.instructions == "Use search first."
    assert handshake.accept({"protocolVersion": mcp.SUPPORTED_VERSIONS[0], "instructions": 7}).instructions == ""
    modern = handshake.accept_discover({"supportedVersions": [handshake.modern_client.MODERN_VERSION],
                                        "capabilities": {}, "instructions": "Stateless."})
    assert modern.instructions == "Stateless."


def test_a_servers_instructions_lead_a_task_to_its_tools():
    with_words = catalogue.build({"lodging": LODGING, "jobs": JOBS}, "__", 1)
    assert dict(with_words.instructions) == {"lodging": LODGING.instructions, "jobs": JOBS.instructions}
    assert _ranked(with_words, "find a homestay in Lisbon for next week")[0] == "lodging__search"
    assert set(_ranked(with_words, "any job offers for a welder in Porto?")[:2]) == {"jobs__search", "jobs__apply"}
    without = catalogue.build({"lodging": catalogue.ServerLists("lodging", "lodging", LODGING.tools),
                               "jobs": catalogue.ServerLists("jobs", "jobs", JOBS.tools)}, "__", 1)
    # Without them the first word that matches, "find" → search, ties the two: names decide.
    assert _ranked(without, "find a homestay in Lisbon for next week")[:2] == ["jobs__search", "lodging__search"]


def test_search_reads_a_profiles_view_and_keeps_its_index_with_that_view():
    cat = catalogue.build({"lodging": LODGING, "jobs": JOBS}, "__", 1)
    jobs_only = view(cat, Profile("recruiter", servers=frozenset({"jobs"})))
    found = _ranked(jobs_only, "find a homestay and search listings")
    assert found and all(name.startswith("jobs__") for name in found)
    assert "lodging__search" in _ranked(cat, "find a homestay and search listings")
    # One index per view, kept with it (and the same object on the next query), none shared.
    assert metatools._index(jobs_only) is metatools._index(jobs_only)
    assert metatools._index(jobs_only) is not metatools._index(cat)
    assert metatools._index(jobs_only).size == 2 and metatools._index(cat).size == 4


_RANK_IN_A_CHILD = """
import json, sys
from tests.unit.test_tool_search import SERVERS, CASES, _cat, _ranked
cat = _cat()
print(json.dumps([_ranked(cat, q, 50) for q, _ in CASES] + [_ranked(cat, "get the file and the page", 50)]))
"""


def test_rankings_are_identical_whatever_the_hash_seed():
    """Set iteration order changes with PYTHONHASHSEED; float sums must not follow it."""
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", _RANK_IN_A_CHILD], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=60, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1 and json.loads(outputs.pop())[0]
