"""Operating troupe: what it shows of its own traffic beyond /status (the dashboard's history)."""
