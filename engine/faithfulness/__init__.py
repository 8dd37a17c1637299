"""Faithfulness: curves and their metrics (ACU/RACU with bootstrap CIs), ROAR / Recursive ROAR; the metric registry
(registry.py).

The names below load on first use (PEP 562), so importing the registry's descriptions (every `--help` does) loads
neither scipy nor torch."""
from __future__ import annotations

from engine.lazy_exports import lazy_face

#: each public name and the module it lives in
_HOMES = {"acu": "engine.faithfulness.metrics", "racu": "engine.faithfulness.metrics",
          "bootstrap_ci": "engine.stats", "paired_comparison": "engine.stats"}
__all__ = list(_HOMES)


__getattr__, __dir__ = lazy_face(__name__, _HOMES, cache=False)
