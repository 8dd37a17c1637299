"""Checkpoints in `models_cache/<id>/`: safetensors weights, tokenizer files, `metadata.json`.

Loading goes only through safetensors and JSON: nothing is ever unpickled, so a folder a user hands
in cannot run code. Saving writes to a temporary folder and renames it, so an interrupted save never
leaves a half-written checkpoint behind.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import engine.settings as settings
from engine.atomic import recover_folder, replacing_folder
from engine.errors import CheckpointError, InvalidInputError  # noqa: F401 (re-exported)
from engine.models.bilstm import ARCHITECTURE, BiLSTMAttentionClassifier
from engine.models.classifier import Classifier
from engine.models.foreign import load_foreign, read_config
from engine.models.ids import check_model_id
from engine.models.kinds import ModelKind, kind_of
from engine.models.listing import REQUIRED_FILES, check_checkpoint, list_checkpoints, validate_checkpoint  # noqa: F401 (re-exported)
from engine.models.loading import load_pretrained
from engine.models.metadata import REQUIRED_KEYS, write_metadata
from engine.models.metadata import read_metadata as read_meta
from engine.models.prompted_loading import load_prompted_checkpoint
from engine.models.registry import artifacts_dir, load_registered, read_manifest, registered_models
from engine.models.weights import weight_files
from engine.models.weights import weights_sha256 as files_sha256
from engine.runtime import configure, pick_device

REQUIRED_METADATA = REQUIRED_KEYS


def models_cache_dir() -> Path:
    return settings.models_cache_dir()


def is_path(model_id_or_path: str | os.PathLike) -> bool:
    """A folder path (existing, or written with a separator) rather than an id."""
    path = Path(model_id_or_path)
    return path.is_dir() or os.sep in str(model_id_or_path) or (os.altsep or os.sep) in str(model_id_or_path)


def checkpoint_dir(model_id_or_path: str | os.PathLike) -> Path:
    """A folder path as given; else `models_cache/<id>`, or the folder of a registered id when there is no
    such checkpoint."""
    if is_path(model_id_or_path):
        return Path(model_id_or_path)
    folder = models_cache_dir() / check_model_id(str(model_id_or_path))
    recover_folder(folder)  # where a killed save left the old checkpoint renamed aside (no atomic swap here)
    if not folder.exists():
        manifest = read_manifest(str(model_id_or_path))
        if manifest is not None:
            return Path(manifest["path"])
    return folder


def read_metadata(folder: Path) -> dict:
    """A checkpoint's metadata.json as a dict (`engine.models.metadata.read_metadata` reads and checks it; this
    dict form is for the readers not yet moved to `CheckpointMeta`)."""
    return read_meta(folder).to_dict()


def weights_sha256(folder: str | os.PathLike | None) -> str | None:
    """SHA-256 (hex) of a checkpoint's `model.safetensors`, or None without a folder.

    Results record it beside the checkpoint's id: an id names a training command, and a checkpoint retrained
    on another machine (models_cache is not shipped) is the same model only if its weights hash the same."""
    if folder is None:
        return None
    return files_sha256(folder)  # model.safetensors, or a sharded folder's shards


def _unknown_model(model_id: str) -> CheckpointError:
    """The error for an id that names neither a checkpoint in the models cache nor a registered model: it lists the
    ids that do and says how to register a folder."""
    known = [m["id"] for m in list_checkpoints() + registered_models() if "error" not in m]
    return CheckpointError(f"no checkpoint or registered model {model_id!r} (known: {', '.join(known) or 'none'}); "
                           "register a folder with `python -m engine models add PATH`")


def model_folders(model_id_or_path: str | os.PathLike) -> tuple[Path, Path | None]:
    """(the folder that holds the weights, the folder for what the engine stores about the model, e.g. its
    MaSF fit, or None) of any model reference `load_classifier` takes, without loading the model. Raises
    CheckpointError when the reference names nothing."""
    if not is_path(model_id_or_path):
        model_id = check_model_id(str(model_id_or_path))
        cached = models_cache_dir() / model_id
        if cached.exists():
            return cached, cached
        manifest = read_manifest(model_id)
        if manifest is None:
            raise _unknown_model(model_id)
        return Path(manifest["path"]), artifacts_dir(model_id)
    folder = Path(model_id_or_path)
    return folder, folder if (folder / "metadata.json").is_file() else None


def reference_weights_sha256(model_id_or_path: str | os.PathLike) -> str | None:
    """`Classifier.weights_sha256` of the model a reference loads, without loading it: the hash of its folder's
    weight files or, for a built-in id with a shipped adapter, of base and adapter merged
    (`builtin_llms.merged_weights_sha256`); None when the folder is gone. What a sweep's resume check compares with
    the hashes its cells recorded. Raises CheckpointError when the reference names nothing."""
    folder, _ = model_folders(model_id_or_path)
    if not folder.is_dir():
        return None
    digest = files_sha256(folder)
    if not is_path(model_id_or_path) and not (models_cache_dir() / str(model_id_or_path)).exists():
        manifest = read_manifest(str(model_id_or_path)) or {}
        if manifest.get("builtin") and manifest.get("adapter"):
            from engine.models.builtin_llms import adapter_sha256, merged_weights_sha256

            return merged_weights_sha256(digest, adapter_sha256(str(model_id_or_path)))
    return digest


def validate_model(model_id_or_path: str | os.PathLike) -> None:
    """Check, before any long work, that a model reference names a loadable folder (files present and
    consistent); raises CheckpointError saying what is wrong."""
    folder, _ = model_folders(model_id_or_path)
    if not is_path(model_id_or_path) and not (models_cache_dir() / str(model_id_or_path)).exists():
        from engine.models.registry import read_manifest

        manifest = read_manifest(str(model_id_or_path))
        if kind_of(manifest.get("prompt"), manifest.get("architecture")) is ModelKind.PROMPTED:  # no head to find
            _validate_prompted(manifest, folder)
            return
    if (folder / "metadata.json").is_file() or not folder.is_dir():
        validate_checkpoint(folder)
        return
    read_config(folder)
    weight_files(folder)


def _validate_prompted(manifest: dict, folder: Path) -> None:
    """A registered prompted LM loads when its folder holds a config and safetensors weights, or, for a packaged
    LLM not converted yet (it is converted on first load), when its package is installed."""
    if manifest.get("packaged_llm") and not (folder / "config.json").is_file():
        from engine.models.llm_package import gguf_source

        gguf_source(manifest["packaged_llm"])
        return
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{folder} has no config.json: not a Hugging Face model folder")
    weight_files(folder)


def load_classifier(model_id_or_path: str | os.PathLike, device: str | None = None, dtype: str | None = None,
                    attention: str | None = None) -> Classifier:
    """The one way to load a model, onto the chosen device. Resolves, in this order:

    an id of a checkpoint in models_cache; an id registered with `python -m engine models add`; a folder:
    a checkpoint of this project (it has metadata.json) or any Hugging Face sequence-classification folder
    fine-tuned elsewhere (engine.models.foreign; the mask token is its replacement token, if it has one).
    Weights are read from safetensors only; dtype and attention kernel as in `engine.models.loading`
    (default: the settings ENGINE_DTYPE and ENGINE_ATTENTION), recorded in `Classifier.runtime`.

    Args:
        model_id_or_path: a checkpoint id, a registered id, or a folder.
        device: 'cpu', 'cuda', ... (default: ENGINE_DEVICE, else the best available).
        dtype, attention: override the settings for this model.

    Returns:
        The Classifier on the chosen device; `classifier.meta` is its typed metadata.

    Raises CheckpointError naming the known models when the reference names nothing loadable.
    """
    configure()
    if not is_path(model_id_or_path):
        model_id = check_model_id(str(model_id_or_path))
        folder = models_cache_dir() / model_id
        recover_folder(folder)  # a save killed mid-swap where no atomic exchange exists
        if not folder.exists():
            if read_manifest(model_id) is not None:
                return load_registered(model_id, device=device, dtype=dtype, attention=attention)
            raise _unknown_model(model_id)
        return _load_checkpoint(folder, device, dtype, attention)  # the id resolved once: checkpoint_dir's folder
    if not (Path(model_id_or_path) / "metadata.json").is_file() and Path(model_id_or_path).is_dir():
        return load_foreign(model_id_or_path, device=device, dtype=dtype, attention=attention)
    return _load_checkpoint(Path(model_id_or_path), device, dtype, attention)


def _load_checkpoint(folder: Path, device: str | None, dtype: str | None = None, attention: str | None = None) -> Classifier:
    """A checkpoint of this project (models_cache/<id> or a copy of one)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    meta = check_checkpoint(folder)  # read and checked once, typed
    if meta.kind is ModelKind.PROMPTED:  # a prompted LM fine-tuned with LoRA, merged (engine.models.lora_training)
        return load_prompted_checkpoint(folder, meta, device, dtype)
    metadata = meta.to_dict()
    target = pick_device(device)
    runtime = None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architecture") == ARCHITECTURE:
            model = BiLSTMAttentionClassifier.from_pretrained(folder)  # safetensors only, float32, its own attention
        else:
            model, runtime = load_pretrained(AutoModelForSequenceClassification, folder, device=target, dtype=dtype,
                                             attention=attention)
    except InvalidInputError:
        raise
    except (OSError, ValueError, SafetensorError, RuntimeError, KeyError, TypeError) as err:
        raise CheckpointError(f"checkpoint {folder} could not be loaded ({type(err).__name__}: {err})") from None
    classifier = Classifier(model, tokenizer, list(meta.classes), meta.max_length, metadata, target)
    classifier.folder = folder
    classifier.load_runtime = runtime
    return classifier


