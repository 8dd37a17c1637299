"""Recursive masking of one typed input by a measure, against the random baseline over several seeds:
what the step-by-step masking page shows."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from engine.faithfulness.recursive import MaskingResult, recursive_masking
from engine.importance.levels import Unit, group_tokens, maskable_offsets, unit_index
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
    text: str = ""  # the primary text as typed
    offsets: list[tuple[int, int]] = field(default_factory=list)  # [N] character spans of `tokens` in `text`
    whole_words: bool = False  # each step masked whole words (ratios and counts count words)

    def units(self, level: str = "token") -> list[Unit]:
        """The tokens, words or sentences of the text (engine.importance.levels)."""
        return group_tokens(self.offsets, self.text, level, self.tokens)

    def step_scores(self, step: int) -> np.ndarray | None:
        """[N] the measure's scores on the maskable tokens that choose step `step + 1`'s tokens (None at the last
        step and where nothing was computed)."""
        steps = self.measure.steps
        if step + 1 >= len(steps) or steps[step + 1].scores is None:
            return None
        return steps[step + 1].scores[0][self.maskable.numpy()]

    def curve_table(self) -> pd.DataFrame:
        """One row per step: the level, tokens masked, the explained class's probability under the measure and
        under each random seed (with their mean, min and max), the MaSF p-value, and the tokens masked."""
        curves = self.curves()
        steps = self.measure.steps
        frame = pd.DataFrame({"step": range(len(steps)),
                              ("count" if self.counts is not None else "ratio"): self.levels,
                              "tokens_masked": [int(s.n_masked[0]) for s in steps],
                              "tokens_total": len(self.tokens),
                              f"p_target_{self.measure.measure}": curves["measure"],
                              "p_target_random_mean": curves["random"].mean(0),
                              "p_target_random_min": curves["random"].min(0),
                              "p_target_random_max": curves["random"].max(0)})
        for seed, row in zip([r.seed for r in self.random], curves["random"]):
            frame[f"p_target_random_seed{seed}"] = row
        frame["masf_p_value"] = [float(s.p_value[0]) if s.p_value is not None else np.nan for s in steps]
        frame["masked_tokens"] = [" ".join(t for t, m in zip(self.tokens, self.masked_flags(i)) if m)
                                  for i in range(len(steps))]
        frame["masking_unit"] = "word" if self.whole_words else "token"
        frame["target"] = int(self.measure.target[0])
        frame["target_source"] = self.measure.target_source
        return frame

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
                      should_stop: Callable[[], bool] | None = None, whole_words: bool = False) -> SingleInputMasking:
    """Mask `text` recursively by `measure` and by `random` with each of `random_seeds` (the baseline band).

    ratios: shares of the maskable tokens (default 0, 0.1, ..., 1), or counts: k tokens (e.g. 0..10, capped at
    the input's length). The explained class is the predicted one unless `target` is given. whole_words: mask
    every piece of a word at once, the schedule counting words (engine.faithfulness.recursive); each step still
    gets its MaSF p-value.

    Args:
        classifier: the model; text / auxiliary: the input (the second text is never masked).
        measure: the importance measure id; options: its options.
        ratios / counts: the schedule; random_seeds: one random-masking run per seed (the baseline band).
        masf: a fitted MaSF for the p-values; target: the explained class (default: the predicted one).
        progress(stage, done, total), should_stop(): for UIs; whole_words: as above.

    Returns:
        A SingleInputMasking: the maskable tokens, the measure's MaskingResult (one step per level) and one
        MaskingResult per random seed.
    """
    from engine.importance import get_explainer

    batch = classifier.batch([text], [auxiliary] if auxiliary is not None else None)
    with torch.no_grad():
        predicted = int(classifier.logits(batch).argmax(-1)[0])
    tgt = [predicted if target is None else classifier.check_target(target)]
    source = "predicted" if target is None else "given"
    offsets = maskable_offsets(batch)
    word_ids = None
    if whole_words:
        word_ids = torch.full(batch.input_ids.shape, -1, dtype=torch.long)
        word_ids[0, batch.maskable[0].cpu()] = torch.as_tensor(unit_index(group_tokens(offsets, text, "word"), len(offsets)))
    explainer = get_explainer(measure, classifier, **(options or {}))
    if measure == "beam" and progress is not None:
        explainer.progress = lambda done, total: progress(measure, done, total)
    if should_stop is not None:
        explainer.should_stop = should_stop
    main = recursive_masking(classifier, explainer, batch, target=tgt, ratios=ratios, counts=counts, masf=masf,
                             target_source=source, should_stop=should_stop, word_ids=word_ids)
    baselines = []
    for i, seed in enumerate(random_seeds):
        if progress is not None:
            progress("random", i, len(random_seeds))
        rnd = get_explainer("random", classifier, seed=seed, memo=False)
        baselines.append(recursive_masking(classifier, rnd, batch, target=tgt, ratios=ratios, counts=counts, masf=masf,
                                           target_source=source, should_stop=should_stop, word_ids=word_ids))
    return SingleInputMasking(tokens=classifier.maskable_tokens(batch), maskable=batch.maskable[0].cpu(),
                              measure=main, random=baselines,
                              ratios=None if counts is not None else [s.ratio for s in main.steps],
                              counts=None if counts is None else [s.count for s in main.steps],
                              mask_token_id=classifier.mask_token_id, text=text, offsets=offsets, whole_words=whole_words)
