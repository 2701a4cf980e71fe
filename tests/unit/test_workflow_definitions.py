"""Workflow definitions and templates: native types, `when` truthiness, the sandbox, and the
problems a broken definition reports (file, line, key path)."""
from __future__ import annotations

import jinja2
import pytest
import yaml

from actors.settings import config as config_mod
from actors.settings.files import Located
from actors.workflows import definitions, templating
from actors.workflows.templating import TemplateProblem


def _value(source, **context):
    return templating.evaluate(templating.compile_value(source), context)


def test_a_single_expression_keeps_its_native_type_and_text_around_it_renders_a_string():
    ctx = {"input": {"a": 7, "tags": ["x", "y"], "on": False}, "steps": {}}
    assert _value("{{ input.a }}", **ctx) == 7
    assert _value("  {{ input.a + 1 }} ", **ctx) == 8
    assert _value("{{ input.tags }}", **ctx) == ["x", "y"]
    assert _value("{{ input.on }}", **ctx) is False
    assert _value("{{ input.a }} items", **ctx) == "7 items"
    assert _value("{{ input.a }}{{ input.a }}", **ctx) == "77"  # two tags: text, not one expression
    assert _value({"n": "{{ input.a }}", "list": ["{{ input.a }}", "plain", 3]}, **ctx) == \
        {"n": 7, "list": [7, "plain", 3]}
    assert _value("no template", **ctx) == "no template"


@pytest.mark.parametrize("rendered, expected", [
    ("", False), ("  ", False), ("false", False), ("False", False), (" FALSE ", False), ("0", False),
    ("none", False), ("None", False), ("true", True), ("1", True), ("12", True), ("no", True), ("0.0", True)])
def test_when_is_read_as_true_or_false(rendered, expected):
    assert templating.truthy(rendered) is expected


def test_when_renders_jinja_booleans_and_skipped_steps_are_falsy():
    when = templating.compile_text("{{ steps.sum.text | int > 10 }}")
    assert templating.truthy(when.value({"steps": {"sum": {"text": "12"}}})) is True
    assert templating.truthy(when.value({"steps": {"sum": {"text": "7"}}})) is False
    from actors.workflows.runner import SKIPPED
    other = templating.compile_text("{{ 'ran' if steps.note else 'skipped' }}:{{ steps.note.text }}")
    assert other.value({"steps": {"note": SKIPPED}}) == "skipped:"


def test_the_sandbox_refuses_attribute_escapes_and_names_are_strict():
    for source in ("{{ ''.__class__ }}", "{{ ''.__class__.__mro__[1].__subclasses__() }}",
                   "x {{ input.__init__.__globals__ }}", "{{ cycler.__init__.__globals__.os }}"):
        with pytest.raises(TemplateProblem) as caught:
            _value(source, input={}, steps={})
        assert "unsafe" in caught.value.message or "undefined" in caught.value.message, source
    with pytest.raises(TemplateProblem, match="has no attribute 'nme'"):
        _value("{{ input.nme }}", input={"name": "x"}, steps={})
    with pytest.raises(TemplateProblem, match="'missing' is undefined"):
        _value("hello {{ missing }}", input={}, steps={})
    assert isinstance(templating.ENV, jinja2.sandbox.SandboxedEnvironment)


def test_a_template_that_does_not_parse_says_where():
    with pytest.raises(TemplateProblem) as caught:
        templating.compile_text("line one\n{{ oops( }}")
    assert caught.value.line == 2


def test_step_references_are_found_by_attribute_and_by_key():
    assert templating.step_references("{{ steps.a.text }} {{ steps['b'].structured }} {{ input.c }}") == {"a", "b"}
    assert templating.step_references("{% if steps.x %}{{ steps.y.text }}{% endif %}") == {"x", "y"}


GOOD = """\
workflows:
  - name: add_and_note
    input_schema:
      type: object
      properties: {a: {type: integer}, b: {type: integer}}
    steps:
      - id: sum
        tool: echo__add
        args: {a: "{{ input.a }}", b: "{{ input.b }}"}
      - {id: left, tool: echo__echo, args: {text: "{{ steps.sum.text }}"}, parallel: true}
      - {id: right, tool: echo__echo, args: {text: r}, parallel: true}
      - id: last
        tool: notes__read_note
        when: "{{ steps.left.text }}"
        args: {name: "{{ steps.right.text }}"}
    output: "{{ steps.last.text }}"
"""

