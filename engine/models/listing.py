"""Listing and checking the checkpoints of the models cache without loading one: their files, metadata and the
safetensors header. Apart from engine.models.checkpoint (which re-exports these), whose loaders import torch and
transformers: the dashboard lists the models on every page, most of which load none.
"""
from __future__ import annotations

import json
from pathlib import Path

import engine.settings as settings
from engine.errors import CheckpointError
from engine.models.metadata import CheckpointMeta
from engine.models.metadata import read_metadata as read_meta
from engine.models.weights import conversion_hint

REQUIRED_FILES = ("config.json", "model.safetensors", "metadata.json", "tokenizer_config.json")


def validate_checkpoint(folder: Path) -> dict:
    """Check files and metadata without loading weights; returns the metadata (a dict) or raises CheckpointError."""
    return check_checkpoint(folder).to_dict()


def check_checkpoint(folder: Path) -> CheckpointMeta:
    """Check a checkpoint's files and metadata without loading weights (`validate_checkpoint`); returns its metadata,
    typed, read once, or raises CheckpointError."""
    if not folder.is_dir():
        raise CheckpointError(f"no checkpoint at {folder} (run `python -m engine models` to list them)")
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if missing:
        pickled = "model.safetensors" in missing and (folder / "pytorch_model.bin").is_file()
        raise CheckpointError(f"checkpoint {folder} is incomplete: missing {', '.join(missing)}"
                              + (f"; its pytorch_model.bin is a pickle and is never loaded: {conversion_hint(folder)}"
                                 if pickled else ""))
    meta = read_meta(folder)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{folder}/config.json is corrupt: {err}") from None
    try:
        # Reads only the JSON header: cheap, and catches truncated or foreign weight files early (framework numpy: the
        # header is the same, and opening it so does not import torch).
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), framework="numpy") as f:
            if not list(f.keys()):
                raise CheckpointError(f"{folder}/model.safetensors holds no tensors")
    except CheckpointError:
        raise
    except Exception as err:  # safetensors raises its own error types for bad headers
        raise CheckpointError(f"{folder}/model.safetensors is corrupt ({type(err).__name__}: {err})") from None
    n_labels = len(config.get("id2label", {})) or config.get("num_labels")
    if n_labels != len(meta.classes) and meta.prompt is None:  # a prompted LM has no label head
        raise CheckpointError(
            f"checkpoint {folder}: config.json has {n_labels} labels but metadata.json names "
            f"{len(meta.classes)} classes {list(meta.classes)}"
        )
    return meta


def list_checkpoints(cache_dir: Path | None = None) -> list[dict]:
    """Metadata of every checkpoint in the cache; broken ones are listed with an `error` field.

    Args:
        cache_dir: default the models cache (ENGINE_MODELS_CACHE).

    Returns:
        One metadata dict per checkpoint folder (with `path`), sorted by folder name.
    """
    cache_dir = Path(cache_dir or settings.models_cache_dir())
    if not cache_dir.is_dir():
        return []
    out = []
    for folder in sorted(p for p in cache_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            out.append(validate_checkpoint(folder) | {"path": str(folder)})
        except CheckpointError as err:
            out.append({"id": folder.name, "path": str(folder), "error": str(err)})
    return out
