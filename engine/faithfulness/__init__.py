"""Faithfulness: curves and their metrics (ACU/RACU with bootstrap CIs), ROAR / Recursive ROAR."""
from engine.faithfulness.metrics import acu, bootstrap_ci, paired_comparison, racu

__all__ = ["acu", "racu", "bootstrap_ci", "paired_comparison"]
