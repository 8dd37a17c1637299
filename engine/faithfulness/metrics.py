"""Faithfulness metrics over curves: ACU and RACU (FMM Sec. 3.4; R-ROAR), with bootstrap CIs over seeds.

A curve is a dataset's performance p_i after masking a fraction r_i of tokens (r_0 = 0 ... r_I = 1).
b_i is the random-masking baseline's curve. A faithful measure removes what the model uses, so its
curve falls below the random one: the area between them (ACU) is positive, and RACU divides it by
the area the random curve itself has above its final value, so 100% means "as far below random as
random is above the end point". RACU is not clipped by default (signed measures can exceed 100%);
R-ROAR clipped it to [-1, 1]: `clip=True` reproduces that and is labelled wherever it is shown.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from engine.errors import InvalidInputError


def _trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    dx = np.diff(x)
    return float(np.sum(0.5 * dx * (y[:-1] + y[1:])))


def _check(ratios, measure, random) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, p, b = (np.asarray(v, dtype=float) for v in (ratios, measure, random))
    if not (x.ndim == p.ndim == b.ndim == 1 and x.shape == p.shape == b.shape and x.size >= 2):
        raise InvalidInputError(f"ratios, measure and random curves must be 1-D of one length >= 2, got {x.shape}, {p.shape}, {b.shape}")
    if np.any(np.diff(x) <= 0):
        raise InvalidInputError("ratios must increase strictly")
    return x, p, b


def acu(ratios: Sequence[float], measure: Sequence[float], random: Sequence[float]) -> float:
    """ACU = sum_i 1/2 dx_i (dp_i + dp_{i+1}), dp_i = b_i - p_i (area of random above measure)."""
    x, p, b = _check(ratios, measure, random)
    return _trapezoid(x, b - p)


def racu(ratios: Sequence[float], measure: Sequence[float], random: Sequence[float], clip: bool = False) -> float:
    """RACU = ACU / sum_i 1/2 dx_i (db_i + db_{i+1}), db_i = b_i - b_I. NaN when the random curve is flat."""
    x, p, b = _check(ratios, measure, random)
    norm = _trapezoid(x, b - b[-1])
    if abs(norm) < 1e-12:
        return float("nan")
    value = _trapezoid(x, b - p) / norm
    return float(np.clip(value, -1.0, 1.0)) if clip else value


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 9999, seed: int = 0,
                 method: str = "BCa", with_method: bool = False) -> tuple:
    """(mean, low, high): the mean over seeds with a BCa bootstrap CI (scipy.stats.bootstrap).

    One value has no interval: the bounds are NaN (a zero-width interval would look exact). Values that
    are all equal give the degenerate interval [mean, mean]. Where BCa is undefined on a small sample it
    falls back to the percentile interval. with_method=True appends which interval was computed
    ("BCa", "percentile", "degenerate: all equal", "none: 1 value"), so a table can say so.
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    nan = float("nan")
    if v.size == 0:
        return (nan, nan, nan, "none: no value") if with_method else (nan, nan, nan)
    mean = float(v.mean())
    if v.size < 2:
        return (mean, nan, nan, "none: 1 value") if with_method else (mean, nan, nan)
    if np.ptp(v) == 0:
        return (mean, mean, mean, "degenerate: all equal") if with_method else (mean, mean, mean)
    used = method
    res = stats.bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=n_resamples, method=method,
                          random_state=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):  # BCa can fail on tiny degenerate samples: fall back to percentile
        used = "percentile"
        res = stats.bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                              method="percentile", random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (mean, low, high, used) if with_method else (mean, low, high)


def paired_comparison(a: Sequence[float], b: Sequence[float], seed: int = 0) -> dict:
    """Compare two measures evaluated on the same seeds: mean of a - b with a bootstrap CI and an exact
    paired sign-flip permutation p-value (two-sided)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InvalidInputError("a paired comparison needs two 1-D arrays over the same seeds")
    diff = a - b
    mean, low, high = bootstrap_ci(diff, seed=seed)
    if diff.size >= 2 and np.ptp(diff) > 0:
        res = stats.permutation_test((diff,), np.mean, permutation_type="samples", alternative="two-sided",
                                     n_resamples=np.inf if diff.size <= 12 else 9999, random_state=np.random.default_rng(seed))
        p = float(res.pvalue)
    else:
        p = float("nan") if diff.size < 2 else (1.0 if mean == 0 else 2.0 / 2 ** diff.size)
    return {"mean_difference": mean, "ci_low": low, "ci_high": high, "p_value": p, "n": int(diff.size)}
