"""Which kind of `Classifier` a model is: the one answer to "is this a prompted LM?" (stdlib only, so a listing
asks it without importing torch).

Three kinds behind the one `Classifier` interface, which the measures never see but the tool's words, options
and costs do: a sequence-classification head on a pretrained encoder (or a decoder's `...ForSequenceClassification`),
a causal language model used through a prompt and its verbalizer, and the BiLSTM with attention of W&P.
"""
from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

#: `config.json`'s `architecture` (and the checkpoint metadata's) of engine.models.bilstm's model
BILSTM_ARCHITECTURE = "bilstm-attention"


class ModelKind(StrEnum):
    """What a classifier is built of. A `StrEnum`: compares equal to its value and writes as it to JSON."""

    HEAD = "classification head"  # a pretrained transformer with a sequence-classification head
    PROMPTED = "prompted LM"  # a causal LM asked through a prompt spec, its classes read from label words
    BILSTM = "BiLSTM"  # engine.models.bilstm: BiLSTM with additive attention


def kind_of(prompt: Mapping[str, Any] | None, architecture: str | None, base_model: str | None = None) -> ModelKind:
    """The kind a model's recorded facts give it: a prompt spec makes it a prompted LM (zero-shot, registered,
    built in or LoRA-fine-tuned: each records the prompt it is asked with); the BiLSTM's architecture (or, for a
    checkpoint written before the architecture was recorded, its base model `bilstm`) makes it the BiLSTM.

    Args:
        prompt: the prompt spec as recorded (a dict), or None.
        architecture: the recorded model family (config's model_type, or the BiLSTM's name).
        base_model: the recorded base model ('tiny', 'bilstm', a Hub id ...).

    Returns:
        Its ModelKind.
    """
    if prompt is not None:
        return ModelKind.PROMPTED
    if architecture == BILSTM_ARCHITECTURE or (architecture is None and base_model == "bilstm"):
        return ModelKind.BILSTM
    return ModelKind.HEAD
