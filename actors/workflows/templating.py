"""Workflow templates: Jinja2's SandboxedEnvironment compiles `args`, `when` and `output`; an
`args` value that is one `{{ expression }}` keeps its native type. Never eval."""
from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

# One environment for every workflow: it holds settings only (from_string keeps no cache), and
# the sandbox refuses attribute escapes (`''.__class__`), unsafe callables and huge ranges.
# StrictUndefined: a typo in a name fails with a clear error instead of rendering as "".
ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)

# Exactly one {{ … }} and nothing else (no second tag inside): the value keeps its native type.
_SINGLE = re.compile(r"^\s*\{\{((?:(?!\}\}|\{\{|\{%|%\}).)*)\}\}\s*$", re.DOTALL)
_FALSE = frozenset({"", "false", "0", "none"})


class TemplateProblem(Exception):
    """A template that does not parse, or failed while rendering; `line` is the line inside the
    template (1 = its first), when Jinja knows it."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message, self.line = message, line


@dataclass(frozen=True, slots=True)
class Text:
    """A template rendered to a string (`when`, `output`, or an args string with text around tags)."""

    source: str
    template: jinja2.Template

    def value(self, context: Mapping[str, Any]) -> str:
        try:
            return self.template.render(context)
        except jinja2.TemplateError as exc:
            raise TemplateProblem(_message(exc), getattr(exc, "lineno", None)) from None


@dataclass(frozen=True, slots=True)
class Expression:
    """An args value that is exactly one `{{ expression }}`: evaluated to its native value
    (`"{{ input.a }}"` with a = 7 gives the integer 7, not "7")."""

    source: str
    expression: Any  # jinja2's TemplateExpression

    def value(self, context: Mapping[str, Any]) -> Any:
        try:
            result = self.expression(context)
            if isinstance(result, jinja2.Undefined):
                str(result)  # StrictUndefined raises here, naming what is missing
            return result
        except jinja2.TemplateError as exc:
            raise TemplateProblem(_message(exc), getattr(exc, "lineno", None)) from None


@dataclass(frozen=True, slots=True)
class Literal:
    """An args value with no template in it, passed as written."""

    value_: Any

    def value(self, context: Mapping[str, Any]) -> Any:
        return self.value_


def compile_text(source: str) -> Text:
    """A template rendered as text; TemplateProblem (with its line) if it does not parse."""
    try:
        return Text(source, ENV.from_string(source))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateProblem(exc.message or str(exc), exc.lineno) from None


def compile_value(value: Any) -> Any:
    """An args tree compiled: strings become Text, Expression or Literal; lists and mappings are
    compiled item by item (as tuples and tuples of pairs, so the tree stays immutable)."""
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value and "{#" not in value:
            return Literal(value)
        single = _SINGLE.match(value)
        if single is None:
            return compile_text(value)
        try:
            return Expression(value, ENV.compile_expression(single.group(1), undefined_to_none=False))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateProblem(exc.message or str(exc), exc.lineno) from None
    if isinstance(value, list):
        return tuple(compile_value(v) for v in value)
    if isinstance(value, dict):
        return ArgsMapping(tuple((str(k), compile_value(v)) for k, v in value.items()))
    return Literal(value)


@dataclass(frozen=True, slots=True)
class ArgsMapping:
    """A compiled args mapping: its keys in order with their compiled values."""

    items: tuple


def evaluate(tree: Any, context: Mapping[str, Any]) -> Any:
    """The plain JSON-like value of a compiled args tree in `context`."""
    if isinstance(tree, ArgsMapping):
        return {k: evaluate(v, context) for k, v in tree.items}
    if isinstance(tree, tuple):
        return [evaluate(v, context) for v in tree]
    return tree.value(context)


def truthy(rendered: str) -> bool:
    """A rendered `when`: empty, false, 0 and none (any case, spaces around) are false."""
    return rendered.strip().lower() not in _FALSE


def sources(tree: Any) -> list[str]:
    """Every template source in a compiled args tree (for reference checks)."""
    if isinstance(tree, ArgsMapping):
        return [s for _, v in tree.items for s in sources(v)]
    if isinstance(tree, tuple):
        return [s for v in tree for s in sources(v)]
    return [tree.source] if isinstance(tree, (Text, Expression)) else []


def step_references(source: str) -> set[str]:
    """The step ids a template names as `steps.ID` or `steps['ID']` (cheap: what the parse
    tree shows; a computed key is not seen)."""
    single = _SINGLE.match(source)
    text = source if single is None else "{{" + single.group(1) + "}}"
    try:
        tree = ENV.parse(text)
    except jinja2.TemplateSyntaxError:
        return set()
    found = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        target = node.node
        if isinstance(target, nodes.Name) and target.name == "steps":
            if isinstance(node, nodes.Getattr):
                found.add(node.attr)
            elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                found.add(node.arg.value)
    return found


def _message(exc: jinja2.TemplateError) -> str:
    text = exc.message or str(exc)
    return f"{type(exc).__name__}: {text}" if isinstance(exc, jinja2.exceptions.SecurityError) else text
