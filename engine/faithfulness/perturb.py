"""The perturbation kernel every metric family and recursive masking share: rank the maskable tokens, build the
perturbed rows (a removal operator applied to chosen positions), forward them with the MaSF features of the same
pass, look their p-values up, and size each pass to the memory it may use.

- ranking: `ranking_positions` (by token) and `word_ranking_positions` (whole words), both from `rank_of` (0 for the
  highest key, ties by position); only maskable tokens take part.
- perturbed rows: `removed_positions` (the top-j removed, or only the top-j kept), `perturbed_rows` (the removal
  operator: 'mask' replaces a position by [MASK] or an infill operator's token, 'delete' drops it and the rest close
  up to the left), `replaced` (ids with chosen positions set to one token: the masking of recursive masking too).
- forwards: `hidden_forward` (logits and MaSF features of one pass, from ids or word embeddings; the features are
  pooled by engine.ood.features, the one MaSF feature path), `perturbed_passes` (every perturbed row once, in passes
  of `rows_per_pass` rows, halving a pass after a CUDA out-of-memory error), `PendingPvalues` (p-values looked up
  several passes at a time).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from engine.errors import InvalidInputError, MaskingCancelled
from engine.importance.batching import halve_after_oom, memory_budget_bytes, row_bytes
from engine.models import Batch, Classifier
from engine.models.kinds import ModelKind

#: The removal operators a perturbed row can be built with (module docstring).
REMOVALS = ("mask", "delete")
#: A perturbed input whose MaSF p-value is below this counts as out of distribution.
OOD_LEVEL = 0.05

# Kinds of perturbed input: REMOVE = the top-j tokens removed; KEEP = only the top-j kept (the rest removed).
REMOVE, KEEP = 0, 1


def checked_inputs(classifier: Classifier, batch: Batch, scores) -> tuple[Batch, torch.Tensor, list[int]]:
    """The batch and scores [B, T] on the classifier's device, and each input's count of maskable tokens; refuses
    scores of another shape and an input with nothing to remove (what every metric family needs first)."""
    batch = batch.to(classifier.device)
    B, T = batch.input_ids.shape
    scores = torch.as_tensor(scores).to(classifier.device)
    if scores.shape != (B, T):
        raise InvalidInputError(f"scores of shape {tuple(scores.shape)} do not match the batch ({B}, {T})")
    n_tokens = batch.maskable.sum(1).tolist()
    if min(n_tokens) == 0:
        raise InvalidInputError("an input has no maskable token")
    return batch, scores, n_tokens


def rank_of(keys: torch.Tensor) -> torch.Tensor:
    """rank [B, N] long of keys [B, N]: 0 for each row's highest key, 1 for the next ...; ties broken by position
    (a stable sort), so the order is deterministic."""
    order = torch.sort(keys, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(keys.shape[1], device=keys.device).expand_as(order))
    return rank


def ranking_positions(scores: torch.Tensor, maskable: torch.Tensor) -> torch.Tensor:
    """rank [B, T] long: 0 for the highest-scoring maskable token, 1 for the next ...; T + position for the
    tokens that are not maskable (never removed). Ties are broken by position (stable), NaN counts as 0.
    The rank is on maskable's (the batch's) device: scores from elsewhere (an `Importance` is on the CPU) follow it."""
    scores = scores.to(maskable.device)
    keys = torch.nan_to_num(scores.double(), nan=0.0).masked_fill(~maskable, float("-inf"))
    rank = rank_of(keys)
    return torch.where(maskable, rank, rank + scores.shape[1])


def any_per_word(flags: torch.Tensor, index: torch.Tensor, n_words: int) -> torch.Tensor:
    """[B, W] bool: whether any position of each word is flagged (flags [B, T] bool, index [B, T] the word of each
    position). Reduced in uint8: CUDA has no reducing scatter kernel (amax, add) for bool tensors, the CPU has."""
    B = flags.shape[0]
    return torch.zeros((B, n_words), dtype=torch.uint8, device=flags.device).scatter_reduce(
        1, index, flags.to(torch.uint8), "amax").bool()


def word_ranking_positions(scores: torch.Tensor, maskable: torch.Tensor, word_ids: torch.Tensor,
                           aggregation: str = "sum") -> tuple[torch.Tensor, list[int]]:
    """Whole-word units: (rank [B, T], words per row). Every piece of a word gets its word's rank (0 for the
    highest word), so removing the top j units removes j whole words; a word's key is the sum of its pieces'
    scores ('sum') or its first piece's ('first': the random baseline's one draw per word). Pieces of a word are
    consecutive; ties are broken by text order; positions that are not maskable get T + position. Scores and
    word_ids follow maskable's (the batch's) device."""
    if aggregation not in ("sum", "first"):
        raise InvalidInputError(f"unknown word aggregation {aggregation!r}: sum or first")
    B, T = scores.shape
    scores, word_ids = scores.to(maskable.device), word_ids.to(maskable.device)
    valid = word_ids >= 0
    if bool((valid != maskable).any()):
        raise InvalidInputError("word_ids must name a word (>= 0) exactly on the maskable tokens")
    W = int(word_ids.max()) + 1 if bool(valid.any()) else 1
    index = torch.where(valid, word_ids, torch.zeros_like(word_ids))
    s = torch.nan_to_num(scores.double(), nan=0.0).masked_fill(~valid, 0.0)
    if aggregation == "first":
        starts = torch.ones_like(valid)
        starts[:, 1:] = word_ids[:, 1:] != word_ids[:, :-1]
        s = s * (valid & starts)
    keys = torch.zeros(B, W, dtype=torch.float64, device=scores.device).scatter_add(1, index, s)
    exists = any_per_word(valid, index, W)
    keys = keys.masked_fill(~exists, float("-inf"))
    word_rank = rank_of(keys)
    positions = torch.arange(T, device=scores.device).expand(B, T)
    rank = torch.where(valid, word_rank.gather(1, index), positions + T)
    return rank, exists.sum(1).tolist()


def unit_ranking(batch: Batch, scores: torch.Tensor, n_tokens: list[int], word_ids: torch.Tensor | None,
                 word_aggregation: str, device: torch.device) -> tuple[torch.Tensor, list[int]]:
    """(rank [B, T], units per input): by token (`ranking_positions`; the units are the maskable tokens), or by
    whole word when `word_ids` [B, T] are given (`word_ranking_positions`)."""
    if word_ids is None:
        return ranking_positions(scores, batch.maskable), n_tokens
    B, T = batch.input_ids.shape
    word_ids = torch.as_tensor(word_ids, dtype=torch.long).to(device)
    if word_ids.shape != (B, T):
        raise InvalidInputError(f"word_ids of shape {tuple(word_ids.shape)} do not match the batch ({B}, {T})")
    return word_ranking_positions(scores, batch.maskable, word_ids, word_aggregation)


def removed_positions(rank: torch.Tensor, maskable: torch.Tensor, kinds: torch.Tensor, js: torch.Tensor) -> torch.Tensor:
    """[R, T] bool: the positions removed in each of R perturbed inputs (rank, maskable: [R, T] rows of the
    batch; kinds, js: [R])."""
    top = rank < js[:, None]
    return torch.where(kinds[:, None] == REMOVE, top, maskable & ~top)


def replaced(ids: torch.Tensor, positions: torch.Tensor, token_id: int) -> torch.Tensor:
    """ids [R, T] with the positions [R, T] (bool) set to `token_id` (the [MASK] of the 'mask' removal)."""
    return torch.where(positions, torch.full_like(ids, token_id), ids)


def perturbed_rows(batch: Batch, rows: torch.Tensor, removed: torch.Tensor, mask_token_id: int, pad_token_id: int,
                   removal: str, infill=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, token_type_ids) [R, T] of the perturbed inputs: batch row rows[r] with the
    positions removed[r] replaced by [MASK] ('mask') or deleted, the rest closing up to the left ('delete').
    `infill` (engine/faithfulness/infill.py; a classifier twin's `infill`): with 'mask', the removed positions get
    its tokens instead of [MASK] (retrieval or MLM infill)."""
    ids, attention, types = batch.input_ids[rows], batch.attention_mask[rows], batch.token_type_ids[rows]
    if removal == "mask" and infill is not None:
        return infill.fill(ids, removed, attention), attention, types
    if removal == "mask":
        return replaced(ids, removed, mask_token_id), attention, types
    T = ids.shape[1]
    gone = removed | (attention == 0)
    order = torch.sort(gone.long() * T + torch.arange(T, device=ids.device), dim=1).indices  # kept tokens first
    kept = ~gone.gather(1, order)
    ids = torch.where(kept, ids.gather(1, order), torch.full_like(ids, pad_token_id))
    return ids, kept.long(), torch.where(kept, types.gather(1, order), torch.zeros_like(types))


