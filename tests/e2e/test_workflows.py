"""Workflows against a real troupe and real backends (echo and notes, our own test servers; hang
for a step that never answers): a three-step workflow with templates and a `when`, in meta mode
through call_tool and in flat mode; a failing step in the middle (stop and continue); a
cancellation in the middle that reaches the upstream; progress per step; a profile that hides
workflows; a workflows_dir file changed, broken and mended live; core_workflow_* tools."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.support import wait_until
from tests.support.troupe import Troupe, server, text_of, write_config

ADD_AND_NOTE = {
    "name": "add_and_note",
    "description": "Add a and b; note the sum when it is over 10; read the note back.",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                      "note": {"type": "string"}},
                     "required": ["a", "b", "note"]},
    "steps": [
        # native types: echo__add takes numbers, so "{{ input.a }}" must pass the integer, not "7"
        {"id": "sum", "tool": "echo__add", "args": {"a": "{{ input.a }}", "b": "{{ input.b }}"}},
        {"id": "note", "tool": "notes__write_note", "when": "{{ steps.sum.text | int > 10 }}",
         "args": {"name": "{{ input.note }}", "text": "sum={{ steps.sum.structured.sum }}"}},
        {"id": "read", "tool": "notes__read_note", "args": {"name": "{{ input.note }}"}},
    ],
    "output": "{{ steps.read.text }} ({{ 'noted' if steps.note else 'not noted' }})",
}
FAILS = {
    "name": "fails_in_the_middle",
    "steps": [{"id": "first", "tool": "echo__echo", "args": {"text": "one"}},
              {"id": "boom", "tool": "echo__fail"},
              {"id": "never", "tool": "echo__echo", "args": {"text": "never sent"}}],
}
CONTINUES = {
    "name": "carries_on",
    "steps": [{"id": "bad", "tool": "echo__fail", "on_error": "continue"},
              {"id": "after", "tool": "echo__echo", "args": {"text": "bad failed: {{ steps.bad.is_error }}"}}],
    "output": "{{ steps.after.text }}",
}
HANGS = {
    "name": "hangs_in_the_middle",
    "steps": [{"id": "first", "tool": "echo__echo", "args": {"text": "one"}},
              {"id": "stuck", "tool": "hang__hang"},
              {"id": "never", "tool": "echo__echo", "args": {"text": "never sent"}}],
}
PARALLEL = {
    "name": "side_by_side",
    "steps": [{"id": "left", "tool": "echo__sleep", "args": {"seconds": 1}, "parallel": True},
              {"id": "right", "tool": "echo__sleep", "args": {"seconds": 1}, "parallel": True},
              {"id": "joined", "tool": "echo__echo", "args": {"text": "{{ steps.left.text }}+{{ steps.right.text }}"}}],
    "output": "{{ steps.joined.text }}",
}
SERVERS = [server("echo", "tests.servers.echo"), server("notes", "tests.servers.notes"),
           server("hang", "tests.servers.hang")]


def _config(tmp_path, mode: str, workflows: list, **extra):
    path = write_config(tmp_path, SERVERS, mode=mode)
    data = yaml.safe_load(path.read_text())
    data.update(workflows=workflows, **extra)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def troupe(tmp_path):
    """troupe over stdio with the workflows above; `start(mode, *args, workflows=…, **config)`."""
    started: list[Troupe] = []

    def start(mode: str, *args: str, workflows=(ADD_AND_NOTE, FAILS, CONTINUES, HANGS, PARALLEL), **extra) -> Troupe:
        t = Troupe(_config(tmp_path, mode, list(workflows), **extra), "--log-level", "DEBUG", *args)
        started.append(t)
        t.initialize()
        return t
    yield start
    for t in started:
        t.close()


def _structured(response: dict) -> dict:
    return response["result"]["structuredContent"]


def _list_changes(t: Troupe) -> int:
    return sum(1 for m in t.received if m.get("method") == "notifications/tools/list_changed")


def _progress_for(t: Troupe, token: str) -> list[dict]:
    return [m["params"] for m in t.received
            if m.get("method") == "notifications/progress" and m["params"].get("progressToken") == token]


def test_three_steps_over_two_servers_in_flat_mode_with_a_condition_and_progress(troupe):
    t = troupe("flat")
    listed = {tool["name"]: tool for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
    assert listed["workflow_add_and_note"]["inputSchema"]["required"] == ["a", "b", "note"]

    small = t.request("tools/call", {"name": "workflow_add_and_note", "arguments": {"a": 3, "b": 4, "note": "small"},
                                     "_meta": {"progressToken": "p-small"}}, timeout=30)
    assert text_of(small) == "(no such note) (not noted)"
    steps = _structured(small)["steps"]
    assert [(s["id"], s["server"], s["skipped"]) for s in steps] == [
        ("sum", "echo", False), ("note", "notes", True), ("read", "notes", False)]
    assert steps[0]["structured"] == {"sum": 7} and not any(s["is_error"] for s in steps)
    assert [(p["progress"], p["total"], p["message"]) for p in _progress_for(t, "p-small")] == [
        (1, 3, "sum"), (2, 3, "note"), (3, 3, "read")]

    big = t.call("workflow_add_and_note", {"a": 7, "b": 5, "note": "big"}, timeout=30)
    assert text_of(big) == "sum=12 (noted)"
    assert _structured(big)["output"] == "sum=12 (noted)"
    assert text_of(t.call("notes__read_note", {"name": "big"})) == "sum=12"  # the step really wrote it

    refused = t.call("workflow_add_and_note", {"a": "seven", "b": 5, "note": "x"})["result"]
    assert refused["isError"] is True and "invalid arguments for workflow_add_and_note" in refused["content"][0]["text"]
    assert t.server_status("echo")["calls"] == 2  # the refused call reached no server


def test_meta_mode_lists_describes_finds_and_calls_a_workflow_through_call_tool(troupe):
    t = troupe("meta")
    names = [tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]]
    assert "workflow_add_and_note" not in names and "call_tool" in names  # meta mode: only the meta-tools
    listed = json.loads(text_of(t.call("list_tools", {"limit": 1000}, timeout=30)))
    assert {"name": "workflow_add_and_note", "server": "(workflows)",
            "description": ADD_AND_NOTE["description"]} in listed["tools"]
    found = json.loads(text_of(t.call("filter_tools", {"query": "note the sum"})))
    assert found["tools"][0]["name"] == "workflow_add_and_note"
    described = json.loads(text_of(t.call("describe_tool", {"name": "workflow_add_and_note"})))
    assert described["tool"]["inputSchema"]["properties"]["a"] == {"type": "integer"}

    answer = t.request("tools/call", {"name": "call_tool", "arguments": {
        "name": "workflow_add_and_note", "arguments": {"a": 20, "b": 1, "note": "meta"}},
        "_meta": {"progressToken": 7}}, timeout=30)
    assert text_of(answer) == "sum=21 (noted)"
    assert [p["message"] for p in _progress_for(t, 7)] == ["sum", "note", "read"]


def test_a_failing_step_stops_the_workflow_naming_step_and_server(troupe):
    t = troupe("flat")
    result = t.call("workflow_fails_in_the_middle", timeout=30)["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "step 'boom'" in text and "server echo" in text and "boom" in text.split("failed:")[1]
    assert [(s["id"], s["is_error"]) for s in result["structuredContent"]["steps"]] == [
        ("first", False), ("boom", True)]  # the third never ran
    assert t.server_status("echo")["calls"] == 2

    carried = t.call("workflow_carries_on", timeout=30)["result"]
    assert "isError" not in carried and carried["content"][0]["text"] == "bad failed: True"


def test_cancelling_in_the_middle_cancels_the_running_step_upstream_and_stops(troupe):
    t = troupe("flat")
    t.request("tools/list", timeout=30)
    rid = t.send_request("tools/call", {"name": "workflow_hangs_in_the_middle", "arguments": {},
                                        "_meta": {"progressToken": "p-hang"}})
    wait_until(lambda: _progress_for(t, "p-hang"), 15, message="the first step done")
    wait_until(lambda: t.server_status("hang")["in_flight"] == 1, 15, message="the hanging step in flight")
    t.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "enough"}})
    wait_until(lambda: any("hang stderr: cancelled" in line for line in t.stderr), 10,
               message="the upstream told of the cancel")
    wait_until(lambda: t.server_status("hang")["in_flight"] == 0, 10, message="the step released")
    assert text_of(t.call("echo__echo", {"text": "after"})) == "after"  # answered after the cancel settled
    assert not any(m.get("id") == rid for m in t.received)  # a cancelled request gets no answer
    assert t.server_status("echo")["calls"] == 2  # step one and the call above; the third step never ran
    assert [p["message"] for p in _progress_for(t, "p-hang")] == ["first"]


def test_adjacent_parallel_steps_run_at_once(troupe):
    t = troupe("flat")
    t.request("tools/list", timeout=30)
    answer = t.call("workflow_side_by_side", timeout=30)
    assert text_of(answer) == "slept+slept"
    spans = [s["ms"] for s in _structured(answer)["steps"][:2]]
    assert all(900 <= ms < 1900 for ms in spans), spans
    assert _structured(answer)["ms"] < 1900  # two 1 s sleeps side by side, not one after the other


def test_a_profile_hides_workflows_unless_it_names_them_and_steps_run_in_its_view(troupe):
    profiles = {"echo_only": {"tools": {"allow": ["echo__*"]}},
                "echo_and_workflows": {"tools": {"allow": ["echo__*", "workflow_*"]}}}
    hidden = troupe("flat", "--profile", "echo_only", profiles=profiles)
    names = {tool["name"] for tool in hidden.request("tools/list", timeout=30)["result"]["tools"]}
    assert "echo__echo" in names and not any(n.startswith("workflow_") for n in names)
    assert "unknown tool" in hidden.call("workflow_fails_in_the_middle")["error"]["message"]

    shown = troupe("flat", "--profile", "echo_and_workflows", profiles=profiles)
    names = {tool["name"] for tool in shown.request("tools/list", timeout=30)["result"]["tools"]}
    assert {"workflow_add_and_note", "workflow_fails_in_the_middle"} <= names
    result = shown.call("workflow_add_and_note", {"a": 30, "b": 1, "note": "n"}, timeout=30)["result"]
    assert result["isError"] is True  # notes is outside this profile: its step cannot reach it
    assert "step 'note'" in result["content"][0]["text"] and "unknown tool" in result["content"][0]["text"]


GREET = """\
name: greet
input_schema: {type: object, properties: {who: {type: string}}, required: [who]}
steps:
  - id: say
    tool: echo__echo
    args: {text: "hello {{ input.who }}"}
