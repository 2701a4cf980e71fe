"""A greenlet that calls `check()` every `interval` seconds and outlives any one failed check:
what the config watcher and the workflows_dir watcher have in common."""
from __future__ import annotations

import gevent
from loguru import logger


class Poller:
    """Subclasses set `interval` and define `check()`; `_start_polling()` and `stop()` run the loop."""

    interval: float
    _greenlet: gevent.Greenlet | None = None

    def check(self) -> bool:
        raise NotImplementedError

    def _start_polling(self) -> None:
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._poll)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=1.0)
            self._greenlet = None

    def _poll(self) -> None:
        while True:
            gevent.sleep(self.interval)
            try:
                self.check()
            except Exception:  # the watcher must outlive any one bad read
                logger.exception("{}: check failed", type(self).__name__)
