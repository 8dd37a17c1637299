"""The student's data with what the frozen teacher contributes, computed once: `SimSplit`.

N examples, T padded tokens, H teacher heads. Every tensor lives on the CPU; `rows(index)` cuts a
mini-batch and trims the columns that are padding in every row of it (right padding: nothing changes).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch


@dataclass
class SimSplit:
    """input_ids, attention_mask, token_type_ids [N, T] long; maskable [N, T] bool (the primary text's
    non-special tokens); teacher_pred [N] long: the teacher's predicted class, the student's label;
    teacher_scores [N, H, T] float or None: the teacher's per-head scores (training examples, and the
    examples whose plausibility is measured); explanations: explainer id -> e_T [N, T] (static explainers);
    rationale [N, T] bool or None: gold rationale tokens (bAbI supporting facts); uids: example ids."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    maskable: torch.Tensor
    teacher_pred: torch.Tensor
    teacher_scores: torch.Tensor | None = None
    explanations: dict[str, torch.Tensor] = field(default_factory=dict)
    rationale: torch.Tensor | None = None
    uids: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, index) -> SimSplit:
        """Rows `index` (a list or a long tensor), trimmed to their longest row."""
        idx = torch.as_tensor(index, dtype=torch.long)
        T = max(1, int(self.attention_mask[idx].sum(1).max()))
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "explanations":
                out[f.name] = {k: v[idx, :T] for k, v in value.items()}
            elif f.name == "uids":
                out[f.name] = [value[i] for i in idx.tolist()] if value else []
            elif value is None:
                out[f.name] = None
            elif value.ndim == 1:
                out[f.name] = value[idx]
            else:
                out[f.name] = value[idx][..., :T]
        return SimSplit(**out)

    def model_inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.input_ids, self.attention_mask, self.token_type_ids
