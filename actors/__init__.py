"""troupe: an MCP aggregator built from actors. Importing this has no side effects."""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
