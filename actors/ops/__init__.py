"""Operations: what an operator of a shared gateway reads about its calls. Traces (tracing:
OpenTelemetry spans per client request, workflow step and upstream request, exported over
OTLP/HTTP when configured; nothing imported or spent when not)."""
