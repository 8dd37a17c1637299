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


def fit_masf(classifier: Classifier, split: str = "validation", limit: int | None = None, seed: int = 0,
             save: bool = True, progress=None) -> MaSF:
    """Fit MaSF on the checkpoint's validation split transformed like its training; store it in the
    checkpoint folder (safetensors + JSON provenance) when the classifier has one."""
    meta = classifier.metadata
    dataset = get_dataset(meta["dataset"], meta.get("split_seed", 0))
    classifier.check_dataset(dataset)
    examples = dataset.split(split)[:limit]
    feats = calibration_features(classifier, examples, meta.get("strategy", "masked"), seed=1234 + seed, progress=progress)
    masf = MaSF(seed=seed).fit(feats)
    if save and classifier.folder is not None:
        # Written under a temporary name and renamed: parallel sweep workers that fit the same checkpoint at
        # once (the fit is deterministic) must never read another's half-written file.
        folder, tag = classifier.folder, f".{os.getpid()}.tmp"
        save_file({k: v.contiguous() for k, v in masf.state().items()}, str(folder / (MASF_FILE + tag)))
        (folder / (MASF_META + tag)).write_text(json.dumps({
            "calibration": f"{dataset.name} {split} split ({len(examples)} inputs) transformed like "
                           f"{meta.get('strategy', 'masked')} training, mask seed {1234 + seed}",
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
    if classifier.folder is None or not (classifier.folder / MASF_FILE).is_file():
        return None
    return MaSF.from_state(load_file(str(classifier.folder / MASF_FILE)))


def masf_provenance(classifier: Classifier) -> dict | None:
    """The JSON stored beside a checkpoint's MaSF fit (calibration data, parts, code version), or None."""
    if classifier.folder is None or not (classifier.folder / MASF_META).is_file():
        return None
    return json.loads((classifier.folder / MASF_META).read_text(encoding="utf-8"))


def masf_pvalues(classifier: Classifier, masf: MaSF, batch: Batch) -> np.ndarray:
    """In-distribution p-value [B] of each input of the batch (as it is, masked or not)."""
    return masf.pvalues(hidden_state_features(classifier, batch))


__all__ = ["MaSF", "fit_masf", "load_masf", "masf_provenance", "masf_pvalues", "hidden_state_features", "logits_and_features",
           "calibration_features", "naive_pvalues"]
