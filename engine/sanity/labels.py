"""Label randomisation (Adebayo et al. 2018): the same encoder fine-tuned, with the same hyper-parameters, on
labels permuted once (seeded); each measure's scores on the real-label model are compared with its scores on this
one (Spearman over each input's maskable tokens, as in cascading randomisation). A measure that gives the same
ranking for a model that learnt nothing about the task explains the input, not the model.

The permutation shuffles the labels of the training and validation splits (so the epoch kept is chosen on the
same kind of labels it was trained on); the test split keeps its real labels, so the model's recorded test metric
shows that it learnt nothing (near the class-majority rate).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch

from engine.models import Batch, Classifier


def label_randomised_id(model_id: str, permutation_seed: int) -> str:
    """The checkpoint id of `model_id`'s label-randomised twin."""
    return f"{model_id}-labels-permuted-p{permutation_seed}"


def train_label_randomised(classifier: Classifier, permutation_seed: int = 0, save: bool = True,
                           show_progress_bar: bool = False, progress=None, should_stop=None,
                           **overrides) -> Classifier:
    """Fine-tune the classifier's encoder again with its recorded training configuration, on permuted labels;
    saved in models_cache as `label_randomised_id(...)` (reused when it exists). `overrides` change fields of
    that configuration (e.g. epochs=1 for a quick trial); they are recorded in the twin's metadata."""
    from engine.models import load_classifier, save_classifier
    from engine.models.checkpoint import checkpoint_dir

    model_id = label_randomised_id(classifier.id, permutation_seed)
    if not save:
        return _train_twin(classifier, permutation_seed, model_id, progress, should_stop, show_progress_bar, overrides)
    from engine.sweeps.cells import shared_lock

    # Every measure's label cell of one (model, seed) needs this twin: in a parallel sweep the first trains and
    # saves it while the others wait, then load it.
    with shared_lock(f"train {model_id}"):
        if (checkpoint_dir(model_id) / "model.safetensors").is_file():
            return load_classifier(model_id)
        randomised = _train_twin(classifier, permutation_seed, model_id, progress, should_stop, show_progress_bar,
                                 overrides)
        save_classifier(randomised, model_id, overwrite=True)
    return randomised


def _train_twin(classifier: Classifier, permutation_seed: int, model_id: str, progress, should_stop,
                show_progress_bar: bool, overrides: dict) -> Classifier:
    from dataclasses import fields, replace

    from engine.models import TrainConfig, train_classifier

    recorded = dict(classifier.meta.config or {})
    known = {f.name for f in fields(TrainConfig)}
    config = TrainConfig(**{**{k: v for k, v in recorded.items() if k in known}, **overrides})
    config.extra = {**(config.extra or {}), "label_permutation_seed": int(permutation_seed)}
    randomised = train_classifier(config, progress=progress, should_stop=should_stop,
                                  show_progress_bar=show_progress_bar)
    # Through the typed metadata, so the file save_classifier writes (engine.models.metadata.write_metadata) has
    # the same shape as any checkpoint's; the link to the real-label model stays an extra key.
    meta = randomised.meta
    randomised.metadata = replace(meta, id=model_id, present=meta.present | {"id"},
                                  extra={**meta.extra, "label_randomised_from": classifier.id}).to_dict()
    return randomised


def label_randomisation(
    classifier: Classifier,
    randomised: Classifier,
    measures: Sequence[str],
    batch: Batch,
    target: torch.Tensor | Sequence[int] | None = None,
    batch_size: int = 32,
    options: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Tidy rows, one per (measure, input): stage_index 1, stage 'labels permuted', spearman, spearman_abs of each
    measure's scores on `randomised` against those on `classifier` (same inputs, same target classes: by default
    the real-label model's predictions)."""
    from engine.sanity.randomisation import explain_in_batches, rank_similarity

    options = dict(options or {})
    batch = batch.to(classifier.device)
    target = classifier.targets_for(batch, target)
    rows = []
    maskable = batch.maskable.cpu()
    for done, m in enumerate(measures, 1):
        a = explain_in_batches(classifier, m, batch, target, batch_size, options)
        b = explain_in_batches(randomised, m, batch.to(randomised.device), target.to(randomised.device), batch_size, options)
        rho, rho_abs = rank_similarity(a, b, maskable)
        rows += [{"stage_index": 1, "stage": "labels permuted", "measure": m, "input": i, "spearman": rho[i],
                  "spearman_abs": rho_abs[i]} for i in range(len(batch))]
        if progress is not None:
            progress(done, len(measures))
    return pd.DataFrame(rows)
