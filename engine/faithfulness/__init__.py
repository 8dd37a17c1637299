"""Faithfulness: curves and their metrics (ACU/RACU with bootstrap CIs), ROAR / Recursive ROAR; the metric registry
(registry.py).

The names below load on first use (PEP 562), so importing the registry's descriptions (every `--help` does) loads
neither scipy nor torch."""
from __future__ import annotations

import importlib

#: each public name and the module it lives in
_HOMES = {"acu": "engine.faithfulness.metrics", "racu": "engine.faithfulness.metrics",
          "bootstrap_ci": "engine.stats", "paired_comparison": "engine.stats"}
__all__ = list(_HOMES)


def __getattr__(name: str) -> object:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'engine.faithfulness' has no attribute {name!r}")
