"""The report card's statistics for many comparisons (engine/stats.py): Benjamini-Hochberg adjusted p-values, checked
against scipy.stats.false_discovery_control, and the paired effect size Cohen's d_z, checked against the paired t
statistic (t = d_z sqrt(n))."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from engine.errors import InvalidInputError
from engine.stats import benjamini_hochberg, paired_effect_size


@pytest.mark.parametrize("seed", range(5))
def test_benjamini_hochberg_equals_scipys_false_discovery_control(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=40), rng.uniform(0, 0.01, size=10), [0.5, 0.5, 0.0, 1.0]])  # ties, bounds
    rng.shuffle(p)
    np.testing.assert_allclose(benjamini_hochberg(p), stats.false_discovery_control(p, method="bh"), rtol=1e-12)


def test_benjamini_hochberg_keeps_nan_out_of_the_count_and_in_place():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    q = benjamini_hochberg(p)
    assert np.isnan(q[1])
    np.testing.assert_allclose(q[[0, 2, 3]], stats.false_discovery_control([0.01, 0.04, 0.03]))
    assert (benjamini_hochberg(p)[[0, 2, 3]] >= p[[0, 2, 3]]).all()  # never below the raw p-value
    assert benjamini_hochberg([]).size == 0
    with pytest.raises(InvalidInputError):
        benjamini_hochberg([0.2, 1.5])


def test_paired_effect_size_is_the_paired_t_statistic_over_root_n():
    rng = np.random.default_rng(1)
    a = rng.normal(0.3, 1.0, size=30)
    b = a - rng.normal(0.5, 0.7, size=30)
    t = stats.ttest_rel(a, b).statistic
    assert paired_effect_size(a, b) == pytest.approx(t / np.sqrt(30), rel=1e-12)
    assert paired_effect_size(b, a) == pytest.approx(-t / np.sqrt(30), rel=1e-12)  # its sign: that of mean(a - b)


def test_paired_effect_size_edge_cases():
    assert paired_effect_size([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert paired_effect_size([2.0, 3.0], [1.0, 2.0]) == np.inf
    assert np.isnan(paired_effect_size([1.0], [0.0]))
    assert paired_effect_size([1.0, np.nan, 3.0, 2.0], [0.0, 5.0, 1.0, 2.0]) == pytest.approx(
        np.mean([1, 2, 0]) / np.std([1, 2, 0], ddof=1))
    with pytest.raises(InvalidInputError):
        paired_effect_size([1.0, 2.0], [1.0])


def test_preference_p_value_is_the_sign_test_of_wins_among_untied_inputs():
    from engine.stats import preference_p_value

    pref = [1, 1, 1, 0.5, 0, 1, 1, 1, 1, np.nan, 1, 0.5]
    assert preference_p_value(pref) == pytest.approx(stats.binomtest(8, 9, 0.5).pvalue)
    assert preference_p_value([1] * 10) == pytest.approx(2 / 2 ** 10)
    assert np.isnan(preference_p_value([0.5, 0.5]))
    with pytest.raises(InvalidInputError):
        preference_p_value([0.3])
