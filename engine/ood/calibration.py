"""MaSF calibration: fitting a MaSF on a dataset's inputs transformed like the model's training, storing it beside
the checkpoint keyed by what calibrated it (`CalibrationKey`), finding it again, and the p-values and provenance
of a stored or fitted fit.

A MaSF fit answers "is this input like the calibration inputs?", so a fit is only meaningful for the data it was
calibrated on. Every stored fit is keyed by a `CalibrationKey` (dataset, split seed, split, number of inputs, the
masking scheme and replacement token of the calibration inputs, mask seed, and the version of the fitting code);
a look-up for another key fits anew (`load_or_fit_masf`) or finds nothing (`load_masf`), and a stored file whose
recorded key is not the one asked for is refused with both named. Every fitted `MaSF` carries its `provenance`
(the key in words, device, dtype, library versions), which callers store beside the p-values they write.
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
from safetensors.torch import load_file, save_file

from engine.atomic import atomic_path, write_text
from engine.data import dataset_sha256, get_dataset
from engine.errors import InvalidInputError
from engine.models import Batch, Classifier
from engine.ood.features import calibration_features, hidden_state_features
from engine.ood.files import LEGACY_MASF_FILE, LEGACY_MASF_META, MASF_FIT_VERSION, MASF_PREFIX  # noqa: F401
from engine.ood.masf import (
    DEFAULT_FOLDS,
    CrossFitMaSF,
    MaSF,
    false_alarm_interval,
)
from engine.runtime import code_version

DEFAULT_MASK_SEED = 1234


@dataclass(frozen=True)
class CalibrationKey:
    """What a MaSF fit was calibrated on; two fits are interchangeable only when their keys are equal.

    dataset, split_seed, split: the calibration inputs (the `split` of `dataset` split with `split_seed`);
    limit: only its first `limit` inputs (None: all); strategy: how they were transformed (like the model's
    training: masked, only-masking or plain); replacement_token_id: the token masking wrote (None for plain: no
    token is written); mask_seed: the seed of the masking draws; parts_seed: the seed that splits the inputs into
    the three levels' parts (the folds' permutation); folds: K of the cross-fit (1: one split into three parts, as
    every fit before version 4 was); fit_version: `MASF_FIT_VERSION` of the code that fitted it; data_sha256: 16 hex
    digits of the calibration inputs themselves (texts and label names), so a dataset registered again under the
    same name with other rows is other data (None in keys stored before it was recorded); prompt_sha256: for a
    prompted language model, 16 hex digits of its prompt spec (instruction, examples, verbalizer, replacement), since
    its fits are kept per model id and the same id can come to read another prompt (a built-in whose prompt changed,
    an id registered again): another prompt is another model, so its fit is made anew."""

    dataset: str
    split_seed: int = 0
    split: str = "validation"
    limit: int | None = None
    strategy: str = "masked"
    replacement_token_id: int | None = None
    mask_seed: int = DEFAULT_MASK_SEED
    parts_seed: int = 0
    fit_version: int = MASF_FIT_VERSION
    data_sha256: str | None = None
    folds: int = 1  # a key stored before folds were recorded was a single split
    prompt_sha256: str | None = None  # a prompted LM's prompt spec (replacement included); None for other models

    @property
    def digest(self) -> str:
        """16 hex digits naming the key's files (sha256 of the key as sorted JSON)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode("utf-8")).hexdigest()[:16]

    def describe(self) -> str:
        """The key in words, as shown beside every p-value."""
        inputs = "all inputs" if self.limit is None else f"first {self.limit} inputs"
        if self.strategy == "plain":
            how = "unmasked (plain training)"
        else:
            how = f"masked like {self.strategy} training with token id {self.replacement_token_id}, mask seed {self.mask_seed}"
        parts = f"{self.folds}-fold cross-fit, fold seed" if self.folds > 1 else "parts seed"
        return (f"{self.dataset} {self.split} split (split seed {self.split_seed}, {inputs}), {how}; "
                f"{parts} {self.parts_seed}, MaSF fit v{self.fit_version}"
                + (f", prompt {self.prompt_sha256}" if self.prompt_sha256 else ""))

    def differences(self, other: CalibrationKey) -> str:
        """'field: this vs other' for every field that differs."""
        return ", ".join(f"{f.name}: {getattr(self, f.name)!r} vs {getattr(other, f.name)!r}" for f in fields(self)
                         if getattr(self, f.name) != getattr(other, f.name))

    @classmethod
    def from_dict(cls, d: dict) -> CalibrationKey:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def calibration_strategy(classifier: Classifier) -> str:
    """How calibration inputs are transformed: like the model's training. A model fine-tuned elsewhere saw
    unmasked text only (plain), unless it was declared masked-fine-tuned with its replacement token."""
    strategy = classifier.meta.strategy or "masked"
    if strategy == "elsewhere":
        return "masked" if classifier.masked_fine_tuned else "plain"
    if strategy == "zero-shot":  # a prompted LM used as it is: trained on unmasked text only
        return "plain"
    return strategy


