"""MCP test server whose tool `wedge` never replies and wedges the whole server: nothing read
after it is answered, ping included (like a regex that backtracks forever while holding the
interpreter); `hang` never replies but leaves the server answering; `echo` works until a wedge."""
import threading

from tests.servers._mini import NO_REPLY, MiniServer
from tests.servers.echo import TEXT_SCHEMA


class Wedge(MiniServer):
    def before_call(self, id_, name: str, args: dict) -> None:
        if name == self.prefix + "wedge":
            threading.Event().wait()  # the reader thread is stuck: no later message is answered


if __name__ == "__main__":
    server = Wedge(name="wedge")
    server.add_tool("echo", TEXT_SCHEMA, lambda a: a["text"], "Return the given text.")
    server.add_tool("hang", None, lambda a: NO_REPLY, "Never answers; the server keeps answering the rest.")
    server.add_tool("wedge", None, lambda a: NO_REPLY, "Never answers, and wedges the whole server.")
    server.run()
