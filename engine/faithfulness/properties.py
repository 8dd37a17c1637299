"""Properties of an explanation's shape, not of its faithfulness (docs/evaluation.md, "properties"; label them so): how
concentrated the scores are. Computed over each input's maskable tokens from |phi|; no forward pass.

    sparseness  (Chalasani et al., ICML 2020) the Gini index of |phi|: with a = |phi| sorted ascending (k = 1..n),
                G = sum_k (2k - n - 1) a_k / (n sum_k a_k); 0 for equal scores, (n - 1) / n for one non-zero score.
                Higher = sparser. As quantus.Sparseness (which adds 1e-7 to a first; not done here), NaN when every
                score is 0.
    complexity  (Bhatt, Weller & Moura, IJCAI 2020) the entropy of p = |phi| / sum |phi| (natural log):
                -sum p log p; 0 for one non-zero score, log n for equal scores. Lower = simpler. As
                quantus.Complexity (scipy.stats.entropy of the normalised |phi|); NaN when every score is 0.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from engine.faithfulness.registry import MetricValues
from engine.models import Batch, Classifier


def gini(a: np.ndarray) -> float:
    """The Gini index of the non-negative vector a [n] (NaN when it sums to 0)."""
    a = np.sort(np.abs(np.asarray(a, float)))
    n, total = len(a), float(np.sum(np.abs(a)))
    if n == 0 or total <= 0:
        return float("nan")
    k = np.arange(1, n + 1)
    return float(np.sum((2 * k - n - 1) * a) / (n * total))


def entropy(a: np.ndarray) -> float:
    """The entropy (nats) of |a| normalised to sum 1 (NaN when it sums to 0)."""
    a = np.abs(np.asarray(a, float))
    total = float(a.sum())
    if total <= 0:
        return float("nan")
    p = a[a > 0] / total
    return float(-np.sum(p * np.log(p)))


def explanation_properties(classifier: Classifier, batch: Batch, scores: torch.Tensor, target=None, *, masf=None,
                           removal: str = "mask", seed: int = 0,
                           should_stop: Callable[[], bool] | None = None) -> MetricValues:
    """sparseness and complexity [B] of `scores` [B, T] over each input's maskable tokens (module docstring). The
    registry's family signature; the model, target, MaSF, removal and seed are not used (nothing is perturbed)."""
    phi = torch.nan_to_num(torch.as_tensor(scores).detach().double().cpu(), nan=0.0)
    maskable = batch.maskable.cpu()
    B = phi.shape[0]
    sparse = np.array([gini(phi[b][maskable[b]].numpy()) for b in range(B)])
    complexity = np.array([entropy(phi[b][maskable[b]].numpy()) for b in range(B)])
    values = {"sparseness": sparse, "complexity": complexity}
    return MetricValues(values=values, n_perturbed={k: np.zeros(B) for k in values},
                        n_ood={k: np.full(B, np.nan) for k in values}, p_values={k: np.zeros(0) for k in values})
