"""Every module and every class under actors/ has a docstring (issue 13): what it owns,
what it receives, what it sends. Read with ast, so nothing is imported."""
from __future__ import annotations

import ast
from pathlib import Path

ACTORS = Path(__file__).resolve().parents[2] / "actors"


def _modules():
    files = sorted(ACTORS.rglob("*.py"))
    assert files, f"no Python files under {ACTORS}"
    for path in files:
        yield path.relative_to(ACTORS.parent), ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_every_module_has_a_docstring():
    missing = [str(rel) for rel, tree in _modules() if not ast.get_docstring(tree)]
    assert not missing, "modules without a docstring:\n  " + "\n  ".join(missing)


def test_every_class_has_a_docstring():
    missing = [f"{rel}:{node.lineno} {node.name}" for rel, tree in _modules() for node in ast.walk(tree)
               if isinstance(node, ast.ClassDef) and not ast.get_docstring(node)]
    assert not missing, "classes without a docstring:\n  " + "\n  ".join(missing)