def _legacy_key(classifier: Classifier) -> CalibrationKey | None:
    """The key of a fit stored before fits were keyed (`masf.safetensors`): it was calibrated on the dataset its
    JSON names, else the checkpoint's own training dataset, by fitting code version 1; None when neither is known."""
    folder = classifier.artifacts_dir
    if folder is None or not (folder / LEGACY_MASF_FILE).is_file():
        return None
    meta = {}
    if (folder / LEGACY_MASF_META).is_file():
        try:
            meta = json.loads((folder / LEGACY_MASF_META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
    name = meta.get("dataset") or classifier.meta.dataset
    if name is None:
        return None
    strategy = calibration_strategy(classifier)
    seed = int(meta.get("seed", 0))
    return CalibrationKey(dataset=name, split_seed=classifier.meta.split_seed, strategy=strategy,
                          replacement_token_id=None if strategy == "plain" else classifier.replacement_token_id,
                          mask_seed=DEFAULT_MASK_SEED + seed, parts_seed=seed, fit_version=1)


def stored_calibrations(classifier: Classifier) -> list[CalibrationKey]:
    """The keys of every MaSF fit stored for `classifier` (a legacy unkeyed fit included, as version 1)."""
    folder = classifier.artifacts_dir
    keys = []
    if folder is not None and folder.is_dir():
        for meta in sorted(folder.glob(f"{MASF_PREFIX}*.json")):
            try:
                keys.append(CalibrationKey.from_dict(json.loads(meta.read_text(encoding="utf-8"))["key"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a file that is not a fit's provenance: not a fit
    legacy = _legacy_key(classifier)
    return keys + ([legacy] if legacy is not None else [])


def calibration_key(classifier: Classifier, dataset: str | None = None, split: str = "validation",
                    limit: int | None = None, seed: int = 0) -> CalibrationKey:
    """The key of the fit a look-up for `dataset` (default: the checkpoint's own) asks for.

    A model fine-tuned elsewhere records no dataset: without `dataset` its only stored current fit is meant (as
    stored, whatever `split`, `limit` and `seed` say); with none or several stored, InvalidInputError names them
    and asks for the dataset."""
    meta = classifier.meta
    name = dataset or meta.dataset
    if name is None:
        current = [k for k in stored_calibrations(classifier) if k.fit_version == MASF_FIT_VERSION]
        if len(current) == 1:  # the fit the user made for it (`masf --dataset`), whatever its split or limit
            return current[0]
        stored = "; ".join(k.describe() for k in stored_calibrations(classifier)) or "none"
        raise InvalidInputError(f"model {classifier.id!r} was fine-tuned elsewhere: name the dataset to calibrate its MaSF "
                                f"on (python -m engine masf --model {classifier.id} --dataset NAME); stored fits: {stored}")
    strategy = calibration_strategy(classifier)
    split_seed = meta.split_seed
    return CalibrationKey(dataset=name, split_seed=split_seed, split=split, limit=limit,
                          strategy=strategy, replacement_token_id=None if strategy == "plain" else classifier.mask_token_id,
                          mask_seed=DEFAULT_MASK_SEED + seed, parts_seed=seed, folds=DEFAULT_FOLDS,
                          data_sha256=dataset_sha256(name, split_seed, split, limit),
                          prompt_sha256=classifier.prompt_sha256)


def _fit_environment(classifier: Classifier) -> dict:
    """Where and with what the features were computed: p-values are robust to last-bit differences (docs/masf.md),
    but a fit is still traceable to its device, dtype, thread count and library versions."""
    import safetensors
    import torch
    import transformers

    dtype = next(iter(classifier.model.parameters()), torch.empty(0)).dtype
    return {"device": str(classifier.device),
            "device_name": torch.cuda.get_device_name(classifier.device) if classifier.device.type == "cuda" else platform.processor() or platform.machine(),
            "model_dtype": str(dtype).removeprefix("torch."), "feature_dtype": "float64 (max-pooled hidden states, cast)",
            "torch_threads": torch.get_num_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__, "numpy": np.__version__,
                         "safetensors": safetensors.__version__}}


def fit_masf(classifier: Classifier, split: str = "validation", limit: int | None = None, seed: int = 0,
             save: bool = True, progress=None, dataset: str | None = None) -> CrossFitMaSF:
    """Fit MaSF on `split` of `dataset` (default: the checkpoint's own) transformed like the model's training,
    and store it beside the checkpoint under its calibration key (safetensors + JSON provenance) when the model
    has a folder for that (`Classifier.artifacts_dir`). The returned MaSF's `provenance` says what calibrated it."""
    key = calibration_key(classifier, dataset, split=split, limit=limit, seed=seed)
    data = get_dataset(key.dataset, key.split_seed)
    data = classifier.check_dataset(data)  # labels in the model's class order
    examples = data.split(split)[:limit]
    feats = calibration_features(classifier, examples, key.strategy, seed=key.mask_seed, progress=progress)
    masf = CrossFitMaSF(folds=key.folds, seed=seed).fit(feats)
    low, high = false_alarm_interval(masf.n_level3, FALSE_ALARM_ALPHA)
    masf.provenance = {
        "calibration": f"{key.describe()}; {calibration_uncertainty(masf.n_level3)}",
        "key": asdict(key), "digest": key.digest, "checkpoint": classifier.id,
        "n_inputs": len(examples), "folds": masf.folds, "parts": masf.parts(), "n_level3": masf.n_level3,
        "false_alarm_interval": {"alpha": FALSE_ALARM_ALPHA, "level": 0.95, "low": low, "high": high},
        "feature_shape": list(masf.shape), "level1_rtol": masf.rtol, **_fit_environment(classifier),
        "code_version": code_version(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    folder = classifier.artifacts_dir
    if save and folder is not None:
        # Each file through the one atomic writer: parallel sweep workers that fit the same key at once (the fit
        # is deterministic) must never read another's half-written file. The JSON first: a reader that finds the
        # safetensors (what load_masf looks for) finds its provenance too.
        folder.mkdir(parents=True, exist_ok=True)
        weights, meta = _files(folder, key)
        write_text(meta, json.dumps(masf.provenance, indent=2))
        with atomic_path(weights) as tmp:
            save_file({k: v.contiguous() for k, v in masf.state().items()}, str(tmp))
    return masf


def _files(folder: Path, key: CalibrationKey) -> tuple[Path, Path]:
    return folder / f"{MASF_PREFIX}{key.digest}.safetensors", folder / f"{MASF_PREFIX}{key.digest}.json"


def load_masf(classifier: Classifier, dataset: str | None = None, split: str = "validation", limit: int | None = None,
              seed: int = 0) -> CrossFitMaSF | None:
    """The stored MaSF calibrated on `dataset` (default: the checkpoint's own) as `calibration_key` describes, or
    None when no fit with that key is stored (a fit on other data, or by older fitting code, is not returned).
    A stored file whose recorded key differs from the one asked for raises InvalidInputError naming both."""
    folder = classifier.artifacts_dir
    if folder is None:
        return None
    key = calibration_key(classifier, dataset, split=split, limit=limit, seed=seed)
    weights, meta = _files(folder, key)
    if not weights.is_file() or not meta.is_file():
        return None
    provenance = json.loads(meta.read_text(encoding="utf-8"))
    found = CalibrationKey.from_dict(provenance.get("key", {}))
    if found != key:
        raise InvalidInputError(f"the MaSF stored in {weights} was calibrated on {found.describe()}, not on "
                                f"{key.describe()} ({found.differences(key)}): delete it to fit it again")
    masf = CrossFitMaSF.from_state(load_file(str(weights)), seed=key.parts_seed)
    if masf.folds != key.folds:  # the key says one thing, the file another: never read a fit as what it is not
        raise InvalidInputError(f"the MaSF stored in {weights} holds {masf.folds} fold(s), its key says {key.folds}: "
                                "delete it to fit it again")
    masf.provenance = provenance
    return masf


def load_or_fit_masf(classifier: Classifier, dataset: str | None = None, progress=None) -> CrossFitMaSF:
    """The stored MaSF calibrated on the validation split of `dataset` (default: the model's own), else one
    fitted (and stored) now. A fit on other data is never reused for `dataset`.

    Args:
        classifier: the model; dataset: the calibration dataset's name (default: the one it was trained on).
        progress: progress(done, total) while fitting.

    Returns:
        The MaSF; `masf_pvalues(classifier, masf, batch)` gives the in-distribution p-values of a batch.
    """
    return load_masf(classifier, dataset) or fit_masf(classifier, dataset=dataset, progress=progress)


def masf_provenance(masf: CrossFitMaSF | MaSF | None) -> dict | None:
    """What calibrated `masf` (the JSON stored beside its fit: key, data in words, device, versions), or None."""
    return None if masf is None else getattr(masf, "provenance", None)


def masf_pvalues(classifier: Classifier, masf: CrossFitMaSF | MaSF, batch: Batch) -> np.ndarray:
    """In-distribution p-value [B] of each input of the batch (as it is, masked or not)."""
    return masf.pvalues(hidden_state_features(classifier, batch))


def masf_pvalue_ranges(classifier: Classifier, masf: CrossFitMaSF, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p [B], lowest fold p-value [B], highest [B]) of each input: the p-value with the calibration's own uncertainty
    (how far it moves with the division of the calibration inputs); `pvalue_verdict` says it in words."""
    return masf.pvalue_ranges(hidden_state_features(classifier, batch))


FALSE_ALARM_ALPHA = 0.05


def calibration_uncertainty(n_level3: int, alpha: float = FALSE_ALARM_ALPHA) -> str:
    """The calibration's own uncertainty in words, shown beside its p-values: the 95% interval of the share of inputs
    like the calibration inputs that this calibration puts below alpha (`false_alarm_interval`)."""
    low, high = false_alarm_interval(n_level3, alpha)
    return (f"{n_level3} inputs rank the final statistic: inputs like them fall below p = {alpha:g} at a rate of "
            f"{low:.1%} to {high:.1%} (95%) given this calibration")
