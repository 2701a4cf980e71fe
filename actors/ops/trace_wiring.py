"""Tracing's wiring for the Runtime: on when the config or the OTEL_* variables name a collector
and the `otel` extra is installed; otherwise None, and opentelemetry is never imported."""
from __future__ import annotations

import os

from loguru import logger

from actors.ops import trace_settings

STOP_FLUSH_S = 1.0  # troupe's stop waits this long at most for the last spans to reach the collector


def start(config, serve_transport: str):
    """A started actors.ops.tracing.Tracing, or None (not configured, or the extra is missing)."""
    url = trace_settings.traces_url(config, os.environ)
    if url is None:
        return None
    try:
        from actors.ops.tracing import Tracing  # needs mcp-troupe[otel]: opentelemetry-sdk and its OTLP exporter
    except ImportError as exc:
        logger.warning("tracing is configured but not installed (pip install 'mcp-troupe[otel]'): {}", exc)
        return None
    service = trace_settings.service_name(config, os.environ)
    tracing = Tracing(url, service, config.export_timeout_s, serve_transport)
    logger.info("tracing on: spans of service {} exported over OTLP/HTTP", service)
    return tracing


def stop(tracing) -> None:
    """The last spans flushed (bounded) and the export ended; a failure here never stops troupe's stop."""
    try:
        tracing.stop(STOP_FLUSH_S)
    except Exception:
        logger.exception("tracing: the export did not stop cleanly")


def report(tracing) -> dict:
    try:
        return tracing.report()
    except Exception as exc:  # the status report never fails for its tracing figures
        return {"error": f"{type(exc).__name__}: {exc}"}
