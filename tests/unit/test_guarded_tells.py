"""Every tell is guarded (issue 25, item 6): a `.tell(` to an actor that has stopped raises
pykka.ActorDeadError in the teller, which stops an actor or kills a reader greenlet. So under
actors/ a tell goes through actors/tells.py (`tell(ref, msg) -> bool`), or sits in the body of a
`try` whose `except pykka.ActorDeadError` handler does something (logs, answers, returns a value:
not just `pass`). Read with ast, so nothing is imported.

Strict on purpose: a tell inside a lambda or a function defined in a guarded `try` is not guarded
(it runs later, outside it), and a bound `.tell` handed on as a callback (`report=ref.tell`) is a
bare tell wherever it is called. An actor telling itself through `self.actor_ref` counts too: its
timers fire after it stopped."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ACTORS = ROOT / "actors"
GUARD = "actors/tells.py"


def _catches_dead(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Attribute) and k.attr == "ActorDeadError"
               or isinstance(k, ast.Name) and k.id == "ActorDeadError" for k in kinds)


def _does_something(handler: ast.ExceptHandler) -> bool:
    """Not only `pass`, `...` or a string: silence is what tells.tell already says, explicitly."""
    return not all(isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                   for s in handler.body)


class _Finder(ast.NodeVisitor):
    """Collects (line, what) for each unguarded tell in one module."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self._guarded = False
        self._called: set[int] = set()  # id() of the `.tell` attributes that are called

    def visit_Try(self, node: ast.Try) -> None:
        outer = self._guarded
        self._guarded = outer or any(_catches_dead(h) and _does_something(h) for h in node.handlers)
        for stmt in node.body:
            self.visit(stmt)
        self._guarded = outer
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    def _later(self, node: ast.AST) -> None:
        """A function body runs later, outside any try around its definition."""
        outer, self._guarded = self._guarded, False
        self.generic_visit(node)
        self._guarded = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _later

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "tell":
            self._called.add(id(func))
            # A file's tell() takes no argument: an actor's takes the message.
            if (node.args or node.keywords) and not self._guarded:
                self.found.append((node.lineno, f"bare {ast.unparse(func)}(…)"))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "tell" and id(node) not in self._called and isinstance(node.ctx, ast.Load):
            self.found.append((node.lineno, f"{ast.unparse(node)} handed on as a callback"))
        self.generic_visit(node)


def unguarded(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    finder = _Finder()
    finder.visit(ast.parse(source, filename))
    return finder.found


def _modules():
    files = sorted(ACTORS.rglob("*.py"))
    assert files, f"no Python files under {ACTORS}"
    for path in files:
        yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def test_no_bare_tell_under_actors():
    bad = [f"{rel}:{line}: {what}" for rel, source in _modules() if rel != GUARD
           for line, what in unguarded(source, rel)]
    assert not bad, ("tells not guarded (use actors.tells.tell, or try/except pykka.ActorDeadError that acts):\n  "
                     + "\n  ".join(bad))


def test_the_guard_itself_is_there():
    sources = dict(_modules())
    assert GUARD in sources and "def tell(" in sources[GUARD]


def test_the_check_tells_guarded_from_bare():
    assert unguarded("ref.tell(Msg())") == [(1, "bare ref.tell(…)")]
    assert unguarded("self.actor_ref.tell(_Tick())")  # an actor telling itself, too
    assert unguarded("f.tell()") == []  # a file position, not an actor
    assert unguarded("tell(ref, Msg())") == []  # actors.tells.tell
    acting = "try:\n    ref.tell(m)\nexcept pykka.ActorDeadError:\n    logger.info('gone')\n"
    assert unguarded(acting) == []
    assert unguarded(acting.replace("pykka.ActorDeadError", "(OSError, ActorDeadError)")) == []
    assert unguarded(acting.replace("logger.info('gone')", "pass")) == [(2, "bare ref.tell(…)")]
    assert unguarded(acting.replace("pykka.ActorDeadError", "Exception")) == [(2, "bare ref.tell(…)")]
    later = "try:\n    spawn(lambda: ref.tell(m))\nexcept ActorDeadError:\n    return False\n"
    assert unguarded(later) == [(2, "bare ref.tell(…)")]  # the lambda runs outside the try
    in_handler = "try:\n    x()\nexcept ActorDeadError:\n    ref.tell(m)\n"
    assert unguarded(in_handler) == [(4, "bare ref.tell(…)")]
    assert unguarded("Liveness(report=supervisor.tell)") == [(1, "supervisor.tell handed on as a callback")]


def test_a_tell_to_a_stopped_actor_is_false_not_a_crash():
    import pykka

    from actors.tells import tell

    class Quiet(pykka.ThreadingActor):
        """Takes anything, answers nothing."""

    ref = Quiet.start()
    assert tell(ref, "hello") is True
    ref.stop()
    assert tell(ref, "too late") is False
