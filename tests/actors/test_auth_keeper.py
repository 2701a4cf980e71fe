"""The AuthKeeper's decisions, in-process, with the network steps of a sign-in replaced by fakes:
when it refreshes, when it asks for a sign-in, what it publishes and stores, whom it tells."""
from __future__ import annotations

import stat
import time

import pykka
import pytest

from actors.auth import flow
from actors.auth.access import UpstreamAuthAccess, auth_snapshot
from actors.auth.keeper import NO_FRONT, AuthKeeper
from actors.auth.messages import CompleteSignIn, SetRedirect, SignedIn, SignInRequired
from actors.auth.tokens import Grant, TokenStore
from tests.support import wait_until

URL = "https://mcp.example/mcp"


class Recorder:
    """Stands in for the Supervisor: keeps what it is told."""

    def __init__(self) -> None:
        self.told: list = []

    def tell(self, message) -> None:
        self.told.append(message)


class FakeFlow:
    """The network steps: numbered tokens, and a refresh that can be made to fail."""

    def __init__(self) -> None:
        self.issued, self.refreshes, self.begun, self.refuse_refresh = 0, 0, 0, False

    def token(self, grant: Grant, lifetime: float = 3600) -> Grant:
        self.issued += 1
        return grant.with_token({"access_token": f"access-{self.issued}", "refresh_token": f"refresh-{self.issued}",
                                 "expires_in": lifetime})

    def begin(self, key, url, challenge, settings, redirect_uri, known):
        self.begun += 1
        grant = Grant("https://as/token", url, "client", "none", redirect_uri)
        return flow.Pending(key, f"https://as/authorize?n={self.begun}", grant, state=f"state-{self.begun}",
                            verifier="v", issuer="https://as", iss_required=self.iss_required)

    iss_required = False
    exchanges = 0

    def exchange(self, pending, code):
        self.exchanges += 1
        assert code == "the-code"
        return self.token(pending.grant, lifetime=self.lifetime)

    def refresh(self, grant):
        self.refreshes += 1
        if self.refuse_refresh:
            raise flow.SignInError("refresh refused: invalid_grant", rejected=True)
        return self.token(grant, lifetime=self.lifetime)

    lifetime = 3600.0


@pytest.fixture
def keeper(tmp_path, monkeypatch):
    fake = FakeFlow()
    for name in ("begin", "exchange", "refresh"):
        monkeypatch.setattr(flow, name, getattr(fake, name))
    (box, writer), supervisor = auth_snapshot(), Recorder()
    ref = AuthKeeper.start(str(tmp_path / "oauth-tokens.json"), writer, lambda: supervisor)
    yield ref, box, supervisor, fake, UpstreamAuthAccess(box, ref)
    ref.stop()


def _ask(ref, state: str, code: str = "the-code", iss: str | None = None):
    future = pykka.ThreadingFuture()
    ref.tell(CompleteSignIn(state, code, future, iss))
    return future.get(timeout=5)


def _signed_in(keeper_fixture) -> str:
    ref, box, supervisor, fake, access = keeper_fixture
    access.unauthorized("guarded", URL, 'Bearer resource_metadata="https://mcp.example/.well-known/x"', None)
    wait_until(lambda: box.current.sign_ins.get(URL, {}).get("auth_url"), 5, message="an auth_url")
    state = f"state-{fake.begun}"
    assert _ask(ref, state) == URL
    wait_until(lambda: access.bearer(URL), 5, message="a bearer")
    return state


def test_no_front_then_a_sign_in_url(keeper):
    ref, box, supervisor, fake, access = keeper
    access.unauthorized("guarded", URL, None, None)
    wait_until(lambda: box.current.sign_ins.get(URL) == {"auth_error": NO_FRONT}, 5, message="no front")
    ref.tell(SetRedirect("http://127.0.0.1:9/"))
    wait_until(lambda: box.current.sign_ins.get(URL, {}).get("auth_url") == "https://as/authorize?n=1", 5,
               message="the sign-in URL once troupe listens")


