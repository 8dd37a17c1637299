"""A report card's stored rows, made by hand: the truth and card cells the Report card page (pages/report_card.py)
reads, for the page's tests (tests/app/) and its browser test (tests/browser/test_browser_state.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd

MODELS = {"gt-q100": 1.0, "gt-q65": 0.65}  # two graded models of one family: the view shows both


def truth_rows(model: str, q: float) -> pd.DataFrame:
    """The truth cell of the graded model `model` of quality `q` (what `engine.groundtruth` stores for it)."""
    common = {"model": model, "mechanism": "graded", "words": "vessel", "q": q, "rate": 0.3, "strategy": "masked",
              "base_model": "tiny", "method": "truth by intervention", "control": False, "seed": 0, "dataset": "rt-v",
              "measure": "truth", "split": "test", "step": 0, "ratio": np.nan, "p_value": np.nan, "n_examples": 40,
              "schedule": "ratio"}
    return pd.DataFrame([
        {**common, "metric": "insertion_flip", "value": 0.9 * q, "ci_low": 0.8 * q, "ci_high": 0.95, "k": 36, "n": 40},
        {**common, "metric": "n-deciding", "value": 36, "ci_low": np.nan, "ci_high": np.nan, "k": 36, "n": 40},
        {**common, "metric": "learned", "value": 1.0, "ci_low": np.nan, "ci_high": np.nan, "k": np.nan, "n": np.nan},
    ])


def card_rows(model: str, q: float, operator: str) -> pd.DataFrame:
    """Per input: NAOPC (higher better) larger for the true explanation on every input; sufficiency (lower better)
    larger for the true one too (so it prefers the wrong ones); recovery of two measures."""
    common = {"model": model, "mechanism": "graded", "operator": operator, "strategy": "masked", "base_model": "tiny",
              "dataset": "rt-v", "method": "report-card", "seed": 0, "split": "test", "step": 0, "ratio": np.nan,
              "p_value": np.nan, "n_examples": 12, "n_perturbed": 1, "n_ood": 0, "schedule": "ratio"}
    rows = []
    for i in range(12):
        uid = f"rt-{i}"
        for expl, naopc, suff in (("true", 0.9, 0.5), ("strongest-other-first", 0.2, 0.1), ("planted-second", 0.5, 0.2)):
            for metric, value, better in (("naopc-comprehensiveness", naopc, "higher"), ("sufficiency@0.1", suff, "lower")):
                rows.append({**common, "measure": f"explanation:{expl}", "kind": "metric", "uid": uid, "metric": metric,
                             "value": value + 0.01 * i, "better": better})
        for measure, hit in (("loo-sign", 1.0), ("random", float(i % 4 == 0))):
            for metric, value in (("top-hit", hit), ("reciprocal-rank", 1.0 if hit else 0.25),
                                  ("mass-share", 0.5 if hit else 0.1), ("planted-rank", 1 if hit else 4)):
                rows.append({**common, "measure": measure, "kind": "recovery", "uid": uid, "metric": metric,
                             "value": float(value), "better": "higher"})
    return pd.DataFrame(rows)

