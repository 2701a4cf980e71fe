"""@dataclass's generated methods compiled once and kept (actors/dataclass_code_cache.py): a second
start compiles nothing and its classes behave as compiled ones do; a file that is broken, or that
someone else could have written, is never used. Each start is a fresh interpreter."""
from __future__ import annotations

import os

from tests.support.fresh import run_fresh

START = ("import json, sys\n"
         "from actors import dataclass_code_cache as cache\n"
         "cache.install()\n"
         "from dataclasses import FrozenInstanceError, dataclass, field, replace\n"
         "@dataclass(frozen=True)\n"
         "class Point:\n"
         "    '''A point.'''\n"
         "    x: int\n"
         "    y: int = 0\n"
         "    tags: tuple = field(default=())\n"
         "loaded = cache.stats()\n"
         "p = Point(1, tags=('a',))\n"
         "try:\n"
         "    p.x = 5; frozen = False\n"
         "except FrozenInstanceError:\n"
         "    frozen = True\n"
         "import inspect, typing\n"
         "seen = {'repr': repr(p), 'eq': p == Point(1, 0, ('a',)), 'hash': hash(p) == hash(Point(1, 0, ('a',))),\n"
         "        'frozen': frozen, 'replace': repr(replace(p, y=2)), 'signature': str(inspect.signature(Point)),\n"
         "        'hints': sorted(f'{k}={v}' for k, v in typing.get_type_hints(Point.__init__).items())}\n"
         "from actors.settings import model  # troupe's own classes\n"
         "before = cache.stats()\n"
         "cache.settle()\n"
         "print(json.dumps({'loaded': loaded, 'before': before, 'seen': seen}))\n")


def _start(cache_home) -> dict:
    return run_fresh(START, env={"XDG_CACHE_HOME": str(cache_home)})


SEEN = {"repr": "Point(x=1, y=0, tags=('a',))", "eq": True, "hash": True, "frozen": True,
        "replace": "Point(x=1, y=2, tags=('a',))",
        # the annotations as a plain @dataclass gives them (not the cache's own __future__ strings)
        "signature": "(x: int, y: int = 0, tags: tuple = ()) -> None",
        "hints": ["return=<class 'NoneType'>", "tags=<class 'tuple'>", "x=<class 'int'>", "y=<class 'int'>"]}


def _table(cache_home):
    files = list((cache_home / "troupe").glob("dataclass-code.*.marshal"))
    assert len(files) == 1, files
    return files[0]


def test_the_second_start_compiles_nothing_and_its_classes_behave_the_same(tmp_path):
    cold = _start(tmp_path)
    assert cold["loaded"] == {"table": 0, "fresh": 6}  # Point: __init__, __repr__, __eq__, __hash__, __setattr__, __delattr__
    assert cold["before"]["fresh"] > 50 and cold["seen"] == SEEN
    table = _table(tmp_path)
    assert oct(table.stat().st_mode & 0o777) == "0o600" and oct(table.parent.stat().st_mode & 0o777) == "0o700"
    warm = _start(tmp_path)
    assert warm["before"] == {"table": cold["before"]["fresh"], "fresh": 0}
    assert warm["seen"] == SEEN


def test_a_broken_table_is_ignored_and_replaced(tmp_path):
    _start(tmp_path)
    table = _table(tmp_path)
    table.write_bytes(b"\x00not marshal at all")
    again = _start(tmp_path)
    assert again["loaded"]["table"] == 0 and again["seen"] == SEEN
    assert _start(tmp_path)["before"]["fresh"] == 0  # written whole again


def test_a_table_others_could_write_is_never_used(tmp_path):
    _start(tmp_path)
    table = _table(tmp_path)
    os.chmod(table, 0o666)
    assert _start(tmp_path)["loaded"]["table"] == 0
    os.chmod(table, 0o600)
    os.chmod(table.parent, 0o777)
    assert _start(tmp_path)["loaded"]["table"] == 0


def test_a_cache_that_cannot_be_written_costs_only_the_compiles(tmp_path):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    got = _start(blocked)  # XDG_CACHE_HOME is a file: nothing can be made under it
    assert got["seen"] == SEEN and got["loaded"]["table"] == 0
