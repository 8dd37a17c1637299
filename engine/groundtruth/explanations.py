"""Explanations whose faithfulness is known on a planted model: the true one and hard wrong ones, as score tensors
the faithfulness metrics take like any measure's.

All are orderings of the input's maskable tokens built from one reference order of the other tokens (by default
signed leave-one-out with [MASK], the model's own single-token effect), so two explanations differ only where
the truth says they should:

    true                   the decisive word(s) first, then the rest by the reference
    strongest-other-first  the strongest non-planted token (by the reference) first, the decisive word(s) last
    planted-second         the strongest non-planted token first, then the decisive word(s), then the rest
    decoy-first            (decoy) the decoy first, then the trigger, then the rest
    inert-last / inert-first  (none: the control) the inert word last (the reference) or first (wrong)

With the planted words in the truth's order (`ordered`: one mask per word, graded-set strongest first) and their
signs toward the explained class (`supports`, cancellation), hard wrong explanations of the set mechanisms:

    true (graded-set)      the planted words first, in the truth's order (strongest first), then the rest
    adjacent-swapped       as true, but the two strongest planted words (adjacent strengths) swapped
    weakest-first          the right words first, in reverse order (the weakest first), then the rest
    true (cancellation)    the word of the explained class first, the rest by the reference, and the opposing word
                           last with a negative score (it pushes toward the other class)
    sign-flipped           as true, but the opposing word's sign flipped: scored as supporting, second

For each mechanism `JUDGE_PAIRS` lists (true, wrong) pairs a faithful metric must order.
"""
from __future__ import annotations

import torch

from engine.errors import InvalidInputError

EXPLANATIONS = ("true", "strongest-other-first", "planted-second", "decoy-first", "inert-last", "inert-first",
                "adjacent-swapped", "weakest-first", "sign-flipped")
PREFIX = "explanation:"

#: per mechanism: the explanation taken as true, and the wrong ones it is compared with
JUDGE_PAIRS = {
    "trigger": ("true", ("strongest-other-first", "planted-second")),
    "graded": ("true", ("strongest-other-first", "planted-second")),
    "and": ("true", ("strongest-other-first", "planted-second")),
    "or": ("true", ("strongest-other-first", "planted-second")),
    "gated": ("true", ("strongest-other-first", "planted-second")),
    "decoy": ("true", ("decoy-first", "strongest-other-first", "planted-second")),
    "none": ("inert-last", ("inert-first",)),
    "graded-set": ("true", ("adjacent-swapped", "weakest-first", "strongest-other-first")),
    "redundant": ("true", ("strongest-other-first", "planted-second")),
    "threshold": ("true", ("strongest-other-first", "planted-second")),
    "cancellation": ("true", ("sign-flipped", "strongest-other-first")),
}


def explanations_for(mechanism: str) -> tuple[str, ...]:
    """The constructed explanations the card scores for `mechanism` (true first)."""
    true, wrong = JUDGE_PAIRS[mechanism]
    return (true, *wrong)


def constructed_scores(kind: str, reference: torch.Tensor, maskable: torch.Tensor, decisive: torch.Tensor,
                       inert: torch.Tensor, ordered: list[torch.Tensor] | None = None,
                       supports: torch.Tensor | None = None) -> torch.Tensor:
    """Scores [B, T] (float64; higher = ranked first) of the constructed explanation `kind`.

    Args:
        kind: one of EXPLANATIONS.
        reference: [B, T] reference scores ordering the other tokens (e.g. loo-sign).
        maskable: [B, T] bool; decisive, inert: [B, T] bool positions of the decisive and inert planted words.
        ordered: the planted words' positions, one [B, T] bool mask per word in the truth's order (the set
            mechanisms); a word of several pieces keeps its pieces together.
        supports: [B, n_words] +1 / -1: whether each word of `ordered` pushes toward the explained class
            (cancellation); given, the true explanation puts the opposing word last with a negative score.

    Returns:
        [B, T]: maskable tokens get distinct values N..1 in the explanation's order (ties of the reference by
        position), other positions 0 (cancellation's opposing word in `true`: -1).
    """
    if kind not in EXPLANATIONS:
        raise InvalidInputError(f"unknown constructed explanation {kind!r}; use one of {', '.join(EXPLANATIONS)}")
    B, T = reference.shape
    out = torch.zeros(B, T, dtype=torch.float64)
    ref = torch.nan_to_num(reference.detach().double().cpu(), nan=0.0)
    maskable, decisive, inert = maskable.cpu(), decisive.cpu(), inert.cpu()
    for b in range(B):
        order = [int(t) for t in sorted(torch.nonzero(maskable[b]).flatten().tolist(), key=lambda t: (-ref[b, t], t))]
        d = [t for t in order if decisive[b, t]]
        i = [t for t in order if inert[b, t]]
        rest = [t for t in order if not decisive[b, t] and not inert[b, t]]
        strongest = rest[:1]
        words = ([[t for t in order if m[b, t]] for m in ordered] if ordered is not None else [])
        if supports is not None and words and kind in ("true", "sign-flipped"):
            own = [w for j, w in enumerate(words) if supports[b, j] > 0]
            opposing = [w for j, w in enumerate(words) if supports[b, j] <= 0]
            first = [t for w in own for t in w]
            against = [t for w in opposing for t in w]
            others = [t for t in order if t not in first and t not in against]
            seq = first + (against + others if kind == "sign-flipped" else others + against)
            n = len(seq)
            for rank, t in enumerate(seq):
                out[b, t] = float(n - rank) if kind == "sign-flipped" or t not in against else -1.0
            continue
        if words and kind in ("true", "adjacent-swapped", "weakest-first"):
            chosen = list(words)
            if kind == "adjacent-swapped" and len(chosen) >= 2:
                chosen[0], chosen[1] = chosen[1], chosen[0]
            elif kind == "weakest-first":
                chosen = chosen[::-1]
            first = [t for w in chosen for t in w]
            seq = first + [t for t in order if t not in first]
        elif kind in ("adjacent-swapped", "weakest-first", "sign-flipped"):
            raise InvalidInputError(f"explanation {kind!r} needs the planted words in the truth's order (ordered=)"
                                    + (" and their signs (supports=)" if kind == "sign-flipped" else ""))
        elif kind == "true":
            seq = d + [t for t in order if not decisive[b, t]]
        elif kind == "strongest-other-first":
            seq = strongest + [t for t in order if t not in strongest and not decisive[b, t]] + d
        elif kind == "planted-second":
            seq = strongest + d + [t for t in order if t not in strongest and not decisive[b, t]]
        elif kind == "decoy-first":
            seq = i + d + rest
        elif kind == "inert-first":
            seq = i + [t for t in order if not inert[b, t]]
        else:  # inert-last
            seq = [t for t in order if not inert[b, t]] + i
        n = len(seq)
        for rank, t in enumerate(seq):
            out[b, t] = float(n - rank)
    return out
