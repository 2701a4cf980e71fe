"""filter_tools through a running troupe, with real FastMCP servers: a server's initialize
instructions lead a task to its tools, and the answer is compact."""
from __future__ import annotations

import json

from tests.support.troupe import Troupe, server, text_of, write_config


def test_a_servers_instructions_lead_a_task_to_its_tools(tmp_path):
    config = write_config(tmp_path, [server("jobs", "tests.servers.fastmcp_listings", "jobs"),
                                     server("lodging", "tests.servers.fastmcp_listings", "lodging")])
    t = Troupe(config)
    try:
        t.initialize()
        listed = json.loads(text_of(t.call("list_tools")))
        servers_tools = {tool["name"] for tool in listed["tools"] if tool["server"] != "(troupe)"}  # not troupe's own
        assert servers_tools == {"jobs__search", "jobs__details", "lodging__search", "lodging__details"}, listed
        # Both servers' tools read alike; "homestay" and "job" are only in their instructions.
        answer = text_of(t.call("filter_tools", {"query": "Find me a homestay in Lisbon for next week"}))
        assert "\n" not in answer  # compact JSON
        assert json.loads(answer)["tools"][0]["name"] == "lodging__search", answer
        found = json.loads(text_of(t.call("filter_tools", {"query": "Any job offers for a welder in Porto?"})))
        assert {tool["name"] for tool in found["tools"][:2]} == {"jobs__search", "jobs__details"}, found
    finally:
        t.close()
