"""A note-keeping stdio server whose tools say whether they only read (annotations), for
profiles: `read_note` and `list_notes` are read-only, `write_note` and `delete_note` change
things, and `grow` adds the read-only tool `count_notes` and announces the list change."""
from __future__ import annotations

import threading

from tests.servers._mini import MiniServer

READS = {"readOnlyHint": True}
WRITES = {"readOnlyHint": False, "destructiveHint": False}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def main() -> None:
    server = MiniServer("notes")
    notes = {"welcome": "hello from the notes server"}
    lock = threading.Lock()

    server.add_tool("read_note", NAME, lambda a: notes.get(a["name"], "(no such note)"), "Read one note.",
                    annotations=READS)
    server.add_tool("list_notes", None, lambda a: ", ".join(sorted(notes)), "List the notes.", annotations=READS)

    def write(args):
        with lock:
            notes[args["name"]] = str(args.get("text") or "")
        return "written"
    server.add_tool("write_note", {**NAME, "properties": {**NAME["properties"], "text": {"type": "string"}}},
                    write, "Write a note.", annotations=WRITES)
    server.add_tool("delete_note", NAME, lambda a: "deleted" if notes.pop(a["name"], None) else "no such note",
                    "Delete a note.", annotations={"readOnlyHint": False, "destructiveHint": True})

    def grow(args):
        server.add_tool("count_notes", None, lambda a: str(len(notes)), "Count the notes.", annotations=READS)
        server.notify("notifications/tools/list_changed")  # before the reply: seen no later than it
        return "grown"
    server.add_tool("grow", None, grow, "Add the count_notes tool.", annotations=WRITES)
    server.run()


if __name__ == "__main__":
    main()
