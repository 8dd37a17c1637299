"""Learned head weights stored beside a teacher checkpoint: `<checkpoint>/smat_head_weights.json`.

JSON only (never a pickle), written atomically. It holds lambda (the sparsemax of the learned phi_T, the
weights the `smat` importance measure applies), phi itself, the head layout and the provenance of the run
that learned it. One file per checkpoint: a run replaces it with the weights learned from the largest
student budget it has finished (lowest seed among equals), so the measure stays one deterministic thing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from engine.atomic import write_text
from engine.errors import CheckpointError, NotApplicableError

HEAD_WEIGHTS_FILE = "smat_head_weights.json"


def head_weights_path(folder: str | os.PathLike) -> Path:
    return Path(folder) / HEAD_WEIGHTS_FILE


def read_head_weights(folder: str | os.PathLike | None) -> dict | None:
    """The stored record (dict with `weights` [H], `phi` [H], `layers`, `heads`, `provenance`) or None."""
    if folder is None:
        return None
    path = head_weights_path(folder)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is corrupt (not valid JSON: {err})") from None
    weights = record.get("weights") if isinstance(record, dict) else None
    if not isinstance(weights, list) or len(weights) != record.get("layers", 0) * record.get("heads", 0):
        raise CheckpointError(f"{path} is corrupt: expected `weights` of layers x heads numbers")
    return record


def write_head_weights(folder: str | os.PathLike, weights: list[float], phi: list[float], layers: int, heads: int,
                       provenance: dict) -> Path:
    """Write the record atomically (temporary file, then rename)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotApplicableError(f"no checkpoint folder {folder} to store learned head weights in")
    record = {"weights": [float(w) for w in weights], "phi": [float(p) for p in phi], "layers": int(layers),
              "heads": int(heads), "provenance": provenance}
    return write_text(head_weights_path(folder), json.dumps(record, indent=2, default=str))


def should_replace(folder: str | os.PathLike, budget: int, seed: int, dataset: str) -> bool:
    """Whether weights learned with (budget, seed) on `dataset` take the place of the stored ones."""
    record = read_head_weights(folder)
    if record is None:
        return True
    old = record.get("provenance", {})
    if old.get("dataset") != dataset:
        return True
    return (int(budget), -int(seed)) >= (int(old.get("budget", -1)), -int(old.get("seed", 0)))
