"""In-distribution tests for masked inputs: MaSF fitted per checkpoint and stored beside it."""
from __future__ import annotations

import json
import os
import time

import numpy as np
from safetensors.torch import load_file, save_file

from engine.data import get_dataset
from engine.models import Batch, Classifier
from engine.ood.features import calibration_features, hidden_state_features, logits_and_features
from engine.ood.masf import MaSF, naive_pvalues
from engine.runtime import code_version

MASF_FILE = "masf.safetensors"
MASF_META = "masf.json"


def calibration_strategy(classifier: Classifier) -> str:
    """How calibration inputs are transformed: like the model's training. A model fine-tuned elsewhere saw
    unmasked text only (plain), unless it was declared masked-fine-tuned with its replacement token."""
    strategy = classifier.metadata.get("strategy", "masked")
    if strategy == "elsewhere":
        return "masked" if classifier.masked_fine_tuned else "plain"
    return strategy


def fit_masf(classifier: Classifier, split: str = "validation", limit: int | None = None, seed: int = 0,
             save: bool = True, progress=None, dataset: str | None = None) -> MaSF:
    """Fit MaSF on the checkpoint's validation split transformed like its training; store it beside the
    checkpoint (safetensors + JSON provenance) when it has a folder for that (`Classifier.artifacts_dir`).

    dataset: the dataset to calibrate on; needed for a model fine-tuned elsewhere (it has none recorded)."""
    from engine.errors import InvalidInputError

    meta = classifier.metadata
    name = dataset or meta.get("dataset")
    if name is None:
        raise InvalidInputError(f"model {classifier.id!r} was fine-tuned elsewhere: name the dataset to calibrate its MaSF "
                                f"on (python -m engine masf --model {classifier.id} --dataset NAME)")
    dataset = get_dataset(name, meta.get("split_seed", 0))
    dataset = classifier.check_dataset(dataset)
    examples = dataset.split(split)[:limit]
    strategy = calibration_strategy(classifier)
    feats = calibration_features(classifier, examples, strategy, seed=1234 + seed, progress=progress)
    masf = MaSF(seed=seed).fit(feats)
    folder = classifier.artifacts_dir
    if save and folder is not None:
        # Written under a temporary name and renamed: parallel sweep workers that fit the same checkpoint at
        # once (the fit is deterministic) must never read another's half-written file.
        folder.mkdir(parents=True, exist_ok=True)
        tag = f".{os.getpid()}.tmp"
        save_file({k: v.contiguous() for k, v in masf.state().items()}, str(folder / (MASF_FILE + tag)))
        (folder / (MASF_META + tag)).write_text(json.dumps({
            "calibration": f"{dataset.name} {split} split ({len(examples)} inputs) transformed like "
                           f"{strategy} training, mask seed {1234 + seed}", "dataset": dataset.name,
            "parts": [int(masf.level1.shape[0]), int(masf.level2.shape[0]), int(masf.level3.shape[0])],
            "feature_shape": list(masf.shape), "seed": seed, "code_version": code_version(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }, indent=2), encoding="utf-8")
        # The JSON first: a reader that finds the safetensors (what load_masf looks for) finds its provenance too.
        os.replace(folder / (MASF_META + tag), folder / MASF_META)
        os.replace(folder / (MASF_FILE + tag), folder / MASF_FILE)
    return masf


def load_masf(classifier: Classifier) -> MaSF | None:
    """The stored MaSF of a checkpoint, or None when it has not been fitted yet."""
    folder = classifier.artifacts_dir
    if folder is None or not (folder / MASF_FILE).is_file():
        return None
    return MaSF.from_state(load_file(str(folder / MASF_FILE)))


def load_or_fit_masf(classifier: Classifier, dataset: str | None = None) -> MaSF:
    """The stored MaSF of `classifier`, else one fitted (and stored) now: on the validation split of the model's own
    dataset, or, for a model fine-tuned elsewhere (it records none), of `dataset`."""
    own = classifier.metadata.get("dataset")
    return load_masf(classifier) or fit_masf(classifier, dataset=None if own else dataset)


def masf_provenance(classifier: Classifier) -> dict | None:
    """The JSON stored beside a checkpoint's MaSF fit (calibration data, parts, code version), or None."""
    folder = classifier.artifacts_dir
    if folder is None or not (folder / MASF_META).is_file():
        return None
    return json.loads((folder / MASF_META).read_text(encoding="utf-8"))


def masf_pvalues(classifier: Classifier, masf: MaSF, batch: Batch) -> np.ndarray:
    """In-distribution p-value [B] of each input of the batch (as it is, masked or not)."""
    return masf.pvalues(hidden_state_features(classifier, batch))


__all__ = ["MaSF", "calibration_strategy", "fit_masf", "load_masf", "masf_provenance", "masf_pvalues", "hidden_state_features", "logits_and_features",
           "calibration_features", "naive_pvalues"]
