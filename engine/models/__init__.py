"""Models: packaged encoders, the `Batch` type, the `Classifier` wrapper, checkpoints, fine-tuning.

The names below load on first use (PEP 562): importing a light submodule (`engine.models.metadata`,
`engine.models.ids`) or the CLI's argument parser does not import torch and transformers through this file.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the submodule that defines it
_EXPORTS = {
    **dict.fromkeys(("AUXILIARY", "PRIMARY", "SPECIAL", "Batch", "EmptyInputError", "collate_examples", "tokenize"), "batch"),
    **dict.fromkeys(("CheckpointError", "list_checkpoints", "load_classifier", "models_cache_dir", "save_classifier",
                     "validate_checkpoint"), "checkpoint"),
    **dict.fromkeys(("Classifier", "LabelMismatchError"), "classifier"),
    **dict.fromkeys(("PACKAGED_ENCODERS", "UnknownModelError", "resolve_encoder"), "encoders"),
    "load_foreign": "foreign",
    **dict.fromkeys(("apply_token_masks", "mask_all_primary", "mask_random_fraction", "training_transform"), "masking"),
    **dict.fromkeys(("STRATEGIES", "CheckpointMeta"), "metadata"),
    "PromptSpec": "prompt_spec",
    "PromptedClassifier": "prompted",
    "load_prompted": "prompted_loading",
    **dict.fromkeys(("register_model", "registered_models", "unregister_model"), "registry"),
    **dict.fromkeys(("TrainConfig", "TrainingCancelled", "default_model_id", "train_classifier"), "training"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"engine.models.{_EXPORTS[name]}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'engine.models' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from engine.models.batch import AUXILIARY, PRIMARY, SPECIAL, Batch, EmptyInputError, collate_examples, tokenize
    from engine.models.checkpoint import (
        CheckpointError,
        list_checkpoints,
        load_classifier,
        models_cache_dir,
        save_classifier,
        validate_checkpoint,
    )
    from engine.models.classifier import Classifier, LabelMismatchError
    from engine.models.encoders import PACKAGED_ENCODERS, UnknownModelError, resolve_encoder
    from engine.models.foreign import load_foreign
    from engine.models.masking import apply_token_masks, mask_all_primary, mask_random_fraction, training_transform
    from engine.models.metadata import STRATEGIES, CheckpointMeta
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier
    from engine.models.prompted_loading import load_prompted
    from engine.models.registry import register_model, registered_models, unregister_model
    from engine.models.training import TrainConfig, TrainingCancelled, default_model_id, train_classifier
