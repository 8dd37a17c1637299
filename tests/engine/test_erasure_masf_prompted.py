"""On a prompted LM, the erasure metrics give every perturbed input the MaSF features MaSF was calibrated on: hidden
states pooled from the input slot on (engine.ood.features.masf_pooled_mask), not over the whole prompt, whose
instruction before the slot is the same for every input. Before this was so, the erasure metrics pooled the
instruction too, and on the planted SmolLM2 every perturbed input of every judge was called out of distribution."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from test_selfexplain import bert_tokenizer, prompted  # noqa: F401 (bert_tokenizer: the fixture)

from engine.data.types import Example
from engine.faithfulness.erasure import erasure_metrics
from engine.ood.features import logits_and_features, pool_start


class _Fingerprint:
    """A MaSF stand-in whose 'p-value' is a fingerprint of the features it is given (their sum per input)."""

    def pvalues(self, feats) -> np.ndarray:
        return torch.as_tensor(feats).double().sum(dim=(1, 2)).numpy()


@pytest.mark.parametrize("removal", ["mask", "delete"])
def test_the_unperturbed_inputs_features_are_those_masf_was_calibrated_on(bert_tokenizer, removal):  # noqa: F811
    clf = prompted(bert_tokenizer)
    batch = clf.batch_of([Example(primary="a gripping , funny and moving film", label=1, uid="a"),
                          Example(primary="dull and far too long", label=0, uid="b")])
    assert bool((~batch.maskable & batch.attention_mask.bool()).any()), "the prompt has tokens outside the slot"
    scores = torch.randn(batch.input_ids.shape, generator=torch.Generator().manual_seed(0))
    result = erasure_metrics(clf, batch, scores, metrics=["comprehensiveness"], masf=_Fingerprint(), removal=removal)
    calibrated = _Fingerprint().pvalues(logits_and_features(clf, batch)[1])
    np.testing.assert_allclose(result.p_value_input, calibrated, rtol=1e-6)


def test_the_pooled_positions_start_at_the_slot_for_a_prompted_lm_and_nowhere_else(bert_tokenizer, known_classifier):  # noqa: F811
    clf = prompted(bert_tokenizer)
    batch = clf.batch_of([Example(primary="a fine film", label=1, uid="a")])
    start = pool_start(clf, batch.maskable)
    assert int(start[0]) == int(batch.maskable[0].float().argmax()) > 0
    encoder, _ = known_classifier([0.5])
    assert pool_start(encoder, batch.maskable) is None  # an encoder pools every real token


def test_f_fidelity_pools_a_prompted_lms_features_like_the_calibration_too(bert_tokenizer):  # noqa: F811
    from engine.faithfulness.ffidelity import ffidelity

    clf = prompted(bert_tokenizer)
    batch = clf.batch_of([Example(primary="a gripping , funny and moving film", label=1, uid="a")])
    scores = torch.randn(batch.input_ids.shape, generator=torch.Generator().manual_seed(1))
    result = ffidelity(clf, batch, scores, masf=_Fingerprint(), draws=2)
    calibrated = _Fingerprint().pvalues(logits_and_features(clf, batch)[1])
    np.testing.assert_allclose(result.p_value_input, calibrated, rtol=1e-6)
