"""How a measure's scores recover the planted words of a report card's inputs (docs/ground-truth.md): where the
planted words are among an input's tokens, and per input the recovery and separation statistics of a measure's
scores (the rows of kind 'recovery' of a ReportCardCell, engine.groundtruth.card_cells).

Recovery (measures only; operator-independent, repeated in each operator's cell):
    planted-rank (worst rank of the decisive words, 1 = top; lower better), top-hit (all decisive words in the
    top |P|), reciprocal-rank (1 / planted-rank), mass-share (their share of the absolute attribution mass),
    rank-first / rank-second (and, or), decoy-rank / decoy-top1 / decoy-mass-share (decoy: lower better),
    inert-rank / inert-top1 / inert-mass-share (none: lower better).
Separation (the set mechanisms, `set_recovery`, at the word level; best possible value 1, SEPARATION_BEST):
    order-spearman / order-kendall (graded-set: the planted words' scores against the truth's order),
    set-top-share / set-mass-share (graded-set, redundant, threshold: the set's share of the top |set| words and of
    the absolute mass), sign-target-word / sign-other-word / signs-both (cancellation: each word scored toward its
    own class).
"""
from __future__ import annotations

import numpy as np
import torch

from engine.groundtruth.mechanisms import word_token_id

#: each recovery statistic's better direction
RECOVERY_BETTER = {"planted-rank": "lower", "top-hit": "higher", "reciprocal-rank": "higher", "mass-share": "higher",
                   "rank-first": "lower", "rank-second": "lower", "decoy-rank": "higher", "decoy-top1": "lower",
                   "decoy-mass-share": "lower", "inert-rank": "higher", "inert-top1": "lower", "inert-mass-share": "lower",
                   "order-spearman": "higher", "order-kendall": "higher", "set-top-share": "higher",
                   "set-mass-share": "higher", "sign-target-word": "higher", "sign-other-word": "higher",
                   "signs-both": "higher"}


def planted_positions(classifier, batch, spec) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, T] bool masks of the decisive and of the inert planted words' token positions (maskable only). A word is
    found as its one running-text token (its leading space included) anywhere, and, where a byte-level BPE spells it
    otherwise at the start of the text (SmolLM2: "vessel" is two pieces there, " vessel" one), as that spelling at
    the input's first maskable position: a planted word inserted first in the text was not found before."""
    maskable = batch.maskable.cpu()
    decisive = torch.zeros_like(maskable)
    inert = torch.zeros_like(maskable)
    for w in spec.decisive_words:
        decisive |= word_mask(classifier, batch, w)
    for w in spec.inert_words:
        inert |= word_mask(classifier, batch, w)
    return decisive, inert


def word_positions(classifier, batch, spec) -> list[torch.Tensor]:
    """One [B, T] bool mask per planted word, in the spec's order (graded-set: strongest first; cancellation: the
    target's word, then the other class's), each as `planted_positions` finds it (all its pieces)."""
    return [word_mask(classifier, batch, w) for w in spec.words]


def word_mask(classifier, batch, word: str) -> torch.Tensor:
    """[B, T] bool: the maskable positions of `word` (planted_positions' rule)."""
    ids, maskable = batch.input_ids.cpu(), batch.maskable.cpu()
    return _found(classifier, ids, maskable, word)


def _found(classifier, ids: torch.Tensor, maskable: torch.Tensor, word: str) -> torch.Tensor:
    one = word_token_id(classifier.tokenizer, word)
    out = (ids == one) & maskable
    bare = [int(t) for t in classifier.tokenizer(word, add_special_tokens=False)["input_ids"]]
    if bare == [one]:
        return out
    n, T = len(bare), ids.shape[1]
    for b in torch.nonzero(maskable.any(1)).flatten().tolist():
        s = int(maskable[b].int().argmax())
        if s + n > T or ids[b, s:s + n].tolist() != bare or not bool(maskable[b, s:s + n].all()):
            continue
        # the word must end there ("vessels" starts with the same pieces): the next token starts a new word
        after = classifier.tokenizer.decode(ids[b, s:s + n + 1].tolist()) if s + n < T else word
        if after.startswith(word) and not after[len(word):len(word) + 1].isalnum():
            out[b, s:s + n] = True
    return out


#: the mechanisms of several words, whose card has the separation statistics (`set_recovery`)
SET_LIKE = ("graded-set", "redundant", "threshold", "cancellation")
#: each separation statistic's best possible value (the tables state it beside the value)
SEPARATION_BEST = {"order-spearman": 1.0, "order-kendall": 1.0, "set-top-share": 1.0, "set-mass-share": 1.0,
                   "sign-target-word": 1.0, "sign-other-word": 1.0, "signs-both": 1.0}


