"""One SDK client in its default (auto) mode, behind a real HAProxy that spreads requests round-robin
over three troupes on one Redis: it negotiates 2026-07-28, its 300 calls land on every instance,
a `single` server's counter stays one counter, and the pages of tools/list, each from whichever
instance HAProxy picked, join into the one catalogue (cursors are digests, not process state)."""
from __future__ import annotations

import asyncio
import subprocess

import pytest
import requests
import yaml
from mcp import Client

from tests.support import free_port, wait_until
from tests.support.ports import stop
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # three troupes, redis-server and haproxy
HAPROXY = "/usr/sbin/haproxy"
CALLS = 300
TOOLS = 600  # more than one page of troupe's own listing (500)


def _haproxy_config(port: int, backends: list[str]) -> str:
    servers = "\n".join(f"  server t{i} {b.split('//', 1)[1]} check inter 500ms" for i, b in enumerate(backends))
    return f"""global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
frontend mcp
  bind 127.0.0.1:{port}
  default_backend troupes
backend troupes
  balance roundrobin
{servers}
"""


@pytest.fixture
def spread(tmp_path):
    redis = RedisServer(tmp_path).start()
    port = free_port()
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", "--tools", str(TOOLS),
                                            placement="replicated", pin=False),
                                     server("counter", "tests.servers.counter", pin=False)],
                          mode="flat", json_response=True, allowed_hosts=[f"127.0.0.1:{port}"])
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 3}}))
    troupes = [TroupeHttp(config) for _ in range(3)]
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(_haproxy_config(port, [t.base for t in troupes]))
    proxy = subprocess.Popen([HAPROXY, "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    yield troupes, f"http://127.0.0.1:{port}/mcp"
    stop(proxy)
    for t in troupes:
        t.stop()
    redis.stop()


def _servers(t: TroupeHttp) -> dict:
    return {s["name"]: s for s in requests.get(t.base + "/status", timeout=10).json()["servers"]}


def _ready(troupes, url: str) -> bool:
    if not all(s["state"] == "ready" for t in troupes for s in _servers(t).values()):
        return False
    try:  # haproxy is up and has found its backends
        return requests.post(url, json={}, timeout=2).status_code != 503
    except requests.ConnectionError:
        return False


def test_an_auto_mode_client_spreads_calls_and_pages_over_three_instances(spread):
    troupes, url = spread
    wait_until(lambda: _ready(troupes, url), 40, message="three troupes and haproxy ready")
    before = [_servers(t)["echo"]["calls"] for t in troupes]

    async def scenario():
        async with Client(url) as client:  # auto: probes with server/discover, then stateless requests
            assert client.protocol_version == "2026-07-28"
            names: list[str] = []
            cursor = None
            pages = 0
            while True:
                page = await client.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                pages += 1
                cursor = page.next_cursor
                if not cursor:
                    break
            assert pages >= 2 and len(names) == len(set(names)) and len(names) >= TOOLS + 6
            assert {"echo__echo", "counter__next"} <= set(names)
            for i in range(CALLS):
                assert (await client.call_tool("echo__echo", {"text": str(i)})).content[0].text == str(i)
            counted = [int((await client.call_tool("counter__next", {})).content[0].text) for _ in range(9)]
            assert counted == list(range(counted[0], counted[0] + 9))  # one counter, whichever instance answered
    asyncio.run(asyncio.wait_for(scenario(), 120))
    landed = [_servers(t)["echo"]["calls"] - b for t, b in zip(troupes, before)]
    assert sum(landed) == CALLS and all(n >= CALLS // 6 for n in landed), landed  # spread, not all on one
