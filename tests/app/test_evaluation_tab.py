"""The Benchmarks page's evaluation section, on a synthetic evaluation store (no model needed)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest


def _write_store(root):
    from engine.faithfulness.evaluation import ERASURE
    from engine.results import ResultsStore

    store = ResultsStore(root / "evaluation")
    for strategy in ("masked", "plain"):
        for measure, v in (("random", 0.05), ("loo-sign", 0.3)):
            for seed in (0, 1):
                rows = pd.DataFrame([{"model": f"tiny-rt-{strategy}-s{seed}", "seed": seed, "dataset": "rt", "split": "test",
                                      "measure": measure, "strategy": strategy, "base_model": "tiny", "method": ERASURE,
                                      "removal": "mask", "step": 0, "metric": "aopc-comprehensiveness", "level": np.nan,
                                      "ratio": np.nan, "value": v + 0.01 * seed, "better": "higher",
                                      "p_below_005": 0.05 if strategy == "masked" else 0.6, "p_value": 0.5,
                                      "n_examples": 10, "seconds_per_explanation": 0.01}])
                store.write_cell("r", {"model": f"tiny-rt-{strategy}-s{seed}", "measure": measure, "seed": seed},
                                 rows, {"command": "test"})


def _app():
    from app.evaluation_tab import render_evaluation_tab

    render_evaluation_tab()


def test_tab_shows_each_measure_beside_its_masf_share_for_masked_and_plain(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path))
    _write_store(tmp_path)
    at = AppTest.from_function(_app, default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    frame = at.dataframe[0].value
    assert set(frame["measure"]) == {"random", "loo-sign"}
    assert "plain: MaSF p<0.05" in frame.columns and "masked: MaSF p<0.05" in frame.columns
    assert frame.set_index("measure").loc["loo-sign", "plain: MaSF p<0.05"] == "60%"
    # No recursive-masking cell with a cost: the cost plot says so rather than inventing one.
    assert any("never with a made-up one" in c.value for c in at.caption)


def test_pareto_front_keeps_only_undominated_points():
    from app.evaluation_tab import pareto_front

    cost = np.array([1.0, 2.0, 3.0, 0.5, 2.5])
    value = np.array([10.0, 5.0, 30.0, 1.0, 40.0])
    assert list(pareto_front(cost, value)) == [3, 0, 4]
