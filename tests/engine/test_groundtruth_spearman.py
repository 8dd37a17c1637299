"""The report card's Spearman table (b) computes every bootstrap resample's rank correlation at once
(engine.groundtruth.tables.column_spearman); it must give what one scipy.stats.spearmanr call per resample gave,
ties, NaN and constant resamples included."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from engine.groundtruth import tables
from engine.groundtruth.tables import column_spearman, spearman_table


def per_column_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The slow reference (the table's former loop): one scipy.stats.spearmanr per column of x, y [n, R]."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return np.asarray([stats.spearmanr(x[:, r], y[:, r]).statistic for r in range(x.shape[1])], float)


def _columns(seed: int, n: int = 7, R: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """x, y [n, R] with ties (values on a coarse grid), NaN, +-inf, constant columns and duplicate rows."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=(n, R)).astype(float) / 3
    y = rng.normal(size=(n, R)).round(1)
    x[rng.random((n, R)) < 0.02] = np.nan
    y[rng.random((n, R)) < 0.02] = np.nan
    x[0, ::37] = np.inf
    y[1, ::41] = -np.inf
    x[:, ::13] = 0.5  # constant columns
    y[:, 5::17] = 2.0
    y[2] = y[3]  # tied rows throughout
    return x, y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_all_columns_at_once_equal_one_spearmanr_per_column_with_ties_nan_and_constants(seed):
    x, y = _columns(seed)
    reference = per_column_spearman(x, y)
    fast = column_spearman(x, y)
    assert np.array_equal(np.isnan(fast), np.isnan(reference))
    assert np.isnan(reference).any() and np.isfinite(reference).sum() > 100  # both paths are exercised
    assert np.allclose(fast, reference, rtol=0, atol=1e-12, equal_nan=True)


def test_a_single_measure_has_no_rank_correlation():
    assert np.isnan(column_spearman(np.ones((1, 3)), np.ones((1, 3)))).all()


def _card_frame(seed: int = 0, n_inputs: int = 25) -> pd.DataFrame:
    """Report-card rows of two models (trigger, and the control `none`) and two operators: 6 measures, recovery
    values on a grid of reciprocal ranks (ties), metric values with NaN inputs, one measure all NaN under a metric,
    a metric constant across the measures, one recovery value missing, and RACU's numerator and denominator."""
    rng = np.random.default_rng(seed)
    measures = ["m0", "m1", "m2", "m3", "m4", "m5"]
    rows = []
    for model, mechanism, truth in (("a", "trigger", "reciprocal-rank"), ("b", "none", "inert-mass-share")):
        for operator in ("mask", "delete"):
            for j, measure in enumerate(measures):
                for i in range(n_inputs):
                    base = {"method": "report-card", "model": model, "mechanism": mechanism, "operator": operator,
                            "measure": measure, "uid": f"u{i}", "n_perturbed": 1.0, "n_ood": 0.0, "p_value": np.nan}
                    if not (model == "b" and measure == "m5" and i == 3):  # one input lacks its truth value
                        value = 1 / rng.integers(1, 4) if truth == "reciprocal-rank" else round(rng.random(), 1)
                        rows.append({**base, "kind": "recovery", "metric": truth, "value": value,
                                     "better": "lower" if truth == "inert-mass-share" else "higher"})
                    metric = rng.normal(j * 0.1, 0.3)
                    rows += [
                        {**base, "kind": "metric", "metric": "aopc-comprehensiveness", "better": "higher",
                         "value": np.nan if rng.random() < 0.1 else metric},
                        {**base, "kind": "metric", "metric": "aopc-sufficiency", "better": "lower",
                         "value": np.nan if measure == "m1" or rng.random() < 0.3 else rng.integers(0, 3) / 2},
                        {**base, "kind": "metric", "metric": "top1-flip", "better": "higher", "value": 1.0},
                        {**base, "kind": "metric", "metric": "acu", "better": "higher", "value": metric + 1},
                        {**base, "kind": "metric", "metric": "racu-norm", "better": "higher",
                         "value": np.nan if rng.random() < 0.05 else rng.uniform(0.5, 1.5)},
                    ]
    return pd.DataFrame(rows)


def test_the_spearman_table_is_unchanged_by_computing_the_resamples_at_once(monkeypatch):
    frame = _card_frame()
    fast = spearman_table(frame, resamples=300, seed=3)
    monkeypatch.setattr(tables, "column_spearman", per_column_spearman)
    reference = spearman_table(frame, resamples=300, seed=3)
    assert list(fast.columns) == list(reference.columns) and len(fast) == len(reference) > 4
    pd.testing.assert_frame_equal(fast.drop(columns=["spearman", "low", "high"]),
                                  reference.drop(columns=["spearman", "low", "high"]))
    for column in ("spearman", "low", "high"):
        assert np.allclose(fast[column], reference[column], rtol=0, atol=1e-12, equal_nan=True), column
    assert reference[["low", "high"]].isna().any().any() and reference["high"].notna().any()


def test_the_resampled_means_are_those_of_the_one_shot_form_to_the_last_bit():
    """spearman_table's bootstrap means are computed a measure at a time (resampled_mean): they must be the bits of
    np.nanmean(values[:, idx], -1) (and .mean(-1) for the truth), or a near tie between two measures could reorder."""
    rng = np.random.default_rng(5)
    for rows, inputs, resamples in ((17, 332, 200), (3, 7, 50), (5, 1, 20), (4, 40, 1), (1, 40, 30), (1, 9, 1)):
        for order in "CF":
            values = np.asarray(rng.normal(size=(rows, inputs)), order=order)
            values[rng.random(values.shape) < 0.1] = np.nan
            values[0, : inputs // 2] = np.nan
            values[-1] = np.nan  # a measure with no value at all
            idx = rng.integers(0, inputs, size=(resamples, inputs))
            draws = np.ascontiguousarray(idx.T)
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                assert np.array_equal(tables.resampled_mean(values, draws), np.nanmean(values[:, idx], -1),
                                      equal_nan=True)
            assert np.array_equal(tables.resampled_mean(values, draws, skip_nan=False), values[:, idx].mean(-1),
                                  equal_nan=True)
