"""AuthKeeper actor: the one owner of the upstream OAuth grants, the sign-ins waiting for a browser
and the token file; it publishes the current bearer per server as a Published[AuthSnapshot]
(whose Publisher it alone holds)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable

import gevent
import pykka
from loguru import logger

from actors import optional_imports
from actors.auth.access import AuthSnapshot, grant_key, split_key
from actors.auth.signin import Pending, SignInError
from actors.auth.messages import CompleteSignIn, SetRedirect, SignedIn, SignInRequired, Unauthorized
from actors.auth.tokens import Grant, TokenStore, fingerprint
from actors.published import Publisher
from actors.redact import redact_url
from actors.settings.upstream_auth import UpstreamAuth
from actors.tells import fail, tell

CALLBACK_PATH = "/oauth/callback"
REFRESH_MARGIN = 60.0  # refresh this long before expiry (at most a quarter of the token's lifetime)
REFRESH_RETRY = 30.0  # an authorization server that could not be reached or read is asked again after this
NO_FRONT = "sign-in needs troupe's HTTP front (serve with --transport http)"


@dataclass(frozen=True, slots=True)
class _Begun:
    """A sign-in's authorization URL is ready (from a flow greenlet)."""

    pending: Pending


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A flow greenlet's result: a new grant, or why not (kind: begin | exchange | refresh)."""

    key: str
    kind: str
    grant: Grant | None = None
    error: SignInError | None = None
    reply: Any = None


@dataclass(frozen=True, slots=True)
class _BeginDue:
    """Prepare the sign-in of `key` again (its authorization server could not be read before)."""

    key: str


@dataclass(frozen=True, slots=True)
class _RefreshDue:
    """The refresh timer of the grant that expires at `expires_at` fired."""

    key: str
    expires_at: float | None


