"""MaSF: exact against the naive implementation, calibrated under the null, sensitive off it, stored safely."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import kstest

from engine.models import mask_all_primary, save_classifier
from engine.ood import MaSF, fit_masf, hidden_state_features, load_masf, masf_pvalues, naive_pvalues
from engine.ood.masf import SortedRows, conformal_two_sided, simes


def test_conformal_pvalue_hand_computed():
    fit = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    p = conformal_two_sided(fit, torch.tensor([[0.0], [2.5], [4.0], [9.0]]))[:, 0]
    # tails: min(#<=z, #>=z) = 0, 2, 1, 0 -> 2 (1 + tail) / 5, capped at 1
    assert torch.allclose(p, torch.tensor([0.4, 1.0, 0.8, 0.4], dtype=torch.float64))
    assert float(simes(torch.tensor([0.01, 0.04, 0.5]), 0)) == pytest.approx(0.03)


def test_fast_pvalues_equal_naive_broadcast():
    rng = np.random.default_rng(1)
    masf = MaSF(seed=2).fit(rng.normal(size=(300, 3, 16)))
    x = rng.normal(size=(50, 3, 16)) * rng.choice([1.0, 3.0], size=(50, 1, 1))
    assert np.array_equal(masf.pvalues(x), naive_pvalues(masf, x))


def test_fast_pvalues_equal_naive_broadcast_with_ties_on_a_grid():
    """Features on a coarse grid tie with calibration values and with each other (the one-search look-up falls
    back to a second search for tied queries; Simes by counting equal tails): still equal to the naive path."""
    rng = np.random.default_rng(3)
    masf = MaSF(seed=1).fit(rng.integers(0, 6, size=(90, 2, 8)).astype(float))
    x = rng.integers(-1, 8, size=(40, 2, 8)).astype(float)
    assert np.array_equal(masf.pvalues(x), naive_pvalues(masf, x))


def test_tail_counts_from_the_run_end_table_equal_brute_force_counts_with_ties_and_out_of_range_queries():
    """min(#{fit <= z}, #{fit >= z}) by one binary search plus the precomputed end of each run of equal values equals
    counting by comparison, for queries below, above, between and equal to calibration values (first, inner and last
    value of a run, the column's maximum and minimum), in float64 and in float32."""
    rng = np.random.default_rng(5)
    fit = torch.sort(torch.as_tensor(rng.integers(0, 5, size=(40, 6)).astype(float)), dim=0).values
    fit[:, 0] = 2.0  # a column that is one run of ties (the [CLS] dims of the embedding layer)
    queries = torch.as_tensor(np.arange(-1.0, 6.5, 0.5))[:, None].expand(-1, 6)  # [M, D]
    for dtype in (torch.float64, torch.float32):
        f, q = fit.to(dtype), queries.to(dtype)
        brute = torch.minimum((f[None] <= q[:, None]).sum(1), (f[None] >= q[:, None]).sum(1)).double()  # [M, D]
        assert torch.equal(SortedRows(f).tail_counts(q.T.contiguous()).T, brute)


def test_lookup_layout_is_made_once_and_again_when_a_level_is_replaced():
    rng = np.random.default_rng(6)
    masf = MaSF().fit(rng.normal(size=(60, 2, 4)))
    x = rng.normal(size=(5, 2, 4))
    first = masf.pvalues(x)
    rows = masf._sorted_rows("level1")
    masf.pvalues(x)
    assert masf._sorted_rows("level1") is rows, "a fitted MaSF keeps its look-up layout between calls"
    other = MaSF(seed=1).fit(rng.normal(size=(60, 2, 4)) * 2.0)
    masf.level1, masf.level2, masf.level3 = other.level1, other.level2, other.level3
    assert np.array_equal(masf.pvalues(x), other.pvalues(x)) and not np.array_equal(first, other.pvalues(x))


def test_simes_per_layer_by_counting_equals_simes_of_the_sorted_conformal_pvalues():
    rng = np.random.default_rng(4)
    masf = MaSF(seed=0).fit(rng.normal(size=(120, 3, 32)))
    for x in (torch.as_tensor(rng.normal(size=(25, 3, 32))), masf.level1[:7].reshape(7, 3, 32)):
        by_sort = simes(conformal_two_sided(masf.level1, x.reshape(len(x), -1)).reshape(len(x), 3, 32), dim=-1)
        assert torch.equal(masf._simes_per_layer(x), by_sort)


def test_pvalues_are_uniform_under_the_null_and_small_off_it():
    rng = np.random.default_rng(0)
    masf = MaSF().fit(rng.normal(size=(3000, 3, 32)))
    p = masf.pvalues(rng.normal(size=(1000, 3, 32)))
    assert kstest(p, "uniform").statistic < 0.06, "fresh in-distribution inputs give ~U(0,1) p-values"
    assert 0.02 < np.mean(p < 0.05) < 0.09
    far = masf.pvalues(rng.normal(size=(200, 3, 32)) * 3.0)
    assert np.mean(far < 0.05) > 0.9, "inputs far from the calibration data get small p-values"
    assert 0 < masf.pvalues(rng.normal(size=(5, 3, 32))).min() <= 1, "conformal p-values are never 0"
    assert MaSF.dataset_pvalue(far) < 0.05


def test_bad_shapes_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 30"):
        MaSF().fit(rng.normal(size=(10, 2, 4)))
    masf = MaSF().fit(rng.normal(size=(60, 2, 4)))
    with pytest.raises(ValueError, match="do not match"):
        masf.pvalues(rng.normal(size=(3, 2, 5)))


def test_features_ignore_padding(toy_classifier):
    short = toy_classifier.batch(["the movie was good"])
    padded = toy_classifier.batch(["the movie was good", "the movie was really very very good and fun"])
    a = hidden_state_features(toy_classifier, short)[0]
    b = hidden_state_features(toy_classifier, padded)[0]
    assert a.shape == (3, 128)  # embeddings + 2 layers, hidden 128
    assert torch.allclose(a, b, atol=1e-5), "max-pooling never looks at padding"


def test_fit_store_and_reload_on_a_checkpoint(toy_classifier, models_cache):
    save_classifier(toy_classifier, "toy-masf")
    masf = fit_masf(toy_classifier)
    assert (toy_classifier.folder / "masf.safetensors").is_file() and (toy_classifier.folder / "masf.json").is_file()
    again = load_masf(toy_classifier)
    batch = toy_classifier.batch(["the plot was dull", "this film was great"])
    assert np.array_equal(masf_pvalues(toy_classifier, masf, batch), masf_pvalues(toy_classifier, again, batch))
    masked = masf_pvalues(toy_classifier, again, mask_all_primary(batch, toy_classifier.mask_token_id))
    assert ((masked > 0) & (masked <= 1)).all()


def test_a_sweep_fits_each_missing_masf_once_and_leaves_no_partial_files(toy_classifier, models_cache):
    """Parallel workers must not each fit (and half-write) the same MaSF: the sweep fits it up front, and a fit
    is written under a temporary name and renamed, so only whole files are ever visible."""
    from engine.faithfulness.benchmark import ensure_masf

    save_classifier(toy_classifier, "toy-ensure")
    folder = models_cache / "toy-ensure"
    ensure_masf(["toy-ensure", "no-such-model"])  # a missing checkpoint is left for its cells to report
    fitted = (folder / "masf.safetensors").stat()
    assert (folder / "masf.json").is_file() and not list(folder.glob("*.tmp"))
    ensure_masf(["toy-ensure"])
    again = (folder / "masf.safetensors").stat()
    assert (again.st_ino, again.st_mtime_ns) == (fitted.st_ino, fitted.st_mtime_ns), "a stored fit is not redone"


def test_one_forward_gives_the_logits_and_pvalues_of_two(toy_classifier):
    """Recursive masking takes a step's logits and MaSF features from one forward: they equal, bit for bit, the
    logits of Classifier.logits and the p-values of a separate MaSF pass (so curves written before the change
    reproduce), on a padded batch with masked tokens."""
    from engine.faithfulness.recursive import _observe
    from engine.ood import logits_and_features

    masf = fit_masf(toy_classifier, save=False)
    batch = toy_classifier.batch(["the movie was good", "the plot was dull and far too long for what it had to say"])
    batch = batch.with_ids(torch.where(batch.maskable & (torch.arange(batch.input_ids.shape[1], device=batch.device) % 3 == 0),
                                       torch.full_like(batch.input_ids, toy_classifier.mask_token_id), batch.input_ids))
    with torch.no_grad():
        separate = toy_classifier.logits(batch)
        # The features computed on their own, as MaSF defines them: every hidden state, max over non-PAD tokens.
        states = toy_classifier.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                      token_type_ids=batch.token_type_ids, output_hidden_states=True).hidden_states
        real = batch.attention_mask.bool()
        own = torch.stack([torch.stack([layer[i][real[i]].amax(0) for layer in states]) for i in range(len(batch))]).double()
    fused, features = logits_and_features(toy_classifier, batch)
    assert torch.equal(fused, separate)
    assert torch.equal(features, own)
    target = torch.tensor([1, 0], device=batch.device)
    prob, logit, predicted, p_value = _observe(toy_classifier, batch, target, masf)
    assert np.array_equal(p_value, masf.pvalues(own))
    assert np.array_equal(logit, separate.float()[[0, 1], target].cpu().numpy())
    assert np.array_equal(prob, torch.softmax(separate.float(), -1)[[0, 1], target].cpu().numpy())
