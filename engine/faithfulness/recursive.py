"""Recursive masking without retraining (FMM Alg. 3 / Sec. 3.4), for one input or a dataset split.

At step i the measure explains the *current* (already partly masked) input, and the top
floor(r_i * N) maskable tokens in total are masked (tokens masked before stay masked: they rank
first; non-maskable tokens rank last and are never masked). Step 0 masks nothing and computes
nothing; the last step (100%) masks everything without computing. A measure that is defined as an
order over all tokens at once (beam search) is computed once on the unmasked input.

Whole-word masking (optional, `word_ids`): the unit of the schedule is a word instead of a word piece: step i
masks the top floor(r_i * W) words in total (or k words), every piece of a chosen word at once, ranked by the
sum of its pieces' scores (a measure may declare another `word_aggregation`: the random baseline ranks by
one draw per word, so its word order stays uniform whatever the words' lengths).

Every step records the masked ids, the probability and logit of the target class, the predicted
class, the measure's scores and (when a fitted MaSF is given) the in-distribution p-value.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from engine.data import Dataset, score
from engine.errors import InvalidInputError, MaskingCancelled
from engine.faithfulness.perturb import any_per_word, rank_of, replaced
from engine.importance.levels import word_ids_of
from engine.models import Batch, Classifier

DEFAULT_RATIOS = tuple(i / 10 for i in range(11))
DEFAULT_COUNTS = tuple(range(0, 11))


@dataclass
class MaskingStep:
    """One step of recursive masking for a batch of B inputs."""

    index: int
    ratio: float | None  # None in count mode
    count: int | None  # tokens asked to be masked in count mode
    n_masked: np.ndarray  # [B] tokens masked so far
    input_ids: torch.Tensor  # [B, T] the masked input at this step (cpu)
    probability: np.ndarray  # [B] probability of the target class
    logit: np.ndarray  # [B] logit of the target class
    predicted: np.ndarray  # [B] predicted class
    scores: np.ndarray | None  # [B, T] the measure's scores that chose this step's tokens (None at step 0 / 100%)
    p_value: np.ndarray | None = None  # [B] MaSF in-distribution p-value


@dataclass
class MaskingResult:
    measure: str
    options: dict
    target: np.ndarray  # [B]
    target_source: str  # 'gold', 'predicted' or 'given'
    steps: list[MaskingStep] = field(default_factory=list)
    seed: int = 0


def masking_order_keys(scores: torch.Tensor, maskable: torch.Tensor, is_masked: torch.Tensor) -> torch.Tensor:
    """Ranking keys [B, T] on maskable's device: already-masked tokens +inf (kept masked), non-maskable -inf
    (never chosen)."""
    keys = torch.nan_to_num(scores.to(maskable.device).double(), nan=0.0)
    keys = torch.where(is_masked, torch.full_like(keys, float("inf")), keys)
    return torch.where(maskable, keys, torch.full_like(keys, float("-inf")))


def mask_top(batch_ids: torch.Tensor, keys: torch.Tensor, k: torch.Tensor, mask_token_id: int) -> torch.Tensor:
    """Mask the k[b] highest-key positions of each row (ties broken by position, deterministic): the kernel's
    ranking (`perturb.rank_of`) and [MASK] replacement (`perturb.replaced`)."""
    return replaced(batch_ids, rank_of(keys) < k[:, None], mask_token_id)


def mask_top_words(batch_ids: torch.Tensor, token_keys: torch.Tensor, word_ids: torch.Tensor, k: torch.Tensor,
                   mask_token_id: int, aggregation: str = "sum") -> torch.Tensor:
    """Mask every piece of the k[b] highest-ranked words of each row.

    token_keys [B, T] (from `masking_order_keys`: +inf on masked pieces, -inf on non-maskable ones);
    word_ids [B, T] long, the word of each maskable piece (-1 elsewhere). A word's key is the sum of its pieces'
    keys (or its first piece's with aggregation='first'); a word with a masked piece ranks first (stays masked).
    Ties between words are broken by word position, so a word is never half masked."""
    B, T = batch_ids.shape
    valid = word_ids >= 0
    W = int(word_ids.max()) + 1 if bool(valid.any()) else 1
    index = torch.where(valid, word_ids, torch.zeros_like(word_ids))
    finite = torch.where(valid & torch.isfinite(token_keys), token_keys, torch.zeros_like(token_keys))
    if aggregation == "first":
        first = torch.full((B, W), T, dtype=torch.long, device=word_ids.device)
        positions = torch.arange(T, device=word_ids.device).expand(B, T)
        first = first.scatter_reduce(1, index, torch.where(valid, positions, torch.full_like(positions, T)), "amin")
        word_keys = torch.gather(finite, 1, first.clamp(max=T - 1))
    else:
        word_keys = torch.zeros((B, W), dtype=finite.dtype, device=finite.device).scatter_add(1, index, finite)
    masked = any_per_word(valid & torch.isposinf(token_keys), index, W)
    exists = any_per_word(valid, index, W)
    word_keys = torch.where(masked, torch.full_like(word_keys, float("inf")), word_keys)
    word_keys = torch.where(exists, word_keys, torch.full_like(word_keys, float("-inf")))
    chosen = rank_of(word_keys) < k[:, None]  # [B, W]
    hit = valid & torch.gather(chosen, 1, index)
    return replaced(batch_ids, hit, mask_token_id)


def _distinct_words(word_ids: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """[B] the number of distinct words at the positions `where` [B, T] of each row."""
    counts = [torch.unique(w[m]).numel() for w, m in zip(word_ids.cpu(), where.cpu())]
    return torch.tensor(counts, dtype=torch.long, device=word_ids.device)


@torch.no_grad()
def observe_step(classifier: Classifier, batch: Batch, target: torch.Tensor, masf) -> tuple:
    """(probability [B], logit [B] of the target class, predicted class [B], MaSF p-values [B] or None) of one
    masking step's inputs: with a MaSF, the logits and the features come from one forward pass."""
    p_value = None
    if masf is None:
        logits = classifier.logits(batch).float()
    else:
        from engine.ood.features import logits_and_features

        logits, features = logits_and_features(classifier, batch)  # one forward for both
        logits = logits.float()
        p_value = masf.pvalues(features)
    probs = torch.softmax(logits, -1)
    rows = torch.arange(len(batch), device=logits.device)
    return (probs[rows, target].cpu().numpy(), logits[rows, target].cpu().numpy(),
            logits.argmax(-1).cpu().numpy(), p_value)


def recursive_masking(
    classifier: Classifier,
    explainer,
    batch: Batch,
    target: torch.Tensor | Sequence[int] | None = None,
    ratios: Sequence[float] | None = None,
    counts: Sequence[int] | None = None,
    masf=None,
    target_source: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    word_ids: torch.Tensor | None = None,
) -> MaskingResult:
    """Recursively mask `batch` by `explainer`'s importance: at each step the explainer ranks the tokens of the
    input as masked so far, and the top ones (up to the step's level) are masked.

    Args:
        classifier: the model (masked-fine-tuned, for in-distribution masked inputs).
        explainer: an importance measure bound to `classifier` (`engine.importance.get_explainer`).
        batch: B inputs of T tokens (`classifier.batch(texts)`).
        target: the class whose probability is tracked and explained; default the predicted class of
            the unmasked input.
        ratios: fractions of each input's maskable tokens (ratio mode, default 0, 0.1, ..., 1), or
        counts: numbers of tokens (count mode, e.g. 0..10; capped at each input's N).
        masf: a fitted MaSF (`engine.ood.load_or_fit_masf`): each step's inputs get in-distribution p-values.
        target_source: recorded with the result ('predicted', 'gold', ...); progress(done, total) and
            should_stop() as elsewhere.
        word_ids: [B, T] long, to mask whole words (see the module docstring): the word of each maskable piece,
            -1 on the other positions; ratios and counts then count words.

    Returns:
        A MaskingResult: one MaskingStep per level (the target's probability and logit [B], predictions [B], the
        masked ids [B, T], the scores that chose the step's tokens, MaSF p-values [B] when `masf` is given).
    """
    if ratios is not None and counts is not None:
        raise InvalidInputError("give either ratios or counts, not both")
    if counts is not None:
        counts = [int(c) for c in counts]
        if counts[0] != 0 or any(b <= a for a, b in zip(counts, counts[1:])):
            raise InvalidInputError("counts must start at 0 and increase")
        ratios = None
    else:
        ratios = [float(r) for r in (DEFAULT_RATIOS if ratios is None else ratios)]
        if ratios[0] != 0.0 or any(b <= a for a, b in zip(ratios, ratios[1:])) or ratios[-1] > 1.0:
            raise InvalidInputError("ratios must start at 0, increase, and stay <= 1")
    if not batch.maskable.any(dim=1).all():
        raise InvalidInputError("an input has no maskable token")
    batch = batch.to(classifier.device)
    if target is None:
        with torch.no_grad():
            target = classifier.logits(batch).argmax(-1)
        target_source = target_source or "predicted"
    target = classifier.check_targets(target, len(batch))
    target_source = target_source or "given"

    n_tokens = batch.maskable.sum(1)  # [B]
    if word_ids is not None:
        word_ids = torch.as_tensor(word_ids, dtype=torch.long).to(classifier.device)
        if word_ids.shape != batch.input_ids.shape or bool(((word_ids >= 0) != batch.maskable).any()):
            raise InvalidInputError("word_ids must be [B, T] with a word (>= 0) exactly on the maskable tokens")
        n_units = _distinct_words(word_ids, word_ids >= 0)
    else:
        n_units = n_tokens
    word_aggregation = getattr(explainer, "word_aggregation", "sum")
    schedule = ratios if ratios is not None else counts
    once = bool(getattr(explainer, "computed_once", False))
    fixed_scores = None
    result = MaskingResult(measure=getattr(explainer, "name", type(explainer).__name__),
                           options=dict(getattr(explainer, "options", {}) or {}),
                           target=target.cpu().numpy(), target_source=target_source,
                           seed=int(getattr(explainer, "seed", 0) or 0))
    current = batch
    for i, level in enumerate(schedule):
        if should_stop is not None and should_stop():
            raise MaskingCancelled("recursive masking was cancelled")
        if ratios is not None:
            k = torch.floor(n_units.double() * level + 1e-9).long()
        else:
            k = torch.clamp(torch.full_like(n_units, level), max=n_units)
        is_masked = (current.input_ids == classifier.mask_token_id) & batch.maskable
        if word_ids is None:
            done = is_masked.sum(1)
        else:  # the words with a masked piece
            done = _distinct_words(word_ids, is_masked)
        scores_np = None
        if i > 0 and bool((k > done).any()):
            if bool((k >= n_units).all()):
                keys = masking_order_keys(torch.zeros_like(current.input_ids, dtype=torch.float64), batch.maskable, is_masked)
            else:
                if once:
                    if fixed_scores is None:
                        fixed_scores = explainer.attribute(batch, target).scores.to(classifier.device)
                    scores = fixed_scores
                else:
                    scores = explainer.attribute(current, target).scores.to(classifier.device)
                scores_np = scores.detach().float().cpu().numpy()
                keys = masking_order_keys(scores, batch.maskable, is_masked)
            if word_ids is None:
                current = current.with_ids(mask_top(current.input_ids, keys, k, classifier.mask_token_id))
            else:
                current = current.with_ids(mask_top_words(current.input_ids, keys, word_ids, k, classifier.mask_token_id,
                                                          word_aggregation))
        prob, logit, predicted, p_value = observe_step(classifier, current, target, masf)
        result.steps.append(MaskingStep(
            index=i, ratio=level if ratios is not None else None, count=level if counts is not None else None,
            n_masked=((current.input_ids == classifier.mask_token_id) & batch.maskable).sum(1).cpu().numpy(),
            input_ids=current.input_ids.cpu(), probability=prob, logit=logit, predicted=predicted,
            scores=scores_np, p_value=p_value))
        if progress is not None:
            progress(i + 1, len(schedule))
    return result


#: Inputs per batch of `masking_batches` for an explainer that does not say how many rows a pass takes.
DEFAULT_BATCH = 32


def masking_batches(classifier: Classifier, explainer, examples: Sequence, order: Sequence[int],
                    batch_size: int | None = None):
    """(indices into `examples` [n], their Batch) in `order` (length-sorted), for recursive masking.

    batch_size None: each batch has as many inputs as one forward pass takes at the batch's padded length T
    (`explainer.rows_per_pass(T, backward=False)`, DEFAULT_BATCH for an explainer without it), so a step's
    observation pass and a single-pass measure's gradient (split to its own backward limit) run at full passes,
    where fixed batches of 32 ran well below a model's best pass size (docs/methods.md#notes-behind-the-code)."""
    def build(n: int) -> Batch:
        return classifier.batch_of([examples[i] for i in order[start:start + n]])

    def fits(batch: Batch) -> int:
        return max(1, int(explainer.rows_per_pass(batch.input_ids.shape[1], backward=False)))

    start = 0
    while start < len(examples):
        n = batch_size or DEFAULT_BATCH
        batch = build(n)
        if batch_size is None and hasattr(explainer, "rows_per_pass") and fits(batch) != n:
            n = fits(batch)
            batch = build(n)
            while n > 1 and fits(batch) < n:  # the longer inputs a bigger batch took in fit fewer rows a pass
                n = fits(batch)
                batch = build(n)
        idx = np.asarray(order[start:start + n])
        yield idx, batch
        start += len(idx)


def dataset_masking_curve(
    classifier: Classifier,
    explainer,
    dataset: Dataset,
    split: str = "test",
    ratios: Sequence[float] | None = None,
    counts: Sequence[int] | None = None,
    masf=None,
    batch_size: int | None = None,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    whole_words: bool = False,
) -> list[dict]:
    """The dataset metric at every masking step, explaining the gold label (as both papers do).

    Args:
        classifier, explainer: as for `recursive_masking`.
        dataset: the dataset (`engine.get_dataset`); its labels are aligned to the model's classes.
        split: which split; limit: its first `limit` examples (None: all).
        ratios / counts: the schedule, as for `recursive_masking`.
        masf: a fitted MaSF, for p-values; batch_size: inputs per batch (default: `masking_batches`, as many as
            one forward pass of the model takes at the batch's length).
        whole_words: the schedule counts words and a word is always masked whole (see the module docstring).

    Returns:
        One dict per step: step, ratio or count, metric, value, mean probability of the gold class, and with
        MaSF the share of p-values below 0.05 and the Simes p-value over the split.
    """
    dataset = classifier.check_dataset(dataset)
    examples = dataset.split(split)[:limit]
    order = np.argsort([len(e.primary) + len(e.auxiliary or "") for e in examples], kind="stable")
    per_step_pred, per_step_prob, per_step_p = None, None, None
    y_true = np.array([e.label for e in examples])
    done = 0
    for idx, batch in masking_batches(classifier, explainer, examples, order, batch_size):
        chunk = [examples[i] for i in idx]
        word_ids = word_ids_of(batch, [e.primary for e in chunk]) if whole_words else None
        res = recursive_masking(classifier, explainer, batch, target=batch.target, ratios=ratios, counts=counts, masf=masf,
                                target_source="gold", should_stop=should_stop, word_ids=word_ids)
        if per_step_pred is None:
            n_steps = len(res.steps)
            per_step_pred = np.zeros((n_steps, len(examples)), dtype=int)
            per_step_prob = np.zeros((n_steps, len(examples)))
            per_step_p = np.full((n_steps, len(examples)), np.nan)
        for s, step in enumerate(res.steps):
            per_step_pred[s, idx] = step.predicted
            per_step_prob[s, idx] = step.probability
            if step.p_value is not None:
                per_step_p[s, idx] = step.p_value
        done += len(idx)
        if progress is not None:
            progress(done, len(examples))
    from engine.ood.masf import MaSF

    schedule = list(DEFAULT_RATIOS if ratios is None else ratios) if counts is None else list(counts)
    rows = []
    for s, level in enumerate(schedule):
        row = {"step": s, "ratio": float(level) if counts is None else None, "count": int(level) if counts is not None else None,
               "metric": dataset.metric, "value": score(dataset.metric, y_true, per_step_pred[s], dataset.num_classes),
               "mean_probability": float(per_step_prob[s].mean())}
        if masf is not None:
            p = per_step_p[s]
            row.update({"p_below_005": float(np.mean(p < 0.05)), "p_value_simes": MaSF.dataset_pvalue(p),
                        "p_value_median": float(np.median(p))})
        rows.append(row)
    return rows
