"""Merging records by identity, naming services, summaries without secrets, change sets."""
from __future__ import annotations

import json
from dataclasses import replace

from actors.discovery.identity import identity_of
from actors.discovery.merge import assign_names, diff, merge, summary
from actors.discovery.messages import ServiceRecord
from actors.discovery.sources import entry_to_config

SECRET = "sekrit-value"


def record(provider, name, spec, confidence, tags=(), auto=True, file=None):
    cfg = entry_to_config(name, spec, file or f"/{provider}.json")
    return ServiceRecord(provider=provider, file=file or f"/{provider}.json", name=name,
                         identity=identity_of(cfg), confidence=confidence, config=cfg,
                         tags=frozenset(tags), auto_connect=auto)


FS = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/d"]}


def test_highest_confidence_supplies_details_and_everything_merges():
    low = record("cursor", "fs", {**FS, "env": {"A": "user"}}, 0.8, {"cursor"})
    high = record("claude_code", "filesystem", {**FS, "env": {"A": "project", "B": SECRET}}, 0.85, {"claude_code"})
    path = record("path", "other", {"command": "mcp-server-x"}, 0.5, {"path"}, auto=False)
    services = merge([low, path, high])
    assert len(services) == 2
    fs = next(s for s in services if s.identity == low.identity)
    assert fs.best is high and dict(fs.config("fs").stdio.env) == {"A": "project", "B": SECRET}
    assert fs.tags == {"cursor", "claude_code"}
    assert [(r.provider, r.name) for r in fs.records] == [("claude_code", "filesystem"), ("cursor", "fs")]


def test_equal_confidence_is_broken_deterministically():
    a = record("cursor", "a", FS, 0.8)
    b = record("claude_desktop", "b", FS, 0.8)
    assert merge([a, b])[0].best is merge([b, a])[0].best is b


def test_auto_connect_when_any_trusted_source_asks_for_it():
    probed = record("path", "x", {"command": "mcp-server-x"}, 0.5, auto=False)
    assert merge([probed])[0].config("x").auto_start is False
    listed = record("cursor", "x", {"command": "mcp-server-x"}, 0.8, auto=True)
    assert merge([probed, listed])[0].config("x").auto_start is True


def test_config_carries_name_and_source():
    cfg = merge([record("cursor", "x", FS, 0.8)])[0].config("fs")
    assert cfg.name == "fs" and cfg.source == "discovery:cursor"


def test_names_reserved_registered_kept_and_suffixed():
    reg = record("registered", "mine", {"command": "a"}, 1.0)
    clash1 = record("cursor", "mine", {"command": "b"}, 0.8)
    clash2 = record("cursor", "main", {"command": "c"}, 0.8)
    kept = record("vscode", "zzz", {"command": "d"}, 0.8)
    services = merge([reg, clash1, clash2, kept])
    previous = {kept.identity: "keepme"}
    named = assign_names(services, reserved={"main"}, previous=previous)
    by_identity = {svc.identity: name for name, svc in named.items()}
    assert by_identity[reg.identity] == "mine"
    assert by_identity[clash1.identity] == "mine-2"
    assert by_identity[clash2.identity] == "main-2"
    assert by_identity[kept.identity] == "keepme"


def test_odd_names_become_valid_server_names():
    odd = record("cursor", "@scope/my server!", {"command": "a"}, 0.8)
    (name,) = assign_names(merge([odd]), (), {})
    assert name == "scope-my-server"


def test_summary_has_names_of_env_and_headers_never_values():
    stdio = record("cursor", "s", {"command": "x", "env": {"TOKEN": SECRET}}, 0.8)
    http = record("cursor", "h", {"url": f"https://u:{SECRET}@h/mcp?token={SECRET}",
                                  "headers": {"Authorization": SECRET}}, 0.8)
    for rec in (stdio, http):
        out = summary(rec.name, merge([rec])[0], healthy=True)
        assert SECRET not in json.dumps(out)
    assert summary("s", merge([stdio])[0])["env_names"] == ["TOKEN"]
    assert summary("h", merge([http])[0])["header_names"] == ["Authorization"]
    s = summary("s", merge([stdio])[0])
    assert set(s) >= {"name", "identity", "sources", "confidence", "tags", "transport", "healthy", "auto_connect"}
    assert s["sources"][0] == {"provider": "cursor", "file": "/cursor.json", "name": "s", "confidence": 0.8}


def test_diff_tells_added_updated_removed_and_source_only_changes():
    a = record("cursor", "a", {"command": "a"}, 0.8)
    b = record("cursor", "b", {"command": "b"}, 0.8)
    old = assign_names(merge([a, b]), (), {})
    b_env = replace(b, config=entry_to_config("b", {"command": "b", "env": {"X": "1"}}, "/cursor.json"))
    a_more = record("vscode", "a", {"command": "a"}, 0.7)
    c = record("cursor", "c", {"command": "c"}, 0.8)
    prev = {svc.identity: n for n, svc in old.items()}
    new = assign_names(merge([a, a_more, b_env, c]), (), prev)
    assert diff(old, new) == (["c"], ["b"], [], ["a"])
    assert diff(new, {}) == ([], [], ["a", "b", "c"], [])
