"""Sealed requestState alone: what troupe sealed opens, anything altered, foreign or expired
does not (and the refusal never repeats the content); the key is configured, or generated once
and kept private, and the digest a retry must match ignores only the round's own keys."""
from __future__ import annotations

import os

import pytest

from actors.protocol import request_state
from actors.protocol.request_state import StateSealer, args_digest, load_sealer


def _sealer(key: bytes = b"k" * 32) -> StateSealer:
    return StateSealer(lambda: key)


def test_what_troupe_sealed_opens_and_nothing_else_does():
    sealer = _sealer()
    state = sealer.seal({"k": "u", "s": "github", "u": "upstream-secret-state"}, ttl_s=60)
    opened = sealer.open(state)
    assert isinstance(opened, dict) and opened["s"] == "github" and opened["u"] == "upstream-secret-state"
    body, mac = state.split(".")[1:]
    flipped = state[:-1] + ("A" if state[-1] != "A" else "B")
    for bad in (flipped, f"troupe1.{body[:-2]}.{mac}", "upstream-secret-state", None, 42, "troupe1.a.b.c",
                _sealer(b"o" * 32).seal({"k": "u"}, 60)):
        why = sealer.open(bad)
        assert isinstance(why, str) and "secret" not in why, bad


def test_an_expired_state_is_refused(monkeypatch):
    sealer = _sealer()
    state = sealer.seal({"k": "p"}, ttl_s=10)
    now = request_state.time.time()
    monkeypatch.setattr(request_state.time, "time", lambda: now + 11)
    assert "expired" in sealer.open(state)


def test_the_digest_ignores_the_envelope_and_the_rounds_keys_only():
    base = {"name": "x", "arguments": {"a": 1}}
    same = {**base, "_meta": {"progressToken": 9}, "requestState": "s", "inputResponses": {"q": {}}}
    assert args_digest("tools/call", base) == args_digest("tools/call", same)
    assert args_digest("tools/call", base) != args_digest("tools/call", {**base, "arguments": {"a": 2}})
    assert args_digest("tools/call", base) != args_digest("prompts/get", base)


def test_the_key_is_generated_once_kept_private_and_read_back(tmp_path):
    first = load_sealer(None, tmp_path / "cfg")
    assert not (tmp_path / "cfg" / "state.key").exists()  # nothing written until a state is sealed
    state = first.seal({"k": "u"}, 60)
    key_file = tmp_path / "cfg" / "state.key"
    assert key_file.stat().st_mode & 0o077 == 0
    assert isinstance(load_sealer(None, tmp_path / "cfg").open(state), dict)  # a restart keeps rounds valid


def test_a_configured_key_is_shared_and_an_unwritable_directory_still_seals(tmp_path):
    a, b = load_sealer("a-long-shared-secret-key", tmp_path), load_sealer("a-long-shared-secret-key", tmp_path / "x")
    assert isinstance(b.open(a.seal({"k": "u"}, 60)), dict)  # instances given one key accept each other's state
    assert not (tmp_path / "state.key").exists()
    if os.geteuid() == 0:
        blocked = tmp_path / "file-not-dir"
        blocked.write_text("")
        sealer = load_sealer(None, blocked)  # its parent is a file: the key cannot be kept
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        sealer = load_sealer(None, locked)
    assert isinstance(sealer.open(sealer.seal({"k": "u"}, 60)), dict)


@pytest.mark.parametrize("text", ["", "zz" * 20])
def test_a_damaged_key_file_falls_back_to_a_run_key(tmp_path, text):
    (tmp_path / "state.key").write_text(text)
    sealer = load_sealer(None, tmp_path)
    assert isinstance(sealer.open(sealer.seal({"k": "u"}, 60)), dict)
    assert (tmp_path / "state.key").read_text() == text  # never overwritten: it may be another troupe's
