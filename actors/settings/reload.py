"""Config reload without restart: a watcher greenlet on the config file, and reload() for SIGHUP."""
from __future__ import annotations

import dataclasses
import hashlib
import os

import gevent
import gevent.lock
from loguru import logger

from actors.polling import Poller

from actors.settings import config as config_mod
from actors.events.kinds import ConfigReloaded

POLL_S = 1.0
SETTLE_S = 0.2  # a change counts once the file has not moved for this long
SETTLE_TRIES = 10


class ConfigWatcher(Poller):
    """Re-reads the config file when it changes (or on reload()) and reconciles the servers.

    Only the servers section and the rate limits are applied live: servers added, removed or
    changed are started, stopped or restarted; unchanged ones keep running with their in-flight
    calls; the RateLimiter takes the new limits (a limit's change restarts nothing).
    """

    def __init__(self, runtime, path: str | os.PathLike, interval: float = POLL_S):
        self.rt = runtime
        self.path = os.fspath(path)
        self.interval = interval
        self._lock = gevent.lock.Semaphore()  # SIGHUP and the poller must not reconcile at once
        self._stat = self._stat_now()
        self._digest = self._digest_now()
        # What the file said last time: a server is "changed" only when its entry in the file
        # changed, so one disabled from the dashboard stays disabled across unrelated edits.
        self._loaded = {s.name: s for s in runtime.config.servers if s.source == "config"}

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> "ConfigWatcher":
        self._start_polling()
        return self

    def _stat_now(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _digest_now(self) -> str | None:
        try:
            with open(self.path, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return None

    def check(self) -> bool:
        """One poll: reload if the file's content changed since the last look; True if it did."""
        stat = self._stat_now()
        if stat == self._stat:
            return False
        # An editor may truncate, then write: wait for the file to hold still, so a
        # half-written (say, empty) file is never applied as "no servers".
        for _ in range(SETTLE_TRIES):
            gevent.sleep(SETTLE_S)
            again = self._stat_now()
            if again == stat:
                break
            stat = again
        self._stat = stat
        digest = self._digest_now()
        if digest is None or digest == self._digest:
            return False  # gone (mid-rename by an editor) or touched without a change
        self._digest = digest
        logger.info("config file {} changed", self.path)
        self.reload()
        return True

    # ---------------------------------------------------------------- reload

    def reload(self) -> dict | None:
        """Load the file and reconcile; on a bad file log every problem and keep the old config."""
        with self._lock:
            # Fingerprint first: an edit landing while we load is seen by the next poll.
            self._stat, self._digest = self._stat_now(), self._digest_now() or self._digest
            try:
                new = config_mod.load(self.path)
            except config_mod.ConfigError as exc:
                logger.error("config reload rejected, keeping the running config ({} problem(s)):",
                             len(exc.problems))
                for problem in exc.problems:
                    logger.error("  {}", problem)
                return None
            wanted = tuple(self._keep_running(s) for s in new.servers if s.source == "config")
            try:
                result = self.rt.apply_servers(wanted, source="config")
            except Exception as exc:  # a timed-out ask: the next change or SIGHUP tries again
                logger.error("config reload failed: {}: {}", type(exc).__name__, exc)
                return None
            self._loaded = {s.name: s for s in new.servers if s.source == "config"}
            # Sessions and passthrough read runtime.config.servers; serve/CLI overrides stay as started.
            self.rt.config = dataclasses.replace(self.rt.config, servers=new.servers, workflows=new.workflows,
                                                 rates=new.rates)
            self.rt.workflows.config_changed(new)
            self.rt.rates.reconfigure(new.rates)  # rate limits apply live (actors/ratelimit)
            self._report(new, result)
            return result

    def _keep_running(self, server: config_mod.ServerConfig) -> config_mod.ServerConfig:
        """The running config for a server whose file entry did not change (keeps runtime toggles)."""
        if self._loaded.get(server.name) != server:
            return server
        view = self.rt.servers.current.get(server.name)
        return view.config if view is not None else server

    def _report(self, new, result: dict) -> None:
        added, removed, changed = (tuple(result.get(k, ())) for k in ("added", "removed", "changed"))
        for verb, names in (("added", added), ("removed", removed), ("changed, restarting", changed)):
            for name in names:
                logger.bind(server=name).info("config reload: {}", verb)
        logger.info("config reloaded from {}: {} added, {} removed, {} changed, {} unchanged", self.path,
                    len(added), len(removed), len(changed),
                    len(new.servers) - len(added) - len(changed))
        if _serve_differs(self.rt.config.serve, new.serve) or dict(self.rt.config.discovery) != dict(new.discovery) \
                or self.rt.config.audit != new.audit:
            logger.warning("config reload: serve/discovery/audit settings changed; they apply when troupe restarts")
        if self.rt.config.telemetry != new.telemetry:  # the tracer and its export are made once, at start
            logger.warning("config reload: telemetry settings changed; they apply when troupe restarts")
        if self.rt.bus is not None and (added or removed or changed):
            self.rt.bus.publish(ConfigReloaded(added, removed, changed))


def _serve_differs(running, loaded) -> bool:
    # CLI flags override transport/mode/host/port at start: compare only what the file alone decides.
    keys = ("separator", "auth_token", "allowed_origins", "allowed_hosts", "json_response", "state_key")
    return any(getattr(running, k) != getattr(loaded, k) for k in keys)
