"""The truth of a planted model (engine.groundtruth.truth), stored beside its checkpoint and reused.

Establishing the truth runs the model on every clean test input of the base dataset two to four times: about 5-6
CPU-minutes on SmolLM2-135M, seconds on tiny. Every report-card process needs it (the truth-only step, then each
card process of `scripts/experiments/groundtruth_rt.sh`), and each established it again. It is now stored in the checkpoint's
artifacts folder (where its MaSF fits are) as `truth-<digest>.parquet` (the per-input table) and `.json` (the rest,
and the key), and read back when the key matches: the weights (SHA-256 of the safetensors), the planted spec, the
prompt spec (prompted LMs), the base dataset's inputs of the split (their texts and labels), the split, limit,
seed, min_deciding and the learned threshold, the device type, and the code version (`engine.runtime.code_version`:
another commit, or other uncommitted code, establishes it again). A model without an artifacts folder establishes
it every time.
"""
from __future__ import annotations

import hashlib
import json

import pandas as pd

import engine.groundtruth.truth as truth_module
from engine.groundtruth.mechanisms import PlantSpec
from engine.groundtruth.truth import MIN_DECIDING, Truth

TRUTH_PREFIX = "truth-"


def truth_key(classifier, seed: int = 0, min_deciding: int = MIN_DECIDING, split: str = "test",
              limit: int | None = None, **known) -> dict:
    """Everything the planted `classifier`'s Truth depends on (module docstring), as a JSON-able dict. known: what
    the caller resolved already (a card's plan): `spec` (its PlantSpec), `weights_sha256`, `prompt_sha256`; the rest
    is resolved here."""
    from engine.data import dataset_sha256
    from engine.runtime import code_version

    spec, weights, prompt = _identity(classifier, **known)
    return {"weights_sha256": weights, "planted": spec.to_dict(), "prompt_sha256": prompt,
            "inputs_sha256": dataset_sha256(spec.base_dataset, spec.split_seed, split, limit),
            "split": split, "limit": limit, "seed": int(seed), "min_deciding": int(min_deciding),
            "learned_lower_bound": truth_module.LEARNED_LOWER_BOUND,
            "device": classifier.device.type, "code_version": code_version()}


def _identity(classifier, spec: PlantSpec | None = None, weights_sha256: str | None = None,
              prompt_sha256: str | None = None) -> tuple[PlantSpec, str | None, str | None]:
    """(planted spec, weights' hash, prompt digest) of `classifier`, each as given or resolved now."""
    if spec is None:
        from engine.groundtruth.planting import planted_spec

        spec = planted_spec(classifier)
    if weights_sha256 is None:
        weights_sha256 = classifier.weights_sha256
    if prompt_sha256 is None:
        prompt_sha256 = classifier.prompt_sha256
    return spec, weights_sha256, prompt_sha256


def _files(folder, key: dict):
    """(per-input table, record) paths of the truth stored under `key` in `folder`."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return folder / f"{TRUTH_PREFIX}{digest}.parquet", folder / f"{TRUTH_PREFIX}{digest}.json"


def load_or_establish_truth(classifier, seed: int = 0, min_deciding: int = MIN_DECIDING, split: str = "test",
                            limit: int | None = None, store: bool = True, **known) -> Truth:
    """The stored Truth of `classifier` under its key (`truth_key`; known: as there), else `establish_truth` now (and
    stored when the model has an artifacts folder and `store`). A stored pair whose recorded key differs, or that
    cannot be read, is established again and overwritten.

    Returns:
        The Truth; its `options["stored"]` says where it was read from (absent when established now)."""
    folder = classifier.artifacts_dir
    key = truth_key(classifier, seed, min_deciding, split, limit, **known) if folder is not None else None
    if key is not None:
        table, meta = _files(folder, key)
        if table.is_file() and meta.is_file():
            try:
                recorded = json.loads(meta.read_text(encoding="utf-8"))
                if recorded.get("key") == key:
                    return Truth(model=classifier.id, spec=PlantSpec.from_dict(recorded["spec"]),
                                 target=int(recorded["target"]), inputs=pd.read_parquet(table),
                                 rates=recorded["rates"], learned=bool(recorded["learned"]),
                                 reason=recorded["reason"], control=bool(recorded["control"]),
                                 options={**recorded["options"], "stored": str(table)})
            except (OSError, ValueError, KeyError, TypeError):
                pass  # unreadable or another format: established again below, and overwritten
    truth = truth_module.establish_truth(classifier, known.get("spec"), split=split, limit=limit, seed=seed,
                                         min_deciding=min_deciding)
    if key is not None and store:
        _save(truth, key, folder)
    return truth


def _save(truth: Truth, key: dict, folder) -> None:
    from engine.atomic import atomic_path, write_text

    folder.mkdir(parents=True, exist_ok=True)
    table, meta = _files(folder, key)
    # the table first: a reader finds the JSON (what it looks for with the table) only once both are whole
    with atomic_path(table) as tmp:
        truth.inputs.to_parquet(tmp, index=False)
    record = {"key": key, "spec": truth.spec.to_dict(), "target": truth.target, "rates": truth.rates,
              "learned": truth.learned, "reason": truth.reason, "control": truth.control, "options": truth.options}
    write_text(meta, json.dumps(record, indent=2))


__all__ = ["TRUTH_PREFIX", "load_or_establish_truth", "truth_key"]
