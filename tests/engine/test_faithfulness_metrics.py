"""ACU / RACU against hand-computed areas, and the bootstrap and paired comparison."""
from __future__ import annotations

import numpy as np
import pytest

from engine.faithfulness.metrics import acu, racu
from engine.stats import bootstrap_ci, paired_comparison

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def test_acu_and_racu_hand_computed():
    x = [0.0, 0.5, 1.0]
    random = [0.9, 0.7, 0.5]
    measure = [0.9, 0.5, 0.5]
    # b - p = [0, 0.2, 0]: trapezoids 0.5*0.5*(0+0.2) + 0.5*0.5*(0.2+0) = 0.1
    assert acu(x, measure, random) == pytest.approx(0.1)
    # b - b_I = [0.4, 0.2, 0]: 0.5*0.5*0.6 + 0.5*0.5*0.2 = 0.2
    assert racu(x, measure, random) == pytest.approx(0.5)


def test_random_against_itself_is_zero_and_sign_follows_the_curves():
    x = np.linspace(0, 1, 11)
    b = 0.9 - 0.4 * x
    assert acu(x, b, b) == 0 and racu(x, b, b) == 0
    worse = np.minimum(b + 0.05, 1.0)  # a measure that masks unimportant tokens first: above random
    assert racu(x, worse, b) < 0


def test_racu_is_unclipped_by_default_and_clipped_on_request():
    x = [0.0, 0.5, 1.0]
    random = [0.9, 0.85, 0.8]
    drop = [0.9, 0.2, 0.2]
    assert racu(x, drop, random) > 1
    assert racu(x, drop, random, clip=True) == 1.0


def test_flat_random_curve_gives_nan_not_a_crash():
    assert np.isnan(racu([0, 1], [0.5, 0.5], [0.5, 0.5]))


def test_bad_curves_are_refused():
    with pytest.raises(ValueError):
        acu([0, 1], [1, 0, 0], [1, 0])
    with pytest.raises(ValueError, match="increase"):
        acu([0, 0], [1, 0], [1, 0])


def test_bootstrap_ci_covers_the_mean_and_degenerates_gracefully():
    mean, low, high = bootstrap_ci([0.40, 0.42, 0.45, 0.41, 0.43])
    assert low < mean < high and mean == pytest.approx(0.422)
    assert bootstrap_ci([0.40, 0.42, 0.45, 0.41, 0.43], with_method=True)[3] == "BCa"
    # One seed has no interval: NaN bounds, not a zero-width interval that would read as exact.
    mean, low, high, used = bootstrap_ci([0.3], with_method=True)
    assert mean == 0.3 and np.isnan(low) and np.isnan(high) and used == "none: 1 value"
    assert bootstrap_ci([0.3, 0.3, 0.3], with_method=True) == (0.3, 0.3, 0.3, "degenerate: all equal")


def test_bootstrap_ci_is_memoised_to_the_bit_and_gives_its_mean_alone_on_request():
    """The interval is memoised per (values, options): a repeat gives scipy's bits of the first call; interval=False
    gives the same mean with NaN bounds (what a table that shows no CI asks for)."""
    from scipy import stats

    values = [0.40, 0.42, float("nan"), 0.45, 0.41]
    first = bootstrap_ci(values, with_method=True)
    assert bootstrap_ci(values, with_method=True) == first
    v = np.array([0.40, 0.42, 0.45, 0.41])
    res = stats.bootstrap((v,), np.mean, confidence_level=0.95, n_resamples=9999, method="BCa",
                          random_state=np.random.default_rng(0))
    assert first[1:3] == (float(res.confidence_interval.low), float(res.confidence_interval.high))
    mean, low, high, used = bootstrap_ci(values, with_method=True, interval=False)
    assert mean == first[0] and np.isnan(low) and np.isnan(high) and used == "not computed"
    assert bootstrap_ci([0.3], with_method=True, interval=False)[::3] == (0.3, "none: 1 value")


def test_paired_comparison_detects_a_consistent_difference():
    a = [0.50, 0.52, 0.55, 0.51, 0.53]
    b = [0.30, 0.33, 0.31, 0.29, 0.35]
    res = paired_comparison(a, b)
    assert res["ci_low"] > 0 and res["p_value"] == pytest.approx(2 / 32)  # exact: all 5 signs agree
    same = paired_comparison(a, a)
    assert same["mean_difference"] == 0


def test_compare_measures_pairs_each_seeds_racu_and_refuses_mixed_groups():
    """compare_measures takes a - b of RACU seed by seed (not the difference of means over unpaired seeds), over
    the seeds both measures have, and refuses rows of two groups (two datasets) where no pairing is meaningful."""
    import pandas as pd

    from engine.faithfulness.summary import area_metrics_per_seed, compare_measures

    x = [0.0, 0.5, 1.0]
    rows = []
    curves = {("random", 0): [0.9, 0.7, 0.5], ("a", 0): [0.9, 0.5, 0.5], ("b", 0): [0.9, 0.6, 0.5],
              ("random", 1): [0.9, 0.8, 0.5], ("a", 1): [0.9, 0.4, 0.5], ("b", 1): [0.9, 0.7, 0.5],
              ("random", 2): [0.9, 0.8, 0.5], ("a", 2): [0.9, 0.6, 0.5]}  # b has no seed 2
    for (measure, seed), values in curves.items():
        rows += [{"model": f"m-s{seed}", "seed": seed, "dataset": "rt", "measure": measure, "step": i, "ratio": r,
                  "value": v} for i, (r, v) in enumerate(zip(x, values))]
    df = pd.DataFrame(rows)
    res = compare_measures(df, "a", "b")
    per_seed = area_metrics_per_seed(df).pivot_table(index="seed", columns="measure", values="racu")
    diffs = (per_seed.loc[[0, 1], "a"] - per_seed.loc[[0, 1], "b"]) * 100
    assert res["seeds"] == [0, 1] and res["n"] == 2
    assert res["mean_difference"] == pytest.approx(diffs.mean())
    assert res["smallest_p_possible"] == 0.5
    with pytest.raises(ValueError, match="within one group"):
        compare_measures(pd.concat([df, df.assign(dataset="imdb")]), "a", "b")
    with pytest.raises(ValueError, match="no racu for c"):
        compare_measures(df, "a", "c")
