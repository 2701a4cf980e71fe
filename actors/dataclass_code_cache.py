"""dataclass_code_cache: the methods @dataclass writes, compiled once per machine, not on every start.

@dataclass writes each class's __init__, __repr__, __eq__, __hash__ (and, for a frozen class,
__setattr__ and __delattr__) as Python source and compiles it while the module imports. troupe's
~180 messages and config classes make ~930 such compiles: ~110 ms of a ~250 ms import on this
machine, before troupe can answer its first `initialize`, on every start of every client that
spawns it. The source depends only on the class's fields and options, so the code compiled from
it can be kept, as Python keeps a module's bytecode in __pycache__.

`install` (troupe's entry point, before the first dataclass) gives the dataclasses module an
`exec` that looks each source up by its digest in a table read from one file, compiles only what
is missing, and runs the code exactly as the builtin would. `settle` (once troupe serves) writes
what was compiled fresh and lets the table go; what later imports compile is written at exit.

The file holds code that will run: it is kept in the user's own cache directory (mode 0700, the
file 0600), named for this exact interpreter (marshal's format and bytecode change between
versions), and ignored unless the user owns it and no one else may write to it. A file that
cannot be read or written costs only the compiles it would have saved.
"""
from __future__ import annotations

import atexit
import builtins
import dataclasses
import marshal
import os
import stat
import sys
from pathlib import Path
from types import CodeType

FORMAT = 2  # bumped when what is compiled changes: 2 compiles without this module's `annotations` flag
_state: dict = {"path": None, "table": {}, "fresh": {}, "installed": False, "blake2b": None}


def default_path() -> Path:
    """$XDG_CACHE_HOME/troupe (else ~/.cache/troupe), one file per interpreter build."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = f"{sys.implementation.cache_tag}-{sys.hexversion:x}-{FORMAT}"
    return Path(base) / "troupe" / f"dataclass-code.{tag}.marshal"


def install(path: Path | None = None) -> None:
    """Route the dataclasses module's compiles through the table at `path` (default_path())."""
    if _state["installed"]:
        return
    import hashlib  # here, not at the top: troupe's entry point first has it loaded without OpenSSL
    _state["blake2b"] = hashlib.blake2b
    _state.update(path=path or default_path(), table=_read(path or default_path()), fresh={}, installed=True)
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # the module's global lookup finds it before the builtin
    atexit.register(_save_fresh)


def settle() -> None:
    """Write what was compiled fresh, then drop the table: from here on a class compiles as usual."""
    _save_fresh()
    _state["table"] = {}


def stats() -> dict:
    """How many sources the table holds and how many were compiled fresh since the last write."""
    return {"table": len(_state["table"]), "fresh": len(_state["fresh"])}


def _digest(source: str) -> bytes:
    return _state["blake2b"](source.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _exec(source, globals=None, locals=None, /):  # noqa: A002 - exec's own parameter names
    """builtins.exec, with a str source's code taken from the table when it holds it."""
    if not isinstance(source, str):
        return builtins.exec(source, globals, locals)
    key = _digest(source)
    code = _state["table"].get(key)
    if code is None:
        code = compile(source, "<string>", "exec", dont_inherit=True)  # not this module's __future__ flags
        _state["fresh"][key] = code
    return builtins.exec(code, globals, locals)


def _trusted(path: Path) -> bool:
    """Only a file of this user's that no one else may write (nor the directory it sits in)."""
    try:
        for p in (path.parent, path):
            st = os.stat(p)
            if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _read(path: Path) -> dict:
    if not _trusted(path):
        return {}
    try:
        table = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, bytes) and isinstance(v, CodeType)}


def _save_fresh() -> None:
    fresh, path = _state["fresh"], _state["path"]
    if not fresh or path is None:
        return
    _state["fresh"] = {}
    merged = {**_read(path), **_state["table"], **fresh}
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        import tempfile  # only when there is something to write: ~5 ms of imports
        fd, tmp = tempfile.mkstemp(prefix=".dataclass-code.", dir=path.parent)  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(marshal.dumps(merged))
            os.replace(tmp, path)  # whole or not at all, for a troupe starting meanwhile
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only home: every start compiles, as before