output: "{{ steps.say.text }}!"
"""


def test_a_workflows_dir_file_is_picked_up_live_and_a_broken_one_keeps_the_last_good(troupe, tmp_path):
    wf_dir = tmp_path / "workflows"
    wf_dir.mkdir()
    (wf_dir / "greet.yaml").write_text(GREET)
    t = troupe("flat", workflows=[], workflows_dir=str(wf_dir))
    t.request("tools/list", timeout=30)
    assert text_of(t.call("workflow_greet", {"who": "ada"}, timeout=30)) == "hello ada!"

    (wf_dir / "greet.yaml").write_text(GREET.replace('}}!"', '}}?"'))
    wait_until(lambda: text_of(t.call("workflow_greet", {"who": "ada"})) == "hello ada?", 15,
               interval=0.2, message="the changed output template in use")

    (wf_dir / "greet.yaml").write_text(GREET.replace("tool: echo__echo", "tool: echo__echo\n    when: \"{{ oops(\""))
    listed = wait_until(lambda: (found := json.loads(text_of(t.call("core_workflow_list"))))["problems"] and found,
                        15, interval=0.2, message="the broken file reported")
    assert listed["problems"][0].startswith(f"{wf_dir / 'greet.yaml'}:6: steps[0].when: template does not parse")
    assert listed["workflows"][0]["stale"] is True
    assert text_of(t.call("workflow_greet", {"who": "ada"})) == "hello ada?"  # the last good one serves on

    changes = _list_changes(t)
    (wf_dir / "shout.yaml").write_text(GREET.replace("name: greet", "name: shout").replace("echo__echo", "echo__nope"))
    wait_until(lambda: _list_changes(t) > changes, 15, interval=0.1, message="tools/list_changed for a new workflow")
    wait_until(lambda: "workflow_shout" in {x["name"] for x in t.request("tools/list")["result"]["tools"]}, 15,
               interval=0.2, message="a new file picked up")
    checked = json.loads(text_of(t.call("core_workflow_validate", {"name": "shout"})))
    assert checked["valid"] is False
    assert checked["problems"] == [f"{wf_dir / 'shout.yaml'}:4: workflow shout: step say: unknown tool "
                                   f"'echo__nope' (not in the catalogue this client can call; list_tools shows "
                                   f"the names)"]
    got = json.loads(text_of(t.call("core_workflow_get", {"name": "workflow_greet"})))
    assert got["source"] == f"{wf_dir / 'greet.yaml'}:1" and got["definition"]["output"] == "{{ steps.say.text }}?"

    (wf_dir / "shout.yaml").unlink()
    wait_until(lambda: "workflow_shout" not in {x["name"] for x in t.request("tools/list")["result"]["tools"]}, 15,
               interval=0.2, message="a removed file's workflow gone")


def test_troupe_check_reports_broken_workflows_with_file_and_line(tmp_path):
    import subprocess

    from tests.support import PYTHON, ROOT
    wf_dir = tmp_path / "workflows"
    wf_dir.mkdir()
    (wf_dir / "greet.yaml").write_text(GREET)
    (wf_dir / "broken.yaml").write_text(GREET.replace("name: greet", "name: broken")
                                        .replace('args: {text: "hello {{ input.who }}"}',
                                                 'args: {text: "hello {{ input.who }"}\n    on_error: maybe'))
    path = _config(tmp_path, "flat", [{**FAILS, "output": "{{ steps.later.text }}"}], workflows_dir=str(wf_dir))

    def check() -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, "-m", "actors.main", "check", str(path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
    done = check()  # the config's own workflow first: a broken config is refused before the dir is read
    assert done.returncode == 1
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith("output:"))
    assert done.stdout.splitlines() == [
        f"{path}:{line}: workflows[0].output: names step 'later', which is not an earlier step of this workflow"]

    path = _config(tmp_path, "flat", [FAILS], workflows_dir=str(wf_dir))
    done = check()
    assert done.returncode == 1
    broken = wf_dir / "broken.yaml"
    assert done.stdout.splitlines() == [
        f"{broken}:6: steps[0].args.text: template does not parse: unexpected '}}'",
        f"{broken}:7: steps[0].on_error: 'maybe' is not one of stop, continue"]
    assert "2 problem(s) found" in done.stderr

    broken.unlink()
    done = check()
    assert done.returncode == 0 and "2 workflows: fails_in_the_middle, greet;" in done.stdout


def test_the_configs_own_workflows_apply_on_reload(troupe, tmp_path):
    t = troupe("flat", workflows=[CONTINUES])
    t.request("tools/list", timeout=30)
    assert text_of(t.call("workflow_carries_on", timeout=30)) == "bad failed: True"
    changed = {**CONTINUES, "output": "after: {{ steps.after.text }}"}
    path = _config(tmp_path, "flat", [changed, GREET_INLINE])
    assert path.exists()
    wait_until(lambda: text_of(t.call("workflow_carries_on")) == "after: bad failed: True", 15, interval=0.2,
               message="the reloaded config's workflow in use")
    assert text_of(t.call("workflow_greet", {"who": "bo"})) == "hello bo!"


GREET_INLINE = yaml.safe_load(GREET)
