"""Interaction recovery: on the deciding inputs of a planted AND / OR / threshold model, does the pairwise Shapley
interaction measure (engine.importance.interactions, `shapley-interactions`) find the pair of planted words, with the
sign theory gives it (docs/ground-truth.md#interactions; REFERENCE.md section 20)?

Expected sign of a planted pair's interaction (order-2 Shapley interaction index, v = the target's logit):

    and        +  the effect needs both words: v(AB) - v(A) - v(B) + v() = +k
    or         -  either word suffices: k - k - k + 0 = -k
    threshold  +  when m = k (every word needed: an AND of k words); 0 when m < k: on an input carrying all k words,
                  a pair's discrete derivative is +k when m - 2 of the other planted words are in the coalition, -k when
                  m - 1 are, and both counts are equally likely under the Shapley weights

Per deciding input (players are words; a planted word's player is the one holding its token):

    pair-top    1 when the pair of largest |interaction| is a planted pair (and / or: the pair; threshold: any pair of
                the set); best 1
    pair-sign   1 when the planted pair's interaction has the expected sign (threshold: the share of the set's pairs
                that have it); NaN where the expected sign is 0; best 1
    pair-value  the planted pair's interaction (threshold: the mean over the set's pairs), logits
    pair-rank   the rank of the best-ranked planted pair by |interaction| (1 = top); best 1

An input on which a planted word is not found among its tokens gets NaN (as the card's recovery rows).
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import torch

from engine.errors import NotApplicableError

#: the mechanisms whose planted pairs have a known interaction
INTERACTION_MECHANISMS = ("and", "or", "threshold")
#: each statistic's best possible value (NaN: none; the value's sign is what is judged)
INTERACTION_BEST = {"pair-top": 1.0, "pair-sign": 1.0, "pair-value": float("nan"), "pair-rank": 1.0}
INTERACTION_BETTER = {"pair-top": "higher", "pair-sign": "higher", "pair-rank": "lower"}
DEFAULT_INTERACTION_BUDGET = 512


def expected_sign(spec) -> int:
    """+1, -1 or 0: the sign theory gives the interaction of a planted pair (module docstring)."""
    if spec.mechanism == "and":
        return 1
    if spec.mechanism == "or":
        return -1
    if spec.mechanism == "threshold":
        return 1 if spec.m == spec.k else 0
    raise NotApplicableError(f"interaction recovery needs a planted {' / '.join(INTERACTION_MECHANISMS)} mechanism, "
                             f"not {spec.mechanism!r}: only their pairs have a known interaction")


def value_direction(spec) -> str:
    """The `better` of pair-value: 'higher' (expected +), 'lower' (expected -), 'zero' (expected 0)."""
    return {1: "higher", -1: "lower", 0: "zero"}[expected_sign(spec)]


def planted_players(pairs, maskable: torch.Tensor, word_masks: list[torch.Tensor]) -> list[int] | None:
    """The player of each planted word of one input (`word_masks`: [T] bool per word, `maskable` [T]), None when a
    word is not found."""
    index = torch.cumsum(maskable.long(), 0) - 1  # position -> its index among the maskable tokens
    out = []
    for m in word_masks:
        at = (m & maskable).nonzero().flatten()
        if not len(at):
            return None
        out.append(pairs.player_of(int(index[at[0]])))
    return out


def pair_recovery(pairs, players: list[int], expected: int) -> dict[str, float]:
    """The four statistics (module docstring) of one input's `PairInteractions` for its planted words' `players`."""
    planted = {(min(a, b), max(a, b)) for a, b in combinations(sorted(set(players)), 2)}
    if not planted or not pairs.pairs:
        return {name: float("nan") for name in INTERACTION_BEST}
    values = [pairs.value(a, b) for a, b in planted]
    top = pairs.top(1)[0][:2]
    sign = float("nan") if expected == 0 else float(np.mean([np.sign(v) == expected for v in values]))
    return {"pair-top": float(top in planted), "pair-sign": sign, "pair-value": float(np.mean(values)),
            "pair-rank": float(min(pairs.rank(a, b) for a, b in planted))}


def interaction_recovery(classifier, batch, target, ordered: list[torch.Tensor], spec, budget: int, index: str,
                         seed: int, should_stop=None) -> tuple[dict[str, np.ndarray], dict]:
    """Per input [B] of `batch` (explaining class `target` [B]): the four statistics, from `shapley-interactions` over
    words with `budget` evaluations per input (`index` k-SII or FSII, `seed`); `ordered`: one [B, T] mask per planted
    word (engine.groundtruth.recovery.word_positions). Returns (statistics, the measure's options)."""
    from engine.importance import get_explainer

    expected = expected_sign(spec)
    explainer = get_explainer("shapley-interactions", classifier, memo=False, index=index, budget=budget, seed=seed,
                              level="word")
    imp = explainer.attribute(batch, target, should_stop=should_stop)
    maskable = batch.maskable.cpu()
    out: dict[str, list[float]] = {name: [] for name in INTERACTION_BEST}
    for b, pairs in enumerate(imp.extras["interactions"]):
        players = planted_players(pairs, maskable[b], [m[b].cpu() for m in ordered])
        stats = ({name: float("nan") for name in INTERACTION_BEST} if players is None
                 else pair_recovery(pairs, players, expected))
        for name, v in stats.items():
            out[name].append(v)
    return {name: np.asarray(v, dtype=float) for name, v in out.items()}, dict(explainer.options)
