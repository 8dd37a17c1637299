"""Which files of a model folder hold its weights, and their SHA-256: safetensors only.

Its own module because both loading (checks a folder before `from_pretrained`) and foreign / checkpoint /
prompted (list and hash the files) need it, and nothing here needs either of them.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from engine.errors import CheckpointError

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
PICKLED_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth", "tf_model.h5",
                 "flax_model.msgpack")


def conversion_hint(folder: Path) -> str:
    """The command that rewrites a folder's pickled weights as safetensors, run by the user who trusts it.

    Args:
        folder: the model folder holding pickled weights.

    Returns:
        One sentence with the shell command and the folder it writes (`<folder>-safetensors`).
    """
    out = f"{folder}-safetensors"
    return (f"convert it once, in a Python you trust with that file (unpickling can run code): python -c \"from "
            f"transformers import AutoModelForSequenceClassification as M, AutoTokenizer as T; "
            f"M.from_pretrained('{folder}').save_pretrained('{out}'); T.from_pretrained('{folder}').save_pretrained('{out}')\" "
            f"and use {out}")


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a folder: `model.safetensors`, or the shards its index names (sorted).

    Args:
        folder: a model folder.

    Returns:
        The weight files' paths, in the order they are hashed.

    Raises CheckpointError for a folder with pickled weights only (with the conversion command), an index
    whose shards are missing, or no weights at all."""
    if (folder / SINGLE_FILE).is_file():
        return [folder / SINGLE_FILE]
    if (folder / INDEX_FILE).is_file():
        try:
            index = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
            shards = sorted(set(index["weight_map"].values()))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(f"{folder / INDEX_FILE} is corrupt (expected a JSON object with a weight_map: {err})") from None
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise CheckpointError(f"{folder} is incomplete: its {INDEX_FILE} names shards that are missing: {', '.join(missing)}")
        if not shards:
            raise CheckpointError(f"{folder / INDEX_FILE} names no weight files")
        return [folder / s for s in shards]
    pickled = [f for f in PICKLED_FILES if (folder / f).is_file()] + sorted(p.name for p in folder.glob("pytorch_model-*.bin"))
    if pickled:
        raise CheckpointError(f"{folder} holds its weights only as a pickle ({', '.join(pickled)}), which is never "
                              f"loaded here because unpickling can run code; {conversion_hint(folder)}")
    raise CheckpointError(f"{folder} holds no weights: expected {SINGLE_FILE} or {INDEX_FILE} with its shards")


def files_sha256(files: list[Path]) -> str:
    """SHA-256 (hex) of weight files' bytes concatenated in the order given (`weight_files`' order).

    Args:
        files: the safetensors files of one model folder, as `weight_files` lists them.

    Returns:
        64 hex digits.
    """
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def weights_sha256(folder: str | os.PathLike) -> str:
    """SHA-256 (hex) of a folder's safetensors weights: of `model.safetensors`, or of its shards' bytes
    concatenated in sorted file-name order (so one file and its re-sharding hash differently, on purpose:
    the hash names the files, not the tensors).

    Args:
        folder: a model folder.

    Returns:
        64 hex digits.
    """
    return files_sha256(weight_files(Path(folder)))
