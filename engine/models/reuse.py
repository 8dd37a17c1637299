"""Reuse a trained model when one with the same training configuration is in models_cache, else train
it once and save it, so sweeps that need a base model (ROAR's level 0, W&P's seeds) share one checkpoint."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from engine.errors import CheckpointError
from engine.models.checkpoint import load_classifier, save_classifier
from engine.models.classifier import Classifier
from engine.models.training import TrainConfig, train_classifier


def load_or_train(config: TrainConfig, model_id: str, log: Callable[[str], None] = print,
                  other_config_suffix: str = "-retrained") -> Classifier:
    """The checkpoint `model_id` when it was trained with exactly `config`; else a model trained with `config`
    and saved. When `model_id` holds a model trained with another configuration, that one is left alone and
    the new one goes to `model_id + other_config_suffix` (reused the same way next time)."""
    for candidate in (model_id, model_id + other_config_suffix):
        try:
            found = load_classifier(candidate)
        except CheckpointError:
            break  # nothing there: train under this id
        # A field added to TrainConfig after a checkpoint was trained (precision) counts at its default value.
        recorded = {**asdict(TrainConfig()), **(found.meta.config or {})}
        if found.meta.config is not None and recorded == asdict(config):
            log(f"{candidate}: loaded from models_cache (same training configuration)")
            return found
        log(f"{candidate}: models_cache has one trained with another configuration; it is left as it is")
    else:
        raise CheckpointError(f"both {model_id!r} and {model_id + other_config_suffix!r} hold models trained with other "
                              "configurations; remove one or choose another id")
    log(f"{candidate}: training")
    classifier = train_classifier(config, show_progress_bar=False)
    save_classifier(classifier, candidate, overwrite=True)
    return classifier
