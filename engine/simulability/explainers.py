"""Explanations as distributions over tokens: the learned head-weighted explainer of SMaT, the static
teacher explainers it is compared with, and the KL regulariser that scaffolds a student with them.

Every explanation here is e [B, T], a probability distribution over a row's tokens (0 on padding).
- Head-weighted (SMaT): lambda = sparsemax(phi) over the H heads, e = softmax_j(sum_h lambda_h s^h_j) over
  the non-pad tokens ([CLS] and [SEP] included). phi starts at 1/H, so lambda is uniform and e is
  "attention, all layers" (logits averaged, not probabilities).
- attention-all / attention-last: the same with lambda fixed uniform over all heads / the last layer's heads.
- grad-l2, x-grad-sign, ig-sign: the project's measures (engine.importance), softmax over the *maskable*
  tokens: the measures score only those (special tokens, padding and a bAbI question get 0 probability).
  The raw scores go into the softmax unscaled, as in SMaT.
- oracle: uniform over the tokens of the gold rationale (bAbI supporting facts); random: softmax of N(0, 1)
  scores over the non-pad tokens, fixed per example and seed. Controls, not explainers of the teacher.
"""
from __future__ import annotations

import torch
from entmax import sparsemax
from torch import nn

from engine.errors import InvalidInputError
from engine.importance.head_scores import head_weighted, masked_softmax

CLIP = 1e-7  # probabilities are clipped to [CLIP, 1 - CLIP] inside the KL (SMaT)

#: explainer id -> (family, default beta). Family decides beta: 5 for attention, 0.2 for gradients (SMaT).
EXPLAINERS = {
    "none": ("none", 0.0),
    "grad-l2": ("gradient", 0.2),
    "x-grad-sign": ("gradient", 0.2),
    "ig-sign": ("gradient", 0.2),
    "attention-all": ("attention", 5.0),
    "attention-last": ("attention", 5.0),
    "smat": ("attention", 5.0),
    "oracle": ("attention", 5.0),
    "random": ("attention", 5.0),
}
MEASURE_EXPLAINERS = ("grad-l2", "x-grad-sign", "ig-sign")  # computed by engine.importance measures


def check_explainer(name: str) -> str:
    if name not in EXPLAINERS:
        raise InvalidInputError(f"unknown teacher explainer {name!r}; use one of {', '.join(EXPLAINERS)}")
    return name


def uniform_weights(n_heads: int, heads: slice | None = None, dtype=torch.float32) -> torch.Tensor:
    """lambda [H]: uniform over all heads, or over `heads` only (e.g. the last layer's)."""
    w = torch.zeros(n_heads, dtype=dtype)
    w[heads if heads is not None else slice(None)] = 1.0
    return w / w.sum()


class HeadWeights(nn.Module):
    """Learned head coefficients phi [H]; lambda = sparsemax(phi) (entmax's sparsemax: exact zeros).

    phi starts at 1/H, so lambda starts uniform and the explainer equals attention-all."""

    def __init__(self, n_heads: int):
        super().__init__()
        if n_heads < 1:
            raise InvalidInputError(f"a head-weighted explainer needs at least one head, got {n_heads}")
        self.phi = nn.Parameter(torch.full((n_heads,), 1.0 / n_heads))

    def weights(self) -> torch.Tensor:
        """lambda [H] on the simplex, many entries exactly 0 once phi spreads."""
        return sparsemax(self.phi, dim=-1)

    def forward(self, scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """e [B, T] from head scores [B, H, T]."""
        return head_weighted(scores, self.weights(), attention_mask)


def explanation_kl(e_teacher: torch.Tensor, e_student: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """KL(e_T || e_S) = sum_j e_T,j (log e_T,j - log e_S,j) over non-pad tokens, probabilities clipped to
    [1e-7, 1 - 1e-7], mean over the batch (a scalar, in nats)."""
    t = e_teacher.clamp(CLIP, 1 - CLIP)
    s = e_student.clamp(CLIP, 1 - CLIP)
    per_token = t * (t.log() - s.log())
    return (per_token * attention_mask.to(per_token.dtype)).sum(-1).mean()


def measure_distribution(scores: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """A measure's scores [B, T] (0 off `maskable`) as a softmax over the maskable tokens."""
    return masked_softmax(scores.to(torch.float32), maskable.bool())


def rationale_distribution(rationale: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Uniform over the rationale tokens of each row (rationale [B, T] bool); rows without one: uniform over
    non-pad tokens."""
    keep = rationale.bool() & attention_mask.bool()
    empty = ~keep.any(1, keepdim=True)
    keep = torch.where(empty, attention_mask.bool(), keep)
    return keep.float() / keep.float().sum(1, keepdim=True)


def random_distribution(attention_mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """softmax of N(0, 1) scores over the non-pad tokens (a control explainer with no information)."""
    noise = torch.randn(attention_mask.shape, generator=generator)
    return masked_softmax(noise, attention_mask.bool())
