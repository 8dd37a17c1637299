"""Agreement between measures (Krishna et al. 2022): hand-computed cases of every metric."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import InvalidInputError
from engine.faithfulness.measure_agreement import agreement, agreement_matrix, pairwise_rank_agreement, top_k_for

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def test_identical_explanations_agree_fully():
    a = np.array([0.5, -2.0, 1.0, 0.1])
    out = agreement(a, a.copy(), k=2)
    assert out == {"feature_agreement": 1.0, "rank_agreement": 1.0, "sign_agreement": 1.0, "signed_rank_agreement": 1.0,
                   "rank_correlation": pytest.approx(1.0), "pairwise_rank_agreement": 1.0}


def test_top_k_metrics_by_hand():
    """a's top-3 by magnitude: tokens 1 (-2.0), 2 (1.0), 0 (0.5); b's: 2 (3.0), 1 (2.5), 3 (-0.4).
    common {1, 2}: feature agreement 2/3; same token at the same rank: none (a: 1,2,0 / b: 2,1,3) -> 0;
    sign: token 1 is - in a and + in b, token 2 + in both -> 1/3; signed rank: 0."""
    a = np.array([0.5, -2.0, 1.0, 0.1])
    b = np.array([0.2, 2.5, 3.0, -0.4])
    out = agreement(a, b, k=3)
    assert out["feature_agreement"] == pytest.approx(2 / 3)
    assert out["rank_agreement"] == 0.0
    assert out["sign_agreement"] == pytest.approx(1 / 3)
    assert out["signed_rank_agreement"] == 0.0
    # At k = 1 the top token differs (1 vs 2): every top-k metric is 0.
    assert agreement(a, b, k=1)["feature_agreement"] == 0.0
    # Same top tokens at the same ranks but one sign flipped: rank 1, signed rank 1/2.
    out = agreement(np.array([3.0, -2.0, 0.1]), np.array([5.0, 4.0, 0.0]), k=2)
    assert out["rank_agreement"] == 1.0 and out["signed_rank_agreement"] == 0.5 and out["sign_agreement"] == 0.5


def test_all_token_metrics_by_hand():
    """Spearman and pairwise agreement over all tokens: a = (1, 2, 3, 4) and b = (1, 3, 2, 4) order 5 of the
    6 pairs the same way (only (1, 2) is swapped); Spearman = 1 - 6 * 2 / (4 * 15) = 0.8."""
    a, b = np.array([1.0, 2, 3, 4]), np.array([1.0, 3, 2, 4])
    out = agreement(a, b, k=2)
    assert out["pairwise_rank_agreement"] == pytest.approx(5 / 6)
    assert out["rank_correlation"] == pytest.approx(0.8)
    assert pairwise_rank_agreement(a, -a) == 0.0
    assert np.isnan(agreement(a, np.ones(4), k=2)["rank_correlation"])  # a constant explanation has no ranking


def test_dataset_table_is_the_mean_over_inputs_per_pair():
    x = [np.array([1.0, 2, 3, 4]), np.array([3.0, 1, 2])]
    explanations = {"m1": x, "m2": [np.array([1.0, 3, 2, 4]), np.array([3.0, 1, 2])], "m3": [-v for v in x]}
    table = agreement_matrix(explanations, top_k=1)
    assert set(zip(table.measure_a, table.measure_b)) == {("m1", "m2"), ("m1", "m3"), ("m2", "m3")}
    row = table[(table.measure_a == "m1") & (table.measure_b == "m2") & (table.metric == "pairwise_rank_agreement")]
    assert float(row["mean"].iloc[0]) == pytest.approx((5 / 6 + 1) / 2) and int(row["n_inputs"].iloc[0]) == 2
    # m3 = -m1: the same magnitudes (top-1 by magnitude agrees) but every sign differs.
    row = table[(table.measure_a == "m1") & (table.measure_b == "m3")].set_index("metric")["mean"]
    assert row["feature_agreement"] == 1.0 and row["sign_agreement"] == 0.0 and row["rank_correlation"] == pytest.approx(-1)
    assert top_k_for(0.2, 4) == 1 and top_k_for(0.2, 30) == 6


def test_mismatched_inputs_are_refused():
    with pytest.raises(InvalidInputError):
        agreement(np.ones(3), np.ones(4), k=1)
    with pytest.raises(InvalidInputError):
        agreement_matrix({"a": [np.ones(3)], "b": [np.ones(3), np.ones(2)]})


def test_importance_agreement_on_a_real_model(toy_classifier):
    """x-grad-sign and x-grad-abs share magnitudes: their top-k by magnitude is identical (feature agreement 1)."""
    from engine.faithfulness.measure_agreement import importance_agreement
    from engine.importance import get_explainer

    batch = toy_classifier.batch(["a great and moving film , truly wonderful", "dull , flat and far too long"])
    imps = {m: get_explainer(m, toy_classifier).attribute(batch) for m in ("x-grad-sign", "x-grad-abs", "random")}
    table = importance_agreement(imps).set_index(["measure_a", "measure_b", "metric"])["mean"]
    assert table[("x-grad-abs", "x-grad-sign", "feature_agreement")] == 1.0
