"""Seeded, stratified train/validation/test splits."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.data.types import Example
from engine.errors import InvalidInputError


def stratified_split(
    examples: Sequence[Example], seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
) -> dict[str, list[Example]]:
    """Split each class separately with a seeded permutation so every split keeps the class
    proportions; the same seed always gives the same splits. Within a split the order is shuffled
    (seeded) so classes are interleaved."""
    if abs(sum(fractions) - 1.0) > 1e-9:
        raise InvalidInputError(f"split fractions must sum to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    labels = np.array([e.label for e in examples])
    parts: dict[str, list[int]] = {"train": [], "validation": [], "test": []}
    for label in np.unique(labels):
        idx = np.flatnonzero(labels == label)
        idx = idx[rng.permutation(idx.size)]
        n_train = int(round(fractions[0] * idx.size))
        n_val = int(round(fractions[1] * idx.size))
        parts["train"].extend(idx[:n_train])
        parts["validation"].extend(idx[n_train : n_train + n_val])
        parts["test"].extend(idx[n_train + n_val :])
    out = {}
    for name, idx in parts.items():
        idx = np.array(sorted(idx), dtype=int)
        idx = idx[rng.permutation(idx.size)]
        out[name] = [examples[i] for i in idx]
    return out