def pad_id_of(classifier: Classifier) -> int:
    """The id a deleted position's place is padded with: the tokenizer's pad id, 0 without one."""
    return classifier.tokenizer.pad_token_id if classifier.tokenizer.pad_token_id is not None else 0


@torch.no_grad()
def hidden_forward(classifier: Classifier, attention: torch.Tensor, types: torch.Tensor,
                   ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None, features: bool = True,
                   start: torch.Tensor | None = None):
    """Logits [R, C] and (when `features`) the MaSF features [R, L+1, H] of one forward pass (on the cpu, in the
    model's dtype: MaSF.pvalues widens them to float64 exactly), from ids or from word embeddings, without gradients
    (every metric reads outputs only); trailing all-padding columns are cut first (right padding: results are
    unchanged). start [R]: the first position pooled
    per row (engine.ood.features.pool_start: a prompted LM's slot), None: every real token."""
    from engine.ood.features import masf_pooled_mask, pool_hidden_states

    L = max(1, int(attention.sum(1).max()))
    kwargs = {"attention_mask": attention[:, :L], "token_type_ids": types[:, :L]}
    if embeds is not None:
        kwargs["inputs_embeds"] = embeds[:, :L]
    else:
        kwargs["input_ids"] = ids[:, :L]
    if classifier.kind is ModelKind.PROMPTED:  # class scores come from its verbalizer
        kwargs.pop("token_type_ids")
        out = classifier.forward(**kwargs, output_hidden_states=features)
    else:
        out = classifier.model(**kwargs, output_hidden_states=features)
    if not features:
        return out.logits, None
    pooled = masf_pooled_mask(attention[:, :L], None if start is None else start.to(attention.device))
    return out.logits, pool_hidden_states(out.hidden_states, pooled).cpu()


