"""The two data types every loader returns: one `Example` per input and a `Dataset` of seeded splits."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from engine.data.metrics import METRICS, score
from engine.errors import InvalidInputError


@dataclass(frozen=True)
class Example:
    """One classification input.

    primary: the text that gets masked and explained (a review; a bAbI paragraph).
    auxiliary: the second sequence of a paired task (a bAbI question), never masked nor explained.
    label: index into `Dataset.classes`.
    rationale_spans: character spans [start, end) of `primary` that justify the label, where the
        data carries them (bAbI supporting facts); empty otherwise.
    uid: stable identifier, unique within the dataset (survives re-splitting).
    """

    primary: str
    label: int
    auxiliary: str | None = None
    rationale_spans: tuple[tuple[int, int], ...] = ()
    uid: str = ""


SPLITS = ("train", "validation", "test")


@dataclass
class Dataset:
    """A dataset with its train/validation/test splits, label names and evaluation metric."""

    name: str
    classes: tuple[str, ...]
    metric: str
    splits: dict[str, list[Example]]
    split_seed: int
    description: str = ""
    paired: bool = False
    max_length: int = 128
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InvalidInputError(f"unknown metric {self.metric!r}; known: {sorted(METRICS)}")
        for split in SPLITS:
            if split not in self.splits:
                raise InvalidInputError(f"dataset {self.name!r} lacks the {split!r} split")

    def split(self, name: str) -> list[Example]:
        if name not in self.splits:
            raise InvalidInputError(f"unknown split {name!r}; use one of {', '.join(SPLITS)}")
        return self.splits[name]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def majority_class(self) -> int:
        """The most frequent label of the training split (ties: the smallest index)."""
        counts = Counter(e.label for e in self.splits["train"])
        return min(counts, key=lambda c: (-counts[c], c))

    def majority_baseline(self, split: str = "test") -> float:
        """The dataset metric of always predicting the training split's majority class."""
        labels = np.array([e.label for e in self.split(split)])
        return score(self.metric, labels, np.full_like(labels, self.majority_class()), self.num_classes)

    def summary(self) -> dict:
        return {
            "name": self.name,
            "classes": list(self.classes),
            "metric": self.metric,
            "paired": self.paired,
            "sizes": {s: len(self.splits[s]) for s in SPLITS},
            "split_seed": self.split_seed,
            "majority_class": self.classes[self.majority_class()],
            "majority_baseline_test": self.majority_baseline("test"),
            "max_length": self.max_length,
        }
