"""Loading a causal language model as a `PromptedClassifier` (engine/models/prompted.py): from a local folder
(config.json, safetensors, tokenizer) or a packaged LLM key, and a saved prompted checkpoint (a merged LoRA
fine-tuning) from its metadata. Weights are read only from safetensors; the metadata records where the weights came
from, their digest and the prompt's digest, so results name the model they came from.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.errors import CheckpointError
from engine.models.foreign import max_length_for
from engine.models.llm_package import PACKAGED_LLMS, resolve_llm
from engine.models.metadata import CheckpointMeta
from engine.models.prompt_digest import prompt_sha256
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.models.weights import files_sha256, weight_files
from engine.runtime import configure, pick_device


def load_prompted(folder: str | Path, spec: PromptSpec | dict, *, model_id: str | None = None, max_length: int | None = None,
                  device: str | None = None, extra: dict | None = None, dtype: str | None = None) -> PromptedClassifier:
    """A `PromptedClassifier` from a local causal-LM folder (config.json, safetensors, tokenizer) or a packaged
    LLM key ('smollm2', converted on first use). Weights are read only from safetensors. dtype: as for every
    model (`engine.models.loading.choose_dtype`; default the setting ENGINE_DTYPE, 'auto' = float32)."""
    configure()
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    packaged = str(folder) if str(folder) in PACKAGED_LLMS else None
    folder = resolve_llm(str(folder))
    spec = spec if isinstance(spec, PromptSpec) else PromptSpec.from_dict(spec)
    files = weight_files(folder)
    sha = files_sha256(files)  # listed and hashed once
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"no usable tokenizer in {folder} ({type(err).__name__}: {err})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise CheckpointError(f"the tokenizer in {folder} is a slow tokenizer; token offsets need a fast one (tokenizer.json)")
    import engine.settings as settings
    from engine.models.loading import choose_dtype, dtype_name, stored_dtype

    target = pick_device(device)
    # The dtype asked for is honoured as for an encoder (choose_dtype), and recorded with why.
    stored = stored_dtype(files)
    chosen, dtype_reason = choose_dtype(target.type, stored, dtype or settings.dtype_request())
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), use_safetensors=True, attn_implementation="eager",
                                                     dtype=chosen)
    except (OSError, ValueError, SafetensorError, RuntimeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{folder} could not be loaded as a causal language model ({type(err).__name__}: {err})") from None
    metadata = {
        "id": model_id or f"{packaged or folder.name}-prompt",
        "folder": str(folder), "base_model": packaged or str(folder), "base_model_source": str(folder),
        "weights_files": [p.name for p in files], "weights_sha256": sha,
        "architecture": (model.config.architectures or [type(model).__name__])[0], "model_type": model.config.model_type,
        "decoder": True, "dataset": None, "prompt_sha256": prompt_sha256(spec), "artifacts_dir": None,
        "note": "a language model prompted zero-shot; masked inputs are out of distribution until masked-fine-tuned",
        **(extra or {}),
    }
    classifier = PromptedClassifier(model, tokenizer, spec, max_length_for(tokenizer, model, max_length), metadata, target)
    classifier.folder = folder
    classifier.record_weights_sha256(sha)
    classifier.load_runtime = {**classifier.load_runtime, "stored_dtype": dtype_name(stored), "dtype_reason": dtype_reason}
    return classifier


def load_prompted_checkpoint(folder: Path, meta: CheckpointMeta, device: str | None = None,
                             dtype: str | None = None) -> PromptedClassifier:
    """A saved prompted classifier (a causal-LM folder whose `metadata.json` holds `prompt`, e.g. a merged LoRA
    fine-tuning), given its metadata as read once (typed). Here rather than in checkpoint.py's caller so that
    checkpoint loading needs no import of the training code (engine/models stays free of import cycles)."""
    keep = {k: v for k, v in meta.to_dict().items() if k not in ("folder", "weights_files", "weights_sha256", "base_model_source",
                                                           "prompt", "replacement", "replacement_token",
                                                           "replacement_token_id", "replacement_tokens")}
    # What is fitted for it (MaSF) is kept in its own folder: the metadata it was saved with may still name the
    # artifacts folder of the zero-shot model it was trained from (whose fits are of another model).
    keep["artifacts_dir"] = str(folder)
    return load_prompted(folder, meta.prompt, model_id=meta.id, max_length=meta.max_length,
                         device=device, extra=keep, dtype=dtype)


__all__: Sequence[str] = ("load_prompted", "load_prompted_checkpoint")