#: Rows per MaSF p-value call: a call has a fixed cost well above a row's (docs/methods.md#notes-behind-the-code), so the
#: features of several forward passes are looked up together, up to this many rows (memory: rows x (L+1) x H floats).
PVALUE_ROWS = 1024


class PendingPvalues:
    """MaSF features of consecutive perturbed rows, collected over forward passes and looked up PVALUE_ROWS at a time
    into `pval` (p-values are per row: grouping rows does not change them)."""

    def __init__(self, masf, pval: np.ndarray):
        self.masf, self.pval = masf, pval
        self.start, self.feats = 0, []

    def add(self, start: int, feats: torch.Tensor) -> None:
        if not self.feats:
            self.start = start
        self.feats.append(feats)
        if sum(len(f) for f in self.feats) >= PVALUE_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.feats:
            feats = torch.cat(self.feats)
            self.pval[self.start:self.start + len(feats)] = self.masf.pvalues(feats)
            self.feats = []


def rows_per_pass(T: int, device: torch.device, max_tokens: int = 4096, classifier: Classifier | None = None,
                  memory_mb: float | None = None) -> int:
    """Rows of T tokens per forward pass: about `max_tokens` tokens on a CPU (where throughput peaks, see
    bench/importance.py); on a GPU as many as half its free memory holds by the one memory model
    (`engine.importance.batching.row_bytes`: one layer's transient activations plus every layer's hidden state,
    kept for the MaSF features), or 16 x max_tokens without a classifier to size them by."""
    if device.type == "cpu":
        return max(1, max_tokens // max(T, 1))
    if classifier is None:
        return max(1, 16 * max_tokens // max(T, 1))
    per_row = row_bytes(classifier, T, backward=False, bf16=False, hidden_states=True)
    return int(max(1, memory_budget_bytes(device, memory_mb) // max(per_row, 1)))


def perturbed_passes(classifier: Classifier, batch: Batch, rows: torch.Tensor,
                     removed_of: Callable[[slice], torch.Tensor], pval: np.ndarray, masf=None, removal: str = "mask",
                     infill=None, step: int | None = None, should_stop: Callable[[], bool] | None = None,
                     cancelled: str = "the metric was cancelled") -> Iterator[tuple[slice, torch.Tensor, torch.Tensor]]:
    """Forward R perturbed rows once each, in passes, yielding (slice of the rows, their batch rows [n], logits [n, C]).

    Row i is batch row rows[i] (rows [R] on the classifier's device) with the positions removed_of(slice) [n, T]
    removed by `removal` (`perturbed_rows`; infill: an infill operator for 'mask'). A pass takes `step` rows
    (default `rows_per_pass` for the classifier); a pass that raises a CUDA out-of-memory error is retried with half
    as many (nothing of it was yielded yet). With `masf`, the features come from the same pass and the p-values land
    in pval [R] once the passes are done (`PendingPvalues`); should_stop is polled before each pass and True raises
    MaskingCancelled(`cancelled`)."""
    device = classifier.device
    R = len(rows)
    if step is None:
        step = rows_per_pass(batch.input_ids.shape[1], device, classifier=classifier)
    pad_id = pad_id_of(classifier)
    pending = PendingPvalues(masf, pval)
    from engine.ood.features import pool_start

    pool_from = None if masf is None else pool_start(classifier, batch.maskable)  # each row keeps its source's slot start
    start = 0
    while start < R:
        if should_stop is not None and should_stop():
            raise MaskingCancelled(cancelled)
        sl = slice(start, min(start + step, R))
        r = rows[sl]
        try:
            ids, attention, types = perturbed_rows(batch, r, removed_of(sl), classifier.mask_token_id, pad_id, removal,
                                                   infill)
            logits, feats = hidden_forward(classifier, attention, types, ids=ids, features=masf is not None,
                                           start=None if pool_from is None else pool_from[r])
        except torch.cuda.OutOfMemoryError as error:  # nothing of this pass was kept yet: retry it with half the rows
            step = halve_after_oom(step, error, device)
            continue
        yield sl, r, logits
        if feats is not None:
            pending.add(start, feats)
        start = sl.stop
    pending.flush()
