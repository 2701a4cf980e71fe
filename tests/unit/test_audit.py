"""The audit trail's parts (actors/ops): the records and their digests, how an answer becomes an
outcome, the observer seam, the rotated owner-only file, the bounded writer, the `audit:` config
section and `troupe audit`'s filters."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import time

import gevent
import orjson
import pytest
import yaml

from actors.ops import audit_file, cli, records
from actors.ops.audit_file import AuditFile
from actors.ops.observer import Observer
from actors.ops.records import ActRecord, CallRecord
from actors.ops.writer import AuditWriter
from actors.messages import UpstreamError
from actors.protocol import jsonrpc, modern
from actors.settings import config as config_mod


def _call(**fields) -> CallRecord:
    base = dict(time=1_764_681_601.25, instance=None, client="alice", profile="readers", session="s1",
                era="legacy", method="tools/call", server="docs", target="lookup", args_sha256="ab" * 32,
                outcome=records.OK, code=None, duration_ms=3.4567)
    return CallRecord(**{**base, **fields})


# ---------------------------------------------------------------- records


def test_a_call_record_is_frozen_slotted_and_written_with_every_field():
    record = _call()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.outcome = records.ERROR  # type: ignore[misc]
    assert not hasattr(record, "__dict__")
    assert record.to_json() == {
        "kind": "call", "time": "2025-12-02T13:20:01.250Z", "instance": None, "client": "alice",
        "profile": "readers", "session": "s1", "era": "legacy", "method": "tools/call", "server": "docs",
        "target": "lookup", "args_sha256": "ab" * 32, "outcome": "ok", "code": None, "duration_ms": 3.457,
        "trace_id": None}
    act = ActRecord(1_764_681_601.0, "i1", "approve", "docs", "ann", "cli")
    assert act.to_json() == {"kind": "act", "time": "2025-12-02T13:20:01.000Z", "instance": "i1", "act": "approve",
                             "server": "docs", "by": "ann", "via": "cli"}


def test_the_digest_is_of_canonical_json_so_key_order_does_not_matter():
    one = {"key": "a", "n": 1, "nested": {"x": [1, {"b": 2, "a": 1}], "y": None}}
    other = {"nested": {"y": None, "x": [1, {"a": 1, "b": 2}]}, "n": 1, "key": "a"}
    assert records.args_digest(one) == records.args_digest(other)
    assert records.args_digest(one) == hashlib.sha256(
        b'{"key":"a","n":1,"nested":{"x":[1,{"a":1,"b":2}],"y":null}}').hexdigest()
    assert records.args_digest({"key": "b", "n": 1}) != records.args_digest({"key": "a", "n": 1})
    assert records.args_digest(None) is None
    assert records.args_digest({"f": object()}) is None  # not JSON: no digest rather than a wrong one


def test_what_ended_a_call_becomes_its_outcome():
    # a server's result, before troupe shapes it
    assert records.outcome_of({"content": []}) == (records.OK, None)
    assert records.outcome_of({"content": []}, from_cache=True) == (records.CACHE_HIT, None)
    assert records.outcome_of({"content": [], "isError": True}) == (records.IS_ERROR, None)
    assert records.outcome_of({"resultType": "input_required"}) == (records.INPUT_REQUIRED, None)
    # a failure: what happened, though a tools/call's client gets it as an isError result
    assert records.outcome_of(UpstreamError(jsonrpc.REQUEST_TIMEOUT, "late", server="docs")) == \
        (records.TIMEOUT, jsonrpc.REQUEST_TIMEOUT)
    assert records.outcome_of(UpstreamError(jsonrpc.INVALID_PARAMS, "unknown tool", server="docs")) == \
        (records.ERROR, jsonrpc.INVALID_PARAMS)
    # a whole answer (a workflow run's, an input round passed through)
    assert records.outcome_of(jsonrpc.result(1, {"content": []})) == (records.OK, None)
    assert records.outcome_of(jsonrpc.result(1, {"content": [], "isError": True})) == (records.IS_ERROR, None)
    assert records.outcome_of(jsonrpc.error(1, jsonrpc.INVALID_PARAMS, "bad")) == (records.ERROR, jsonrpc.INVALID_PARAMS)
    assert records.outcome_of(jsonrpc.error(1, jsonrpc.REQUEST_TIMEOUT, "late")) == \
        (records.TIMEOUT, jsonrpc.REQUEST_TIMEOUT)
    assert records.outcome_of(jsonrpc.result(1, {"resultType": "input_required"})) == (records.INPUT_REQUIRED, None)


def test_what_a_forwarded_request_names():
    assert records.target_and_arguments("tools/call", {"name": "lookup", "arguments": {"k": 1}}) == ("lookup", {"k": 1})
    assert records.target_and_arguments("tools/call", {"name": "ping"}) == ("ping", {})
    assert records.target_and_arguments("resources/read", {"uri": "mem://doc"}) == ("mem://doc", None)
    assert records.target_and_arguments("prompts/get", {"name": "p", "arguments": {"a": "x"}}) == ("p", {"a": "x"})
    assert records.target_and_arguments("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"},
                                                                "argument": {"name": "a", "value": "x"}}) == \
        ("p", {"name": "a", "value": "x"})
    # a task id is an anonymous caller's capability: never a target, only digested
    assert records.target_and_arguments("tasks/get", {"taskId": "t-1", "_meta": {}}) == (None, {"taskId": "t-1"})


# ---------------------------------------------------------------- the observer seam


def test_a_session_reports_each_call_once_with_its_era_digest_and_duration():
    seen: list = []
    observer = Observer(lambda: "i1", (seen.append,))
    side = observer.session("s7", "alice", "readers")
    begun = side.begin("tools/call", "docs", {"name": "lookup", "arguments": {"k": "v"}}, lambda m: None)
    side.answered(begun, jsonrpc.result(1, {"content": []}))
    modern_sink = modern.ModernSink(2, "tools/call", lambda m: None)
    core = side.begin_named("tools/call", "troupe", "core_status", {}, modern_sink)
    side.ended(core, records.CANCELLED)
    side.refused("tools/call", "docs", {"name": "lookup", "arguments": {}}, lambda m: None, records.RATE_LIMITED,
                 -32029)
    first, second, third = seen
    assert (first.instance, first.client, first.profile, first.session, first.era) == \
        ("i1", "alice", "readers", "s7", "legacy")
    assert (first.server, first.target, first.outcome, first.code) == ("docs", "lookup", records.OK, None)
    assert first.args_sha256 == records.args_digest({"k": "v"}) and first.duration_ms >= 0
    assert abs(first.time - time.time()) < 5 and first.trace_id is None
    assert (second.era, second.server, second.target, second.outcome) == \
        ("modern", "troupe", "core_status", records.CANCELLED)
    assert (third.outcome, third.code) == (records.RATE_LIMITED, -32029)


def test_a_failing_listener_fails_nothing():
    seen: list = []

    def broken(record) -> None:
        raise RuntimeError("listener bug")
    observer = Observer(lambda: None, (broken, seen.append))
    observer.act("restart", "docs", "operator", "http")
    assert [(r.act, r.server, r.by, r.via) for r in seen] == [("restart", "docs", "operator", "http")]


# ---------------------------------------------------------------- the file


def test_rotation_by_size_keeps_keep_files_oldest_dropped_all_owner_only(tmp_path):
    path = str(tmp_path / "logs" / "audit.jsonl")
    file = AuditFile(path, max_bytes=120, keep=3)
    lines = [orjson.dumps({"n": i, "pad": "x" * 20}) + b"\n" for i in range(20)]  # 37-38 bytes: 3 a file
    for line in lines:
        file.append(line)
    file.close()
    names = sorted(os.listdir(tmp_path / "logs"))
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    for name in names:
        st = os.stat(tmp_path / "logs" / name)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size <= 120
    assert stat.S_IMODE(os.stat(tmp_path / "logs").st_mode) == 0o700
    kept = [orjson.loads(line)["n"] for line in audit_file.read_lines(path)]
    assert kept == list(range(9, 20))  # the newest, in order, oldest first: 3 rotated files and the live one
    assert file.rotations == 6


def test_a_batch_of_lines_is_split_across_rotations_within_the_bound(tmp_path):
    path = str(tmp_path / "audit.jsonl")
    file = AuditFile(path, max_bytes=100, keep=10)
    file.write_lines([b"%02d-------------------------\n" % i for i in range(12)])  # 28 bytes: 3 a file
    file.close()
    assert [os.path.getsize(name) for name in audit_file.files_oldest_first(path)] == [84, 84, 84, 84]
    assert [line[:2] for line in audit_file.read_lines(path)] == [b"%02d" % i for i in range(12)]


def test_a_line_bigger_than_max_bytes_still_gets_a_file_of_its_own(tmp_path):
    path = str(tmp_path / "audit.jsonl")
    file = AuditFile(path, max_bytes=50, keep=2)
    file.append(b"small\n")
    file.append(b"b" * 80 + b"\n")
    file.close()
    assert open(path, "rb").read() == b"b" * 80 + b"\n" and open(path + ".1", "rb").read() == b"small\n"


def test_a_file_rotated_by_another_writer_is_reopened_and_a_wider_mode_narrowed(tmp_path):
    path = str(tmp_path / "audit.jsonl")
    with open(path, "wb") as fh:
        fh.write(b"before\n")
    os.chmod(path, 0o644)
    troupe, cli_side = AuditFile(path, 50, 5), AuditFile(path, 50, 5)
    troupe.append(b"from troupe 1\n")  # 7 + 14 bytes
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    cli_side.append(b"from the cli, long enough to rotate\n")  # 36 more would pass 50: the other one rotates
    troupe.append(b"from troupe 2\n")  # lands in the new live file (36 + 14), not in the rotated one
    troupe.close()
    cli_side.close()
    assert open(path + ".1", "rb").read() == b"before\nfrom troupe 1\n"
    assert open(path, "rb").read() == b"from the cli, long enough to rotate\nfrom troupe 2\n"
    assert list(audit_file.read_lines(path)) == [b"before", b"from troupe 1", b"from the cli, long enough to rotate",
                                                 b"from troupe 2"]


# ---------------------------------------------------------------- the writer


def test_the_writer_appends_off_the_callers_greenlet_and_counts_what_a_full_queue_drops(tmp_path):
    path = str(tmp_path / "audit.jsonl")
    writer = AuditWriter(AuditFile(path, 1 << 20, 5), queue_max=3).start()
    for n in range(5):  # no yield in between: the writer greenlet has not run yet
        writer.offer(_call(session=f"s{n}"))
    assert not os.path.exists(path)  # nothing was written by the offering greenlet
    assert writer.stats()["dropped"] == 2 and writer.stats()["queued"] == 3
    gevent.sleep(0)
    deadline = time.monotonic() + 5
    while writer.stats()["written"] < 3 and time.monotonic() < deadline:
        gevent.sleep(0.01)
    writer.offer(_call(session="last"))
    writer.stop()
    lines = [orjson.loads(line) for line in audit_file.read_lines(path)]
    assert [line["session"] for line in lines] == ["s0", "s1", "s2", "last"]
    assert writer.stats() | {"file": None} == {"file": None, "written": 4, "dropped": 2, "failed": 0, "queued": 0,
                                              "queue_max": 3, "rotations": 0, "max_bytes": 1 << 20, "keep": 5}
    writer.offer(_call())  # after stop: ignored, not counted as a drop
    assert writer.stats()["dropped"] == 2


def test_a_write_that_fails_loses_its_records_counted_and_the_writer_goes_on(tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the directory should be")
    writer = AuditWriter(AuditFile(str(blocked / "audit.jsonl"), 1 << 20, 5)).start()
    writer.offer(_call())
    writer.offer(_call())
    writer.stop()
    assert writer.stats()["failed"] == 2 and writer.stats()["written"] == 0


# ---------------------------------------------------------------- the config section


def _config(tmp_path, audit) -> config_mod.Config:
    path = tmp_path / "troupe.yaml"
    path.write_text(yaml.safe_dump({"servers": [], "audit": audit}))
    return config_mod.load(path)


def test_the_audit_section_defaults_and_resolves_its_file_beside_the_config(tmp_path):
    audit = _config(tmp_path, {"file": "logs/audit.jsonl"}).audit
    assert (audit.file, audit.max_bytes, audit.keep) == (str(tmp_path / "logs" / "audit.jsonl"), 10 * 1024 * 1024, 5)
    assert _config(tmp_path, {"file": "/var/x.jsonl", "max_bytes": 4096, "keep": 2}).audit.keep == 2
    assert config_mod.from_data({"servers": []}).audit is None


@pytest.mark.parametrize("audit, problem", [
    ({"max_bytes": 4096}, "audit.file: is required"),
    ({"file": "a", "max_bytes": 10}, "audit.max_bytes: must be at least 1024 bytes"),
    ({"file": "a", "keep": 0}, "audit.keep: must be at least 1"),
    ({"file": "a", "rotate": 3}, "audit.rotate: unknown key (allowed: file, keep, max_bytes)"),
    ({"file": "a", "keep": "5"}, "audit.keep: must be an integer"),
    ("audit.jsonl", "audit: must be a mapping"),
])
def test_a_bad_audit_section_is_reported_with_its_key(tmp_path, audit, problem):
    with pytest.raises(config_mod.ConfigError) as caught:
        _config(tmp_path, audit)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


# ---------------------------------------------------------------- troupe audit


def _trail(tmp_path) -> tuple[str, list[dict]]:
    """A config naming an audit file, and a trail over a live and two rotated files."""
    now = time.time()
    lines = [_call(time=now - 7200, client="alice", server="docs").to_json(),
             _call(time=now - 600, client="bob", server="docs", target="x" * 80).to_json(),
             ActRecord(now - 300, None, "approve", "docs", "ann", "cli").to_json(),
             _call(time=now - 60, client="alice", server="notes", outcome=records.ERROR, code=-32602).to_json(),
             _call(time=now - 5, client=None, server="troupe", target="core_status").to_json()]
    log = tmp_path / "audit.jsonl"
    (tmp_path / "audit.jsonl.2").write_bytes(orjson.dumps(lines[0]) + b"\n")
    (tmp_path / "audit.jsonl.1").write_bytes(orjson.dumps(lines[1]) + b"\n" + b"{cut short\n"
                                             + orjson.dumps(lines[2]) + b"\n")
    log.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines[3:]))
    cfg = tmp_path / "troupe.yaml"
    cfg.write_text(yaml.safe_dump({"servers": [], "audit": {"file": str(log)}}))
    return str(cfg), lines


def _json_lines(capsys, argv) -> list[dict]:
    assert cli.run(argv) == 0
    return [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_troupe_audit_reads_rotated_files_oldest_first_and_filters(tmp_path, capsys):
    cfg, lines = _trail(tmp_path)
    assert _json_lines(capsys, ["--config", cfg, "--json"]) == lines  # the cut-short line skipped
    assert [r["server"] for r in _json_lines(capsys, ["--config", cfg, "--json", "--client", "alice"])] == \
        ["docs", "notes"]
    assert [r.get("act") or r["client"] for r in _json_lines(capsys, ["--config", cfg, "--json", "--server",
                                                                     "docs"])] == ["alice", "bob", "approve"]
    assert [r["kind"] for r in _json_lines(capsys, ["--config", cfg, "--json", "--since", "15m"])] == \
        ["call", "act", "call", "call"]
    assert _json_lines(capsys, ["--config", cfg, "--json", "--since", "15m", "--client", "alice",
                                "--server", "notes"]) == [lines[3]]
    assert _json_lines(capsys, ["--config", cfg, "--json", "--client", "nobody"]) == []


def test_troupe_audit_prints_a_table(tmp_path, capsys):
    cfg, lines = _trail(tmp_path)
    assert cli.run(["--config", cfg, "--since", "1h"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TIME", "CLIENT/BY", "SESSION", "METHOD/ACT", "SERVER", "TARGET", "OUTCOME", "MS"]
    assert len(out) == 5
    assert "x" * 47 + "…" in out[1] and "bob" in out[1]
    assert "approve (via cli)" in out[2] and "ann" in out[2]
    assert "error -32602" in out[3] and "notes" in out[3]
    assert out[4].split()[1:4] == ["-", "s1", "tools/call"] and "core_status" in out[4]
    assert cli.run(["--config", cfg, "--client", "nobody"]) == 0
    assert "(no matching records)" in capsys.readouterr().out


def test_since_takes_durations_and_times():
    now = 1_764_681_601.0
    assert cli.since_cutoff("90s", now) == "2025-12-02T13:18:31.000Z"
    assert cli.since_cutoff("1h", now) == "2025-12-02T12:20:01.000Z"
    assert cli.since_cutoff("2d", now) == "2025-11-30T13:20:01.000Z"
    assert cli.since_cutoff("2025-12-02T13:00:00Z") == "2025-12-02T13:00:00.000Z"
    assert cli.since_cutoff("2025-12-02T14:00:00+01:00") == "2025-12-02T13:00:00.000Z"
    with pytest.raises(ValueError, match="use a duration"):
        cli.since_cutoff("yesterday")


def test_troupe_audit_without_an_audit_file_or_with_a_bad_since_says_so(tmp_path, capsys):
    cfg = tmp_path / "troupe.yaml"
    cfg.write_text(yaml.safe_dump({"servers": []}))
    assert cli.run(["--config", str(cfg)]) == 2
    assert "has no audit.file" in capsys.readouterr().err
    cfg2, _ = _trail(tmp_path)
    assert cli.run(["--config", cfg2, "--since", "soon"]) == 2
    assert "--since 'soon'" in capsys.readouterr().err


def test_a_resource_uri_is_kept_without_its_password_or_query_values():
    from actors.ops.records import target_and_arguments
    target, _ = target_and_arguments("resources/read", {"uri": "postgres://admin:hunter2@db/t?token=abc#frag"})
    assert target is not None and "hunter2" not in target and "abc" not in target and "frag" not in target
    assert target.startswith("postgres://admin:") and "db/t" in target and "token=" in target
    name, _ = target_and_arguments("completion/complete", {"ref": {"type": "ref/resource",
                                                                   "uri": "https://u:pw@h/x?k=v"}, "argument": {}})
    assert name is not None and "pw" not in name and "v" not in name.split("?", 1)[1]
