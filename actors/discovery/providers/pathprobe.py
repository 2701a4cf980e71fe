"""PathProbeProvider: MCP-looking binaries in trusted PATH directories, confirmed by a sandboxed `--help`."""
from __future__ import annotations

import fnmatch
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass

import gevent
import gevent.os
import gevent.pool
from loguru import logger

from actors.settings.config import ServerConfig, StdioSpec
from actors.discovery.identity import identity_of, which_on
from actors.discovery.messages import ProviderResult, ServiceRecord
from actors.discovery.sources import CONFIDENCE_PATH, PLACEHOLDER
from actors.discovery.providers.base import ProviderActor

# Only names like these are ever run; everything else on PATH is left alone.
NAME_PATTERNS = ("mcp-server-*", "*-mcp", "*-mcp-server")
HELP_ARGS = ("--help",)
MAX_HELP_BYTES = 64 * 1024  # a binary that prints forever is cut off here
READ_CHUNK = 8192
KILL_WAIT = 2.0  # after SIGKILL to the group, to reap the leader
# What --help must mention to count as an MCP server (medium confidence).
MCP_HINT = re.compile(r"\bmcp\b|model context protocol|\bstdio\b", re.I)
WINDOWS_EXTS = (".exe", ".cmd", ".bat")
ROOT_UID = 0
HELP_DIR_PREFIX = "troupe-help-"


@dataclass(frozen=True, slots=True)
class Candidate:
    """An executable in a trusted PATH directory whose name looks like an MCP server: its name,
    the path it was found at, and its realpath (what is checked, cached and deduplicated)."""

    name: str
    path: str
    real: str


def looks_like_mcp(name: str, allowlist=()) -> bool:
    stem = name
    for ext in WINDOWS_EXTS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    return name in allowlist or stem in allowlist or any(fnmatch.fnmatchcase(stem, p) for p in NAME_PATTERNS)


def unsafe(st: os.stat_result, uid: int) -> str | None:
    """Why a directory or binary with this stat is not safe to run from, or None.

    Anyone else who can write there can swap the binary we are about to run."""
    if st.st_uid not in (ROOT_UID, uid):
        return f"is owned by uid {st.st_uid}"
    if st.st_mode & stat.S_IWOTH:
        return "is writable by others"
    if st.st_mode & stat.S_IWGRP:
        return "is writable by its group"
    return None


