"""Sealed `requestState`: what troupe hands a modern client in an `input_required` answer and
gets back, unchanged, on the retry.

The spec makes the server responsible for the state's integrity, and a client is not to be
trusted with it: the state names which upstream a retry goes to and which parked call it
resumes. So troupe never hands out anything it did not seal with HMAC-SHA256 under its own key,
and opens nothing it did not seal, nothing expired, and nothing sealed for another caller or for
other arguments. The payload is readable (base64url JSON), never secret: it holds ids, not data.

The key comes from `serve.state_key` (or $TROUPE_STATE_KEY); otherwise it is generated once and
kept in `state.key` beside the approvals file (0600), so a restart keeps open rounds valid and
several instances given the same key accept each other's state.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path
from typing import Any, Callable

import orjson
from loguru import logger

PREFIX = "troupe1."  # names the format, so a later one can be told apart
KEY_FILE = "state.key"
KEY_BYTES = 32


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def args_digest(method: str, params: dict) -> str:
    """What a retry must repeat: the method and its params, without the envelope and the round's
    own keys (a retry carries new inputResponses and the state itself)."""
    kept = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")}
    return hashlib.sha256(orjson.dumps([method, kept], option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


class StateSealer:
    """Seals and opens requestState under one key, shared by every Session. The key is fetched
    by `key_source` the first time it is needed: a troupe whose clients never take an input
    round writes no key file."""

    __slots__ = ("_key", "_key_source")

    def __init__(self, key_source: Callable[[], bytes]) -> None:
        self._key: bytes | None = None
        self._key_source = key_source

    @property
    def key(self) -> bytes:
        if self._key is None:
            key = self._key_source()
            if len(key) < 16:
                raise ValueError("a requestState key needs at least 16 bytes")
            self._key = key
        return self._key

    def seal(self, payload: dict, ttl_s: float) -> str:
        """`payload` plus its expiry, signed."""
        body = _b64(orjson.dumps({**payload, "exp": round(time.time() + ttl_s, 3)}))
        return PREFIX + body + "." + self._mac(body)

    def open(self, state: Any) -> dict | str:
        """The payload of a state troupe sealed and that has not expired; otherwise a string
        saying why not (never naming what was inside)."""
        if not isinstance(state, str) or not state.startswith(PREFIX) or state.count(".") != 2:
            return "requestState was not issued by troupe"
        body, mac = state[len(PREFIX):].split(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            return "requestState was not issued by troupe (or was altered)"
        try:
            payload = orjson.loads(_unb64(body))
        except (ValueError, orjson.JSONDecodeError):
            return "requestState is damaged"
        if not isinstance(payload, dict) or not isinstance(payload.get("exp"), (int, float)):
            return "requestState is damaged"
        if payload["exp"] < time.time():
            return "requestState has expired: send the request again without it"
        return payload

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self.key, body.encode("ascii"), hashlib.sha256).digest())


def load_sealer(configured: str | None, directory: str | Path) -> StateSealer:
    """The sealer for this troupe: the configured key, else the stored one (generated the first
    time). A directory that cannot be written gets a key for this process only, with a warning."""
    if configured:
        key = hashlib.sha256(configured.encode("utf-8")).digest()
        return StateSealer(lambda: key)
    path = Path(directory) / KEY_FILE

    def stored() -> bytes:
        try:
            return _read_or_create(path)
        except OSError as exc:
            logger.warning("requestState key: cannot keep {} ({}); using a key for this run only",
                           path, exc.strerror or exc)
            return secrets.token_bytes(KEY_BYTES)
    return StateSealer(stored)


def _read_or_create(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
        if len(text) >= 32:
            return bytes.fromhex(text)
        raise OSError(f"{path} holds no key")
    except FileNotFoundError:
        pass
    except ValueError:
        raise OSError(f"{path} holds no key") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    try:  # O_EXCL: two troupes starting at once keep one key (the loser reads the winner's)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(key.hex() + "\n")
    return key
