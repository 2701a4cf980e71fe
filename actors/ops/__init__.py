"""Operating troupe: the call path's observer seam (observer.py), the audit trail (writer, file,
CLI) and its figures, each server's traffic over the last 15 minutes for the dashboard
(history.py), and OpenTelemetry traces (tracing.py: spans per client request, workflow step and
upstream request, exported over OTLP/HTTP when configured; nothing imported or spent when not)."""
