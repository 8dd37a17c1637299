"""The one look-up of a dataset by name (`get_dataset(name, split_seed)`), for the packaged datasets (rt, imdb,
babi-1..3, toy) and the user's registered files (`engine.data.user_registry`), and the names it resolves."""
from __future__ import annotations

from functools import lru_cache

from engine.data.packaged import LOADERS as _LOADERS
from engine.data.packaged import PACKAGED_DATASETS
from engine.data.types import Dataset
from engine.data.user_registry import get_user_dataset, load_user_dataset, user_dataset_names

DATASET_NAMES = PACKAGED_DATASETS  # the packaged names only, kept for callers that list those


def dataset_names() -> tuple[str, ...]:
    """Every name `get_dataset` resolves: the packaged datasets, then the registered ones (alphabetical).
    Read each time: a registration made in another process shows up.

    Returns:
        The names, packaged first.
    """
    return PACKAGED_DATASETS + tuple(user_dataset_names())


@lru_cache(maxsize=16)
def _packaged_dataset(name: str, split_seed: int) -> Dataset:
    return _LOADERS[name](split_seed=split_seed)


def load_dataset(name: str, split_seed: int = 0) -> Dataset:
    """`get_dataset` without its cache (a fresh load every call)."""
    if name in _LOADERS:
        return _LOADERS[name](split_seed=split_seed)
    return load_user_dataset(name, split_seed)


def get_dataset(name: str, split_seed: int = 0) -> Dataset:
    """Load a dataset by name with seeded splits; the same (name, split_seed) gives the same splits.
    Cached: packaged ones per process, registered ones while their manifest and file are unchanged (a file
    that changed since its registration raises DataFileError). Unknown names raise UnknownDatasetError
    listing the known ones.

    Args:
        name: a packaged dataset (rt, imdb, babi-1..3, toy) or one registered with `python -m engine datasets add`.
        split_seed: seeds the train/validation/test split (recorded in checkpoints as `split_seed`).

    Returns:
        The Dataset, its splits as lists of Examples.
    """
    if name in _LOADERS:
        return _packaged_dataset(name, split_seed)
    return get_user_dataset(name, split_seed)


get_dataset.__wrapped__ = load_dataset  # the uncached loader, as functools' decorators expose it
