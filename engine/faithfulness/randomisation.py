"""The randomisation test (ICE, ice-faithfulness 1.0.1): is the explanation's top-k set more effective to remove than
random k-sets of the same input?

Per input with N maskable tokens, the explanation's top-k set E and n_sets random k-sets R_1 .. R_n, each drawn
uniformly among the k-sets of the maskable positions OTHER than E (a draw equal to E is drawn again: comparing E with
itself says nothing, and at k = 1 a perfect explanation would often draw its own token and keep its p-value high,
docs/methods.md#notes-behind-the-code):

    effect(S) = p_c(x) - p_c(x with S removed)
    win rate  = mean_j [effect(E) > effect(R_j)] + w * [effect(E) = effect(R_j)]     higher = more faithful
    p-value   = (1 + #{j: effect(R_j) >= effect(E)}) / (1 + n_sets)                  (a permutation p-value)

Ties: w = 1/2 with ties='half' (the report card's convention, the default: a tie is neither a win nor a loss) or
w = 0 with ties='loss' (ICE's: a tie is a loss). The p-value counts a tie against the explanation under both, as a
permutation p-value must. The p-value's floor is 1 / (n_sets + 1): with the default n_sets = 99 it is 0.01, so a
single input can reach p < 0.05 (with 20 sets the floor was 1/21 = 0.048). An input with k >= N (no other k-set)
has no test: NaN. Removal as the erasure metrics' (perturb.perturbed_rows: mask / delete). Cost: 2 + n_sets forward
rows per input.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.faithfulness.registry import family_options

#: random k-sets per input by default (the registry's option): p-value floor 1 / (99 + 1) = 0.01 < 0.05
DEFAULT_RANDOM_SETS: int = family_options("randomisation")["random_sets"]
TIES = ("half", "loss")


def p_value_floor(n_sets: int) -> float:
    """The smallest p-value the test can give with n_sets random sets: 1 / (n_sets + 1)."""
    return 1.0 / (n_sets + 1)


def draw_other_sets(rng: np.random.Generator, positions: np.ndarray, k: int, own: np.ndarray,
                    n_sets: int) -> list[np.ndarray]:
    """n_sets k-subsets (sorted position arrays) of `positions`, each uniform among those not equal to `own` (sorted
    [k]); [] when no other k-set exists (k >= len(positions))."""
    if k >= len(positions) or k < 1:
        return []
    own = np.sort(np.asarray(own))
    out = []
    while len(out) < n_sets:
        pick = np.sort(rng.choice(positions, size=k, replace=False))
        if len(own) == k and np.array_equal(pick, own):
            continue  # at most 1 / C(N, k) <= 1/2 of the draws: the loop ends
        out.append(pick)
    return out


def randomisation_test(classifier, batch, scores: torch.Tensor, k: torch.Tensor | Sequence[int], target: torch.Tensor,
                       removal: str, n_sets: int = DEFAULT_RANDOM_SETS, seed: int = 0,
                       ties: str = "half") -> tuple[np.ndarray, np.ndarray]:
    """(win rate [B], p-value [B]) of the explanation's top-k set (scores [B, T], k [B]) against n_sets random
    k-sets of the same input drawn without the explanation's own set (module docstring). ties: 'half' (the card's
    default) or 'loss' (ICE's); the p-value's floor is 1 / (n_sets + 1). NaN for an input with k >= its maskable
    tokens. target [B] or None (the predicted class)."""
    from engine.faithfulness.perturb import perturbed_rows, ranking_positions

    if n_sets < 1:
        raise InvalidInputError(f"the randomisation test needs at least 1 random set, got {n_sets}")
    if ties not in TIES:
        raise InvalidInputError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    tie_weight = 0.5 if ties == "half" else 0.0
    device = classifier.device
    batch = batch.to(device)
    target = classifier.targets_for(batch, target)  # None: the predicted class, as the other families
    B, T = batch.input_ids.shape
    maskable = batch.maskable
    rank = ranking_positions(scores.to(device), maskable)
    pad_id = classifier.tokenizer.pad_token_id if classifier.tokenizer.pad_token_id is not None else 0
    win, pval = np.full(B, np.nan), np.full(B, np.nan)
    for b in range(B):
        kb = int(k[b])
        rng = np.random.default_rng([seed, int(batch.input_ids[b].sum()), b % 7])
        pos = torch.nonzero(maskable[b]).flatten().cpu().numpy()
        own = rank[b] < kb
        others = draw_other_sets(rng, pos, kb, torch.nonzero(own).flatten().cpu().numpy(), n_sets)
        if not others:
            continue
        sets = [own]
        for pick in others:
            m = torch.zeros(T, dtype=torch.bool, device=device)
            m[torch.as_tensor(pick, device=device)] = True
            sets.append(m)
        removed = torch.stack([torch.zeros(T, dtype=torch.bool, device=device), *sets])
        rows = torch.full((len(removed),), b, device=device)
        ids, attention, types = perturbed_rows(batch, rows, removed, classifier.mask_token_id, pad_id, removal,
                                               getattr(classifier, "infill", None))
        with torch.no_grad():
            logits = classifier.forward(input_ids=ids, attention_mask=attention, token_type_ids=types).logits
        p = torch.softmax(logits.double(), -1)[:, int(target[b])].cpu().numpy()
        effect = p[0] - p[1:]
        top, rand = effect[0], effect[1:]
        win[b] = float(np.mean((top > rand) + tie_weight * (top == rand)))
        pval[b] = float((1 + np.sum(rand >= top)) / (1 + n_sets))
    return win, pval


def n_other_sets(n_tokens: int, k: int) -> int:
    """How many k-sets other than the explanation's own an input of n_tokens maskable tokens has: C(N, k) - 1."""
    return max(0, math.comb(n_tokens, k) - 1) if 0 < k <= n_tokens else 0
