"""The digest of a dataset's inputs: what names the data in every key that depends on it (a MaSF fit's calibration,
a planted model's truth), since a dataset name alone does not say which rows it holds (a registered name can be
given to another file)."""
from __future__ import annotations

import hashlib
import json

from engine.data.lookup import get_dataset


def dataset_sha256(dataset: str, split_seed: int, split: str, limit: int | None) -> str:
    """16 hex digits of the first `limit` inputs (None: all) of `split` of `dataset` split with `split_seed`: each
    example's texts and label name, in order, as JSON."""
    data = get_dataset(dataset, split_seed)
    digest = hashlib.sha256()
    for example in data.split(split)[:limit]:
        digest.update(json.dumps([example.primary, example.auxiliary, data.classes[example.label]]).encode("utf-8"))
    return digest.hexdigest()[:16]
