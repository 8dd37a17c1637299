"""Sequence classifiers fine-tuned elsewhere: any local Hugging Face `*ForSequenceClassification` folder.

A folder written by `save_pretrained` (model and tokenizer) loads as a `Classifier` with its provenance
synthesised: the folder, the SHA-256 of its weights, its class names (`id2label`), its max length (the
tokenizer's, capped by the model's position embeddings) and `strategy: 'elsewhere'`, `masked_fine_tuned:
False` unless the caller says otherwise. Weights are read only from safetensors, single-file or sharded with
`model.safetensors.index.json`; a folder with pickled weights only (`pytorch_model.bin`) is refused with the
command that converts it, and nothing is ever unpickled.

The replacement token that masking writes is chosen here: the tokenizer's mask token by default, or for a
model without one (GPT-2, Llama) 'pad', 'unk' or any single token of its vocabulary (e.g. one added before
fine-tuning). Masked inputs count as in distribution only if the model was fine-tuned with that token.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from engine.errors import CheckpointError, InvalidInputError
from engine.models.classifier import Classifier, is_decoder_classifier
from engine.models.loading import load_pretrained
from engine.models.weights import files_sha256, weight_files
from engine.runtime import configure, pick_device

#: values of `replacement` that name one of the tokenizer's special tokens
SPECIAL_REPLACEMENTS = {"mask": "mask_token", "pad": "pad_token", "unk": "unk_token"}
#: a tokenizer that does not know its own limit says 1e30; anything above this is treated as "no limit"
_NO_LIMIT = 1_000_000
DEFAULT_MAX_LENGTH = 512


def read_config(folder: Path) -> dict:
    """config.json as a dict; refuses a folder that is not a sequence classifier by its `architectures`."""
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{folder} has no config.json: not a Hugging Face model folder "
                              "(write one with model.save_pretrained(folder))")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is corrupt: {err}") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} is corrupt (expected a JSON object)")
    architectures = config.get("architectures") or []
    if architectures and not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise CheckpointError(
            f"{folder} holds a {architectures[0]}, not a sequence classifier (*ForSequenceClassification). Fine-tune "
            f"one here instead: python -m engine train --model {folder} --dataset NAME")
    return config


def resolve_replacement(tokenizer, replacement: str | None) -> tuple[str | None, int | None]:
    """(token, id) that masking writes: the mask token by default (None, None when there is none);
    'mask', 'pad', 'unk' name the tokenizer's special tokens; anything else must be one token of its vocabulary."""
    if replacement is None:
        if tokenizer.mask_token_id is None:
            return None, None
        return str(tokenizer.mask_token), int(tokenizer.mask_token_id)
    if replacement in SPECIAL_REPLACEMENTS:
        token = getattr(tokenizer, SPECIAL_REPLACEMENTS[replacement], None)
        if token is None:
            have = [k for k, attr in SPECIAL_REPLACEMENTS.items() if getattr(tokenizer, attr, None) is not None]
            raise InvalidInputError(f"the tokenizer has no {replacement} token; it has: {', '.join(have) or 'none of mask, pad, unk'} "
                                    "(or name a token of its vocabulary)")
        return str(token), int(tokenizer.convert_tokens_to_ids(token))
    token_id = tokenizer.convert_tokens_to_ids(replacement)
    if token_id is None or (token_id == tokenizer.unk_token_id and replacement != tokenizer.unk_token):
        raise InvalidInputError(
            f"replacement token {replacement!r} is not one token of the tokenizer's vocabulary; use mask, pad, unk, or "
            "add it before fine-tuning (tokenizer.add_tokens([...]); model.resize_token_embeddings(len(tokenizer)))")
    return replacement, int(token_id)


def position_limit(model) -> int | None:
    """The longest input the model's learned position embeddings allow, or None (relative/rotary positions).

    RoBERTa and XLM-R number positions from pad_token_id + 1, so 514 embeddings allow 512 tokens."""
    import torch

    for module in model.modules():
        table = getattr(module, "position_embeddings", None)
        if isinstance(table, torch.nn.Embedding):
            offset = getattr(module, "padding_idx", None)
            return int(table.num_embeddings) - (int(offset) + 1 if offset is not None else 0)
    positions = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    return int(positions) if positions else None


def max_length_for(tokenizer, model, requested: int | None = None) -> int:
    """Tokens per input: the requested length, else the tokenizer's `model_max_length`, capped by the model's
    position embeddings; 512 (or the positions, if fewer) when neither states a limit."""
    positions = position_limit(model)
    if requested and positions and requested > positions:
        raise InvalidInputError(f"max length {requested} exceeds the model's {positions} position embeddings")
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    first = requested or (int(tokenizer_limit) if tokenizer_limit and tokenizer_limit < _NO_LIMIT else None)
    if first is None:
        return min(DEFAULT_MAX_LENGTH, positions or DEFAULT_MAX_LENGTH)
    return min(first, positions) if positions else first