def test_sign_in_stores_0600_tells_the_supervisor_and_refuses_a_used_state(keeper, tmp_path):
    ref, box, supervisor, fake, access = keeper
    ref.tell(SetRedirect("http://127.0.0.1:9"))
    with pytest.raises(KeyError):
        _ask(ref, "never-issued")
    state = _signed_in(keeper)
    assert access.bearer(URL) == "access-1" and URL not in box.current.sign_ins
    wait_until(lambda: SignedIn(URL) in supervisor.told, 5, message="SignedIn told")
    path = tmp_path / "oauth-tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TokenStore(str(path)).load()[URL].refresh_token == "refresh-1"
    with pytest.raises(KeyError):
        _ask(ref, state)
    assert "access-1" not in repr(box.current)


def test_a_refused_token_is_refreshed_once_then_a_sign_in_is_asked(keeper):
    ref, box, supervisor, fake, access = keeper
    ref.tell(SetRedirect("http://127.0.0.1:9"))
    _signed_in(keeper)
    supervisor.told.clear()
    access.unauthorized("guarded", URL, None, "Bearer access-1")
    wait_until(lambda: access.bearer(URL) == "access-2", 5, message="refreshed after the 401")
    wait_until(lambda: supervisor.told == [SignedIn(URL)], 5, message="started again")
    begun = fake.begun
    access.unauthorized("guarded", URL, None, "Bearer access-2")  # the new token refused too
    wait_until(lambda: box.current.sign_ins.get(URL, {}).get("auth_url"), 5, message="a sign-in, not a refresh")
    assert fake.refreshes == 1 and fake.begun == begun + 1 and access.bearer(URL) is None


def test_an_older_refused_token_restarts_with_the_current_one(keeper):
    ref, box, supervisor, fake, access = keeper
    ref.tell(SetRedirect("http://127.0.0.1:9"))
    _signed_in(keeper)
    supervisor.told.clear()
    access.unauthorized("guarded", URL, None, "Bearer some-older-token")
    wait_until(lambda: supervisor.told == [SignedIn(URL)], 5, message="started again")
    assert fake.refreshes == 0


def test_refreshed_before_expiry_and_a_revoked_refresh_token_asks_for_a_sign_in(keeper):
    ref, box, supervisor, fake, access = keeper
    fake.lifetime = 0.4  # refreshed a quarter of its lifetime before it ends
    ref.tell(SetRedirect("http://127.0.0.1:9"))
    _signed_in(keeper)
    started = time.monotonic()
    wait_until(lambda: fake.refreshes >= 2, 5, message="two timely refreshes")
    assert time.monotonic() - started < 2.0
    fake.refuse_refresh = True
    wait_until(lambda: access.bearer(URL) is None, 5, message="the revoked grant dropped")
    # Nobody was refused yet: the supervisor hears of it, and the sign-in is prepared at once.
    wait_until(lambda: SignInRequired(URL) in supervisor.told, 5, message="SignInRequired told")
    wait_until(lambda: box.current.sign_ins.get(URL, {}).get("auth_url"), 5, message="a sign-in asked")


def test_a_code_from_another_issuer_is_refused_before_any_exchange(keeper):
    """RFC 9207: where the server promised `iss`, a response without it or naming another issuer
    is refused, its code never sent; a fresh sign-in link replaces the used one."""
    ref, box, supervisor, fake, access = keeper
    fake.iss_required = True
    ref.tell(SetRedirect("http://127.0.0.1:9"))
    access.unauthorized("guarded", URL, None, None)
    for n, iss in enumerate((None, "https://evil", "https://as/"), start=1):
        wait_until(lambda n=n: box.current.sign_ins.get(URL, {}).get("auth_url") == f"https://as/authorize?n={n}", 5,
                   message=f"sign-in link {n}")
        with pytest.raises(flow.SignInError, match="RFC 9207"):
            _ask(ref, f"state-{n}", iss=iss)
        assert fake.exchanges == 0
    wait_until(lambda: box.current.sign_ins.get(URL, {}).get("auth_url") == "https://as/authorize?n=4", 5,
               message="sign-in link 4")
    assert _ask(ref, "state-4", iss="https://as") == URL and fake.exchanges == 1
    wait_until(lambda: access.bearer(URL), 5, message="a bearer")
