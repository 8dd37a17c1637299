"""Faithfulness correlation (Bhatt, Weller & Moura, IJCAI 2020, "Evaluating and aggregating feature-based model
explanations"): does the explanation's mass on a random subset of tokens predict how much removing that subset
changes the model's output?

Per input with N maskable tokens and scores phi over them:

    S_1 .. S_M     random subsets of size n = max(1, round(subset_fraction N)) of the maskable tokens
    a_s = sum_{i in S_s} phi_i,     d_s = f(x) - f(x with S_s removed)
    faithfulness-correlation = Pearson(a, d) over the M subsets          higher = more faithful, in [-1, 1]

f is the explained class's probability (default, as every erasure metric) or its logit (`output='logit'`): for a
model additive in its logit and its exact attributions, d_s = a_s for every subset and the correlation is 1.
NaN where it is undefined: one maskable token (every subset is the same), or a or d constant over the subsets.
Removal by the operator (subsets.py); every perturbed input has its MaSF p-value. Cost: 1 + M forward rows per
input, no backward. Quantus (`quantus.FaithfulnessCorrelation`) draws subsets of pixels with replacement of the
baseline value and 100 runs by default; here subsets are of tokens, without replacement, M = 20 by default.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.perturb import OOD_LEVEL, checked_inputs
from engine.faithfulness.registry import MetricValues
from engine.faithfulness.subsets import fixed_size_subsets, forward_removed
from engine.models import Batch, Classifier

METRIC = "faithfulness-correlation"


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r of two vectors; NaN when either is constant (its spread below 1e-12 of its magnitude)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    da, db = a - a.mean(), b - b.mean()
    na, nb = np.linalg.norm(da), np.linalg.norm(db)
    if na <= 1e-12 * (np.linalg.norm(a) + 1e-300) or nb <= 1e-12 * (np.linalg.norm(b) + 1e-300):
        return float("nan")
    return float(np.clip(np.dot(da, db) / (na * nb), -1.0, 1.0))


def faithfulness_correlation(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, *, masf=None,
                             removal: str = "mask", seed: int = 0, should_stop: Callable[[], bool] | None = None,
                             subsets: int = 20, subset_fraction: float = 0.2,
                             output: str = "probability") -> MetricValues:
    """Faithfulness correlation [B] of `scores` [B, T] on `batch` (module docstring), with the MaSF share of its
    perturbed inputs. target: the explained class (default: the predicted one)."""
    if subsets < 2:
        raise InvalidInputError(f"faithfulness correlation needs at least 2 subsets, got {subsets}")
    if not 0 < subset_fraction <= 1:
        raise InvalidInputError(f"subset_fraction must be in (0, 1], got {subset_fraction}")
    batch, scores, n_tokens = checked_inputs(classifier, batch, scores)
    target = classifier.targets_for(batch, target)
    B, T = batch.input_ids.shape
    phi = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    sets = [torch.zeros(1, T, dtype=torch.bool)]
    for b in range(B):
        n = max(1, round(subset_fraction * n_tokens[b]))
        sets.append(fixed_size_subsets(batch, b, subsets, n, seed))
    removed = torch.cat([torch.zeros(B, T, dtype=torch.bool), *sets[1:]])
    rows = torch.cat([torch.arange(B), torch.arange(B).repeat_interleave(subsets)])
    f, pval = forward_removed(classifier, batch, rows, removed, target, masf, removal, output, should_stop)
    values = np.empty(B)
    used = []
    for b in range(B):
        at = slice(B + b * subsets, B + (b + 1) * subsets)
        mass = (removed[at].double() * phi[b]).sum(1).numpy()
        values[b] = pearson(mass, f[b] - f[at]) if n_tokens[b] > 1 else float("nan")
        used.append(pval[at])
    n_ood = np.array([np.sum(u < OOD_LEVEL) for u in used], float) if masf is not None else np.full(B, np.nan)
    return MetricValues(values={METRIC: values}, n_perturbed={METRIC: np.full(B, float(subsets))},
                        n_ood={METRIC: n_ood},
                        p_values={METRIC: np.concatenate(used) if masf is not None else np.zeros(0)},
                        forward_rows=len(rows),
                        options={"faithfulness_correlation": {"subsets": subsets, "subset_fraction": subset_fraction,
                                                              "output": output, "removal": removal, "seed": seed}})
