"""ROAR and Recursive ROAR with retraining (Hooker et al. 2019; Madsen et al. 2022, R-ROAR).

At each level k the tokens an importance measure ranks highest are masked in the train, validation
and test splits, and a fresh model is fine-tuned from the pretrained start on the masked data; its
test metric at level k makes the curve. A faithful measure removes what the model needs, so the
retrained model cannot recover: the curve falls fast.

ROAR: the level-0 model explains the unmasked data once; level k masks that ranking's top k.
Recursive ROAR: the model retrained at level k - 1 explains the (k - 1)-masked data; tokens masked
before stay masked (they rank first) and the next ones are added.
Strategies: `quantile` (k = fraction of each input's maskable tokens, default 10%..90%) or `count`
(k = 1..10 tokens). The `random` measure is the model-independent baseline.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from engine.data import SPLITS, get_dataset
from engine.errors import InvalidInputError
from engine.faithfulness.recursive import mask_top, masking_order_keys
from engine.models import Classifier, TrainConfig, apply_token_masks, train_classifier

DEFAULT_QUANTILES = tuple(round(0.1 * i, 1) for i in range(1, 10))
DEFAULT_COUNTS = tuple(range(1, 11))


def _default_factory(measure: str, seed: int, options: dict):
    def make(classifier: Classifier):
        from engine.importance import get_explainer, seed_options

        extra = seed_options(measure, seed)
        return get_explainer(measure, classifier, **extra, **options)

    return make


def _split_examples(dataset, config: TrainConfig) -> dict[str, list]:
    return {
        "train": dataset.split("train")[: config.train_limit],
        "validation": dataset.split("validation")[: config.eval_limit],
        "test": dataset.split("test")[: config.eval_limit],
    }


def _extend_masks(classifier: Classifier, explainer, examples, masks: dict, level: float, strategy: str,
                  cached_scores: dict | None, batch_size: int = 64) -> None:
    """Add, for every example, the next highest-ranked tokens until level k is reached (in place).
    With `cached_scores` (ROAR) scores are computed on the unmasked input once and reused."""
    for start in range(0, len(examples), batch_size):
        rows = examples[start : start + batch_size]
        uids = [e.uid for e in rows]
        batch = classifier.batch_of(rows)
        current = apply_token_masks(batch, uids, masks, classifier.mask_token_id)
        is_masked = (current.input_ids == classifier.mask_token_id) & batch.maskable
        n_tokens = batch.maskable.sum(1)
        if strategy == "quantile":
            k = torch.floor(n_tokens.double() * level + 1e-9).long()
        else:
            k = torch.clamp(torch.full_like(n_tokens, int(level)), max=n_tokens)
        if cached_scores is not None:
            if uids[0] not in cached_scores:
                scores = explainer.attribute(batch, batch.target).scores.to(classifier.device)
                for uid, row in zip(uids, scores):
                    cached_scores[uid] = row
            scores = torch.stack([cached_scores[uid] for uid in uids])
        else:
            scores = explainer.attribute(current, current.target).scores.to(classifier.device)
        keys = masking_order_keys(scores, batch.maskable, is_masked)
        new_ids = mask_top(current.input_ids, keys, k, classifier.mask_token_id)
        hit = ((new_ids == classifier.mask_token_id) & batch.maskable).cpu()  # one copy, not a sync per row
        for uid, row in zip(uids, hit):
            masks[uid] = torch.nonzero(row).flatten().tolist()


def roar_curve(
    config: TrainConfig,
    measure: str,
    recursive: bool = True,
    strategy: str = "quantile",
    levels: Sequence[float] | None = None,
    explainer_factory: Callable[[Classifier], object] | None = None,
    explainer_options: dict | None = None,
    base_classifier: Classifier | None = None,
    progress: Callable[[dict], None] | None = None,
) -> dict:
    """The (Recursive) ROAR curve of one measure: test metric after retraining at each level.

    Returns {'levels': [0, ...], 'values': [...], 'masked_fraction': [...], 'measure', 'recursive',
    'strategy', 'seed', 'models': per-level training metadata}."""
    if strategy not in ("quantile", "count"):
        raise InvalidInputError(f"unknown strategy {strategy!r}; use quantile or count")
    levels = list(levels or (DEFAULT_QUANTILES if strategy == "quantile" else DEFAULT_COUNTS))
    if any(b <= a for a, b in zip(levels, levels[1:])) or levels[0] <= 0:
        raise InvalidInputError("levels must be positive and increasing")
    factory = explainer_factory or _default_factory(measure, config.seed, explainer_options or {})
    dataset = get_dataset(config.dataset, config.split_seed)
    examples = _split_examples(dataset, config)
    base = base_classifier or train_classifier(config, show_progress_bar=False)
    masks: dict[str, list[int]] = {}
    roar_scores: dict | None = None if recursive else {}
    roar_explainer = None if recursive else factory(base)
    explaining = base
    values = [base.meta.test["unmasked"]]
    fractions = [0.0]
    models = [base.metadata]
    for i, level in enumerate(levels, 1):
        explainer = roar_explainer if not recursive else factory(explaining)
        for split in SPLITS:
            _extend_masks(explaining if recursive else base, explainer, examples[split], masks, level, strategy, roar_scores)
        retrained = train_classifier(config, show_progress_bar=False, token_masks=masks)
        values.append(retrained.meta.test["unmasked"])
        test_uids = [e.uid for e in examples["test"]]
        # One tokenisation and one read of the first 200 test inputs' maskable tokens (padding is never maskable).
        n_total = int(base.batch_of(examples["test"][:200]).maskable.sum()) if examples["test"] else 0
        n_masked = sum(len(masks.get(uid, [])) for uid in test_uids[:200])
        fractions.append(n_masked / max(n_total, 1))
        models.append(retrained.metadata)
        explaining = retrained
        if progress is not None:
            progress({"level": level, "step": i, "steps": len(levels), "value": values[-1]})
    return {"measure": measure, "recursive": recursive, "strategy": strategy, "levels": [0.0, *levels],
            "values": values, "masked_fraction": fractions, "seed": config.seed, "models": models}
