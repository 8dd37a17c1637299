"""SmoothGrad / SquareGrad / VarGrad (captum NoiseTunnel over input x gradient) and value zeroing (Mohebbi et al.
2023, whole-model readout): the properties that pin each down (engine/importance/noise_tunnel.py, value_zeroing.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from handbuilt_models import EmbeddingModule

from engine.importance import MEASURES, applicable_measures, get_explainer
from engine.models import Batch, Classifier

pytestmark = pytest.mark.usefixtures("one_thread")
TEXTS = ["a gripping and funny film", "dull"]


def _batch(clf):
    return clf.batch(TEXTS)


def test_smoothgrad_without_noise_is_input_x_gradient(toy_classifier):
    """noise 0: every noisy copy is the input itself, so the mean of input x gradient is x-grad-sign (float32 product
    in captum, float64 in the project: equal to rounding)."""
    b = _batch(toy_classifier)
    smooth = get_explainer("smoothgrad", toy_classifier, noise=0.0, n_samples=3).attribute(b, 1).scores
    xgrad = get_explainer("x-grad-sign", toy_classifier).attribute(b, 1).scores
    torch.testing.assert_close(smooth, xgrad, atol=1e-6, rtol=1e-5)
    assert smooth[b.maskable].abs().max() > 0


def test_vargrad_without_noise_is_zero_and_squaregrad_is_the_square(toy_classifier):
    """noise 0: no variance between identical copies (VarGrad 0); SquareGrad is sum_h (e_h g_h)^2 of the gradient."""
    b = _batch(toy_classifier)
    var = get_explainer("vargrad", toy_classifier, noise=0.0, n_samples=4).attribute(b, 1).scores
    assert var.abs().max() < 1e-10
    square = get_explainer("squaregrad", toy_classifier, noise=0.0, n_samples=2).attribute(b, 1).scores
    e = toy_classifier.word_embeddings(b.input_ids).detach().double()
    g = get_explainer("x-grad-sign", toy_classifier)
    from engine.importance.types import Call

    _, grad = g._gradient(Call(batch=b, target=torch.tensor([1, 1]), logits=None, progress=None, should_stop=None))
    expected = ((e * grad.double()) ** 2).sum(-1).masked_fill(~b.maskable, 0.0).float()
    torch.testing.assert_close(square, expected, atol=1e-7, rtol=1e-4)


def test_noise_draws_are_seeded_and_change_the_scores(toy_classifier):
    b = _batch(toy_classifier)

    def run(seed):
        return get_explainer("smoothgrad", toy_classifier, noise=0.2, n_samples=5, seed=seed, memo=False).attribute(b, 1).scores

    first, again, other = run(0), run(0), run(1)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    var = get_explainer("vargrad", toy_classifier, noise=0.2, n_samples=5).attribute(b, 1).scores
    assert (var[b.maskable] > 0).all() and (var[~b.maskable] == 0).all()


def test_bad_noise_options_are_refused():
    from engine.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="noise"):
        MEASURES["smoothgrad"](SimpleNamespace(), noise=-0.1)
    with pytest.raises(InvalidInputError, match="n_samples"):
        MEASURES["vargrad"](SimpleNamespace(), n_samples=0)


# -- value zeroing ------------------------------------------------------------------------------------------------
REACH, VALUE = 0, 1


class _SelfAttention(torch.nn.Module):
    """One head: [CLS] (position 0) attends uniformly to the tokens whose REACH feature is 1 (a -inf score for the
    others), through a value projection named as BERT's (`...attention.self.value`)."""

    def __init__(self):
        super().__init__()
        self.value = torch.nn.Linear(2, 1, bias=False, dtype=torch.float64)
        with torch.no_grad():
            self.value.weight.copy_(torch.tensor([[0.0, 1.0]], dtype=torch.float64))

    def forward(self, e, real):
        v = self.value(e)  # [B, T, 1]
        score = torch.where((e[..., REACH] > 0) & (real > 0), 0.0, float("-inf"))
        a = torch.softmax(score, dim=1)
        return (a[..., None] * v).sum(1)  # [B, 1]: the [CLS] output


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.Module()
        self.attention.self = _SelfAttention()


class _Reach(EmbeddingModule):
    """logit_1 = 2 * (the [CLS] output) + the count of all real tokens' VALUE feature through a path that is not
    attention (their own states): a token of REACH 0 moves the logit, but not through any value vector."""

    def __init__(self):
        super().__init__(torch.tensor([[0, 0], [0, 0], [0, 0], [0, 0], [1, 1.0], [0, 1.0], [1, 3.0]],
                                      dtype=torch.float64))
        self.layer = torch.nn.ModuleList([_Layer()])

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_attentions=False, output_hidden_states=False):
        e = self.embedded(input_ids, inputs_embeds)
        real = attention_mask.to(e.dtype)
        cls = self.layer[0].attention.self(e, real)  # [B, 1]
        logit = 2 * cls[:, 0] + (e[..., VALUE] * real).sum(1)
        hidden = torch.cat([cls, logit[:, None]], 1)[:, None, :].expand(-1, e.shape[1], -1)
        return SimpleNamespace(logits=torch.stack([torch.zeros_like(logit), logit], 1), attentions=None,
                               hidden_states=(e, hidden) if output_hidden_states else None)