def load_foreign(folder: str | os.PathLike, *, model_id: str | None = None, tokenizer_path: str | os.PathLike | None = None,
                 replacement: str | None = None, masked_fine_tuned: bool = False, max_length: int | None = None,
                 artifacts_dir: str | os.PathLike | None = None, device: str | None = None, extra: dict | None = None,
                 dtype: str | None = None, attention: str | None = None):
    """A `Classifier` from a Hugging Face sequence-classification folder fine-tuned elsewhere.

    tokenizer_path: where the tokenizer is, when not in the folder. replacement: see `resolve_replacement`.
    masked_fine_tuned: the model was trained with the replacement token (its masked inputs are in
    distribution). artifacts_dir: where files fitted for it (MaSF) are kept; None keeps none. dtype, attention:
    see `engine.models.loading` (default: the settings ENGINE_DTYPE, ENGINE_ATTENTION).
    """
    configure()
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise CheckpointError(f"no model folder at {folder}")
    config = read_config(folder)
    files = weight_files(folder)
    sha = files_sha256(files)  # listed and hashed once: the loader below is handed the list
    tok_source = Path(tokenizer_path).expanduser().resolve() if tokenizer_path else folder
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tok_source))
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise CheckpointError(
            f"no usable tokenizer in {tok_source} ({type(err).__name__}: {err}); save it beside the model with "
            "tokenizer.save_pretrained(folder), or register the model with --tokenizer PATH") from None
    if not getattr(tokenizer, "is_fast", False):
        raise CheckpointError(f"the tokenizer in {tok_source} is a slow (Python) tokenizer; token offsets need a fast one "
                              "(save it from transformers' *TokenizerFast, or with tokenizer.json)")
    target = pick_device(device)
    try:
        (model, info), runtime = load_pretrained(AutoModelForSequenceClassification, folder, device=target, dtype=dtype,
                                                 attention=attention, output_loading_info=True, files=files)
    except InvalidInputError:
        raise
    except (OSError, ValueError, SafetensorError, RuntimeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{folder} could not be loaded ({type(err).__name__}: {err})") from None
    missing = sorted(info.get("missing_keys") or [])
    head = [k for k in missing if k.split(".")[0] in ("classifier", "score")]
    if head:
        raise CheckpointError(f"{folder} has no trained classifier head (missing {', '.join(head[:4])}): it is an encoder, "
                              f"not a classifier. Fine-tune one here: python -m engine train --model {folder} --dataset NAME")
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        raise CheckpointError(f"the tokenizer has {len(tokenizer)} tokens but the model's embedding table only "
                              f"{model.get_input_embeddings().num_embeddings} rows: a tokenizer of another model?")
    decoder = is_decoder_classifier(model)
    pad_added = None
    if tokenizer.pad_token_id is None:
        # Decoders often ship without a pad token; padding is masked out by the attention mask and the read-out
        # position comes from it too (Classifier.forward), so any existing token will do.
        for name in ("eos_token", "unk_token", "bos_token"):
            if getattr(tokenizer, name, None) is not None:
                tokenizer.pad_token = getattr(tokenizer, name)
                pad_added = name
                break
        else:
            raise CheckpointError(f"the tokenizer in {tok_source} has no pad, eos, unk or bos token to pad with")
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    token, token_id = resolve_replacement(tokenizer, replacement)
    n_labels = model.config.num_labels
    id2label = {int(k): str(v) for k, v in (model.config.id2label or {}).items()}
    classes = [id2label.get(i, f"LABEL_{i}") for i in range(n_labels)]
    architecture = (config.get("architectures") or [type(model).__name__])[0]
    metadata = {
        "id": model_id or folder.name,
        "source": "elsewhere",
        "folder": str(folder),
        "tokenizer": str(tok_source),
        "weights_files": [p.name for p in files],
        "weights_sha256": sha,
        "base_model": str(folder),
        "base_model_source": str(folder),
        "architecture": architecture,
        "model_type": model.config.model_type,
        "decoder": decoder,
        "dataset": None,
        "classes": classes,
        "paired": False,
        "strategy": "elsewhere",
        "masked_fine_tuned": bool(masked_fine_tuned),
        "max_length": max_length_for(tokenizer, model, max_length),
        "replacement_token": token,
        "replacement_token_id": token_id,
        "replacement_in_distribution": bool(masked_fine_tuned) and token_id is not None,
        "pad_token_from": pad_added,
        "randomly_initialised": missing,
        "artifacts_dir": str(artifacts_dir) if artifacts_dir else None,
        "note": "fine-tuned elsewhere" + ("" if masked_fine_tuned else
                 "; not masked-fine-tuned here, so its masked inputs may be out of distribution"),
        **(extra or {}),
    }
    classifier = Classifier(model, tokenizer, classes, metadata["max_length"], metadata, target)
    classifier.folder = folder
    classifier.record_weights_sha256(sha)
    classifier.load_runtime = runtime
    return classifier
