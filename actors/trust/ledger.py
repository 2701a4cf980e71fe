"""The approvals file: operator decisions, pinned definitions and withheld changes, and its snapshot.

One JSON file under troupe's config directory, shared by every troupe process and the
`troupe approve` command. Each read-modify-write holds an exclusive lock on a sidecar
lock file and replaces the file atomically, so a reader never sees half a file.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

import orjson

from actors.off_hub import blocking
from actors.private_files import write_private

FORMAT_VERSION = 1
FILE_NAME = "approvals.json"
APPROVED, DENIED = "approved", "denied"
KINDS = ("tools", "prompts")


class LedgerError(Exception):
    """The approvals file cannot be read or written; one line naming the file."""


def default_path(home: str | None = None) -> str:
    """<config dir>/approvals.json: $TROUPE_CONFIG_DIR, else $XDG_CONFIG_HOME/troupe, else ~/.config/troupe."""
    base = os.environ.get("TROUPE_CONFIG_DIR")
    if not base:
        if home:
            base = str(Path(home) / ".config" / "troupe")
        else:
            xdg = os.environ.get("XDG_CONFIG_HOME")
            base = str(Path(xdg) / "troupe") if xdg else str(Path.home() / ".config" / "troupe")
    return str(Path(base) / FILE_NAME)


def path_for(config, home: str | None = None) -> str:
    """The approvals file a troupe on `config` keeps: trust.approvals_file, else the default one
    (under discovery.home's, or `home`'s, config directory when either is given)."""
    home_dir = home or config.discovery.get("home")
    return config.approvals_file or default_path(os.path.expanduser(home_dir) if home_dir else None)


@dataclass(frozen=True, slots=True)
class Pinned:
    """The definitions pinned for one server identity: kind → name → (digest, definition)."""

    tools: Mapping[str, tuple] = field(default_factory=lambda: MappingProxyType({}))
    prompts: Mapping[str, tuple] = field(default_factory=lambda: MappingProxyType({}))

    def of(self, kind: str) -> Mapping[str, tuple]:
        return self.tools if kind == "tools" else self.prompts


@dataclass(frozen=True, slots=True)
class TrustSnapshot:
    """Everything the gate and the registry need, immutable; published by the TrustKeeper."""

    version: int = 0
    decisions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # identity → approved|denied
    pins: Mapping[str, Pinned] = field(default_factory=lambda: MappingProxyType({}))  # identity → pinned digests
    # identity → {"name", "tools": {name: {"digest", "diff", "kind": new|changed}}, "prompts": {…}}
    withheld: Mapping[str, Mapping] = field(default_factory=lambda: MappingProxyType({}))
    # identity → the last full listing of an on-demand server, pre-encoded JSON ({"tools",
    # "resources", "templates", "prompts", "capabilities", "instructions"}): served while it is stopped
    listings: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))


def decisions_of(data: Mapping[str, Any]) -> dict[str, str]:
    """identity → approved | denied: the operator's decisions the file holds."""
    return {identity: entry["decision"] for identity, entry in (data.get("servers") or {}).items()
            if isinstance(entry, dict) and entry.get("decision") in (APPROVED, DENIED)}


def snapshot(data: Mapping[str, Any], version: int) -> TrustSnapshot:
    decisions, pins, withheld, listings = decisions_of(data), {}, {}, {}
    for identity, entry in (data.get("servers") or {}).items():
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("pinned"), dict):
            p = entry["pinned"]
            pins[identity] = Pinned(*(MappingProxyType({n: (d["digest"], d.get("definition"))
                                                        for n, d in (p.get(k) or {}).items()
                                                        if isinstance(d, dict) and "digest" in d})
                                      for k in KINDS))
        listing = _kept_listing(entry.get("listing"))
        if listing is not None:
            # as the Registry encodes a listing (sorted keys), so an unchanged one is not kept again
            listings[identity] = orjson.dumps(listing, option=orjson.OPT_SORT_KEYS)
        pending = entry.get("withheld")
        if isinstance(pending, dict) and any(pending.get(k) for k in KINDS):
            withheld[identity] = MappingProxyType({"name": entry.get("name"),
                                                   **{k: pending.get(k) or {} for k in KINDS}})
    return TrustSnapshot(version, MappingProxyType(decisions), MappingProxyType(pins), MappingProxyType(withheld),
                         MappingProxyType(listings))


LISTED_KINDS = ("tools", "resources", "templates", "prompts")


