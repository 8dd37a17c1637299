"""Models: packaged encoders, the `Batch` type, the `Classifier` wrapper, checkpoints, fine-tuning.

The names below load on first use (PEP 562): importing a light submodule (`engine.models.metadata`,
`engine.models.ids`) or the CLI's argument parser does not import torch and transformers through this file.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lazy_exports import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)


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
