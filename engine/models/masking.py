"""Replacing tokens by [MASK]: the masked fine-tuning transform (FMM Alg. 1) and full masking."""
from __future__ import annotations

import torch

from engine.errors import InvalidInputError
from engine.models.batch import SPECIAL, Batch
from engine.models.metadata import STRATEGIES  # noqa: F401 (defined there, with the metadata that records it)


def mask_with_ratio(
    input_ids: torch.Tensor, candidates: torch.Tensor, ratio: torch.Tensor, mask_token_id: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Replace each candidate token of row b by [MASK] with probability ratio[b].

    input_ids [B, T] long; candidates [B, T] bool; ratio [B] float in [0, 1]. Returns new ids."""
    draw = torch.rand(input_ids.shape, generator=generator, device=input_ids.device if generator is None else "cpu")
    draw = draw.to(input_ids.device)
    hit = candidates & (draw < ratio[:, None].to(input_ids.device))
    return torch.where(hit, torch.full_like(input_ids, mask_token_id), input_ids)


def training_transform(
    batch: Batch, strategy: str, mask_token_id: int, generator: torch.Generator | None = None
) -> Batch:
    """The input transform of each training strategy.

    masked: even rows of the mini-batch get r ~ U(0,1) and each non-special token of *both* sequences
        becomes [MASK] with probability r; odd rows stay unchanged (FMM Alg. 1).
    only-masking: every row masked that way (ablation).
    plain: unchanged (ordinary fine-tuning).
    """
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    if strategy == "plain":
        return batch
    B = len(batch)
    ratio = torch.rand(B, generator=generator)
    if strategy == "masked":
        ratio[1::2] = 0.0
    candidates = (batch.segments != SPECIAL) & (batch.attention_mask == 1)
    return batch.with_ids(mask_with_ratio(batch.input_ids, candidates, ratio, mask_token_id, generator))


def mask_all_primary(batch: Batch, mask_token_id: int) -> Batch:
    """Every maskable (primary, non-special) token replaced by [MASK]: the 100%-masked input."""
    return batch.with_ids(torch.where(batch.maskable, torch.full_like(batch.input_ids, mask_token_id), batch.input_ids))


def mask_random_fraction(batch: Batch, ratio: float, mask_token_id: int, generator: torch.Generator | None = None) -> Batch:
    """Mask exactly floor(ratio * N_b) of row b's N_b maskable (primary) tokens, chosen uniformly at random."""
    if not 0.0 <= ratio <= 1.0:
        raise InvalidInputError(f"ratio must be in [0, 1], got {ratio}")
    keys = torch.rand(batch.input_ids.shape, generator=generator).to(batch.device)
    keys = keys.masked_fill(~batch.maskable, float("inf"))  # non-maskable sort last, never chosen
    n_mask = torch.floor(batch.maskable.sum(1).double() * ratio + 1e-9).long()  # [B]
    rank = keys.argsort(dim=1).argsort(dim=1)  # rank of each position's key within its row
    hit = rank < n_mask[:, None]
    return batch.with_ids(torch.where(hit, torch.full_like(batch.input_ids, mask_token_id), batch.input_ids))


def apply_token_masks(batch: Batch, uids, token_masks, mask_token_id: int) -> Batch:
    """Mask the positions recorded per example uid (ROAR's pre-masked data): token_masks[uid] is a list
    of token positions of that example's tokenisation. Rows without an entry stay as they are."""
    if not token_masks:
        return batch
    hit = torch.zeros_like(batch.maskable)
    for row, uid in enumerate(uids):
        positions = token_masks.get(uid)
        if positions:
            hit[row, torch.as_tensor(list(positions), dtype=torch.long, device=hit.device)] = True
    hit &= batch.maskable
    return batch.with_ids(torch.where(hit, torch.full_like(batch.input_ids, mask_token_id), batch.input_ids))
