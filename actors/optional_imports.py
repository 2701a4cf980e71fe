"""optional_imports: a feature's heavy module, imported when the feature is first used, off the hub.

A default stdio run must not pay for what it does not use (OAuth's requests and authlib, the
cluster's redis, Prometheus, Jinja2, jsonschema: tests/e2e/test_import_budget.py holds the
list). So their modules are imported where the feature begins, not at the top of the module that
may one day need them. On the hub such an import is CPU work that holds every greenlet: authlib
with requests and cryptography takes ~300 ms here (DESIGN.md allows ~50). `load` runs the first
import in gevent's threadpool instead: the interpreter hands the GIL back every few ms, so the
hub keeps serving while the module loads, and only the greenlet that asked waits.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

import gevent


def load(name: str) -> ModuleType:
    """Module `name`: at once when it is loaded, else imported in a worker thread while this
    greenlet alone waits. An import that fails raises here, as a plain import would."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if module is not None and not getattr(spec, "_initializing", False):
        return module
    return gevent.get_hub().threadpool.apply(importlib.import_module, (name,))
