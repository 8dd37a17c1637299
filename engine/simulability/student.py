"""The student of SMaT: a pretrained encoder with scalar mixing (Peters et al. 2018), a fresh linear head and
its own head-weighted explainer (docs/methods.md#plausibility-and-simulability).

Pooling: p_l = masked mean over non-pad tokens of hidden_states[l] for the embedding output and every layer
(L + 1 vectors); pooled = gamma * sum_l softmax(w)_l p_l with w initialised to 0 and gamma to 1; then
dropout and a linear head. The forward also returns the student's explanation, from per-head scores recomputed
from the hidden states with the layers' own query/key projections, so `torch.func.functional_call` with
look-ahead weights differentiates through them.
"""
from __future__ import annotations

import torch
from torch import nn

from engine.errors import NotApplicableError
from engine.importance.head_scores import head_count, head_scores
from engine.simulability.explainers import HeadWeights


class ScalarMix(nn.Module):
    """gamma * sum_l softmax(w)_l x_l over L + 1 pooled vectors [B, hidden]; w = 0, gamma = 1 at start."""

    def __init__(self, n_inputs: int):
        super().__init__()
        self.mix_logits = nn.Parameter(torch.zeros(n_inputs))
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, pooled: list[torch.Tensor]) -> torch.Tensor:
        weights = torch.softmax(self.mix_logits, 0)
        return self.gamma * sum(w * p for w, p in zip(weights, pooled))


class Student(nn.Module):
    """encoder (a transformers BERT-like `AutoModel`, eager attention) + ScalarMix + dropout + Linear head,
    plus `explainer`: the student's own HeadWeights phi_S [H_S], trained with it.

    forward(input_ids, attention_mask, token_type_ids, explain) -> (logits [B, C], e_S [B, T] or None): e_S is
    the student's explanation softmax_j(sum_h sparsemax(phi_S)_h s^h_j), computed inside `forward` so that
    `functional_call` substitutes phi_S and the encoder weights alike."""

    def __init__(self, encoder: nn.Module, num_classes: int, dropout: float | None = None):
        super().__init__()
        if getattr(encoder.config, "_attn_implementation", "eager") not in (None, "eager"):
            raise NotApplicableError("the student must run eager attention (fused kernels have no double backward)")
        self.encoder = encoder
        layers, heads = head_count(encoder)
        self.layers, self.heads = layers, heads
        hidden = int(encoder.config.hidden_size)
        self.mix = ScalarMix(layers + 1)
        p = encoder.config.hidden_dropout_prob if dropout is None else dropout
        self.dropout = nn.Dropout(p)
        self.head = nn.Linear(hidden, num_classes)
        self.explainer = HeadWeights(layers * heads)

    @property
    def n_heads(self) -> int:
        return self.layers * self.heads

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                explain: bool = True):
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                           output_hidden_states=True)
        hidden = out.hidden_states
        mask = attention_mask.to(hidden[0].dtype)[..., None]
        count = mask.sum(1).clamp_min(1.0)
        pooled = [(h * mask).sum(1) / count for h in hidden]
        logits = self.head(self.dropout(self.mix(pooled)))
        if not explain:
            return logits, None
        return logits, self.explainer(head_scores(self.encoder, hidden, attention_mask), attention_mask)


def new_student(source: str, num_classes: int, seed: int, pretrained: bool = True, config_overrides: dict | None = None,
                dtype: torch.dtype = torch.float32) -> Student:
    """A student from an encoder folder (`engine.models.resolve_encoder`): pretrained weights (SMaT) or a
    random initialisation of the same configuration; the head is seeded with `seed`."""
    from transformers import AutoConfig, AutoModel

    from engine.models.loading import load_pretrained
    from engine.runtime import configure

    configure()  # quiet load reports
    torch.manual_seed(seed)
    if pretrained:
        # Safetensors only (a folder with a pickled pytorch_model.bin is refused); eager attention, because the
        # look-ahead step differentiates twice and the fused kernels have no double backward; float32 weights.
        encoder, _ = load_pretrained(AutoModel, source, dtype="float32", need_weights=True, add_pooling_layer=False)
    else:
        config = AutoConfig.from_pretrained(source, **(config_overrides or {}))
        config._attn_implementation = "eager"
        encoder = AutoModel.from_config(config, add_pooling_layer=False)
    return Student(encoder, num_classes).to(dtype)
