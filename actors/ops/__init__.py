"""Operating troupe: the call path's observer seam (observer.py), the audit trail (writer, file,
CLI) and its figures, and each server's traffic over the last 15 minutes for the dashboard
(history.py)."""
