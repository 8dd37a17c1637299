"""DeepLift and GradientSHAP cost what captum's own call costs: their completeness check reads f_c(x), f_c(b) and
the per-sample gaps from the passes captum makes, instead of asking captum for its convergence delta (two more
forward passes for DeepLift, 2 x n_samples more forward rows for GradientSHAP), and what it reads equals captum's
delta."""
from __future__ import annotations

import pytest
import torch

from engine.importance import get_explainer

TEXTS = ["the movie was really good and fun", "this film was so dull"]


def _rows_forwarded(classifier, fn) -> list[int]:
    """The batch size of every forward of the classifier's model while fn() runs."""
    rows: list[int] = []
    handle = classifier.model.register_forward_hook(
        lambda _m, args, kwargs, _out: rows.append(int((kwargs.get("inputs_embeds") if kwargs.get("inputs_embeds")
                                                        is not None else kwargs["input_ids"]).shape[0])),
        with_kwargs=True)
    try:
        fn()
    finally:
        handle.remove()
    return rows


@pytest.mark.parametrize("measure, options, expected", [
    ("deeplift", {}, [2]),  # captum's one forward+backward of the input and the baseline, nothing else
    ("gradient-shap", {"n_samples": 6}, [6, 2]),  # captum's 6 path points, then f_c(x) and f_c(b)
])
def test_the_completeness_check_adds_no_pass_to_captums(toy_classifier, measure, options, expected):
    """Per input (explicit target, so no prediction pass), the model runs exactly the rows captum's own call runs
    (plus, for GradientSHAP, one 2-row forward of the endpoints): captum's convergence delta would add 2 forward
    rows (DeepLift) or 2 x n_samples (GradientSHAP)."""
    batch = toy_classifier.batch(TEXTS)
    explainer = get_explainer(measure, toy_classifier, memo=False, **options)
    rows = _rows_forwarded(toy_classifier, lambda: explainer.attribute(batch, 1))
    assert rows == expected * len(TEXTS)


def test_deeplift_scores_and_gap_equal_captums_attribution_and_delta(toy_classifier):
    """deeplift's scores are captum's DeepLift attributions summed over H, and its completeness gap is captum's
    convergence delta (sum of the attributions - (f_c(x) - f_c(b)), f_c from plain forwards) to 1e-5."""
    from captum.attr import DeepLift

    from engine.importance.captum_extras import EmbeddingForward

    batch = toy_classifier.batch(TEXTS)
    imp = get_explainer("deeplift", toy_classifier, memo=False).attribute(batch, 1)
    mask_emb = toy_classifier.word_embeddings(torch.tensor([[toy_classifier.mask_token_id]], device=batch.device))
    for i in range(len(TEXTS)):
        L = int(batch.attention_mask[i].sum())
        e = toy_classifier.word_embeddings(batch.input_ids[i:i + 1, :L]).detach()
        base = torch.where(batch.maskable[i:i + 1, :L, None], mask_emb.detach(), e)
        args = (batch.attention_mask[i:i + 1, :L], batch.token_type_ids[i:i + 1, :L])
        with torch.enable_grad():
            attr, delta = DeepLift(EmbeddingForward(toy_classifier)).attribute(
                e, baselines=base, target=1, additional_forward_args=args, return_convergence_delta=True)
        torch.testing.assert_close(imp.scores[i, :L], attr[0].sum(-1).detach().float().cpu(), atol=1e-5, rtol=0)
        assert abs(float(imp.extras["completeness_gap"][i]) - float(delta[0])) < 1e-5


def test_gradient_shap_allowed_gap_equals_the_one_from_captums_deltas(toy_classifier):
    """gradient-shap's allowed gap (3 standard errors of the per-sample gaps, at least 0.01) is the one captum's
    own per-sample convergence deltas give, with the same seeded draws; the scores are captum's."""
    from captum.attr import GradientShap

    from engine.importance.captum_extras import EmbeddingForward, seeded_rngs
    from engine.importance.completeness import ABSOLUTE_TOLERANCE, GRADIENT_SHAP_STANDARD_ERRORS
    from engine.importance.random_baseline import row_seed

    n = 8
    batch = toy_classifier.batch(TEXTS)
    imp = get_explainer("gradient-shap", toy_classifier, memo=False, n_samples=n, seed=5).attribute(batch, 1)
    mask_emb = toy_classifier.word_embeddings(torch.tensor([[toy_classifier.mask_token_id]], device=batch.device))
    for i in range(len(TEXTS)):
        L = int(batch.attention_mask[i].sum())
        ids = batch.input_ids[i:i + 1, :L]
        e = toy_classifier.word_embeddings(ids).detach()
        base = torch.where(batch.maskable[i:i + 1, :L, None], mask_emb.detach(), e)
        args = (batch.attention_mask[i:i + 1, :L], batch.token_type_ids[i:i + 1, :L])
        with seeded_rngs(row_seed(5, ids), batch.device), torch.enable_grad():
            attr, deltas = GradientShap(EmbeddingForward(toy_classifier)).attribute(
                e, baselines=base, target=1, additional_forward_args=args, n_samples=n, return_convergence_delta=True)
        torch.testing.assert_close(imp.scores[i, :L], attr[0].sum(-1).detach().float().cpu(), atol=1e-6, rtol=0)
        deltas = deltas.detach().double().cpu()
        assert float(deltas.std()) > 1e-3, "the test needs samples whose gaps differ"
        expected = max(GRADIENT_SHAP_STANDARD_ERRORS * float(deltas.std(unbiased=True)) / n ** 0.5, ABSOLUTE_TOLERANCE)
        assert float(imp.extras["allowed_gap"][i]) == pytest.approx(expected, abs=1e-6)
        assert abs(float(imp.extras["completeness_gap"][i]) - float(deltas.mean())) < 1e-5
