"""The random-logit test (Sixt, Granz & Landgraf, ICML 2020, "When explanations lie"): does a measure's explanation
depend on the class it explains? Each input is explained for its class c and for a class c' != c drawn uniformly
(seeded per input), on the same model, and the two score vectors are compared by Spearman's rank correlation over
the input's maskable tokens (and of |scores|, as in the randomisation checks). A measure whose explanation of
another class ranks the tokens as it ranks them for c says which tokens matter, not for what: lower is better.

For a two-class model c' is the other class. A signed measure of a logit difference then gives about -1 (the
same tokens, opposite signs: class-sensitive); its absolute value, +1 by construction. Sixt et al. measure
similarity by SSIM on images; for token vectors Spearman is the comparison the randomisation checks use here
(engine.sanity.randomisation), so one pass rule serves all three: the upper end of the 95% BCa CI of the mean
Spearman below PASS_THRESHOLD (ours, labelled wherever shown).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from engine.errors import InvalidInputError
from engine.models import Batch, Classifier


def other_classes(target: torch.Tensor, n_classes: int, seed: int) -> torch.Tensor:
    """[B] long: for each input a class other than its target [B], uniform over the other n_classes - 1 (seeded)."""
    if n_classes < 2:
        raise InvalidInputError("the random-logit test needs a model of at least two classes")
    generator = torch.Generator().manual_seed(int(seed))
    shift = torch.randint(1, n_classes, (len(target),), generator=generator)  # 1..C-1: never the target itself
    return (target.cpu().long() + shift) % n_classes


def random_logit(
    classifier: Classifier,
    measures: Sequence[str],
    batch: Batch,
    target: torch.Tensor | Sequence[int] | None = None,
    seed: int = 0,
    batch_size: int = 32,
    options: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Tidy rows, one per (measure, input): stage_index 1, stage 'another class', spearman, spearman_abs of each
    measure's scores for a random other class against its scores for `target` (default: the predictions), and
    `other_class`. Rows shaped as the randomisation checks' (engine.sanity.sanity_summary reads them)."""
    from engine.sanity.randomisation import explain_in_batches, rank_similarity

    options = dict(options or {})
    batch = batch.to(classifier.device)
    target = classifier.targets_for(batch, target)
    other = other_classes(target, len(classifier.classes), seed).to(target.device)
    maskable = batch.maskable.cpu()
    rows = []
    for done, m in enumerate(measures, 1):
        own = explain_in_batches(classifier, m, batch, target, batch_size, options)
        against = explain_in_batches(classifier, m, batch, other, batch_size, options)
        rho, rho_abs = rank_similarity(own, against, maskable)
        rows += [{"stage_index": 1, "stage": "another class", "measure": m, "input": i, "spearman": rho[i],
                  "spearman_abs": rho_abs[i], "other_class": int(other[i])} for i in range(len(batch))]
        if progress is not None:
            progress(done, len(measures))
    out = pd.DataFrame(rows)
    if out.empty:
        out = pd.DataFrame(columns=["stage_index", "stage", "measure", "input", "spearman", "spearman_abs", "other_class"])
    return out.astype({"spearman": np.float64, "spearman_abs": np.float64})
