"""FastMCP stdio test server "notes" that takes --delay seconds (default 1) before it serves, as
a server with a slow start does: a tool, a resource (notes://readme), a resource template
(notes://note/{name}), a prompt (summarize) and completion of the prompt's argument."""
import argparse
import time

TOPICS = ("actors", "agents", "gevent")


def build():
    from fastmcp import FastMCP  # imported after the delay: a real server's import is part of its start

    mcp = FastMCP("notes")

    @mcp.tool
    def word_count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    @mcp.resource("notes://readme", mime_type="text/plain")
    def readme() -> str:
        """The notes server's readme."""
        return "These are the slow notes."

    @mcp.resource("notes://note/{name}", mime_type="text/plain")
    def note(name: str) -> str:
        """One note, by name."""
        return f"note {name}"

    @mcp.prompt
    def summarize(topic: str) -> str:
        """Ask for a summary of a topic."""
        return f"Please summarize {topic} in three sentences."

    @mcp.completion
    def complete(ref, argument, context):
        if getattr(ref, "name", None) == "summarize" and argument.name == "topic":
            return [t for t in TOPICS if t.startswith(argument.value)]
        return None

    return mcp


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--delay", type=float, default=1.0)
    args = p.parse_args()
    time.sleep(args.delay)
    build().run(show_banner=False)
