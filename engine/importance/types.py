"""The values that cross the measures' boundary: `Importance` (scores with their provenance), the
per-call context `Call`, and the progress / cancellation callback types.

Shapes: B inputs, T padded tokens. Scores [B, T] are float32 on the CPU and 0 wherever `batch.maskable`
is False: special tokens, padding and the auxiliary sequence of a paired task never get importance
(docs/methods.md#importance-measures). Scores are in the unit of the target class's logit unless a measure's docstring
says otherwise (ranks, attention weights, probabilities of U(0, 1)).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from engine.errors import ExplanationCancelled
from engine.models import Batch

Progress = Callable[[int, int], None]
ShouldStop = Callable[[], bool]


@dataclass(frozen=True)
class Importance:
    """Scores of one measure for a batch, with their provenance.

    scores [B, T] float32: importance per token, 0 on positions that are not maskable;
    maskable [B, T] bool: which positions carry a score (the primary sequence's non-special tokens);
    target [B] long: the class explained per input; target_source: 'predicted' (argmax of the model
    on the unmodified input) or 'given' (passed by the caller, e.g. the gold label);
    measure, options: the measure id and every option that affects the scores;
    signed: whether the sign of a score means something (red/blue in the UI);
    model_id: the checkpoint id of the explained model;
    extras: measure-specific diagnostics, e.g. IG's per-input `completeness_gap` [B].
    """

    scores: torch.Tensor
    maskable: torch.Tensor
    target: torch.Tensor
    measure: str
    options: dict
    target_source: str
    signed: bool = False
    model_id: str = "unsaved"
    extras: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.scores.shape[0]

    def token_scores(self, i: int) -> torch.Tensor:
        """Row i's scores on its maskable tokens only, in text order: [N_i]."""
        return self.scores[i][self.maskable[i]]

    def copy(self) -> Importance:
        return replace(self, scores=self.scores.clone(), maskable=self.maskable.clone(), target=self.target.clone(),
                       options=dict(self.options), extras=dict(self.extras))


@dataclass
class Call:
    """Everything one `attribute` call's computation needs (passed to `Explainer._scores`)."""

    batch: Batch
    target: torch.Tensor  # [B] long, on the model's device
    logits: torch.Tensor | None  # [B, C] logits of the unmodified input, when already computed
    progress: Progress | None
    should_stop: ShouldStop | None

    def check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise ExplanationCancelled("the explanation was cancelled")