def _reach_classifier():
    clf = Classifier(_Reach(), SimpleNamespace(mask_token_id=1, pad_token_id=0), ("neg", "pos"), max_length=16)
    clf.metadata["id"] = "handbuilt-reach"
    ids = torch.tensor([[2, 4, 5, 6, 3]])  # [CLS] reached(1) unreached(1) reached(3) [SEP]
    maskable = ids >= 4
    batch = Batch(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                  segments=maskable.long(), maskable=maskable, target=None, truncated=torch.zeros(1, dtype=torch.bool),
                  offsets=[[(0, 0)] * 5])
    return clf, batch


def test_value_zeroing_gives_zero_to_a_token_no_head_reads_and_the_exact_drop_to_the_others():
    """The [CLS] output is the mean value (VALUE feature) of the two reached tokens, (1 + 3) / 2 = 2, times 2 in the
    logit. Zeroing the first's value makes it (0 + 3) / 2: the logit drops by 1; the second's: (1 + 0) / 2, a drop of 3.
    The unreached token's value vector is read by no head: 0 exactly, though removing the token itself would move the
    logit by 1 (its own state: loo-sign says 1)."""
    clf, batch = _reach_classifier()
    sign = get_explainer("value-zeroing-sign", clf).attribute(batch, 1).token_scores(0)
    torch.testing.assert_close(sign.double(), torch.tensor([1.0, 0.0, 3.0], dtype=torch.float64))
    cosine = get_explainer("value-zeroing", clf).attribute(batch, 1).token_scores(0)
    assert float(cosine[1]) == 0.0 and (cosine[[0, 2]] > 0).all()
    loo = get_explainer("loo-sign", clf).attribute(batch, 1).token_scores(0)
    assert float(loo[1]) == pytest.approx(1.0)


def test_value_zeroing_equals_a_forward_that_zeroes_the_values_by_hand(toy_classifier):
    """On the tiny BERT: for each token t, one forward at a time whose every value projection's output is replaced
    at position t by zeros (a module swapped in by hand, not the measure's hook): the logit drop and the [CLS] cosine
    distance match the batched measure."""
    b = toy_classifier.batch(TEXTS[:1])
    sign = get_explainer("value-zeroing-sign", toy_classifier).attribute(b, 1).token_scores(0).double()
    cosine = get_explainer("value-zeroing", toy_classifier).attribute(b, 1).token_scores(0).double()
    layers = toy_classifier.model.bert.encoder.layer

    class Zeroed(torch.nn.Module):
        def __init__(self, inner, position):
            super().__init__()
            self.inner, self.position = inner, position

        def forward(self, x):
            out = self.inner(x).clone()
            out[:, self.position] = 0
            return out

    def run():
        with torch.no_grad():
            out = toy_classifier.model(input_ids=b.input_ids, attention_mask=b.attention_mask,
                                       token_type_ids=b.token_type_ids, output_hidden_states=True)
        return float(out.logits[0, 1]), out.hidden_states[-1][0, 0].double()

    logit, cls = run()
    positions = b.maskable[0].nonzero().flatten().tolist()
    for k, t in enumerate(positions):
        originals = [layer.attention.self.value for layer in layers]
        try:
            for layer, inner in zip(layers, originals):
                layer.attention.self.value = Zeroed(inner, t)
            zlogit, zcls = run()
        finally:
            for layer, inner in zip(layers, originals):
                layer.attention.self.value = inner
        assert float(sign[k]) == pytest.approx(logit - zlogit, abs=1e-5)
        distance = 1 - torch.nn.functional.cosine_similarity(cls, zcls, dim=0)
        assert float(cosine[k]) == pytest.approx(float(distance), abs=1e-5)


def test_value_zeroing_is_offered_for_encoders_only(toy_classifier):
    assert {"value-zeroing", "value-zeroing-sign", "smoothgrad", "squaregrad", "vargrad"} <= set(
        applicable_measures(toy_classifier))
    from handbuilt_models import handbuilt  # no attention value projection

    ok, why = get_explainer("value-zeroing", handbuilt("and")).supports()
    assert not ok and "value projection" in why


def test_the_new_measures_are_listed_by_explain_help():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "engine", "explain", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for name in ("smoothgrad", "squaregrad", "vargrad", "value-zeroing", "value-zeroing-sign", "shapley-interactions"):
        assert f"  {name} " in out, name
