"""The config's `telemetry:` section and the standard OTEL_* variables: where spans go, under what
service name. Checked with the config loader's `fail(path, message)`, so every problem names its
file, line and key; the variables are read when troupe starts, never at load."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

Fail = Callable[[str, str], None]
DEFAULT_SERVICE_NAME = "troupe"
# An export waits at most this long for the collector (the SDK's own default is 10 s): a collector
# that is down costs the export greenlet this much per batch, and the spans of that batch.
DEFAULT_EXPORT_TIMEOUT_S = 2.0
TRACES_PATH = "/v1/traces"  # the OTLP/HTTP signal path under a collector's base URL


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """The `telemetry:` section. `otlp_endpoint`: the collector's OTLP/HTTP URL (a base such as
    http://collector:4318, to which /v1/traces is added, or the full traces URL); None: the
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT variables decide, and without
    them nothing is traced. `service_name`: the spans' service.name (None: OTEL_SERVICE_NAME, else
    troupe). `export_timeout_s`: how long one export may wait for the collector."""

    otlp_endpoint: str | None = None
    service_name: str | None = None
    export_timeout_s: float = DEFAULT_EXPORT_TIMEOUT_S


def parse(data: Any, fail: Fail) -> TelemetryConfig:
    """`telemetry: {otlp_endpoint: URL, service_name: NAME, export_timeout_s: S}`, each optional."""
    if data is None:
        return TelemetryConfig()
    if not isinstance(data, dict):
        fail("telemetry", "must be a mapping: {otlp_endpoint: URL, service_name: NAME}")
        return TelemetryConfig()
    allowed = {"otlp_endpoint", "service_name", "export_timeout_s"}
    for key in data:
        if key not in allowed:
            fail(f"telemetry.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    endpoint = data.get("otlp_endpoint")
    if endpoint is not None and (not isinstance(endpoint, str) or not _is_http_url(endpoint)):
        fail("telemetry.otlp_endpoint", "must be an http(s) URL such as http://127.0.0.1:4318")
        endpoint = None
    name = data.get("service_name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        fail("telemetry.service_name", "must be a non-empty string")
        name = None
    timeout = data.get("export_timeout_s", DEFAULT_EXPORT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        fail("telemetry.export_timeout_s", f"must be > 0 seconds, got {timeout!r}")
        timeout = DEFAULT_EXPORT_TIMEOUT_S
    return TelemetryConfig(endpoint or None, name.strip() if isinstance(name, str) else None, float(timeout))


def traces_url(config: TelemetryConfig, env: Mapping[str, str]) -> str | None:
    """Where spans are posted, or None: not traced. The config's endpoint first, then
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL, as the OTLP spec reads it), then
    OTEL_EXPORTER_OTLP_ENDPOINT (a base, /v1/traces added); OTEL_SDK_DISABLED=true turns it all off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if config.otlp_endpoint:
        return _with_traces_path(config.otlp_endpoint)
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces if _is_http_url(traces) else None
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return _with_traces_path(base) if base and _is_http_url(base) else None


def service_name(config: TelemetryConfig, env: Mapping[str, str]) -> str:
    return config.service_name or env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME


def _with_traces_path(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def _is_http_url(text: str) -> bool:
    parts = urlsplit(text.strip())
    return parts.scheme in ("http", "https") and bool(parts.hostname)