def _kept_listing(raw: Any) -> dict | None:
    """A kept listing as the file holds it, if it has the shape troupe wrote (each kind a list of
    objects, capabilities an object, instructions a string); else None: a file edited by hand or
    damaged costs that server its kept lists (it is started once to learn them again), never the
    Supervisor that serves them."""
    if not isinstance(raw, dict):
        return None
    if any(not isinstance(raw.get(k) or [], list) or not all(isinstance(item, dict) for item in raw.get(k) or [])
           for k in LISTED_KINDS):
        return None
    if not isinstance(raw.get("capabilities") or {}, dict) or not isinstance(raw.get("instructions") or "", str):
        return None
    return {k: v for k, v in raw.items() if k != "at"}


class Ledger:
    """Reads and updates one approvals file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    def stamp(self) -> tuple | None:
        """What changes when the file does (polled; a stat costs microseconds)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot stat ({exc.strerror})") from None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def read(self) -> dict:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {"version": FORMAT_VERSION, "servers": {}}
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot read ({exc.strerror})") from None
        try:
            data = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise LedgerError(f"{self.path}: not valid JSON ({exc}); fix or remove it") from None
        if not isinstance(data, dict) or not isinstance(data.get("servers", {}), dict):
            raise LedgerError(f"{self.path}: not an approvals file (no servers mapping)")
        data.setdefault("servers", {})
        return data

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self._lock_path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another writer holds it: wait for it off the hub, never in place
                # (a second runtime in this process may hold it across its fsync's wait in the pool,
                # which the hub, held by a blocking flock, would never let it finish)
                blocking(fcntl.flock, lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def update(self, change: Callable[[dict], Any]) -> tuple[Any, dict]:
        """Apply `change(data)` under the lock and write the result atomically;
        returns (what change returned, the data as written)."""
        with self._locked():
            data = self.read()
            result = change(data)
            data["version"] = FORMAT_VERSION
            blob = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
            write_private(self.path, blob, ".approvals-")
            return result, data


# ---------------------------------------------------------------- changes applied under the lock

def _entry(data: dict, identity: str, name: str | None) -> dict:
    entry = data["servers"].setdefault(identity, {})
    if name:
        entry["name"] = name
    return entry


def decide(data: dict, identity: str, name: str, decision: str, provenance: str | None = None,
           launch: str | None = None) -> dict:
    """Record an operator's decision; approving also accepts every withheld definition."""
    entry = _entry(data, identity, name)
    entry.update(decision=decision, decided_at=time.time())
    if provenance:
        entry["provenance"] = provenance
    if launch:
        entry["launch"] = launch  # already redacted by the caller: the file is shown to people
    if decision == APPROVED:
        accept_withheld(entry)
    return entry


def accept_withheld(entry: dict) -> int:
    """Move withheld definitions into the pins; returns how many were accepted. A server that
    never listed anything keeps no pin: what it lists first is pinned then (trust on first sight)."""
    pending = entry.pop("withheld", None) or {}
    if not any(pending.get(kind) for kind in KINDS):
        return 0
    pinned = entry.setdefault("pinned", {"tools": {}, "prompts": {}, "at": time.time()})
    n = 0
    for kind in KINDS:
        for item, change in (pending.get(kind) or {}).items():
            pinned.setdefault(kind, {})[item] = {"digest": change["digest"], "definition": change.get("definition")}
            n += 1
    return n


def pin_first_sight(data: dict, identity: str, name: str, items: Mapping[str, Mapping[str, tuple]],
                    extend: bool = False) -> bool:
    """Pin what a server lists the first time it is seen (kind → name → (digest, definition));
    an existing pin is never replaced: only an operator's approval changes it. extend: add the
    items not pinned yet (tools a server added during its first start) beside the pin."""
    entry = _entry(data, identity, name)
    if "pinned" in entry:
        if not extend:
            return False
        for kind in KINDS:
            pins = entry["pinned"].setdefault(kind, {})
            for n, (d, body) in items.get(kind, {}).items():
                pins.setdefault(n, {"digest": d, "definition": body})
        return True
    entry["pinned"] = {"at": time.time(), **{k: {n: {"digest": d, "definition": body}
                                                 for n, (d, body) in items.get(k, {}).items()}
                                             for k in KINDS}}
    return True


def keep_listing(data: dict, identity: str, name: str, listing: Mapping) -> None:
    """Keep an on-demand server's last full listing beside its pins: troupe serves it (screened
    against the pins as any listing) while the server is not running."""
    entry = _entry(data, identity, name)
    entry["listing"] = {**listing, "at": time.time()}


def withhold(data: dict, identity: str, name: str, changes: Mapping[str, Mapping[str, Mapping]]) -> None:
    """Replace the withheld set of one identity with what its latest listing withheld."""
    entry = _entry(data, identity, name)
    if any(changes.get(k) for k in KINDS):
        entry["withheld"] = {k: {n: dict(c) for n, c in changes.get(k, {}).items()} for k in KINDS}
    else:
        entry.pop("withheld", None)
