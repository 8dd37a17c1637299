"""Agreement between importance measures (Krishna et al. 2022, "The disagreement problem in explainable ML").

For two explanations a, b of one input (scores over its N maskable tokens):

    top-k metrics, over the k tokens of largest MAGNITUDE (Krishna et al. rank features by |attribution|):
    feature agreement       |top_k(a) ∩ top_k(b)| / k
    rank agreement          share of the k positions where a and b have the same token at the same rank
    sign agreement          share of the k tokens in both top-k sets that also have the same sign in a and b
    signed rank agreement   share of the k positions with the same token at the same rank and the same sign
    over all tokens (ranked by signed score, as the masking metrics rank them):
    rank correlation        Spearman's rho of a and b
    pairwise rank agreement share of the token pairs (i, j) that a and b order the same way (ties count as an order)

Every value is in [0, 1] except Spearman's rho ([-1, 1]); higher = the two measures agree more. The sign of
an unsigned measure is + for every non-zero score. k is a count of tokens here; `top_k_for` turns a fraction of
an input's tokens into a count (at least 1, as the ERASER bins do).

`agreement_matrix` gives the dataset-level table: for every pair of measures the mean of each metric over inputs.
(engine/plausibility/agreement.py measures agreement between annotators, not between measures: not reused.)
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from engine.errors import InvalidInputError

TOP_K_METRICS = ("feature_agreement", "rank_agreement", "sign_agreement", "signed_rank_agreement")
ALL_TOKEN_METRICS = ("rank_correlation", "pairwise_rank_agreement")


def top_k_for(fraction: float, n: int) -> int:
    """Tokens in the top `fraction` of an n-token input: round(fraction n), at least 1 and at most n."""
    return int(min(n, max(1, np.floor(fraction * n + 0.5))))


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest-magnitude scores, largest first (ties by position)."""
    return np.argsort(-np.abs(scores), kind="stable")[:k]


def pairwise_rank_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Share of the N (N - 1) / 2 token pairs ordered the same way by a and by b (sign of a_i - a_j equal to
    the sign of b_i - b_j, a tie matching only a tie). NaN for fewer than 2 tokens."""
    n = len(a)
    if n < 2:
        return float("nan")
    i, j = np.triu_indices(n, k=1)
    return float(np.mean(np.sign(a[i] - a[j]) == np.sign(b[i] - b[j])))


def agreement(a: Sequence[float], b: Sequence[float], k: int) -> dict[str, float]:
    """Krishna et al.'s metrics of two explanations a, b [N] of one input at top-k (k tokens) and over all tokens."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise InvalidInputError(f"two explanations of one input must have the same tokens, got {a.shape} and {b.shape}")
    if not 1 <= k <= a.size:
        raise InvalidInputError(f"k must be between 1 and the {a.size} tokens, got {k}")
    ta, tb = _top(a, k), _top(b, k)
    common = np.intersect1d(ta, tb)
    same_rank = ta == tb
    same_sign_at_rank = same_rank & (np.sign(a[ta]) == np.sign(b[ta]))
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        rho = float("nan")  # a constant explanation has no ranking to correlate
    else:
        rho = float(stats.spearmanr(a, b).statistic)
    return {
        "feature_agreement": common.size / k,
        "rank_agreement": float(np.mean(same_rank)),
        "sign_agreement": float(np.sum(np.sign(a[common]) == np.sign(b[common]))) / k,
        "signed_rank_agreement": float(np.mean(same_sign_at_rank)),
        "rank_correlation": rho,
        "pairwise_rank_agreement": pairwise_rank_agreement(a, b),
    }


def agreement_matrix(explanations: Mapping[str, Sequence[np.ndarray]], top_fraction: float = 0.2,
                     top_k: int | None = None) -> pd.DataFrame:
    """The dataset-level table: one row per pair of measures (a < b by name) and metric, with the mean over
    inputs, its standard error and the number of inputs (NaN values, e.g. Spearman of a constant explanation,
    are left out and counted in `n_undefined`).

    explanations: measure -> one score array [N_i] per input (the same inputs, in the same order, for every
    measure; `Importance.token_scores(i)` gives them). k per input: `top_k` tokens (capped at N_i) when given,
    else `top_k_for(top_fraction, N_i)`."""
    names = sorted(explanations)
    if len(names) < 2:
        raise InvalidInputError("agreement needs at least two measures")
    n_inputs = {len(explanations[m]) for m in names}
    if len(n_inputs) != 1:
        raise InvalidInputError(f"every measure must explain the same inputs; got {sorted(n_inputs)} inputs")
    rows = []
    for a, b in itertools.combinations(names, 2):
        per_input = []
        for sa, sb in zip(explanations[a], explanations[b]):
            n = len(sa)
            k = min(n, top_k) if top_k is not None else top_k_for(top_fraction, n)
            per_input.append(agreement(sa, sb, k))
        for metric in (*TOP_K_METRICS, *ALL_TOKEN_METRICS):
            v = np.array([p[metric] for p in per_input], dtype=float)
            ok = v[~np.isnan(v)]
            rows.append({"measure_a": a, "measure_b": b, "metric": metric,
                         "k": f"top {top_k} tokens" if top_k is not None else f"top {top_fraction:.0%}"
                         if metric in TOP_K_METRICS else "all tokens",
                         "mean": float(ok.mean()) if ok.size else float("nan"),
                         "sem": float(ok.std(ddof=1) / np.sqrt(ok.size)) if ok.size > 1 else float("nan"),
                         "n_inputs": int(ok.size), "n_undefined": int(v.size - ok.size)})
    return pd.DataFrame(rows)


def importance_agreement(importances: Mapping[str, object], top_fraction: float = 0.2,
                         top_k: int | None = None) -> pd.DataFrame:
    """`agreement_matrix` of `Importance` objects of several measures on one batch (the Explain page's input,
    or a dataset batch)."""
    explanations = {}
    for name, imp in importances.items():
        explanations[name] = [imp.token_scores(i).double().numpy() for i in range(len(imp))]
    return agreement_matrix(explanations, top_fraction=top_fraction, top_k=top_k)
