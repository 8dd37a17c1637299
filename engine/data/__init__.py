"""Dataset registry: `get_dataset(name, split_seed)` for rt, imdb, babi-1..3 and toy."""
from __future__ import annotations

from functools import lru_cache, partial

from engine.data.babi import load_babi
from engine.data.metrics import METRICS, score
from engine.data.sentiment import load_imdb, load_rt
from engine.data.toy import load_toy
from engine.data.types import SPLITS, Dataset, Example
from engine.errors import UnknownDatasetError  # noqa: F401 (re-exported)

_LOADERS = {
    "rt": load_rt,
    "imdb": load_imdb,
    "babi-1": partial(load_babi, 1),
    "babi-2": partial(load_babi, 2),
    "babi-3": partial(load_babi, 3),
    "toy": load_toy,
}
DATASET_NAMES = tuple(_LOADERS)


@lru_cache(maxsize=16)
def get_dataset(name: str, split_seed: int = 0) -> Dataset:
    """Load a dataset by name with seeded splits; the same (name, split_seed) gives the same splits."""
    if name not in _LOADERS:
        raise UnknownDatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASET_NAMES)}")
    return _LOADERS[name](split_seed=split_seed)


__all__ = ["Dataset", "Example", "SPLITS", "METRICS", "score", "get_dataset", "DATASET_NAMES", "UnknownDatasetError"]