class AuthKeeper(pykka.ThreadingActor):
    """Owns every upstream grant (client registration and tokens, kept in the token file), the
    sign-ins waiting for a browser (state → PKCE verifier and server), the refresh timers.

    Receives Unauthorized (transports), CompleteSignIn (the /oauth/callback route; reply: the
    server's URL), SetRedirect (the runtime), and from its own greenlets _Begun, _Outcome,
    _BeginDue and _RefreshDue. Sends SignedIn and SignInRequired to the Supervisor. Publishes an
    AuthSnapshot after each change.
    The network steps run in greenlets it spawns; their results come back as messages.
    """

    def __init__(self, path: str, box: Publisher[AuthSnapshot], supervisor: Callable[[], Any]) -> None:
        super().__init__()
        self.store, self.box, self._supervisor = TokenStore(path), box, supervisor
        self.grants: dict[str, Grant] = {}
        self.pending: dict[str, Pending] = {}  # state → its sign-in
        self.flows: dict[str, str] = {}  # server URL → the state of its sign-in in the browser
        self.errors: dict[str, str] = {}  # server URL → why it has no authorization URL
        self.waiting: dict[str, set[str]] = {}  # server URL → names refused with 401, started on a token
        self.settings: dict[str, UpstreamAuth | None] = {}
        self.challenges: dict[str, str | None] = {}  # server URL → its last WWW-Authenticate
        self.busy: set[str] = set()  # URLs with a begin or refresh in flight
        self.refused: set[str] = set()  # URLs whose current token came from a refresh after a 401
        self.redirect: str | None = None
        self._timers: dict[str, gevent.Greenlet] = {}
        self._greenlets: set[gevent.Greenlet] = set()

    def on_start(self) -> None:
        self.grants = self.store.load()
        for key, grant in self.grants.items():
            self._schedule(key, grant)
        self._publish()

    def on_stop(self) -> None:
        for greenlet in [*self._timers.values(), *self._greenlets]:
            greenlet.kill(block=False)

    def on_receive(self, message):
        match message:
            case Unauthorized():
                self._unauthorized(message)
            case CompleteSignIn():
                self._complete(message)
            case SetRedirect(url=url):
                self.redirect = url.rstrip("/") + CALLBACK_PATH
                for key in [k for k, why in self.errors.items() if why == NO_FRONT]:
                    self._begin(key)
            case _Begun(pending=pending):
                self._begun(pending)
            case _Outcome():
                self._outcome(message)
            case _BeginDue(key=key) if self.waiting.get(key) and key in self.errors:
                self._begin(key)  # the last error stays shown until this attempt ends
            case _BeginDue():
                pass  # signed in meanwhile, or nobody waits any more
            case _RefreshDue(key=key, expires_at=expires_at):
                grant = self.grants.get(key)
                if grant is not None and grant.expires_at == expires_at and key not in self.busy:
                    self._refresh(key)
            case _:
                logger.warning("auth: unknown message {!r}", message)
        self._publish()

    # ---------------------------------------------------------------- decisions

    def _unauthorized(self, msg: Unauthorized) -> None:
        key = grant_key(msg.url, msg.client)
        self.waiting.setdefault(key, set()).add(msg.server)
        self.settings[key] = msg.settings
        self.challenges[key] = msg.challenge
        grant = self.grants.get(key)
        if key in self.busy:
            return  # a refresh or a sign-in is on its way; its outcome starts the server
        if grant is not None and grant.access_token and fingerprint(grant.access_token) != msg.used:
            self._signed_in(key)  # a newer token than the refused one exists: try with that
        elif grant is not None and grant.refresh_token and key not in self.refused:
            self.refused.add(key)
            self._refresh(key)
        else:
            self._drop(key)
            self._begin(key)

    def _begin(self, key: str) -> None:
        if key in self.flows or key in self.busy:
            return
        if self.redirect is None:
            self.errors[key] = NO_FRONT
            return
        self.busy.add(key)
        # the greenlet gets values, never this actor's dicts
        args = (key, split_key(key)[0], self.challenges.get(key), self.settings.get(key), self.redirect,
                self.grants.get(key))
        self._spawn(key, "begin", lambda: _Begun(_flow().begin(*args)))

    def _refresh(self, key: str) -> None:
        grant = self.grants[key]
        self.busy.add(key)
        self._spawn(key, "refresh", lambda: _Outcome(key, "refresh", _flow().refresh(grant)))

    def _spawn(self, key: str, kind: str, work: Callable[[], Any], reply=None) -> None:
        def run() -> None:
            try:
                result = work()
            except SignInError as exc:
                result = _Outcome(key, kind, error=exc, reply=reply)
            except Exception as exc:  # a bug in a step must still end the step
                logger.opt(exception=exc).error("auth: {} failed", kind)
                result = _Outcome(key, kind, error=SignInError(f"{kind} failed: {type(exc).__name__}"),
                                  reply=reply)
            tell(self.actor_ref, result)
        greenlet = gevent.spawn(run)
        self._greenlets.add(greenlet)
        greenlet.link(self._greenlets.discard)

    def _begun(self, pending: Pending) -> None:
        key = pending.key
        self.busy.discard(key)
        self.errors.pop(key, None)
        self.pending = {s: p for s, p in self.pending.items() if p.key != key}  # one live sign-in per server
        self.pending[pending.state] = pending
        self.flows[key] = pending.state
        url, client = split_key(key)
        names = ", ".join(sorted(self.waiting.get(key, ()))) or "NAME"
        if client is None:
            logger.warning("auth: {} needs a sign-in: run `troupe auth {}` or open the link in /status",
                           redact_url(url), names)
        else:
            logger.info("auth: {} needs client {}'s own sign-in (`troupe auth {} --client {}`, or its "
                        "list_tools)", redact_url(url), client, names, client)

    def _complete(self, msg: CompleteSignIn) -> None:
        pending = self.pending.pop(msg.state, None)
        if pending is None:
            fail(msg.reply, KeyError("unknown or used sign-in state"))
            return
        self.flows.pop(pending.key, None)
        refusal = pending.iss_refusal(msg.iss)
        if refusal is not None:  # a mix-up (RFC 9207): the code is not sent anywhere; a new link instead
            logger.warning("auth: sign-in for {} refused: {}", _shown(pending.key), refusal)
            fail(msg.reply, SignInError(refusal, rejected=True))
            self._begin(pending.key)
            return
        self.busy.add(pending.key)
        self._spawn(pending.key, "exchange",
                    lambda: _Outcome(pending.key, "exchange", _flow().exchange(pending, msg.code), reply=msg.reply),
                    reply=msg.reply)

    def _outcome(self, msg: _Outcome) -> None:
        key = msg.key
        self.busy.discard(key)
        if msg.grant is not None:
            if msg.kind == "exchange":
                self.refused.discard(key)
            elif msg.kind == "refresh" and not self.waiting.get(key):
                self.refused.discard(key)  # a timely refresh: the next 401 may refresh once again
            self.grants[key] = msg.grant
            self.errors.pop(key, None)
            self._save()
            self._schedule(key, msg.grant)
            logger.info("auth: {} for {}", "signed in" if msg.kind == "exchange" else "token refreshed",
                        _shown(key))
            if msg.kind == "exchange" or self.waiting.get(key):
                self._signed_in(key)
            if msg.reply is not None:
                msg.reply.set(key)
            return
        error = msg.error or SignInError("failed")
        logger.warning("auth: {} for {}: {}", msg.kind, _shown(key), error)
        if msg.reply is not None:
            fail(msg.reply, error)
        if msg.kind == "refresh" and not error.rejected:
            self._timer(key, REFRESH_RETRY, self.grants[key].expires_at if key in self.grants else None)
            return
        if msg.kind == "begin":  # shown as auth_error; tried again while the server waits
            self.errors[key] = str(error)
            gevent.spawn_later(REFRESH_RETRY, tell, self.actor_ref, _BeginDue(key))
            return
        self._drop(key)  # a revoked or expired grant: sign in again, never a crash loop
        if msg.kind == "refresh" and not self.waiting.get(key) and split_key(key)[1] is None:
            self._tell_supervisor(SignInRequired(key))  # its servers run on: hold them
        self._begin(key)

    def _signed_in(self, key: str) -> None:
        self.waiting.pop(key, None)
        if split_key(key)[1] is None:  # a client's own grant starts nothing: troupe's link runs on
            self._tell_supervisor(SignedIn(key))

    def _tell_supervisor(self, message) -> None:
        supervisor = self._supervisor()
        if supervisor is not None:  # None only before the runtime started it
            tell(supervisor, message)

    def _drop(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.kill(block=False)
        if self.grants.get(key) is not None and self.grants[key].access_token:
            # keep the client registration for the next sign-in, forget the tokens
            old = self.grants[key]
            self.grants[key] = Grant(old.token_endpoint, old.resource, old.client_id, old.auth_method,
                                     old.redirect_uri, scope=old.scope, client_secret=old.client_secret)
            self._save()

    # ---------------------------------------------------------------- timers, file, snapshot

    def _schedule(self, key: str, grant: Grant) -> None:
        if not grant.access_token or not grant.refresh_token or grant.expires_at is None:
            return
        lifetime = max(grant.expires_at - (grant.issued_at or time.time()), 0.0)
        due = grant.expires_at - min(REFRESH_MARGIN, lifetime / 4)
        self._timer(key, max(due - time.time(), 0.0), grant.expires_at)

    def _timer(self, key: str, delay: float, expires_at: float | None) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.kill(block=False)
        self._timers[key] = gevent.spawn_later(delay, tell, self.actor_ref, _RefreshDue(key, expires_at))

    def _save(self) -> None:
        try:
            self.store.save(self.grants)
        except OSError as exc:  # the tokens still work in memory; the next start signs in again
            logger.error("auth: cannot write {}: {}", self.store.path, exc)

    def _publish(self) -> None:
        bearers = {k: g.access_token for k, g in self.grants.items() if g.access_token}
        sign_ins = {key: MappingProxyType({"auth_url": self.pending[state].auth_url})
                    for key, state in self.flows.items() if state in self.pending}
        for key, why in self.errors.items():
            sign_ins.setdefault(key, MappingProxyType({"auth_error": why}))
        refreshing = frozenset(k for k in self.busy if k in self.grants and self.grants[k].access_token)
        snapshot = AuthSnapshot(MappingProxyType(bearers), MappingProxyType(sign_ins), refreshing)
        if snapshot != self.box.current:
            self.box.publish(snapshot)


def _shown(key: str) -> str:
    """A grant key for a log line: the URL without secrets, and the client if it is one's own."""
    url, client = split_key(key)
    return redact_url(url) if client is None else f"{redact_url(url)} (client {client})"


def _flow():
    """actors/auth/flow.py, the network steps: requests and authlib load on the first sign-in or
    refresh (in a step's greenlet, off the hub), never on a run no server of which asks for OAuth."""
    return optional_imports.load("actors.auth.flow")
