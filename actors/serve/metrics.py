"""Prometheus text exposition for GET /metrics, built per scrape from the status report and stats."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.process_collector import ProcessCollector

from actors.caching import metrics as cache_metrics
from actors.ops import trace_metrics
from actors.ops import metrics as audit_metrics
from actors.ratelimit import metrics as rate_metrics
from actors.tasks import metrics as task_metrics
from actors.upstream.stats import LATENCY_BUCKETS
from actors.supervision.states import CALLABLE_STATES, ServerState

# generate_latest writes the classic text format; newer clients label it "version=1.0.0",
# which Prometheus before 3.0 does not know, so name the version every scraper reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATES = tuple(state.value for state in ServerState)  # every state, so a waiting server shows too


class TroupeCollector:
    """A custom collector: reads the runtime at scrape time, so nothing is double-booked."""

    def __init__(self, runtime, clients=None, streams=None):
        self.rt = runtime
        self.clients = clients  # () -> the front's figures by client name (http.App.client_report)
        self.streams = streams  # () -> the front's stream drop figures by front (StreamStats.report)

    def describe(self):
        # An empty describe keeps registration from calling collect() (that would ask the supervisor).
        return []

    def collect(self):
        report = self.rt.status()
        servers = report.get("servers") or []
        yield from _troupe(report)
        yield from _servers(servers)
        yield from _discovery(report.get("discovery"))
        yield from cache_metrics.families(report.get("cache"))
        yield from task_metrics.families(report.get("tasks"))
        yield from trace_metrics.families(report.get("tracing"))
        yield from audit_metrics.families(report.get("audit"))
        yield from rate_metrics.families(report.get("rates"))
        if self.clients is not None:
            yield from _clients(self.clients())
        if self.streams is not None:
            yield from _streams(self.streams())


def _troupe(report: dict):
    info = GaugeMetricFamily("troupe_info", "troupe's version and serving mode.", labels=["version", "mode"])
    info.add_metric([str(report.get("version") or ""), str(report.get("mode") or "")], 1)
    yield info
    yield GaugeMetricFamily("troupe_ready", "1 once every auto-start server is ready or has failed.",
                            value=1 if report.get("ready") else 0)
    yield GaugeMetricFamily("troupe_uptime_seconds", "Seconds since troupe started.",
                            value=float(report.get("uptime_s") or 0))
    yield GaugeMetricFamily("troupe_servers", "Servers troupe supervises.", value=len(report.get("servers") or []))
    memory = report.get("memory") or {}
    for name, text, key in (("troupe_process_rss_bytes", "Resident memory of troupe's own process.", "troupe"),
                            ("troupe_children_rss_bytes", "Resident memory of every process troupe started.",
                             "children"),
                            ("troupe_total_rss_bytes", "Resident memory of troupe and its children.", "total")):
        if memory:
            yield GaugeMetricFamily(name, text, value=memory.get(f"{key}_rss_bytes") or 0)


def _servers(servers: list):
    label = ["server"]
    calls = CounterMetricFamily("troupe_server_calls", "Tool calls forwarded to the server.", labels=label)
    errors = CounterMetricFamily("troupe_server_errors", "Calls that got an error, a transport failure or a "
                                 "timeout (a tool result with isError is an answer).", labels=label)
    timeouts = CounterMetricFamily("troupe_server_timeouts", "Calls that timed out.", labels=label)
    garbage = CounterMetricFamily("troupe_server_garbage_lines", "Lines from the server that were not JSON-RPC "
                                  "messages (dropped).", labels=label)
    bad_ids = CounterMetricFamily("troupe_server_bad_ids", "Messages from the server whose id was neither a "
                                  "string nor a number (dropped).", labels=label)
    latency = HistogramMetricFamily("troupe_server_call_duration_seconds", "Tool call latency.", labels=label)
    in_flight = GaugeMetricFamily("troupe_server_in_flight", "Calls waiting for the server now.", labels=label)
    restarts = CounterMetricFamily("troupe_server_restarts", "Restarts (automatic and requested).", labels=label)
    state = GaugeMetricFamily("troupe_server_state", "1 for the server's current state, 0 for the others.",
                              labels=["server", "state"])
    up = GaugeMetricFamily("troupe_server_up", "1 when the server takes calls (ready or degraded).", labels=label)
    listed = GaugeMetricFamily("troupe_server_tools", "Tools the server lists now.", labels=label)
    wakes = CounterMetricFamily("troupe_server_wakes", "Starts of an on-demand server caused by a first use.",
                                labels=label)
    rss = GaugeMetricFamily("troupe_server_rss_bytes", "Resident memory of the server's processes while it runs.",
                            labels=label)
    for s in servers:
        name = s["name"]
        # the report's figures: every generation's totals plus the live one's, asked of it
        calls.add_metric([name], s.get("calls") or 0)
        errors.add_metric([name], s.get("errors") or 0)
        timeouts.add_metric([name], s.get("timeouts") or 0)
        garbage.add_metric([name], s.get("garbage_lines") or 0)
        bad_ids.add_metric([name], s.get("bad_ids") or 0)
        latency.add_metric([name], _buckets(s.get("latency_buckets") or [0] * (len(LATENCY_BUCKETS) + 1)),
                           sum_value=s.get("latency_sum_s") or 0.0)
        in_flight.add_metric([name], s.get("in_flight") or 0)
        restarts.add_metric([name], s.get("restarts") or 0)
        for st in STATES:
            state.add_metric([name, st], 1 if s.get("state") == st else 0)
        up.add_metric([name], 1 if s.get("state") in CALLABLE_STATES else 0)
        listed.add_metric([name], s.get("tools") or 0)
        if s.get("start") == "on_demand":
            wakes.add_metric([name], s.get("wakes") or 0)
        if s.get("rss_bytes") is not None:
            rss.add_metric([name], s["rss_bytes"])
    yield from (calls, errors, timeouts, garbage, bad_ids, latency, in_flight, restarts, state, up, listed, wakes, rss)


def _buckets(counts) -> list:
    """ServerStats keeps per-bucket counts; Prometheus wants them cumulative, ending at +Inf."""
    out, total = [], 0
    for bound, n in zip(LATENCY_BUCKETS + (float("inf"),), counts):
        total += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), total))
    return out


def _discovery(disc):
    if not isinstance(disc, dict) or ("error" in disc and len(disc) == 1):
        return  # discovery off (or not answering): no series rather than misleading zeros
    yield CounterMetricFamily("troupe_discovery_cycles", "Discovery cycles run.", value=disc.get("cycles") or 0)
    yield GaugeMetricFamily("troupe_discovery_services", "Services discovery knows now.",
                            value=disc.get("services") or 0)
    yield GaugeMetricFamily("troupe_discovery_registered", "Servers registered passively.",
                            value=disc.get("registered") or 0)
    yield GaugeMetricFamily("troupe_discovery_errors", "Provider errors in the last cycle.",
                            value=len(disc.get("errors") or ()))
    if disc.get("duration_s") is not None:
        yield GaugeMetricFamily("troupe_discovery_last_duration_seconds", "Duration of the last discovery cycle.",
                                value=float(disc["duration_s"]))
    providers = disc.get("providers")
    if isinstance(providers, dict):
        found = GaugeMetricFamily("troupe_discovery_provider_records", "Records each provider found last cycle.",
                                  labels=["provider"])
        for name, p in sorted(providers.items()):
            found.add_metric([name], (p or {}).get("count") or 0)
        yield found
    health = disc.get("health")
    if isinstance(health, dict):
        g = GaugeMetricFamily("troupe_health_services", "Discovered services by health.", labels=["health"])
        for key in ("healthy", "unhealthy", "unknown"):
            g.add_metric([key], health.get(key) or 0)
        yield g


def _clients(report: dict):
    """Per client of serve.clients (by name, never by token)."""
    label = ["client", "profile"]
    requests = CounterMetricFamily("troupe_client_requests", "JSON-RPC requests the client sent.", labels=label)
    calls = CounterMetricFamily("troupe_client_tool_calls", "tools/call requests the client sent.", labels=label)
    sessions = GaugeMetricFamily("troupe_client_sessions", "The client's open HTTP sessions.", labels=label)
    evicted = CounterMetricFamily("troupe_client_sessions_evicted",
                                  "The client's idle sessions closed to make room for a new one.", labels=label)
    for name, figures in report.items():
        labels = [name, figures.get("profile") or ""]
        requests.add_metric(labels, figures["requests"])
        calls.add_metric(labels, figures["tool_calls"])
        sessions.add_metric(labels, figures["sessions"])
        evicted.add_metric(labels, figures.get("sessions_evicted", 0))
    yield from (requests, calls, sessions, evicted)


def _streams(report: dict):
    """What slow readers cost (serve.stream_buffer_bytes), by front: events, session, legacy, post, modern."""
    dropped = CounterMetricFamily("troupe_stream_dropped", "Progress and log notifications dropped for a "
                                  "reader that fell behind.", labels=["front", "kind"])
    dropped_bytes = CounterMetricFamily("troupe_stream_dropped_bytes", "Bytes of the notifications dropped.",
                                        labels=["front"])
    closed = CounterMetricFamily("troupe_stream_closed", "Streams closed because what cannot be dropped "
                                 "did not fit.", labels=["front"])
    for front, figures in report.items():
        for kind, count in figures["dropped"].items():
            dropped.add_metric([front, kind], count)
        dropped_bytes.add_metric([front], figures["dropped_bytes"])
        closed.add_metric([front], figures["closed_slow"])
    yield from (dropped, dropped_bytes, closed)


def registry_for(runtime, clients=None, streams=None) -> CollectorRegistry:
    """A private registry (never the global one): several runtimes may share a process."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TroupeCollector(runtime, clients, streams))
    # process_resident_memory_bytes, process_open_fds, CPU, start time: read from /proc/self.
    ProcessCollector(registry=registry)
    return registry


def install(app) -> None:
    """Register GET /metrics on an http.App (one registry per app, built once)."""
    registry = registry_for(app.rt, app.client_report, app.mcp.streams.report)
    app.extra_routes[("GET", "/metrics")] = \
        lambda environ: ("200 OK", [("Content-Type", CONTENT_TYPE)], generate_latest(registry))