def save_classifier(classifier: Classifier, model_id: str, cache_dir: Path | None = None, overwrite: bool = False) -> Path:
    """Write the checkpoint atomically to `<cache_dir>/<model_id>` (metadata through
    `engine.models.metadata.write_metadata`, stamped with its schema version).

    Args:
        classifier: the model; model_id: its id (checked by `check_model_id`).
        cache_dir: default the models cache (ENGINE_MODELS_CACHE); overwrite: replace an existing checkpoint.

    Returns:
        The checkpoint folder; `classifier.metadata` and `classifier.folder` then name it.
    """
    cache_dir = Path(cache_dir or models_cache_dir())
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / check_model_id(model_id)
    if final.exists() and not overwrite:
        raise FileExistsError(f"{final} exists; pass overwrite=True (CLI: --overwrite) or choose another --id")
    # built beside the old checkpoint and swapped in whole: a reader, or a process killed at any point, sees the
    # old checkpoint or the new one (the old one is never deleted before the new one is in place)
    with replacing_folder(final) as tmp:
        classifier.model.config.id2label = dict(enumerate(classifier.classes))
        classifier.model.config.label2id = {c: i for i, c in enumerate(classifier.classes)}
        classifier.model.save_pretrained(str(tmp), safe_serialization=True)
        classifier.tokenizer.save_pretrained(str(tmp))
        metadata = write_metadata(tmp, dict(classifier.metadata, id=model_id))
    classifier.metadata = metadata
    classifier.folder = final
    classifier.record_weights_sha256(None)  # its weights are the files just written: hashed from the folder
    return final