def trusted_dirs(search_path: str) -> tuple[list[str], list[str]]:
    """(PATH directories --help may run from, one note per entry skipped as unsafe).

    Only absolute directories owned by root or us and writable by no one else: a
    relative entry (`.`, `bin`, empty) means whatever directory troupe was started in."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is None:
        return [], ["PATH probe: owners and permissions cannot be checked on this platform; not probed"]
    dirs: list[str] = []
    notes: list[str] = []
    for entry in dict.fromkeys(search_path.split(os.pathsep)):
        if not os.path.isabs(entry):
            notes.append(f"PATH entry {entry!r} is relative; not probed")
            continue
        try:
            st = os.stat(entry)
        except OSError:
            continue  # a missing directory holds nothing to run
        if not stat.S_ISDIR(st.st_mode):
            continue
        why = unsafe(st, uid)
        if why:
            notes.append(f"PATH entry {entry!r} {why}; not probed")
            continue
        dirs.append(entry)
    return dirs, notes


def candidates(directories, allowlist=()) -> list[Candidate]:
    """Executables whose names look like MCP servers, in directory order; a name shadowed by
    an earlier directory and a second path to the same binary are both dropped."""
    out, names, reals = [], set(), set()
    for directory in directories:
        try:
            listing = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in listing:
            if name in names or not looks_like_mcp(name, allowlist):
                continue
            path = os.path.join(directory, name)
            if not os.path.isfile(path) or not os.access(path, os.X_OK):
                continue
            names.add(name)
            real = os.path.realpath(path)
            if real in reals:
                continue
            reals.add(real)
            out.append(Candidate(name, path, real))
    return out


def unsafe_binary(cand: Candidate, uid: int) -> str | None:
    """Why this binary (or, for a symlink, the directory it really lives in) is not safe to run."""
    places = [cand.real]
    if os.path.dirname(cand.real) != os.path.dirname(cand.path):
        places.append(os.path.dirname(cand.real))
    for place in places:
        try:
            why = unsafe(os.stat(place), uid)
        except OSError as exc:
            return f"{place}: cannot stat ({exc.strerror}); not probed"
        if why:
            return f"{place} {why}; not probed"
    return None


def run_help(path: str, timeout: float, env: dict) -> tuple[int | None, bytes]:
    """`path --help`: no stdin, minimal env, a fresh empty cwd, own process group killed on timeout.

    Returns (exit code or None on timeout, first MAX_HELP_BYTES of stdout+stderr).
    """
    # Never $HOME or troupe's cwd: a --help that reads or writes relative paths finds
    # nothing of ours, and what it leaves behind goes with the directory.
    cwd = tempfile.mkdtemp(prefix=HELP_DIR_PREFIX)
    try:
        return _run_help_in(path, timeout, env, cwd)
    finally:
        shutil.rmtree(cwd, ignore_errors=True)


def _run_help_in(path: str, timeout: float, env: dict, cwd: str) -> tuple[int | None, bytes]:
    proc = subprocess.Popen([path, *HELP_ARGS], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True,
                            close_fds=True)
    assert proc.stdout is not None  # stdout=PIPE
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        fd = proc.stdout.fileno()
        gevent.os.make_nonblocking(fd)
        with gevent.Timeout(timeout, False):  # pyright: ignore[reportArgumentType]  # stubs lack documented False
            while len(out) < MAX_HELP_BYTES:
                chunk = gevent.os.nb_read(fd, READ_CHUNK)
                if not chunk:
                    break
                out += chunk
        try:
            code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
    finally:
        # The whole group goes, whatever happened: no helper outlives its probe.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:
            logger.warning("path probe: {} did not die after SIGKILL", path)
        proc.stdout.close()
    return code, bytes(out[:MAX_HELP_BYTES])


class PathProbeProvider(ProviderActor):
    """Runs `--help` once per binary version (cached by realpath, mtime and size), only from
    PATH directories no one but root or us can write to."""

    provider = "path"

    def __init__(self, *, search_path: str, home: str, allowlist=(), timeout: float = 2.0,
                 concurrency: int = 8, auto_connect: bool = False) -> None:
        super().__init__()
        self._path = search_path
        self._home = home
        self._allow = tuple(allowlist)
        self._timeout = timeout
        self._concurrency = max(1, concurrency)
        self._auto = auto_connect
        self._which = which_on(search_path)
        self._uid = os.geteuid() if hasattr(os, "geteuid") else None
        self._cache: dict[tuple, bool] = {}

    def _env(self, trusted: list[str]) -> dict:
        # Only what a --help needs: no tokens or keys from troupe's environment, and a PATH
        # without the entries we refused to run from.
        return {"PATH": os.pathsep.join(trusted), "HOME": self._home, "LANG": os.environ.get("LANG", "C.UTF-8")}

    def _check(self, cand: Candidate, env: dict) -> tuple[Candidate, bool, str | None]:
        """(candidate, mentions MCP, problem or None); cached per binary version."""
        assert self._uid is not None  # candidates come from trusted_dirs, empty without geteuid
        why = unsafe_binary(cand, self._uid)
        if why:
            return cand, False, why
        try:
            st = os.stat(cand.real)
        except OSError as exc:
            return cand, False, f"{cand.path}: cannot stat ({exc.strerror})"
        key = (cand.real, st.st_mtime_ns, st.st_size)
        if key not in self._cache:
            try:
                code, out = run_help(cand.path, self._timeout, env)
            except OSError as exc:
                return cand, False, f"{cand.path}: cannot run ({exc.strerror or exc})"
            # its own name ("usage: mcp-server-x") proves nothing: only the rest of the text counts
            text = out.decode("utf-8", "replace").replace(cand.path, "").replace(cand.name, "")
            matched = bool(MCP_HINT.search(text))
            how = "timed out" if code is None else f"exit {code}"
            logger.debug("path probe: {} --help {}, {}", cand.path, how, "mentions MCP" if matched else "no MCP")
            self._cache[key] = matched
        return cand, self._cache[key], None

    def scan(self) -> ProviderResult:
        trusted, notes = trusted_dirs(self._path)
        cands = candidates(trusted, self._allow)
        env = self._env(trusted)
        pool = gevent.pool.Pool(self._concurrency)
        try:
            checked = pool.map(lambda cand: self._check(cand, env), cands)
        finally:
            pool.kill(block=True)  # a stopped scan leaves no --help running
        records, errors = [], list(notes)
        for cand, matched, problem in checked:
            if problem:
                errors.append(problem)
            if not matched:
                continue  # low confidence: not recorded
            cfg = ServerConfig(name=PLACEHOLDER, transport="stdio", stdio=StdioSpec(cand.path))
            records.append(ServiceRecord(
                provider=self.provider, file=cand.path, name=cand.name,
                identity=identity_of(cfg, self._which), confidence=CONFIDENCE_PATH, config=cfg,
                tags=frozenset({"path", "probed"}), auto_connect=self._auto))
        return ProviderResult(self.provider, tuple(records), tuple(errors), tuple(c.path for c in cands))
