"""Logging: loguru to stderr (human or JSON lines), stdlib logging routed into it."""
from __future__ import annotations

import logging
import sys

from loguru import logger

HUMAN = ("<green>{time:HH:mm:ss.SSS}</green> <level>{level: <7}</level> "
         "<cyan>{extra[server]}</cyan> {message}")


class _Intercept(logging.Handler):
    """pykka logs through stdlib logging; without this its crash reports vanish."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).bind(server=record.name).log(level, record.getMessage())


def setup(level: str = "INFO", json: bool = False) -> None:
    logger.remove()
    logger.configure(extra={"server": "troupe"})
    # enqueue=False: loguru's queue thread misbehaves under gevent patching.
    logger.add(sys.stderr, level=level.upper(), serialize=json, enqueue=False, backtrace=False,
               diagnose=False, format=HUMAN, colorize=None if not json else False)
    logging.basicConfig(handlers=[_Intercept()], level=logging.WARNING, force=True)