BROKEN = """\
workflows:
  - name: bad name
    input_schema: {type: array}
    colour: blue
    steps:
      - id: a
        tool: x
        args: {v: "{{ steps.b.text }}", w: "{{ oops( }}"}
      - id: a
        tool: workflow_other
        on_error: maybe
      - {id: p, tool: t, parallel: true}
      - {id: q, tool: t, parallel: true, args: {v: "{{ steps.p.text }}"}}
      - {id: 9lives, tool: t}
    output: "{{ steps.zzz.text }}"
  - {name: nosteps, steps: []}
"""


def test_a_good_definition_groups_parallel_steps_next_to_each_other(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text(GOOD)
    config = config_mod.load(path)
    (workflow,) = config.workflows
    assert workflow.tool_name == "workflow_add_and_note" and workflow.line == 2
    assert [[s.id for s in group] for group in workflow.groups()] == [["sum"], ["left", "right"], ["last"]]
    assert [s.line for s in workflow.steps] == [7, 10, 11, 12]
    assert workflow.tool_definition()["inputSchema"]["properties"]["a"] == {"type": "integer"}


def test_every_problem_of_a_broken_definition_names_file_line_and_key(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text(BROKEN)
    with pytest.raises(config_mod.ConfigError) as caught:
        config_mod.load(path)
    got = sorted(caught.value.problems, key=lambda p: int(p.split(":")[1]))
    expected = [
        "2: workflows[0].name: is required: letters, digits, _ and -, at most 55 ('bad name')",
        "3: workflows[0].input_schema.type: a tool's input schema must have type object",
        "4: workflows[0].colour: unknown key",
        "8: workflows[0].steps[0].args.w: template does not parse",
        "8: workflows[0].steps[0].args.v: names step 'b', which is not an earlier step",
        "9: workflows[0].steps[1].id: duplicate step id 'a'",
        "10: workflows[0].steps[1].tool: 'workflow_other': a step cannot call a workflow",
        "11: workflows[0].steps[1].on_error: 'maybe' is not one of stop, continue",
        "13: workflows[0].steps[3].args.v: names step 'p', which runs in parallel with it",
        "14: workflows[0].steps[4].id: '9lives' must be letters, digits and _",
        "15: workflows[0].output: names step 'zzz', which is not an earlier step",
        "16: workflows[1].steps: is required",
    ]
    assert len(got) == len(expected), got
    for problem in expected:
        assert any(p.startswith(f"{path}:{problem}") for p in got), (problem, got)


def test_a_workflows_dir_file_takes_its_name_from_the_file_and_reports_its_own_lines(tmp_path):
    (tmp_path / "greet.yaml").write_text("steps:\n  - {id: say, tool: echo__echo, args: {text: hi}}\n")
    (tmp_path / "broken.yml").write_text("steps:\n  - id: x\n    tool: t\n    when: '{% if %}'\n")
    (tmp_path / "notes.txt").write_text("not a workflow")
    files = definitions.dir_files(str(tmp_path))
    assert [f.name for f in files] == ["broken.yml", "greet.yaml"]
    broken, problems = definitions.load_file(files[0])
    assert broken is None and problems[0].startswith(f"{files[0]}:4: steps[0].when: template does not parse")
    greet, problems = definitions.load_file(files[1])
    assert problems == [] and greet is not None and greet.name == "greet" and greet.output is None


def test_an_inline_definition_is_checked_without_a_file():
    data = yaml.safe_load("name: x\nsteps: [{id: a, tool: t, args: {v: '{{ steps.a.text }}'}}]")
    problems: list[str] = []
    assert definitions.parse(data, "", Located(data, {}, "<definition>"), lambda p, m: problems.append(f"{p}: {m}")) \
        is None
    assert problems == ["steps[0].args.v: names its own step 'a': a step sees only the steps before it"]
