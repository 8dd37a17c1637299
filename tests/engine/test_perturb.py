"""The perturbation kernel (engine/faithfulness/perturb.py) on a model whose outputs are known in closed form: every
perturbed row is forwarded once, whatever the pass size, with the logit of its remaining tokens and the MaSF p-value
of its own features; and the one MaSF feature path (engine/ood/features.py) pools what calibration pools."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.errors import MaskingCancelled
from engine.faithfulness import perturb
from engine.ood import MaSF

WEIGHTS = [2.0, 1.5, -0.5, 1.0, 0.25, -1.0, 0.5]


def _setup(known_classifier):
    classifier, batch_of = known_classifier(WEIGHTS)
    batch = batch_of([[4, 5, 6, 7, 8, 9, 10], [6, 4, 9], [10, 7, 5, 8]])
    g = torch.Generator().manual_seed(0)
    rows = torch.tensor([0, 0, 1, 2, 1, 0, 2, 2, 1, 0, 2])
    removed = (torch.rand(len(rows), batch.input_ids.shape[1], generator=g) < 0.4) & batch.maskable[rows]
    masf = MaSF().fit(np.random.default_rng(0).normal(size=(60, 1, 1)))
    return classifier, batch, rows, removed, masf


def _passes(classifier, batch, rows, removed, masf, removal="mask", **kwargs):
    pval = np.full(len(rows), np.nan)
    seen, logits = [], torch.empty(len(rows), 2, dtype=torch.float64)
    for sl, r, out in perturb.perturbed_passes(classifier, batch, rows, lambda sl: removed[sl], pval, masf, removal,
                                               **kwargs):
        assert torch.equal(r, rows[sl])
        seen.extend(range(sl.start, sl.stop))
        logits[sl] = out
    return seen, logits, pval


@pytest.mark.parametrize("removal", ["mask", "delete"])
def test_every_perturbed_row_is_forwarded_once_with_its_own_logit_and_pvalue_whatever_the_pass_size(
        known_classifier, monkeypatch, removal):
    """Passes of 1, 4 and all 11 rows (and p-values looked up 2 rows at a time) forward each row once, in order; a
    row's logit is the sum of the weights of the tokens it keeps (a removed token counts 0 as [MASK] and is gone when
    deleted), and its p-value is MaSF's of its own features: the max of its real positions' embeddings."""
    classifier, batch, rows, removed, masf = _setup(known_classifier)
    w = classifier.model.embed.weight[:, 0]
    kept = batch.attention_mask[rows].bool() & ~removed
    expected_logit = (w[batch.input_ids[rows]] * kept).sum(1)
    masked_ids = torch.where(removed, torch.ones_like(removed, dtype=torch.long), batch.input_ids[rows])
    pooled = batch.attention_mask[rows].bool() if removal == "mask" else kept
    features = w[masked_ids].masked_fill(~pooled, float("-inf")).amax(1)[:, None, None]
    expected_p = masf.pvalues(features)
    results = []
    for step in (1, 4, 11):
        monkeypatch.setattr(perturb, "PVALUE_ROWS", 2 if step == 1 else 1024)
        seen, logits, pval = _passes(classifier, batch, rows, removed, masf, removal, step=step)
        assert seen == list(range(len(rows)))
        assert torch.equal(logits[:, 1], expected_logit) and not logits[:, 0].any()
        assert np.array_equal(pval, expected_p)
        results.append((logits, pval))
    assert all(torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(results, results[1:]))


def test_the_passes_leave_the_pvalues_nan_without_a_masf_and_stop_when_asked(known_classifier):
    """Without a MaSF no p-value is looked up (NaN stays); a should_stop that says True raises MaskingCancelled with
    the caller's message before the next pass, and nothing of that pass is yielded."""
    classifier, batch, rows, removed, _ = _setup(known_classifier)
    seen, _, pval = _passes(classifier, batch, rows, removed, None, step=4)
    assert seen == list(range(len(rows))) and np.isnan(pval).all()
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(MaskingCancelled, match="the probe was cancelled"):
        _passes(classifier, batch, rows, removed, None, step=4, should_stop=stop, cancelled="the probe was cancelled")
    assert len(calls) == 3


def test_the_kernels_features_are_the_calibration_features(toy_classifier):
    """One MaSF feature path: the features the kernel's forward returns for unperturbed rows (all-padding columns cut,
    pooled by runs of equal length) are those calibration computes for the same batch (logits_and_features) and
    those of the definition, every hidden state's max over each row's real tokens, computed here on its own: within
    float32 rounding of the shorter forward."""
    from engine.data import get_dataset
    from engine.ood.features import logits_and_features

    batch = toy_classifier.batch_of(get_dataset("toy").split("test")[:6])
    order = torch.argsort(batch.attention_mask.sum(1), stable=True)
    batch = batch.select(order.tolist())
    assert len(set(batch.attention_mask.sum(1).tolist())) > 1  # rows of several lengths: padding to leave out
    with torch.no_grad():
        states = toy_classifier.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                      token_type_ids=batch.token_type_ids, output_hidden_states=True).hidden_states
    real = batch.attention_mask.bool()
    own = torch.stack([torch.stack([layer[i][real[i]].amax(0) for layer in states]) for i in range(len(batch))])
    _, calibration = logits_and_features(toy_classifier, batch)
    _, kernel = perturb.hidden_forward(toy_classifier, batch.attention_mask, batch.token_type_ids, ids=batch.input_ids)
    assert kernel.shape == calibration.shape == own.shape
    assert torch.equal(calibration, own.double().cpu())
    assert torch.allclose(kernel.double(), calibration, rtol=0, atol=1e-5)
