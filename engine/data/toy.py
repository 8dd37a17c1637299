"""A small deterministic sentiment set for tests: short sentences whose label is fixed by the
polarity words they contain, so a tiny model can learn it in seconds."""
from __future__ import annotations

import numpy as np

from engine.data.splits import stratified_split
from engine.data.types import Dataset, Example

_POSITIVE = ("good", "great", "wonderful", "fun", "brilliant", "lovely")
_NEGATIVE = ("bad", "awful", "boring", "dull", "terrible", "poor")
_SUBJECTS = ("the movie", "this film", "the plot", "the acting", "the story", "the ending")
_FILLERS = ("really", "quite", "very", "truly", "rather", "so")


def load_toy(split_seed: int = 0, size: int = 400) -> Dataset:
    rng = np.random.default_rng(12345)  # content is fixed; only the split depends on split_seed
    examples = []
    for i in range(size):
        label = i % 2
        words = _POSITIVE if label else _NEGATIVE
        text = f"{_SUBJECTS[rng.integers(6)]} was {_FILLERS[rng.integers(6)]} {words[rng.integers(6)]}"
        if rng.random() < 0.5:
            text += f" and {words[rng.integers(6)]}"
        examples.append(Example(primary=text, label=label, uid=f"toy-{i}"))
    return Dataset(
        name="toy",
        classes=("negative", "positive"),
        metric="accuracy",
        splits=stratified_split(examples, split_seed),
        split_seed=split_seed,
        description="Deterministic toy sentiment sentences for tests (label decided by polarity words).",
        max_length=16,
    )
