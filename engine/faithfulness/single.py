"""Recursive masking of one typed input by a measure, against the random baseline over several seeds:
what the step-by-step masking page shows."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from engine.faithfulness.recursive import MaskingResult, recursive_masking
from engine.models import Classifier


@dataclass
class SingleInputMasking:
    tokens: list[str]  # maskable tokens of the unmasked input, in text order
    maskable: torch.Tensor  # [T] bool
    measure: MaskingResult
    random: list[MaskingResult]  # one per seed
    ratios: list[float] | None  # ratio mode: the share of maskable tokens masked at each step
    mask_token_id: int
    counts: list[int] | None = None  # count mode: the k asked for at each step (masked: min(k, the input's N))

    @property
    def levels(self) -> list[float] | list[int]:
        """The x-axis: the ratio of each step, or its token count k in count mode."""
        return self.counts if self.counts is not None else self.ratios

    def masked_flags(self, step: int) -> list[bool]:
        """Which of the maskable tokens are [MASK] at `step`."""
        ids = self.measure.steps[step].input_ids[0][self.maskable]
        return [bool(v) for v in (ids == self.mask_token_id)]

    def curves(self) -> dict[str, np.ndarray]:
        """probability of the target per step for the measure, and the random seeds' [S, steps]."""
        measure = np.array([float(s.probability[0]) for s in self.measure.steps])
        random = np.array([[float(s.probability[0]) for s in r.steps] for r in self.random])
        return {"measure": measure, "random": random}


def mask_single_input(classifier: Classifier, text: str, measure: str, auxiliary: str | None = None,
                      ratios: Sequence[float] | None = None, random_seeds: Sequence[int] = range(5), masf=None,
                      counts: Sequence[int] | None = None,
                      target: int | None = None, options: dict | None = None,
                      progress: Callable[[str, int, int], None] | None = None,
                      should_stop: Callable[[], bool] | None = None) -> SingleInputMasking:
    """Mask `text` recursively by `measure` and by `random` with each of `random_seeds` (the baseline band).

    ratios: shares of the maskable tokens (default 0, 0.1, ..., 1), or counts: k tokens (e.g. 0..10, capped at
    the input's length). The explained class is the predicted one unless `target` is given."""
    from engine.importance import get_explainer

    batch = classifier.batch([text], [auxiliary] if auxiliary is not None else None)
    with torch.no_grad():
        predicted = int(classifier.logits(batch).argmax(-1)[0])
    tgt = [predicted if target is None else classifier.check_target(target)]
    source = "predicted" if target is None else "given"
    explainer = get_explainer(measure, classifier, **(options or {}))
    if measure == "beam" and progress is not None:
        explainer.progress = lambda done, total: progress(measure, done, total)
    if should_stop is not None:
        explainer.should_stop = should_stop
    main = recursive_masking(classifier, explainer, batch, target=tgt, ratios=ratios, counts=counts, masf=masf,
                             target_source=source, should_stop=should_stop)
    baselines = []
    for i, seed in enumerate(random_seeds):
        if progress is not None:
            progress("random", i, len(random_seeds))
        rnd = get_explainer("random", classifier, seed=seed, memo=False)
        baselines.append(recursive_masking(classifier, rnd, batch, target=tgt, ratios=ratios, counts=counts, masf=masf,
                                           target_source=source, should_stop=should_stop))
    return SingleInputMasking(tokens=classifier.maskable_tokens(batch), maskable=batch.maskable[0].cpu(),
                              measure=main, random=baselines,
                              ratios=None if counts is not None else [s.ratio for s in main.steps],
                              counts=None if counts is None else [s.count for s in main.steps],
                              mask_token_id=classifier.mask_token_id)
