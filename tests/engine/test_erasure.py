"""Erasure metrics (docs/methods.md#erasure-metrics): hand-computed values on a model whose probabilities are known exactly,
and agreement with independent masked forwards on a real (tiny BERT) classifier."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.erasure import (
    ERASER_BINS,
    better,
    bin_count,
    erasure_metrics,
    pi_keep_probability,
    soft_keep_probability,
    soft_normalised,
)
from engine.faithfulness.perturb import perturbed_rows, ranking_positions
from engine.faithfulness.registry import METRICS
from engine.ood.features import pool_hidden_states

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


# Ten tokens, ids 4..13, weights below; the ranking scores put them in the order 4, 5, ..., 13.
WEIGHTS = [2.0, 1.5, -0.5, 1.0, 0.25, -1.0, 0.5, 0.75, -0.25, 0.1]
SCORES = [10.0, 9, 8, 7, 6, 5, 4, 3, 2, 1]


def _setup(known_classifier, weights=WEIGHTS, scores=SCORES):
    classifier, batch_of = known_classifier(weights)
    batch = batch_of([list(range(4, 4 + len(weights)))])
    s = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    s[0, 1 : 1 + len(scores)] = torch.tensor(scores)
    return classifier, batch, s


def test_comprehensiveness_sufficiency_and_aopc_by_hand_on_eraser_bins(known_classifier):
    """p_1 = sigmoid(sum of the present tokens' weights): comprehensiveness@k removes the top round(kN) (>= 1)
    tokens, sufficiency@k keeps only them; AOPC is the mean over ERASER's five bins."""
    classifier, batch, s = _setup(known_classifier)
    res = erasure_metrics(classifier, batch, s, target=[1], metrics=["comprehensiveness", "sufficiency"])
    total = sum(WEIGHTS)
    p_x = sigmoid(total)
    # N = 10: 1% -> 1 token (at least one), 5% -> round(0.5) = 1 (half rounds up), 10% -> 1, 20% -> 2, 50% -> 5.
    assert [bin_count(k, 10) for k in ERASER_BINS] == [1, 1, 1, 2, 5]
    comps, suffs = [], []
    for k, n in zip(ERASER_BINS, [1, 1, 1, 2, 5]):
        comp = p_x - sigmoid(total - sum(WEIGHTS[:n]))
        suff = p_x - sigmoid(sum(WEIGHTS[:n]))
        assert res.values[f"comprehensiveness@{k:g}"][0] == pytest.approx(comp, abs=1e-12)
        assert res.values[f"sufficiency@{k:g}"][0] == pytest.approx(suff, abs=1e-12)
        comps.append(comp)
        suffs.append(suff)
    assert res.values["aopc-comprehensiveness"][0] == pytest.approx(np.mean(comps), abs=1e-12)
    assert res.values["aopc-sufficiency"][0] == pytest.approx(np.mean(suffs), abs=1e-12)
    # Distinct inputs: the unperturbed one, removal of top 1, 2, 5 and keep-only top 1, 2, 5.
    assert res.forward_rows == 7


def test_deletion_and_insertion_curves_and_areas_by_hand(known_classifier):
    """deletion@r removes the top floor(rN) tokens, insertion@r reveals them in the fully masked input; the areas
    are trapezoids over r. Deletion at 0 is the input, at 100% the fully masked input, and insertion the reverse."""
    classifier, batch, s = _setup(known_classifier)
    res = erasure_metrics(classifier, batch, s, target=[1], metrics=["deletion", "insertion"])
    total = sum(WEIGHTS)
    deletion = [sigmoid(total - sum(WEIGHTS[:j])) for j in range(11)]
    insertion = [sigmoid(sum(WEIGHTS[:j])) for j in range(11)]
    for j in range(11):
        assert res.values[f"deletion@{j / 10:g}"][0] == pytest.approx(deletion[j], abs=1e-12)
        assert res.values[f"insertion@{j / 10:g}"][0] == pytest.approx(insertion[j], abs=1e-12)
    area = lambda y: sum(0.05 * (a + b) for a, b in zip(y, y[1:]))  # noqa: E731
    assert res.values["deletion-area"][0] == pytest.approx(area(deletion), abs=1e-12)
    assert res.values["insertion-area"][0] == pytest.approx(area(insertion), abs=1e-12)
    assert deletion[10] == insertion[0] == 0.5  # nothing left: logit 0 for both classes
    assert better("deletion-area") == "lower" and better("insertion-area") == "higher"


def test_decision_flip_fraction_and_top1_flip_by_hand(known_classifier):
    """The prediction (class 1 while the sum of weights is > 0) flips after removing the top j tokens where the
    running sum first drops to <= 0; never flipped -> 1.0 with the flag."""
    # Sum 2.25; removing 2.0 leaves 0.25, then removing 1.5 leaves -1.25: flips at j = 2 of N = 4.
    classifier, batch, s = _setup(known_classifier, weights=[2.0, 1.5, -0.25, -1.0], scores=[4, 3, 2, 1])
    res = erasure_metrics(classifier, batch, s, metrics=["decision-flip"])
    assert res.values["flip-fraction"][0] == pytest.approx(2 / 4)
    assert res.values["never-flipped"][0] == 0 and res.values["top1-flip"][0] == 0
    # Ranked the other way (-0.25, -1.0, 1.5, 2.0: sums 2.5, 3.5, 2.0, 0) it flips only when all are gone, where
    # p = 0.5 predicts class 0 (argmax of a tie): j = N, a flip, not 'never'.
    classifier, batch, s = _setup(known_classifier, weights=[2.0, 1.5, -0.25, -1.0], scores=[1, 2, 4, 3])
    res = erasure_metrics(classifier, batch, s, metrics=["decision-flip"])
    assert res.values["flip-fraction"][0] == pytest.approx(1.0) and res.values["never-flipped"][0] == 0
    # A negative input (class 0) whose removals only make it more negative: never flips.
    classifier, batch, s = _setup(known_classifier, weights=[1.0, -2.0, -3.0], scores=[3, 2, 1])
    res = erasure_metrics(classifier, batch, s, metrics=["decision-flip"])
    assert res.values["flip-fraction"][0] == 1.0 and res.values["never-flipped"][0] == 1.0
    # Top-1 flip: removing the single token 2.0 of (2.0, -1.0) turns the prediction from 1 to 0.
    classifier, batch, s = _setup(known_classifier, weights=[2.0, -1.0], scores=[2, 1])
    res = erasure_metrics(classifier, batch, s, metrics=["decision-flip"])
    assert res.values["top1-flip"][0] == 1.0 and res.values["flip-fraction"][0] == pytest.approx(0.5)


def _soft_batch(known_classifier, table, rows, row_scores):
    """A bag-of-words classifier with weights `table` for ids 4.., a batch of the id lists `rows`, and scores
    [B, T] with `row_scores` on each row's tokens."""
    classifier, batch_of = known_classifier(table)
    batch = batch_of(rows)
    s = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    for b, sc in enumerate(row_scores):
        s[b, 1 : 1 + len(sc)] = torch.tensor(sc, dtype=torch.float32)
    return classifier, batch, s


def test_soft_metrics_with_zero_one_importance_equal_hard_removal_and_soft_nc_ns_clip_to_0_1_by_hand(
        known_classifier):
    """Scores that normalise to exactly 0 or 1 make every Bernoulli draw certain: soft sufficiency keeps exactly the
    top tokens, soft comprehensiveness removes them (embedding 0 = weight 0). Soft-NC / Soft-NS then have closed
    forms (SoftFaith's metrics.py): with drop = max(0, p(x) - p(x')) and 1 - S0 = max(0, p(x) - p(null)) = p(x) - 1/2
    (the all-[PAD] null input has weight 0), NC = clip(drop / (1 - S0), 0, 1), NS = clip(1 - drop / (1 - S0), 0, 1).
    Three inputs: NC clipped from 1.61 to 1; NC = 0 and NS clipped from -0.22 to 0; both inside (0, 1)."""
    table = [2.0, 1.0, -1.5, 0.5, -1.0, 0.75]  # ids 4..9
    w = dict(zip(range(4, 10), table))
    rows = [[4, 5, 6, 7], [8, 9, 5, 7], [5, 9, 4]]
    top = [[4, 5], [8, 9], [5]]
    classifier, batch, s = _soft_batch(known_classifier, table, rows, [[5, 5, 1, 1], [5, 5, 1, 1], [5, 1, 1]])
    res = erasure_metrics(classifier, batch, s, target=[1, 1, 1], metrics=["soft"], soft_draws=3, seed=7)
    expected_nc = [1.0, 0.0, None]
    expected_ns = [1.0, 0.0, None]
    for b, (row, kept) in enumerate(zip(rows, top)):
        total = sum(w[i] for i in row)
        p_x = sigmoid(total)
        p_comp = sigmoid(total - sum(w[i] for i in kept))  # the top tokens removed
        p_suff = sigmoid(sum(w[i] for i in kept))  # only they kept
        assert res.values["soft-comprehensiveness"][b] == pytest.approx(p_x - p_comp, abs=1e-12)
        assert res.values["soft-sufficiency"][b] == pytest.approx(p_x - p_suff, abs=1e-12)
        scale = p_x - 0.5
        nc = min(1.0, max(0.0, p_x - p_comp) / scale)
        ns = max(0.0, min(1.0, 1 - max(0.0, p_x - p_suff) / scale))
        assert res.values["soft-nc"][b] == pytest.approx(nc, abs=1e-12)
        assert res.values["soft-ns"][b] == pytest.approx(ns, abs=1e-12)
        if expected_nc[b] is not None:
            assert nc == expected_nc[b] and ns == expected_ns[b]
    # The unclipped values the old normaliser returned: 1.61 for input 0's NC, -0.22 for input 1's NS.
    assert (sigmoid(2.0) - sigmoid(-1.0)) / (sigmoid(2.0) - 0.5) == pytest.approx(1.607, abs=1e-3)
    assert 1 - (sigmoid(1.25) - sigmoid(-0.25)) / (sigmoid(1.25) - 0.5) == pytest.approx(-0.224, abs=1e-3)
    # Input 2 inside (0, 1): NC = (sigmoid(3.75) - sigmoid(2.75)) / (sigmoid(3.75) - 1/2) = 0.0778.
    assert res.values["soft-nc"][2] == pytest.approx(0.0778, abs=1e-4)
    assert res.values["soft-ns"][2] == pytest.approx(0.4844, abs=1e-4)
    assert res.soft_rows == 3 * (2 * 3) + 3  # 2 D draws per input and one null input each


def test_soft_null_input_replaces_every_position_by_pad_including_cls_and_sep(known_classifier):
    """The normaliser's null input is SoftFaith's all-0 (= [PAD]) input over the whole attended length, [CLS] and
    [SEP] included, whatever the hard removal: with w[PAD] = -0.1 and 4 tokens + 2 specials, p(null) =
    sigmoid(-0.6); [MASK] (w = 0) would give 1/2. With 0/1 importances, NC = clip(drop / (p(x) - p(null)))."""
    table = [1.0, 0.5, 0.25, 0.25]
    classifier, batch, s = _soft_batch(known_classifier, table, [[4, 5, 6, 7]], [[5, 1, 1, 1]])
    with torch.no_grad():
        classifier.model.embed.weight[0, 0] = -0.1
    p_x, p_null = sigmoid(2.0), sigmoid(-0.6)
    for removal in ("mask", "delete"):
        res = erasure_metrics(classifier, batch, s, target=[1], metrics=["soft"], soft_draws=2, removal=removal)
        drop_comp = p_x - sigmoid(1.0)  # token 4 (w 1.0) removed
        drop_suff = p_x - sigmoid(1.0)  # only token 4 kept
        assert res.values["soft-nc"][0] == pytest.approx(drop_comp / (p_x - p_null), abs=1e-12)
        assert res.values["soft-ns"][0] == pytest.approx(1 - drop_suff / (p_x - p_null), abs=1e-12)


def test_soft_nc_ns_are_the_mean_of_per_draw_clipped_values_not_the_clip_of_the_mean(known_classifier):
    """A token of normalised importance 0.5 makes each draw one of two inputs; soft comprehensiveness gives the
    share f of draws that kept it, and Soft-NC must equal f NC(kept) + (1 - f) NC(dropped) with each per-draw NC
    clipped (SoftFaith clips its one draw): here NC(dropped) = 1.29 before clipping, so the clip of the mean differs."""
    weights = [1.0, 2.0, -0.5]  # scores 2, 1, 0 -> s = 1, 0.5, 0
    classifier, batch, s = _setup(known_classifier, weights=weights, scores=[2, 1, 0])
    D = 40
    res = erasure_metrics(classifier, batch, s, target=[1], metrics=["soft"], soft_draws=D, seed=11)
    p_x = sigmoid(2.5)
    scale = p_x - 0.5
    # Comprehensiveness: token 4 always dropped, token 6 always kept, token 5 kept with probability 0.5.
    kept, dropped = sigmoid(1.5), sigmoid(-0.5)
    f = (p_x - res.values["soft-comprehensiveness"][0] - dropped) / (kept - dropped)
    assert abs(f * D - round(f * D)) < 1e-9 and 0 < f < 1
    nc_kept, nc_dropped = (p_x - kept) / scale, min(1.0, (p_x - dropped) / scale)
    assert (p_x - dropped) / scale > 1.2
    assert res.values["soft-nc"][0] == pytest.approx(f * nc_kept + (1 - f) * nc_dropped, abs=1e-12)
    mean_drop = res.values["soft-comprehensiveness"][0]
    assert abs(min(1.0, mean_drop / scale) - res.values["soft-nc"][0]) > 0.05
    # Sufficiency: token 4 always kept, token 6 never, token 5 half the time.
    kept, dropped = sigmoid(3.0), sigmoid(1.0)
    g = (p_x - res.values["soft-sufficiency"][0] - dropped) / (kept - dropped)
    assert abs(g * D - round(g * D)) < 1e-9 and 0 < g < 1
    ns_kept, ns_dropped = 1.0, 1 - (p_x - dropped) / scale  # p(kept) > p(x): drop 0
    assert res.values["soft-ns"][0] == pytest.approx(g * ns_kept + (1 - g) * ns_dropped, abs=1e-12)


def test_soft_normalised_closed_form_and_undefined_without_a_scale():
    """soft_normalised on hand-picked probabilities: p(x) = 0.9, p(null) = 0.4 (1 - S0 = 0.5); comprehensiveness
    draws 0.7 and 0.2 -> NC 0.4 and 1.4 -> 1 (clipped), mean 0.7; sufficiency draws 0.95 and 0.6 -> NS 1 and 0.4,
    mean 0.7. A null input at or above p(x) leaves no scale: NaN."""
    p_x = np.array([0.9, 0.6])
    draws = np.array([[[0.7, 0.2], [0.95, 0.6]], [[0.5, 0.5], [0.5, 0.5]]])
    nc, ns = soft_normalised(p_x, draws, np.array([0.4, 0.7]))
    assert nc[0] == pytest.approx(0.7, abs=1e-12) and ns[0] == pytest.approx(0.7, abs=1e-12)
    assert np.isnan(nc[1]) and np.isnan(ns[1])


def test_soft_draws_keep_each_dimension_with_the_normalised_score_on_average(known_classifier):
    """A token with normalised importance 0.5 keeps its (one) embedding dimension in about half of many draws:
    soft sufficiency's mean probability is near the average of the two outcomes, and the draws are seeded."""
    weights = [3.0, 0.0, -3.0]  # scores 2, 1, 0 -> s = 1, 0.5, 0
    classifier, batch, s = _setup(known_classifier, weights=weights, scores=[2, 1, 0])
    a = erasure_metrics(classifier, batch, s, target=[1], metrics=["soft"], soft_draws=400, seed=3)
    b = erasure_metrics(classifier, batch, s, target=[1], metrics=["soft"], soft_draws=400, seed=3)
    assert a.values["soft-sufficiency"][0] == b.values["soft-sufficiency"][0]
    # Sufficiency keeps token 4 (w 3) surely, token 5 (w 0) half the time, token 6 never: p = sigmoid(3) always.
    assert a.values["soft-sufficiency"][0] == pytest.approx(sigmoid(0.0) - sigmoid(3.0), abs=1e-12)
    s_norm = soft_keep_probability(s, batch.maskable)
    assert s_norm[0, 1:4].tolist() == [1.0, 0.5, 0.0] and s_norm[0, 0] == 1.0


def test_every_metric_carries_the_share_of_its_perturbed_inputs_out_of_distribution(known_classifier):
    """With a stand-in MaSF that calls only the fully masked input out of distribution (p = 0.01), exactly the
    metrics that rest on it carry a share above 0, in the right proportion."""
    class FullyMaskedIsOOD:
        def pvalues(self, feats):  # feats [R, 1, 1]: max over real tokens of the word embedding (w of the tokens)
            # The all-[MASK] input has only zero-weight tokens; every other input here has a positive one.
            return np.where(feats[:, 0, 0].cpu().numpy() <= 0, 0.01, 0.5)

    classifier, batch, s = _setup(known_classifier, weights=[1.0, 2.0, 0.5, 0.25], scores=[4, 3, 2, 1])
    res = erasure_metrics(classifier, batch, s, target=[1], masf=FullyMaskedIsOOD(),
                          metrics=["comprehensiveness", "deletion", "insertion"])
    assert res.ood_share("comprehensiveness@0.5") == 0.0
    assert res.ood_share("deletion@1") == 1.0 and res.ood_share("insertion@0") == 1.0
    assert res.ood_share("deletion@0.5") == 0.0
    # The deletion area rests on 5 distinct inputs (0, 1, 2, 3, 4 tokens removed of N = 4), one of them fully masked.
    assert res.n_perturbed["deletion-area"][0] == 5 and res.ood_share("deletion-area") == pytest.approx(1 / 5)
    assert res.p_value_input[0] == 0.5
    rows = {(r["metric"], r["level"]): r for r in res.summary()}
    assert rows[("deletion", 1.0)]["p_below_005"] == 1.0 and rows[("deletion", 1.0)]["better"] == "lower"
    assert all(r["better"] in ("higher", "lower") for r in res.summary())


def test_delete_removal_closes_up_the_remaining_tokens():
    """'delete' drops the removed tokens and shifts the rest left (ERASER); 'mask' replaces them by [MASK]."""
    from engine.models import Batch

    ids = torch.tensor([[2, 4, 5, 6, 3, 0]])
    att = torch.tensor([[1, 1, 1, 1, 1, 0]])
    b = Batch(input_ids=ids, attention_mask=att, token_type_ids=torch.zeros_like(ids), segments=att,
              maskable=torch.tensor([[False, True, True, True, False, False]]), target=None,
              truncated=torch.zeros(1, dtype=torch.bool), offsets=[[(0, 0)] * 6])
    removed = torch.tensor([[False, False, True, False, False, False]])
    out, attention, _ = perturbed_rows(b, torch.tensor([0]), removed, mask_token_id=1, pad_token_id=0, removal="delete")
    assert out.tolist() == [[2, 4, 6, 3, 0, 0]] and attention.tolist() == [[1, 1, 1, 1, 0, 0]]
    out, attention, _ = perturbed_rows(b, torch.tensor([0]), removed, mask_token_id=1, pad_token_id=0, removal="mask")
    assert out.tolist() == [[2, 4, 1, 6, 3, 0]] and attention.tolist() == att.tolist()


def test_pooling_by_runs_of_equal_length_equals_max_over_real_tokens_bit_for_bit():
    """MaSF features pooled by slicing runs of equal-length rows equal the max over the real tokens with padding filled
    by -inf, for length-sorted and unsorted right padding and for padding that is not on the right (the fallback)."""
    g = torch.Generator().manual_seed(0)
    states = [torch.randn(9, 7, 5, generator=g) for _ in range(3)]
    positions = torch.arange(7)

    def reference(attention):
        pad = (attention == 0)[:, :, None]
        return torch.stack([h.masked_fill(pad, float("-inf")).amax(1) for h in states], dim=1)

    for lengths in ([1, 2, 2, 4, 4, 4, 6, 7, 7], [7, 3, 5, 3, 1, 7, 2, 6, 4]):
        attention = (positions < torch.tensor(lengths)[:, None]).long()
        assert torch.equal(pool_hidden_states(states, attention), reference(attention))
    holes = (torch.rand(9, 7, generator=g) < 0.7).long()
    holes[:, 0] = 1
    assert torch.equal(pool_hidden_states(states, holes), reference(holes))


def test_pvalues_looked_up_over_several_passes_land_on_their_rows(monkeypatch):
    """Features collected over forward passes of uneven sizes and looked up a few rows at a time (flushing mid-pass
    and at the end) give each row the p-value of a single look-up of all rows."""
    from engine.faithfulness import perturb
    from engine.ood import MaSF

    rng = np.random.default_rng(0)
    masf = MaSF().fit(rng.normal(size=(60, 2, 4)))
    feats = torch.as_tensor(rng.normal(size=(23, 2, 4)), dtype=torch.float32)
    monkeypatch.setattr(perturb, "PVALUE_ROWS", 5)
    pval = np.full(23, np.nan)
    pending = perturb.PendingPvalues(masf, pval)
    for start, stop in ((0, 3), (3, 4), (4, 11), (11, 20), (20, 23)):
        pending.add(start, feats[start:stop])
    pending.flush()
    assert np.array_equal(pval, masf.pvalues(feats))


def test_ranking_is_by_score_with_ties_by_position_and_never_picks_non_maskable():
    scores = torch.tensor([[9.0, 1.0, 3.0, 3.0, 9.0]])
    maskable = torch.tensor([[False, True, True, True, False]])
    rank = ranking_positions(scores, maskable)
    assert rank[0, 2] == 0 and rank[0, 3] == 1 and rank[0, 1] == 2 and bool((rank[0, [0, 4]] >= 5).all())


def test_unknown_metric_and_removal_are_refused_with_the_alternatives(known_classifier):
    classifier, batch, s = _setup(known_classifier)
    with pytest.raises(InvalidInputError, match="comprehensiveness"):
        erasure_metrics(classifier, batch, s, metrics=["aopc-foo"])
    with pytest.raises(InvalidInputError, match="delete"):
        erasure_metrics(classifier, batch, s, removal="drop")
    assert all(m.better in ("higher", "lower") for m in METRICS.values())


def test_on_tiny_bert_comprehensiveness_equals_an_independent_masked_forward_and_full_deletion_the_all_masked_input(
        toy_classifier):
    """On a real classifier: comprehensiveness@k = p_c(x) - p_c of the input with its top round(kN) tokens masked
    by hand; deletion@1 = p_c of `mask_all_primary`; every perturbed input's p-value is that of an independent
    MaSF pass on it."""
    from engine.faithfulness.recursive import mask_top, masking_order_keys
    from engine.importance import get_explainer
    from engine.models import mask_all_primary
    from engine.ood import fit_masf, masf_pvalues

    clf = toy_classifier
    batch = clf.batch(["a great and moving film , truly wonderful", "dull , flat and far too long to bear",
                       "fine"], target=[1, 0, 1])
    imp = get_explainer("x-grad-sign", clf).attribute(batch, batch.target)
    masf = fit_masf(clf, save=False)
    res = erasure_metrics(clf, batch, imp.scores, target=batch.target, masf=masf, removal="mask")
    with torch.no_grad():
        p = torch.softmax(clf.logits(batch), -1)[torch.arange(3), batch.target]
        n = batch.maskable.sum(1)
        keys = masking_order_keys(imp.scores.double().to(batch.device), batch.maskable, torch.zeros_like(batch.maskable))
        for k in ERASER_BINS:
            counts = torch.tensor([bin_count(k, int(v)) for v in n], device=batch.device)
            masked = batch.with_ids(mask_top(batch.input_ids, keys, counts, clf.mask_token_id))
            q = torch.softmax(clf.logits(masked), -1)[torch.arange(3), batch.target]
            np.testing.assert_allclose(res.values[f"comprehensiveness@{k:g}"], (p - q).cpu().numpy(), atol=1e-5)
            if k == 0.5:
                np.testing.assert_allclose(res.p_values[f"comprehensiveness@{k:g}"], masf_pvalues(clf, masf, masked))
        full = mask_all_primary(batch, clf.mask_token_id)
        q_full = torch.softmax(clf.logits(full), -1)[torch.arange(3), batch.target]
    np.testing.assert_allclose(res.values["deletion@1"], q_full.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(res.values["insertion@0"], q_full.cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(res.probability, p.cpu().numpy(), atol=1e-5)
    assert all(not np.isnan(res.ood_share(name)) for name in res.values)
    # 'delete' is labelled in the result and gives other perturbed inputs (positions shift).
    deleted = erasure_metrics(clf, batch, imp.scores, target=batch.target, removal="delete", metrics=["deletion"])
    assert deleted.removal == "delete" and not np.allclose(deleted.values["deletion@0.5"], res.values["deletion@0.5"])


def _pinned_case(known_classifier, **options) -> dict:
    """Every output of erasure_metrics on two inputs of different lengths (every family, a stand-in MaSF whose
    p-values fall on both sides of 0.05, three soft draws), rounded as tests/data/erasure_pinned.json keeps them."""
    class StandInMasf:
        def pvalues(self, feats):  # feats [R, 1, 1]: max word-embedding weight over the real tokens
            return 0.2 / (1 + np.exp(-3 * (feats[:, 0, 0].double().cpu().numpy() - 0.6)))

    classifier, batch_of = known_classifier([2.0, -1.5, 0.5, 1.0, -0.25, 0.75])
    batch = batch_of([[4, 5, 6, 7, 8, 9], [9, 7, 5, 4]])
    s = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
    s[0, 1:7] = torch.tensor([0.3, -2.0, 1.0, 1.0, 0.1, 0.5])  # a tie (1.0, 1.0): broken by position
    s[1, 1:5] = torch.tensor([1.0, -1.0, 0.5, 2.0])
    res = erasure_metrics(classifier, batch, s, masf=StandInMasf(), soft_draws=3, seed=1, **options)
    return {"values": {k: [round(float(x), 10) for x in v] for k, v in sorted(res.values.items())},
            "n_ood": {k: [float(x) for x in v] for k, v in sorted(res.n_ood.items())},
            "n_perturbed": {k: [float(x) for x in v] for k, v in sorted(res.n_perturbed.items())},
            "p_sum": {k: round(float(np.sum(v)), 10) for k, v in sorted(res.p_values.items())},
            "forward_rows": res.forward_rows, "soft_rows": res.soft_rows,
            "probability": [round(float(x), 10) for x in res.probability],
            "p_value_input": [round(float(x), 10) for x in res.p_value_input]}


def test_every_output_on_a_two_input_case_equals_the_values_pinned_before_the_split_into_named_steps(known_classifier):
    """tests/data/erasure_pinned.json holds erasure_metrics' outputs as the single-function implementation (with
    closures) computed them, by tokens and by whole words; the implementation split into named steps gives the
    same values (to 1e-9), the same out-of-distribution counts and the same number of forward rows."""
    import json
    from pathlib import Path

    pinned = json.loads((Path(__file__).resolve().parents[1] / "data" / "erasure_pinned.json").read_text(encoding="utf-8"))
    words = torch.tensor([[-1, 0, 1, 1, 2, 3, 3, -1], [-1, 0, 1, 1, 2, -1, -1, -1]])
    for name, options in (("tokens", {}), ("words", {"word_ids": words})):
        now, then = _pinned_case(known_classifier, **options), pinned[name]
        assert now.keys() == then.keys()
        for key in ("n_ood", "n_perturbed", "forward_rows", "soft_rows"):
            assert now[key] == then[key], (name, key)
        assert now["values"].keys() == then["values"].keys()
        for metric, values in then["values"].items():
            assert now["values"][metric] == pytest.approx(values, abs=1e-9), (name, metric)
        assert now["p_sum"] == pytest.approx(then["p_sum"], abs=1e-9)
        assert now["probability"] == pytest.approx(then["probability"], abs=1e-9)
        assert now["p_value_input"] == pytest.approx(then["p_value_input"], abs=1e-9)


def test_pi_keep_probabilities_keep_the_same_expected_share_whatever_the_explanations_shape():
    """Soft-NC / NS keep token t with its min-max normalised score, so a sparse explanation keeps about a sixth of its
    input in a sufficiency draw and a dense one most of it; pi-Soft's keep probabilities have the same mean
    (keep_share) over every input's maskable tokens, keep the order of the scores, give keep_share to equal scores
    and 1 off the maskable positions."""
    scores = torch.tensor([[0, 5, 0, 0, 0, 0, 0, 0], [0, 5, 4, 4, 4, 3, 0, 0], [0, 2, 2, 2, 2, 2, 2, 0]],
                          dtype=torch.float32)
    maskable = torch.zeros(3, 8, dtype=torch.bool)
    maskable[:, 1:7] = True
    plain = soft_keep_probability(scores, maskable)
    plain_means = plain[maskable].view(3, 6).mean(1)
    assert plain_means[0] < 0.2 < 0.6 < plain_means[1]  # the confound the pi variants remove
    for share in (0.5, 0.3):
        s = pi_keep_probability(scores, maskable, share)
        assert torch.allclose(s[maskable].view(3, 6).mean(1), torch.full((3,), share, dtype=s.dtype), atol=1e-9)
        assert bool((s[~maskable] == 1).all())
        for b in range(3):
            order = torch.argsort(scores[b, 1:7], stable=True)
            assert bool((s[b, 1:7][order].diff() >= -1e-12).all()), "the shift changed the explanation's order"
        assert torch.allclose(s[2, 1:7], torch.full((6,), share, dtype=s.dtype), atol=1e-9)
    with pytest.raises(InvalidInputError, match="keep_share"):
        pi_keep_probability(scores, maskable, 1.0)


def test_pi_soft_is_soft_where_the_shares_already_match_and_computed_only_when_asked(known_classifier):
    """Scores whose normalised values already average 0.5 over the input ([5, 5, 1, 1] -> 1, 1, 0, 0) need no shift:
    pi-Soft-NC / NS equal Soft-NC / NS exactly (the same seeded draws). A sparse explanation ([5, 1, 1, 1] -> 1, 0,
    0, 0) is shifted (1, 1/3, 1/3, 1/3): its pi-Soft-NS differs from its Soft-NS. The default selection computes no
    pi-soft row (default cells keep their rows); metrics=['pi-soft'] computes only its two rows and their draws."""
    table = [2.0, 1.0, -1.5, 0.5, -1.0, 0.75]
    rows = [[4, 5, 6, 7], [4, 5, 6, 7]]
    classifier, batch, s = _soft_batch(known_classifier, table, rows, [[5, 5, 1, 1], [5, 1, 1, 1]])
    both = erasure_metrics(classifier, batch, s, target=[1, 1], metrics=["soft", "pi-soft"], soft_draws=40, seed=5)
    assert both.values["pi-soft-nc"][0] == both.values["soft-nc"][0]
    assert both.values["pi-soft-ns"][0] == both.values["soft-ns"][0]
    assert abs(both.values["pi-soft-ns"][1] - both.values["soft-ns"][1]) > 0.05
    assert both.soft_rows == 2 * (2 * (2 * 40) + 2)
    only = erasure_metrics(classifier, batch, s, target=[1, 1], metrics=["pi-soft"], soft_draws=40, seed=5)
    assert set(only.values) == {"pi-soft-nc", "pi-soft-ns"} and only.options["keep_share"] == 0.5
    np.testing.assert_array_equal(only.values["pi-soft-ns"], both.values["pi-soft-ns"])
    default = erasure_metrics(classifier, batch, s, target=[1, 1], soft_draws=2)
    assert not any(name.startswith("pi-soft") for name in default.values) and "keep_share" not in default.options
