"""Statistics over seeds shared by several layers: a bootstrap CI of a mean, a paired comparison, Benjamini-Hochberg
adjusted p-values and a paired effect size (Cohen's d_z).

Kept at the bottom of engine's layers (docs/architecture.md#layers) so that the sanity checks and the
faithfulness metrics both use it without one importing the other; the package face engine.faithfulness names them.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from engine.errors import InvalidInputError


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 9999, seed: int = 0,
                 method: str = "BCa", with_method: bool = False, interval: bool = True) -> tuple:
    """(mean, low, high): the mean over seeds with a BCa bootstrap CI (scipy.stats.bootstrap).

    One value has no interval: the bounds are NaN (a zero-width interval would look exact). Values that
    are all equal give the degenerate interval [mean, mean]. Where BCa is undefined on a small sample it
    falls back to the percentile interval. with_method=True appends which interval was computed
    ("BCa", "percentile", "degenerate: all equal", "none: 1 value"), so a table can say so.
    interval=False: the same mean without its interval (NaN bounds, "not computed"), for a reader that shows
    only the mean of some rows (the interval is the costly part).
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    nan = float("nan")
    if v.size == 0:
        return (nan, nan, nan, "none: no value") if with_method else (nan, nan, nan)
    mean = float(v.mean())
    if v.size < 2:
        return (mean, nan, nan, "none: 1 value") if with_method else (mean, nan, nan)
    if not interval:
        return (mean, nan, nan, "not computed") if with_method else (mean, nan, nan)
    if np.ptp(v) == 0:
        return (mean, mean, mean, "degenerate: all equal") if with_method else (mean, mean, mean)
    # a seed that is a Generator (its state moves on with each use) is not memoised
    compute = _bootstrap_interval if isinstance(seed, (int, np.integer)) else _bootstrap_interval.__wrapped__
    low, high, used = compute(v.tobytes(), confidence, n_resamples, seed, method)
    return (mean, low, high, used) if with_method else (mean, low, high)


@functools.lru_cache(maxsize=4096)
def _bootstrap_interval(sample: bytes, confidence: float, n_resamples: int, seed,
                        method: str) -> tuple[float, float, str]:
    """(low, high, the interval computed) of bootstrap_ci for the float64 values `sample` (their bytes: a hashable key
    that tells apart every value, -0.0 from 0.0 included).

    Memoised: the interval is a function of the values and the options alone (a fresh generator from `seed` each
    time), and `report` asks for the same ones many times (a table's seeds again in another table, the same
    per-input preferences for several wrong explanations): thousands of scipy calls, the costliest part of it."""
    v = np.frombuffer(sample, dtype=float)
    used = method
    from scipy import stats  # here, not at the top: a reader that computes no interval loads no scipy
    res = stats.bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=n_resamples, method=method,
                          random_state=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):  # BCa can fail on tiny degenerate samples: fall back to percentile
        used = "percentile"
        res = stats.bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                              method="percentile", random_state=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return low, high, used


def paired_comparison(a: Sequence[float], b: Sequence[float], seed: int = 0) -> dict:
    """Compare two measures evaluated on the same seeds: mean of a - b with a bootstrap CI and an exact
    paired sign-flip permutation p-value (two-sided)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InvalidInputError("a paired comparison needs two 1-D arrays over the same seeds")
    diff = a - b
    mean, low, high = bootstrap_ci(diff, seed=seed)
    if diff.size >= 2 and np.ptp(diff) > 0:
        from scipy import stats  # here, not at the top: a reader that computes no interval loads no scipy
        res = stats.permutation_test((diff,), np.mean, permutation_type="samples", alternative="two-sided",
                                     n_resamples=np.inf if diff.size <= 12 else 9999, random_state=np.random.default_rng(seed))
        p = float(res.pvalue)
    else:
        p = float("nan") if diff.size < 2 else (1.0 if mean == 0 else 2.0 / 2 ** diff.size)
    return {"mean_difference": mean, "ci_low": low, "ci_high": high, "p_value": p, "n": int(diff.size)}


def wilson_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (low, high) of a proportion k / n; (NaN, NaN) when n = 0.

    Preferred over the normal approximation for rates near 0 or 1 (flip rates of a dominant trigger)."""
    if n <= 0:
        return float("nan"), float("nan")
    if not 0 <= k <= n:
        raise InvalidInputError(f"a proportion needs 0 <= k <= n, got k={k}, n={n}")
    from scipy import stats  # here, not at the top: a reader that computes no interval loads no scipy
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values) [m] of m p-values, in their order; NaN stays NaN and is not
    counted among the m tests. Rejecting every q <= alpha controls the false discovery rate at alpha for independent
    (or positively dependent) tests. Equal to scipy.stats.false_discovery_control(p, method='bh') on the finite ones:

        q_(i) = min_{j >= i} min(1, m p_(j) / j)      p_(1) <= ... <= p_(m)
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise InvalidInputError(f"Benjamini-Hochberg takes a 1-D array of p-values, got shape {p.shape}")
    finite = ~np.isnan(p)
    if np.any((p[finite] < 0) | (p[finite] > 1)):
        raise InvalidInputError("p-values must lie in [0, 1]")
    out = np.full(p.shape, np.nan)
    v = p[finite]
    m = v.size
    if m == 0:
        return out
    order = np.argsort(v, kind="stable")
    scaled = v[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1].clip(max=1.0)
    adjusted = np.empty(m)
    adjusted[order] = q
    out[finite] = adjusted
    return out


def paired_effect_size(a: Sequence[float], b: Sequence[float]) -> float:
    """Cohen's d_z of paired values: mean(a - b) / sd(a - b) (sd with n - 1), over the pairs where both are finite.

    The paired equivalent of Cohen's d (the effect size to show beside a win rate over the same inputs): 0 for no
    difference, its sign that of mean(a - b). NaN for fewer than 2 pairs; +-inf for a constant non-zero difference;
    0 for a difference that is 0 on every pair."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InvalidInputError("a paired effect size needs two 1-D arrays over the same inputs")
    d = a - b
    d = d[~np.isnan(d)]
    if d.size < 2:
        return float("nan")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return 0.0 if mean == 0 else float(np.copysign(np.inf, mean))
    return mean / sd


def preference_p_value(preferences: Sequence[float]) -> float:
    """Two-sided sign-test p-value that a win rate differs from chance: preferences [n] are 1 (win), 0 (loss) or 0.5
    (tie, left out, as a sign test does), NaN ignored; exact binomial test of the wins among the non-tied inputs
    against 1/2. NaN when every input ties. The p-value to adjust with benjamini_hochberg across a table's rows."""
    p = np.asarray(preferences, dtype=float)
    p = p[~np.isnan(p)]
    if np.any((p != 0) & (p != 0.5) & (p != 1)):
        raise InvalidInputError("preferences must be 1 (win), 0 (loss) or 0.5 (tie)")
    wins, losses = int(np.sum(p == 1)), int(np.sum(p == 0))
    if wins + losses == 0:
        return float("nan")
    from scipy import stats  # here, not at the top: a reader that computes no interval loads no scipy
    return float(stats.binomtest(wins, wins + losses, 0.5).pvalue)
