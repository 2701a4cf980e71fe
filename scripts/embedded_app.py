"""Example: a gevent WSGI app with troupe embedded, its MCP endpoints mounted at /troupe on the same port."""
from gevent import monkey

monkey.patch_all()  # first thing, before any other import: troupe refuses to start otherwise

import argparse  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from urllib.parse import parse_qs  # noqa: E402

import gevent  # noqa: E402
import gevent.event  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a checkout
import actors  # noqa: E402
from actors.embed import mount  # noqa: E402
from actors.serve.http import NoDelayHandler  # noqa: E402

FANOUT_DEFAULT = 50
FANOUT_MAX = 200  # also the server's max_in_flight, so no call is refused as busy
FANOUT_TIMEOUT = 30.0  # seconds the /fanout request waits for all its calls


def troupe_config(root: str) -> dict:
    """troupe's own read-only workspace server over `root`; every MCP client of /troupe/mcp sees it too."""
    # work_dir: where the `actors` package lives, so `-m actors.bundled.workspace` imports from a checkout too
    home = str(Path(actors.__file__).resolve().parent.parent)
    return {"servers": [{"name": "workspace", "max_in_flight": FANOUT_MAX, "transport": {"type": "stdio", "stdio": {
        "command": sys.executable, "args": ["-m", "actors.bundled.workspace", "--root", root], "work_dir": home}}}],
        "serve": {"mode": "flat", "startup_wait": 15}}




def host_app(troupe):
    """The host's own routes: `/` and `/fanout?n=50` (one tool call from each of n greenlets)."""

    def reply(start_response, value, status="200 OK"):
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps(value, indent=2).encode()]

    def fanout(n: int) -> dict:
        tools = troupe.list_tools()  # also waits for start-up to settle

        def one(i: int):
            began = time.monotonic()
            result = troupe.call_tool("workspace__file_info", {"path": "."})
            return time.monotonic() - began, not result.get("isError")
        began = time.monotonic()
        jobs = [gevent.spawn(one, i) for i in range(n)]
        gevent.joinall(jobs, timeout=FANOUT_TIMEOUT)
        wall = time.monotonic() - began
        took = [j.value[0] for j in jobs if j.successful()]
        return {"calls": n, "ok": sum(1 for j in jobs if j.successful() and j.value[1]),
                "wall_s": round(wall, 4), "sum_of_calls_s": round(sum(took), 4),
                "slowest_call_s": round(max(took, default=0), 4), "tools_known": len(tools)}

    def app(environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == "/":
            return reply(start_response, {"hello": "from the host app", "troupe": "/troupe/mcp",
                                          "status": "/troupe/status", "fanout": "/fanout?n=50"})
        if path == "/fanout":
            query = parse_qs(environ.get("QUERY_STRING", ""))
            n = max(1, min(FANOUT_MAX, int((query.get("n") or [FANOUT_DEFAULT])[0])))
            return reply(start_response, fanout(n))
        return reply(start_response, {"error": f"no route {path}"}, "404 Not Found")
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--root", default=".", help="directory the workspace server reads")
    args = parser.parse_args()

    troupe = actors.start(troupe_config(str(Path(args.root).resolve())))
    app = mount("/troupe", actors.wsgi_app(troupe, bound_host=args.host), host_app(troupe))
    server = WSGIServer((args.host, args.port), app, handler_class=NoDelayHandler)
    stop = gevent.event.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(sig, stop.set)
    server.start()
    print(f"serving http://{args.host}:{server.server_port}/ (MCP at /troupe/mcp); Ctrl-C to stop", flush=True)
    try:
        stop.wait()
    finally:
        server.stop(timeout=1.0)
        troupe.stop()  # every actor and the workspace server process go; this process could go on


if __name__ == "__main__":
    main()
