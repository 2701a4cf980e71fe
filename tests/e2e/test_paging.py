"""troupe's own cursors over the merged catalogue: every page, in order, once; bad cursors refused."""
from __future__ import annotations

from tests.support.schema import validate_message
from tests.support.troupe import Troupe, server, write_config


def test_tools_list_pages_through_a_big_merged_catalogue(tmp_path):
    t = Troupe(write_config(tmp_path, [server("a", "tests.servers.echo", "--tools", "700", "--page-size", "100"),
                                       server("b", "tests.servers.echo", "--tools", "300")], mode="flat"))
    try:
        t.initialize()
        names, cursor, pages = [], None, 0
        while True:
            response = t.request("tools/list", {"cursor": cursor} if cursor else {}, timeout=30)
            validate_message(response, "server", "tools/list")
            names += [tool["name"] for tool in response["result"]["tools"]]
            pages += 1
            cursor = response["result"].get("nextCursor")
            if not cursor:
                break
        assert pages >= 3
        assert len(names) == len(set(names))  # no tool twice
        assert sum(n.startswith("a__t") for n in names) == 700  # upstream pages were all read
        assert sum(n.startswith("b__t") for n in names) == 300
        bad = t.request("tools/list", {"cursor": "not-a-cursor"})
        assert bad["error"]["code"] == -32602
    finally:
        t.close()
