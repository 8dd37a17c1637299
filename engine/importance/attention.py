"""Attention weights as importance: what exactly is computed is stated per measure.

Transformers (need eager attention, which `Classifier.forward` switches to for forwards that ask for them,
so that `output_attentions=True` returns the softmax weights A_l [B, heads, T, T], query x key). "CLS" is
the position the classifier head reads: [CLS] (position 0) for encoders, the last real token for decoder
classifiers (GPT-2, Llama), whose causal attention row 0 sees only the first token:
  attention-cls-last   A_L[CLS -> t] of the last layer, averaged over heads
  attention-mean       A_l[CLS -> t] averaged over heads and over all L layers
  attention-rollout    Abnar & Zuidema (2020): R = Ã_L ... Ã_1 with Ã_l = (mean_heads A_l + I) / 2
                       (rows still sum to 1), importance = R[CLS -> t]
BiLSTM-attention (R-ROAR App. C.1):
  attention            the additive attention alpha_t the model itself applies (exact)
All three share one forward per batch. Attention weights do not depend on the target class (the target is
still recorded). Unit: attention probability (rows of A sum to 1 over all tokens, special tokens included,
so the scores on maskable tokens sum to less than 1); unsigned.
"""
from __future__ import annotations

import torch

from engine.errors import InvalidInputError
from engine.importance.explainer import Explainer, PassEstimate
from engine.importance.registry import register
from engine.importance.types import Call


def is_bilstm(classifier) -> bool:
    from engine.models.bilstm import BiLSTMAttentionClassifier

    return isinstance(classifier.model, BiLSTMAttentionClassifier)


#: Bytes of the float64 copy of attention weights made at a time when averaging heads.
HEAD_MEAN_BYTES = 64 * 2**20


def _head_mean(a: torch.Tensor) -> torch.Tensor:
    """Mean over heads of attention weights a [B, heads, T, T], in float64: [B, T, T]. The float64 copy is
    made a few rows at a time (at most HEAD_MEAN_BYTES), not of the whole [B, heads, T, T]; each row is
    averaged by the same kernel as before, so the result is the same bit for bit."""
    B, heads, T, _ = a.shape
    rows = max(1, HEAD_MEAN_BYTES // max(heads * T * T * 8, 1))
    if rows >= B:
        return a.to(torch.float64).mean(1)
    out = torch.empty(B, T, T, dtype=torch.float64, device=a.device)
    for start in range(0, B, rows):
        torch.mean(a[start:start + rows].to(torch.float64), 1, out=out[start:start + rows])
    return out


def attention_summaries(attentions, query: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """From per-layer attentions [B, heads, T, T] (query x key): the three [B, T] summaries.

    query [B] long: the position read by the classifier head, whose attention row is summarised: 0 ([CLS])
    for encoders (the default), the last real token for decoder classifiers (`Classifier.pooled_positions`)."""
    layers = [_head_mean(a) for a in attentions]  # L x [B, T, T], heads averaged
    B = layers[0].shape[0]
    rows = torch.arange(B, device=layers[0].device)
    q = torch.zeros(B, dtype=torch.long, device=rows.device) if query is None else query.to(rows.device)
    cls_last = layers[-1][rows, q, :]
    cls_mean = torch.stack([a[rows, q, :] for a in layers]).mean(0)
    T = layers[0].shape[-1]
    eye = torch.eye(T, dtype=torch.float64, device=layers[0].device)
    rollout = None
    for a in layers:
        a_res = 0.5 * a + 0.5 * eye
        a_res = a_res / a_res.sum(-1, keepdim=True)
        rollout = a_res if rollout is None else a_res @ rollout
    return {"attention-cls-last": cls_last, "attention-mean": cls_mean, "attention-rollout": rollout[rows, q, :]}


class _TransformerAttention(Explainer):
    bf16_ok = True  # rankings within tolerance under bf16 autocast (bench/importance.py --bf16-agreement)

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=1)

    def supports(self) -> tuple[bool, str]:
        if is_bilstm(self.classifier):
            return False, "a BiLSTM has no [CLS] attention layers: use the measure 'attention' (its additive attention)"
        return self.classifier.attention_weights_available()  # forwards with attentions switch to eager

    def _scores(self, call: Call):
        def compute():
            b = call.batch
            with torch.no_grad(), self.autocast():
                out = self.classifier.forward(input_ids=b.input_ids, attention_mask=b.attention_mask,
                                              token_type_ids=b.token_type_ids, output_attentions=True)
            atts = out.attentions
            if not atts or any(a is None for a in atts):
                raise InvalidInputError("the model returned no attention weights: it must run with attn_implementation='eager'")
            return attention_summaries(atts, self.classifier.pooled_positions(b.attention_mask))
        return self._shared(("attention",), compute, call)[self.name], {}


@register
class AttentionClsLast(_TransformerAttention):
    """attention-cls-last: last-layer attention from [CLS] to each token, averaged over heads."""

    name = "attention-cls-last"
    cost_tier = 0


@register
class AttentionMean(_TransformerAttention):
    """attention-mean: attention from [CLS] to each token, averaged over heads and over all layers."""

    name = "attention-mean"
    cost_tier = 0


@register
class AttentionRollout(_TransformerAttention):
    """attention-rollout: attention rollout (Abnar & Zuidema 2020), heads averaged, residual 0.5*I, [CLS] row."""

    name = "attention-rollout"
    cost_tier = 0


@register
class AdditiveAttention(Explainer):
    """attention: the BiLSTM-attention model's own additive attention alpha_t (exact; R-ROAR App. C.1)."""

    name = "attention"
    cost_tier = 0

    def passes(self, n_tokens: int) -> PassEstimate:
        return PassEstimate(forward=1)

    def supports(self) -> tuple[bool, str]:
        if not is_bilstm(self.classifier):
            return False, ("only BiLSTM-attention models have a single additive attention; for transformers use "
                           "attention-cls-last, attention-mean or attention-rollout")
        return True, ""

    def _scores(self, call: Call):
        b = call.batch
        with torch.no_grad():
            out = self.classifier.model(input_ids=b.input_ids, attention_mask=b.attention_mask,
                                        token_type_ids=b.token_type_ids, output_attentions=True)
        return out.attentions[0], {}
