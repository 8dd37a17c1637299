"""Models: packaged encoders, the `Batch` type, the `Classifier` wrapper, checkpoints, fine-tuning."""
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
from engine.models.masking import STRATEGIES, apply_token_masks, mask_all_primary, mask_random_fraction, training_transform
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier, load_prompted  # prompted language models
from engine.models.registry import register_model, registered_models, unregister_model
from engine.models.training import TrainConfig, TrainingCancelled, default_model_id, train_classifier

__all__ = [name for name in dir() if not name.startswith("_")]
