"""Per-head attention scores of a BERT-like encoder, recomputed from its hidden states so they stay
differentiable in every weight (SMaT, docs/methods.md#plausibility-and-simulability).

H = layers x heads, layer-major (head h of layer l is index l * heads + h). For head h with queries q_i and
keys k_j (d = head size):

    logits[b, h, i, j] = q_i . k_j / sqrt(d)        (the pre-softmax attention logits; pad keys -1e9)
    s[b, h, j]          = mean over non-pad queries i of logits[b, h, i, j]
                        = mean_i(q_i) . k_j / sqrt(d)

Softmax over j of `logits` is the attention the model itself applies under eager attention (tested). The
queries and keys are recomputed with each layer's own `query`/`key` projections from `hidden_states[l]` (the
input of layer l), so `torch.func.functional_call` with other weights gives the scores of those weights.
Fused attention kernels are never involved (they have no double backward).
"""
from __future__ import annotations

import torch
from torch import nn

from engine.errors import NotApplicableError

PAD_SCORE = -1e9  # the score of a padding key (exp underflows to 0 in a softmax)


def self_attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of each layer (with `query`, `key`, `attention_head_size`), bottom first.

    model: a transformers BERT-like model (`BertModel` or `...ForSequenceClassification`). Raises
    NotApplicableError for models without that structure (a BiLSTM)."""
    base = getattr(model, "base_model", model)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None:
        raise NotApplicableError(f"{type(model).__name__} has no BERT-like encoder layers: per-head attention "
                                 "scores need a transformer encoder with query/key projections")
    modules = []
    for layer in layers:
        attention = getattr(getattr(layer, "attention", None), "self", None)
        if attention is None or not hasattr(attention, "query") or not hasattr(attention, "key"):
            raise NotApplicableError(f"layer {type(layer).__name__} has no self-attention with query/key projections")
        modules.append(attention)
    return modules


def head_count(model: nn.Module) -> tuple[int, int]:
    """(layers, heads per layer) of a BERT-like model."""
    modules = self_attention_modules(model)
    return len(modules), int(modules[0].num_attention_heads)


def _queries_keys(attention: nn.Module, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k [B, heads, T, d] of one layer from its input hidden states [B, T, hidden]."""
    B, T, _ = hidden.shape
    d = int(attention.attention_head_size)
    q = attention.query(hidden).view(B, T, -1, d).transpose(1, 2)
    k = attention.key(hidden).view(B, T, -1, d).transpose(1, 2)
    return q, k


def attention_logits(model: nn.Module, hidden_states, attention_mask: torch.Tensor) -> torch.Tensor:
    """Pre-softmax attention logits [B, H, T, T] (query x key) of every head of every layer.

    hidden_states: the model's `hidden_states` output (L + 1 tensors [B, T, hidden]; index l is layer l's
    input); attention_mask [B, T] (1 = real token). Pad keys get PAD_SCORE."""
    keep = attention_mask.bool()[:, None, None, :]
    out = []
    for layer, attention in enumerate(self_attention_modules(model)):
        q, k = _queries_keys(attention, hidden_states[layer])
        logits = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5)
        out.append(logits.masked_fill(~keep, PAD_SCORE))
    return torch.cat(out, dim=1)


def head_scores(model: nn.Module, hidden_states, attention_mask: torch.Tensor) -> torch.Tensor:
    """Per-head token scores s [B, H, T]: the attention logits averaged over the non-pad queries.

    Computed as mean_i(q_i) . k_j / sqrt(d) (one matrix-vector product per head, not T x T). Pad keys get
    PAD_SCORE. Differentiable in the model's weights and in `hidden_states`."""
    mask = attention_mask.to(hidden_states[0].dtype)  # [B, T]
    n_queries = mask.sum(1).clamp_min(1.0)[:, None, None]  # [B, 1, 1]
    keep = attention_mask.bool()[:, None, :]
    out = []
    for layer, attention in enumerate(self_attention_modules(model)):
        q, k = _queries_keys(attention, hidden_states[layer])
        q_mean = (q * mask[:, None, :, None]).sum(2) / n_queries  # [B, heads, d]
        s = torch.einsum("bnd,bntd->bnt", q_mean, k) / (q.shape[-1] ** 0.5)
        out.append(s.masked_fill(~keep, PAD_SCORE))
    return torch.cat(out, dim=1)


@torch.no_grad()
def model_head_scores(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      token_type_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits [B, C], head scores [B, H, T]) of a frozen `...ForSequenceClassification` model in one
    forward (no gradient): what the teacher contributes, computed once per example."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                output_hidden_states=True)
    return out.logits, head_scores(model, out.hidden_states, attention_mask)


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis restricted to `keep` (bool, same shape); 0 elsewhere."""
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1).masked_fill(~keep, 0.0)


def head_weighted(scores: torch.Tensor, weights: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """e [B, T] = softmax over non-pad tokens of sum_h weights[h] * scores[b, h, t].

    scores [B, H, T] (pad keys hold a large negative number), weights [H] (on the simplex), attention_mask [B, T]."""
    mixed = torch.einsum("h,bht->bt", weights.to(scores.dtype), scores)
    return masked_softmax(mixed, attention_mask.bool())
