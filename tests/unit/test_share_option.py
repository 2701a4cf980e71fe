"""`share: all | per_client`: the option is checked with a clear error, and `resolve` (behind
Runtime.connection_or_status) picks a client's own upstream only where the option says so."""
from __future__ import annotations

import subprocess
from dataclasses import replace
from types import MappingProxyType

import pytest

from actors.settings import config
from actors.settings.model import ServerConfig, StdioSpec
from actors.supervision.client_route import ClientRoute, resolve
from actors.supervision.directory import Directory, ServerView
from actors.supervision.states import ServerState
from tests.support import PYTHON, ROOT

ENTRY = "servers:\n  - name: a\n    transport: {type: stdio, stdio: {command: x}}\n"


def test_share_defaults_to_all_and_takes_per_client(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(ENTRY + "  - name: b\n    share: per_client\n    transport: {type: stdio, stdio: {command: y}}\n")
    a, b = config.load(path).servers
    assert (a.share, b.share) == ("all", "per_client")


@pytest.mark.parametrize("value, problem", [("bogus", "servers[0].share: 'bogus' is not one of all, per_client"),
                                            ("[1]", "servers[0].share: must be a string")])
def test_a_bad_share_is_a_clear_error_naming_file_line_and_choices(tmp_path, value, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(ENTRY.replace("    transport", f"    share: {value}\n    transport"))
    with pytest.raises(config.ConfigError) as err:
        config.load(path)
    assert f"{path}:3: {problem}" in "\n".join(err.value.problems)


def test_troupe_check_refuses_a_bad_share(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(ENTRY.replace("    transport", "    share: bogus\n    transport"))
    done = subprocess.run([PYTHON, "-m", "actors.main", "check", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "share: 'bogus' is not one of all, per_client" in done.stdout + done.stderr


class _Ref:
    def __init__(self, urn: str) -> None:
        self.actor_urn = urn


def _view(state=ServerState.READY, share="per_client", ref=None, reason="") -> ServerView:
    cfg = ServerConfig("a", "stdio", stdio=StdioSpec("x"), share=share)
    return ServerView("a", cfg, state, reason, ref if ref is not None else _Ref("conn"), 1, True, (1, 0, 0))


def _directory(server: ServerView, **clients: ServerView) -> Directory:
    return Directory(1, MappingProxyType({"a": server}), MappingProxyType({("a", k): v for k, v in clients.items()}))


def test_a_shared_server_answers_with_its_one_connection_whoever_calls():
    view = _view(share="all")
    assert resolve(_directory(view), "sup", "a", _Ref("s1")) == (view.ref, "")
    assert resolve(_directory(view), "sup", "a", _Ref("s1"), anonymous=True) == (view.ref, "")


def test_a_per_client_server_routes_through_the_supervisor_until_the_clients_own_is_ready():
    me = _Ref("s1")
    assert resolve(_directory(_view()), "sup", "a", me) == (ClientRoute("sup", "a", "s1", me), "")
    starting = _view(ServerState.STARTING, ref=_Ref("mine"))
    assert resolve(_directory(_view(), s1=starting), "sup", "a", me)[0] == ClientRoute("sup", "a", "s1", me)
    ready = replace(starting, state=ServerState.READY)
    assert resolve(_directory(_view(), s1=ready), "sup", "a", me) == (ready.ref, "")
    # another client's upstream is never mine
    assert resolve(_directory(_view(), s2=ready), "sup", "a", me)[0] == ClientRoute("sup", "a", "s1", me)
    backoff = replace(ready, state=ServerState.BACKOFF, reason="exit 3")
    ref, why = resolve(_directory(_view(), s1=backoff), "sup", "a", me)
    assert ref is None and why == "server a (this client's own upstream) is restarting (backoff): exit 3"


def test_a_per_client_server_refuses_anonymous_stateless_callers_and_closed_states():
    ref, why = resolve(_directory(_view()), "sup", "a", _Ref("s1"), anonymous=True)
    assert ref is None and "share: per_client" in why and "serve.clients" in why
    for state in (ServerState.STOPPED, ServerState.PENDING_APPROVAL, ServerState.DENIED):
        ref, why = resolve(_directory(_view(state, reason="r")), "sup", "a", _Ref("s1"))
        assert ref is None and why == f"server a is {state}: r"  # never started for a client either
    assert resolve(Directory(), "sup", "b", _Ref("s1")) == (None, "server b is not configured")


def test_a_clients_own_upstream_tells_its_news_to_its_client_only():
    from actors.events.kinds import ResourceUpdated, ServerListChanged, ServerLogged
    from actors.supervision.per_client import OwnerBus

    class Owner:
        def __init__(self) -> None:
            self.told: list = []

        def tell(self, message) -> None:
            self.told.append(message)
    owner = Owner()
    bus = OwnerBus(owner)
    logged, updated = ServerLogged("a", "info", None, "hi"), ResourceUpdated("a", "x:y")
    for event in (logged, updated, ServerListChanged("a", frozenset({"tools"}))):
        bus.publish(event)
    assert owner.told == [logged, updated]  # a list change of its own touches no catalogue
