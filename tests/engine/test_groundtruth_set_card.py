"""The card's statistics that can separate measures on the set mechanisms (engine.groundtruth.card.set_recovery),
the hard wrong explanations of the judges (engine.groundtruth.explanations), and the separation tables
(engine.groundtruth.tables): each checked on scores whose right answer is known by hand."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from engine.groundtruth.card_cells import CARD
from engine.groundtruth.explanations import JUDGE_PAIRS, constructed_scores
from engine.groundtruth.mechanisms import MECHANISMS, PlantSpec
from engine.groundtruth.recovery import SEPARATION_BEST, set_recovery

GRADED = PlantSpec(mechanism="graded-set", words=("a", "b", "c", "d"), strengths=(0.95, 0.8, 0.65, 0.5))
# one input, T = 8: [CLS] a x b c y d [SEP]: the planted words at 1, 3, 4, 6, the others at 2, 5
MASKABLE = torch.tensor([[False, True, True, True, True, True, True, False]])
ORDERED = [torch.zeros(1, 8, dtype=torch.bool) for _ in range(4)]
for mask, pos in zip(ORDERED, (1, 3, 4, 6)):
    mask[0, pos] = True


def row(values: dict[int, float]) -> torch.Tensor:
    out = torch.zeros(1, 8, dtype=torch.float64)
    for t, v in values.items():
        out[0, t] = v
    return out


def test_order_statistics_are_one_in_the_truths_order_minus_one_reversed_zero_when_flat():
    right = set_recovery(row({1: 4, 3: 3, 4: 2, 6: 1}), MASKABLE, ORDERED, GRADED)
    assert right["order-spearman"][0] == pytest.approx(1.0) and right["order-kendall"][0] == pytest.approx(1.0)
    reversed_ = set_recovery(row({1: 1, 3: 2, 4: 3, 6: 4}), MASKABLE, ORDERED, GRADED)
    assert reversed_["order-spearman"][0] == pytest.approx(-1.0) and reversed_["order-kendall"][0] == pytest.approx(-1.0)
    swapped = set_recovery(row({1: 3, 3: 4, 4: 2, 6: 1}), MASKABLE, ORDERED, GRADED)  # the two strongest swapped
    assert swapped["order-spearman"][0] == pytest.approx(0.8) and swapped["order-kendall"][0] == pytest.approx(2 / 3)
    flat = set_recovery(row({}), MASKABLE, ORDERED, GRADED)
    assert flat["order-spearman"][0] == 0.0 and flat["order-kendall"][0] == 0.0


def test_a_word_of_several_pieces_is_scored_as_one_word():
    """Word 'a' spelt as two pieces (positions 1 and 2): its score is their sum, 1 + 3 = 4 > b's 3.5, so the order is
    right; taken piece by piece its best piece (3) would rank below b."""
    ordered = [m.clone() for m in ORDERED]
    ordered[0][0, 2] = True
    s = row({1: 1, 2: 3, 3: 3.5, 4: 2, 6: 1})
    assert set_recovery(s, MASKABLE, ordered, GRADED)["order-spearman"][0] == pytest.approx(1.0)


def test_set_top_share_and_mass_share_read_the_sets_words_among_all_words():
    spec = PlantSpec(mechanism="redundant", words=("a", "b", "c"))
    ordered = ORDERED[:3]  # a, b, c at 1, 3, 4; the others at 2, 5, 6
    out = set_recovery(row({1: 2, 3: 2, 2: 3, 4: 0.5, 5: 0.5, 6: 0}), MASKABLE, ordered, spec)
    # the top 3 words: x (3), a (2), b (2): two of the three planted
    assert out["set-top-share"][0] == pytest.approx(2 / 3)
    assert out["set-mass-share"][0] == pytest.approx(4.5 / 8.0)
    assert "order-spearman" not in out


def test_an_input_without_a_planted_word_gets_nan_and_the_others_keep_their_values():
    maskable = MASKABLE.repeat(2, 1)
    ordered = [m.repeat(2, 1) for m in ORDERED]
    ordered[2][1] = False  # the second input lacks word c
    s = torch.cat([row({1: 4, 3: 3, 4: 2, 6: 1})] * 2)
    out = set_recovery(s, maskable, ordered, GRADED)
    assert out["order-spearman"][0] == pytest.approx(1.0) and np.isnan(out["order-spearman"][1])


def test_hard_wrong_explanations_of_the_graded_set():
    ref = row({2: 9, 5: 8})  # the reference prefers the other words
    d = torch.zeros(1, 8, dtype=torch.bool)
    for m in ORDERED:
        d |= m

    def order(kind):
        s = constructed_scores(kind, ref, MASKABLE, d, torch.zeros_like(d), ordered=ORDERED)
        return [int(t) for t in torch.argsort(s[0], descending=True)[:6]]

    assert order("true") == [1, 3, 4, 6, 2, 5]
    assert order("adjacent-swapped") == [3, 1, 4, 6, 2, 5]
    assert order("weakest-first") == [6, 4, 3, 1, 2, 5]
    assert order("strongest-other-first")[0] == 2
    with pytest.raises(Exception, match="needs the planted words"):
        constructed_scores("weakest-first", ref, MASKABLE, d, torch.zeros_like(d))


def test_cancellations_true_explanation_scores_the_opposing_word_negative_and_sign_flipped_does_not():
    """Explained class = the other class's (supports: target's word -1, other's +1): the true explanation puts the
    other class's word first and the target's word last with a negative score; sign-flipped scores it second."""
    ordered = ORDERED[:2]  # the target's word at 1, the other's at 3
    d = ordered[0] | ordered[1]
    supports = torch.tensor([[-1, 1]])
    true = constructed_scores("true", row({2: 5}), MASKABLE, d, torch.zeros_like(d), ordered=ordered, supports=supports)
    flipped = constructed_scores("sign-flipped", row({2: 5}), MASKABLE, d, torch.zeros_like(d), ordered=ordered,
                                 supports=supports)
    assert int(true[0].argmax()) == 3 and true[0, 1] < 0 and (true[0, [2, 4, 5, 6]] > 0).all()
    assert torch.argsort(flipped[0], descending=True)[:2].tolist() == [3, 1] and flipped[0, 1] > 0
    spec = PlantSpec(mechanism="cancellation", words=("a", "b"))
    signs = set_recovery(true, MASKABLE, ordered, spec, explained=torch.tensor([0]), target=1, other=0)
    assert signs["signs-both"][0] == 1.0
    signs = set_recovery(flipped, MASKABLE, ordered, spec, explained=torch.tensor([0]), target=1, other=0)
    assert signs["sign-target-word"][0] == 0.0 and signs["signs-both"][0] == 0.0


def test_every_mechanism_has_its_judge_pairs():
    assert set(JUDGE_PAIRS) == set(MECHANISMS)
    assert JUDGE_PAIRS["graded-set"][1][:2] == ("adjacent-swapped", "weakest-first")
    assert "sign-flipped" in JUDGE_PAIRS["cancellation"][1]


def _rows(model, mechanism, measure, statistic, values):
    return pd.DataFrame({"method": CARD, "model": model, "mechanism": mechanism, "operator": "mask",
                         "measure": measure, "kind": "recovery", "uid": [f"u{i}" for i in range(len(values))],
                         "metric": statistic, "value": values, "better": "higher", "n_perturbed": np.nan,
                         "n_ood": np.nan, "p_value": np.nan})


def test_separation_table_states_each_statistics_best_value_and_the_summary_its_span():
    from engine.groundtruth.tables import separation_summary, separation_table

    rng = np.random.default_rng(0)
    df = pd.concat([
        _rows("m", "graded-set", "ig-sign", "order-spearman", np.clip(rng.normal(0.9, 0.05, 60), -1, 1)),
        _rows("m", "graded-set", "grad-l2", "order-spearman", np.clip(rng.normal(0.2, 0.05, 60), -1, 1)),
        _rows("m", "graded-set", "random", "order-spearman", np.clip(rng.normal(0.0, 0.05, 60), -1, 1)),
        _rows("m", "graded-set", "ig-sign", "set-top-share", np.ones(60)),
        _rows("m", "graded-set", "ig-sign", "top-hit", np.ones(60)),  # not a separation statistic: left out
    ])
    table = separation_table(df)
    assert set(table["statistic"]) == {"order-spearman", "set-top-share"}
    assert (table["best"] == table["statistic"].map(SEPARATION_BEST)).all()
    assert table["measure"].tolist()[0] == "ig-sign"  # best first
    r = table[(table["measure"] == "ig-sign") & (table["statistic"] == "order-spearman")].iloc[0]
    assert r["low"] < r["value"] < r["high"] and r["n"] == 60
    summary = separation_summary(df).iloc[0]
    assert (summary["best_measure"], summary["worst_measure"]) == ("ig-sign", "grad-l2")  # random left out
    assert summary["span"] == pytest.approx(0.7, abs=0.05) and summary["apart"] and summary["best_value"] == 1.0


def test_on_the_graded_set_the_metrics_are_ranked_against_the_order_statistic_not_the_reciprocal_rank():
    """The measures' truth ranking on a graded set is their order-spearman: a metric that ranks them by it gets
    rho 1 even when the reciprocal rank of the strongest word (the same for all, as on a card where one word
    dominates) would leave the truth ranking undefined."""
    from engine.groundtruth.tables import spearman_table

    rows = []
    for m, (rho, metric) in {"a": (0.9, 0.9), "b": (0.5, 0.5), "c": (0.2, 0.3), "d": (-0.1, 0.1)}.items():
        for i in range(30):
            base = {"method": CARD, "model": "m", "mechanism": "graded-set", "operator": "mask", "measure": m,
                    "uid": f"u{i}", "n_perturbed": 1.0, "n_ood": 0.0, "p_value": np.nan}
            rows.append({**base, "kind": "recovery", "metric": "order-spearman", "value": rho, "better": "higher"})
            rows.append({**base, "kind": "recovery", "metric": "reciprocal-rank", "value": 1.0, "better": "higher"})
            rows.append({**base, "kind": "metric", "metric": "aopc-comprehensiveness", "value": metric,
                         "better": "higher"})
    table = spearman_table(pd.DataFrame(rows), resamples=50).set_index("metric")
    assert table.loc["aopc-comprehensiveness", "spearman"] == pytest.approx(1.0)
