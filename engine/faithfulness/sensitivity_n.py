"""Sensitivity-n (Ancona, Ceolini, Oztireli & Gross, ICLR 2018, "Towards better understanding of gradient-based
attribution methods for deep neural networks"): for subsets of n tokens, does the explanation's mass on a random
subset predict how much removing it changes the model's output? One correlation per n.

Per input with N maskable tokens and scores phi over them, for each level l (a fraction of the tokens):

    n = max(1, round(l N));   S_1 .. S_M random n-subsets of the maskable tokens (uniform, without replacement)
    a_s = sum_{i in S_s} phi_i,     d_s = f(x) - f(x with S_s removed)
    sensitivity-n@l = Pearson(a, d) over the M subsets                    higher = more faithful, in [-1, 1]
    sensitivity-n-mean = the mean over the levels where it is defined

An explanation satisfies sensitivity-n (the paper's property) when a_s = d_s for every n-subset: the exact
attributions of a model additive in f do, for every n. NaN where undefined: n >= N (every subset is the whole input)
or a or d constant over the subsets. Each level's subsets are drawn independently (seeded per input and level).
Removal by the operator (subsets.py); every perturbed input has its MaSF p-value. Cost: 1 + |levels| M forward rows
per input, no backward.

Per input and level this is Bhatt et al.'s faithfulness correlation with the subset size n (quantus
.FaithfulnessCorrelation(subset_size=n) computes it, and tests/engine/test_metric_reference.py checks it against it).
Quantus 0.6's own `SensitivityN` is another quantity: it removes the top-ranked features in steps and correlates,
per step, the attribution sums with the output changes ACROSS the inputs of a batch (one value per step for the
whole batch, not per input); docs/evaluation.md gives the measured difference.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.correlation import pearson
from engine.faithfulness.perturb import OOD_LEVEL, checked_inputs
from engine.faithfulness.registry import MetricValues
from engine.faithfulness.subsets import fixed_size_subsets, forward_removed
from engine.models import Batch, Classifier

METRIC = "sensitivity-n"
MEAN = "sensitivity-n-mean"
#: a level's subsets are drawn from seed + LEVEL_SEED_STRIDE * (its index + 1), so levels draw independently
LEVEL_SEED_STRIDE = 1_000_003


def subset_size(level: float, n_tokens: int) -> int:
    """n of a level: max(1, round(level N))."""
    return max(1, round(level * n_tokens))


def sensitivity_n(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, *, masf=None,
                  removal: str = "mask", seed: int = 0, should_stop: Callable[[], bool] | None = None,
                  levels: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5), subsets: int = 20,
                  output: str = "probability") -> MetricValues:
    """Sensitivity-n [B] per level ('sensitivity-n@0.1', ...) and its mean over the levels ('sensitivity-n-mean') of
    `scores` [B, T] on `batch` (module docstring), with the MaSF share of the perturbed inputs (the mean's: all of
    them). target: the explained class (default: the predicted one)."""
    if subsets < 2:
        raise InvalidInputError(f"sensitivity-n needs at least 2 subsets per level, got {subsets}")
    levels = tuple(float(x) for x in levels)
    if not levels or any(not 0 < x <= 1 for x in levels):
        raise InvalidInputError(f"sensitivity-n's levels must be fractions in (0, 1], got {levels}")
    batch, scores, n_tokens = checked_inputs(classifier, batch, scores)
    target = classifier.targets_for(batch, target)
    B, T = batch.input_ids.shape
    L = len(levels)
    phi = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    # rows: the B inputs themselves, then per input, per level, its M subsets
    drawn = [fixed_size_subsets(batch, b, subsets, subset_size(level, n_tokens[b]), seed + LEVEL_SEED_STRIDE * (j + 1))
             for b in range(B) for j, level in enumerate(levels)]
    removed = torch.cat([torch.zeros(B, T, dtype=torch.bool), *drawn])
    rows = torch.cat([torch.arange(B), torch.arange(B).repeat_interleave(L * subsets)])
    f, pval = forward_removed(classifier, batch, rows, removed, target, masf, removal, output, should_stop)
    per_level = np.full((L, B), np.nan)
    for b in range(B):
        for j, level in enumerate(levels):
            start = B + (b * L + j) * subsets
            at = slice(start, start + subsets)
            mass = (removed[at].double() * phi[b]).sum(1).numpy()
            if subset_size(level, n_tokens[b]) < n_tokens[b]:
                per_level[j, b] = pearson(mass, f[b] - f[at])
    values, n_perturbed, n_ood, p_values = {}, {}, {}, {}
    pv = pval[B:].reshape(B, L, subsets)
    for j, level in enumerate(levels):
        name = f"{METRIC}@{level:g}"
        values[name] = per_level[j]
        n_perturbed[name] = np.full(B, float(subsets))
        n_ood[name] = (pv[:, j] < OOD_LEVEL).sum(1).astype(float) if masf is not None else np.full(B, np.nan)
        p_values[name] = pv[:, j].ravel() if masf is not None else np.zeros(0)
    with np.errstate(all="ignore"):
        defined = ~np.isnan(per_level)
        values[MEAN] = np.where(defined.any(0), np.nansum(per_level, 0) / np.maximum(defined.sum(0), 1), np.nan)
    n_perturbed[MEAN] = np.full(B, float(L * subsets))
    n_ood[MEAN] = (pv < OOD_LEVEL).sum((1, 2)).astype(float) if masf is not None else np.full(B, np.nan)
    p_values[MEAN] = pv.ravel() if masf is not None else np.zeros(0)
    return MetricValues(values=values, n_perturbed=n_perturbed, n_ood=n_ood, p_values=p_values,
                        forward_rows=len(rows),
                        options={"sensitivity_n": {"levels": list(levels), "subsets": subsets, "output": output,
                                                   "removal": removal, "seed": seed}})
