"""Seeded, stratified train/validation/test splits."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.data.types import Example
from engine.errors import InvalidInputError

#: share of each class given to the split a dataset lacks (carved out of its training rows)
CARVE_FRACTION = 0.1


def stratified_sizes(n: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[int, int, int]:
    """(train, validation, test) sizes that `stratified_split` gives a class of `n` examples: train and
    validation are rounded, test takes the rest. Known without the data, so a listing can show split
    sizes from counts alone."""
    n_train = int(round(fractions[0] * n))
    n_val = int(round(fractions[1] * n))
    return n_train, n_val, n - n_train - n_val


def carved_size(n: int, fraction: float = CARVE_FRACTION) -> int:
    """How many of a class's `n` training examples `carve` moves to the carved split."""
    return int(round(fraction * n))


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
        n_train, n_val, _ = stratified_sizes(idx.size, fractions)
        parts["train"].extend(idx[:n_train])
        parts["validation"].extend(idx[n_train : n_train + n_val])
        parts["test"].extend(idx[n_train + n_val :])
    out = {}
    for name, idx in parts.items():
        idx = np.array(sorted(idx), dtype=int)
        idx = idx[rng.permutation(idx.size)]
        out[name] = [examples[i] for i in idx]
    return out


def carve(examples: Sequence[Example], seed: int, fraction: float = CARVE_FRACTION) -> tuple[list[Example], list[Example]]:
    """(kept, carved): `carved_size` examples of each class moved out, chosen by a seeded permutation; both
    keep the input order. For a dataset whose own split column lacks a validation or test split."""
    rng = np.random.default_rng(seed)
    labels = np.array([e.label for e in examples])
    moved = np.zeros(len(examples), dtype=bool)
    for label in np.unique(labels):
        idx = np.flatnonzero(labels == label)
        moved[idx[rng.permutation(idx.size)][: carved_size(idx.size, fraction)]] = True
    return [e for e, m in zip(examples, moved) if not m], [e for e, m in zip(examples, moved) if m]