def set_recovery(scores: torch.Tensor, maskable: torch.Tensor, ordered: list[torch.Tensor], spec,
                 explained: torch.Tensor | None = None, target: int | None = None, other: int | None = None,
                 word_ids: torch.Tensor | None = None) -> dict[str, np.ndarray]:
    """Per input [B]: the separation statistics of a measure's scores on an input carrying several planted words,
    at the word level (a word of several pieces is one word: its pieces' scores summed; word_ids [B, T], -1 off
    the words, groups the other tokens into their words; None: each other token is a word of its own).

        order-spearman / order-kendall  (graded-set) Spearman's rho / Kendall's tau between the planted words'
                         scores and the truth's order (strongest first); 0 where the scores of the planted words
                         are all equal (no order given); best 1
        set-top-share    the share of the planted words among the top |set| words by signed score; best 1
        set-mass-share   the planted words' share of the absolute mass over words; best 1
        sign-target-word / sign-other-word / signs-both  (cancellation, `explained` [B] the explained class, the
                         words' classes `target` and `other`) whether each word is scored toward its own class
                         (positive where it is the explained class, negative where it opposes it; 0 is no sign);
                         both; best 1

    An input on which a planted word is not found gets NaN (its batch's other inputs keep their values)."""
    from scipy import stats

    scores = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    maskable = maskable.cpu()
    B, k = scores.shape[0], len(ordered)
    out: dict[str, list] = {}

    def add(name, value):
        out.setdefault(name, []).append(float(value))

    names = ((["order-spearman", "order-kendall"] if spec.mechanism == "graded-set" else [])
             + (["sign-target-word", "sign-other-word", "signs-both"] if spec.mechanism == "cancellation" else
                ["set-top-share", "set-mass-share"]))
    for b in range(B):
        masks = [m[b].cpu() & maskable[b] for m in ordered]
        if not all(bool(m.any()) for m in masks):
            for name in names:
                add(name, float("nan"))
            continue
        planted = torch.zeros_like(maskable[b])
        for m in masks:
            planted |= m
        word_scores = [float(scores[b][m].sum()) for m in masks]
        # the other words: grouped by word_ids where known, else one token each
        rest = (maskable[b] & ~planted).nonzero().flatten().tolist()
        groups: dict = {}
        for t in rest:
            key = int(word_ids[b, t]) if word_ids is not None and int(word_ids[b, t]) >= 0 else ("t", t)
            groups.setdefault(key, []).append(t)
        other_scores = [float(scores[b, ts].sum()) for ts in groups.values()]
        if spec.mechanism == "graded-set":
            truth = np.arange(k, 0, -1, dtype=float)  # strongest first
            if np.ptp(word_scores) == 0:
                add("order-spearman", 0.0)
                add("order-kendall", 0.0)
            else:
                add("order-spearman", float(stats.spearmanr(word_scores, truth).statistic))
                add("order-kendall", float(stats.kendalltau(word_scores, truth).statistic))
        if spec.mechanism == "cancellation":
            c = int(explained[b])
            right = [(word_scores[0] > 0) if c == target else (word_scores[0] < 0),
                     (word_scores[1] > 0) if c == other else (word_scores[1] < 0)]
            add("sign-target-word", float(right[0]))
            add("sign-other-word", float(right[1]))
            add("signs-both", float(right[0] and right[1]))
            continue
        # ties with another word count against the planted word (as a position tie-break would, at random)
        units = [(v, 1) for v in word_scores] + [(v, 0) for v in other_scores]
        units.sort(key=lambda u: (-u[0], u[1]))
        add("set-top-share", sum(flag for _, flag in units[:k]) / k)
        mass = sum(abs(v) for v in word_scores) + sum(abs(v) for v in other_scores)
        add("set-mass-share", sum(abs(v) for v in word_scores) / mass if mass > 0 else 0.0)
    return {name: np.asarray(v) for name, v in out.items() if len(v) == B}


def recovery(scores: torch.Tensor, maskable: torch.Tensor, decisive: torch.Tensor, inert: torch.Tensor,
             spec) -> dict[str, np.ndarray]:
    """Per input [B]: how a measure's scores rank the planted words (module docstring's recovery metrics).
    Ranks follow the erasure metrics' ordering (signed scores, highest first, ties by position), 1 = top. An input
    whose planted word is not found among its tokens (a byte-level BPE spells a word at the start of the text
    without its leading space, another token) gets NaN, so the batch's other inputs keep their values."""
    from engine.faithfulness.perturb import ranking_positions

    scores = torch.nan_to_num(scores.detach().double().cpu(), nan=0.0)
    maskable = maskable.cpu()
    rank = ranking_positions(scores, maskable) + 1  # 1-based among maskable tokens
    mass = scores.abs().masked_fill(~maskable, 0.0)
    total = mass.sum(1).clamp_min(1e-300)
    B = scores.shape[0]
    out: dict[str, list] = {}

    def add(name, value):
        out.setdefault(name, []).append(float(value))

    two_words = spec.mechanism in ("and", "or")
    names_d = ["planted-rank", "top-hit", "reciprocal-rank", "mass-share"] + (["rank-first", "rank-second"] if two_words
                                                                             else [])
    inert_name = "decoy" if spec.mechanism == "decoy" else "inert"
    names_i = [f"{inert_name}-rank", f"{inert_name}-top1", f"{inert_name}-mass-share"]
    any_d, any_i = bool(decisive.any()), bool(inert.any())
    for b in range(B):
        d = torch.nonzero(decisive[b]).flatten()
        i = torch.nonzero(inert[b]).flatten()
        if any_d and not len(d):
            for name in names_d:
                add(name, float("nan"))
        if any_i and not len(i):
            for name in names_i:
                add(name, float("nan"))
        if len(d):
            r = rank[b, d]
            worst = int(r.max())
            add("planted-rank", worst)
            add("top-hit", float(worst <= len(d)))
            add("reciprocal-rank", 1.0 / worst)
            add("mass-share", float(mass[b, d].sum() / total[b]))
            if two_words:
                firsts = [int(rank[b, p]) for p in d]
                add("rank-first", firsts[0])
                add("rank-second", firsts[-1])
        if len(i):
            ri = int(rank[b, i].min())
            add(f"{inert_name}-rank", ri)
            add(f"{inert_name}-top1", float(ri == 1))
            add(f"{inert_name}-mass-share", float(mass[b, i].sum() / total[b]))
    return {k: np.asarray(v) for k, v in out.items() if len(v) == B}
