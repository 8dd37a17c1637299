"""Faithfulness metrics over curves: ACU and RACU (FMM Sec. 3.4; R-ROAR), with bootstrap CIs over seeds
(engine.stats).

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
    """ACU = sum_i 1/2 dx_i (dp_i + dp_{i+1}), dp_i = b_i - p_i (area of random above measure).

    Args:
        ratios: the masking levels x_i, increasing (fractions 0..1, or k / k_max for count schedules).
        measure: p_i, the tracked probability (or metric) after masking by the measure, one per level.
        random: b_i, the same under random masking.

    Returns:
        The area, in units of probability x level (positive: the measure's tokens lower p faster than random).
    """
    x, p, b = _check(ratios, measure, random)
    return _trapezoid(x, b - p)


def racu(ratios: Sequence[float], measure: Sequence[float], random: Sequence[float], clip: bool = False) -> float:
    """RACU = ACU / sum_i 1/2 dx_i (db_i + db_{i+1}), db_i = b_i - b_I. NaN when the random curve is flat.

    Args:
        ratios, measure, random: as for `acu`.
        clip: clip the result to [-1, 1].

    Returns:
        ACU relative to the random curve's own area above its last value (a fraction; NaN for a flat curve).
    """
    x, p, b = _check(ratios, measure, random)
    norm = _trapezoid(x, b - b[-1])
    if abs(norm) < 1e-12:
        return float("nan")
    value = _trapezoid(x, b - p) / norm
    return float(np.clip(value, -1.0, 1.0)) if clip else value
