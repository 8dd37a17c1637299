"""Faithfulness: curves and their metrics (ACU/RACU with bootstrap CIs), ROAR / Recursive ROAR; the metric registry
(registry.py).

The names below load on first use (PEP 562), so importing the registry's descriptions (every `--help` does) loads
neither scipy nor torch."""
from __future__ import annotations

import importlib

__all__ = ["acu", "racu", "bootstrap_ci", "paired_comparison"]


def __getattr__(name: str) -> object:
    if name in __all__:
        return getattr(importlib.import_module("engine.faithfulness.metrics"), name)
    raise AttributeError(f"module 'engine.faithfulness' has no attribute {name!r}")
