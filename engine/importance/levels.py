"""Reading levels: token scores (word pieces, `red ##eem ##s`) gathered into the words and sentences a
reader reads.

A unit (word or sentence) is a run of consecutive maskable tokens, found from the tokenizer's character
offsets into the primary text, so the same rule works for every tokenizer (BERT's `##` pieces, byte-level
BPE's `Ġ` pieces, sentencepiece's `▁` pieces) without looking at how the pieces are spelt:

- word: a new word starts where whitespace separates a token from the previous one (or where the token's
  own span starts with whitespace, as byte-level BPE's offsets may include the space). Punctuation attached
  to a word stays with it ("film." is one word), as a reader sees it.
- sentence: a new sentence starts after `.`, `!` or `?` (closing quotes and brackets included) followed by
  whitespace, and after a line break: bAbI paragraphs are sentences of facts.

A unit's score aggregates its tokens' scores: `sum` (the default; for additive measures such as IG and LOO
with signed scores the word's share of the total is kept: sums are preserved), `mean` (a long word does not
outweigh a short one), or `max-abs` (the token of largest magnitude, with its sign).

Shapes: N maskable tokens, G units; `offsets` [N] (start, end) character offsets into `text`.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import InvalidInputError

LEVELS = ("token", "word", "sentence")
AGGREGATIONS = ("sum", "mean", "max-abs")
DEFAULT_AGGREGATION = "sum"

# the end of a sentence: terminal punctuation (and closing quotes / brackets) then whitespace, or a line break
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+|\n+")


@dataclass(frozen=True)
class Unit:
    """One word or sentence: its text as typed, its character span, and the maskable tokens it covers."""

    text: str
    start: int  # character offset into the primary text
    end: int
    tokens: tuple[int, ...]  # indices into the N maskable tokens, consecutive


def maskable_offsets(batch, row: int = 0) -> list[tuple[int, int]]:
    """[N] the character spans of row `row`'s maskable tokens (a `Batch`'s offsets at its maskable positions),
    aligned with `Classifier.maskable_tokens` and every score vector over maskable tokens."""
    positions = batch.maskable[row].cpu().nonzero().flatten().tolist()
    return [tuple(batch.offsets[row][i]) for i in positions]


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise InvalidInputError(f"unknown level {level!r}; choose one of: {', '.join(LEVELS)}")
    return level


def check_aggregation(how: str) -> str:
    if how not in AGGREGATIONS:
        raise InvalidInputError(f"unknown aggregation {how!r}; choose one of: {', '.join(AGGREGATIONS)}")
    return how


def _sentence_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _SENTENCE_END.finditer(text) if m.end() < len(text)]


def group_tokens(offsets: Sequence[tuple[int, int]], text: str, level: str,
                 tokens: Sequence[str] | None = None) -> list[Unit]:
    """The units of `level` over N tokens with character `offsets` into `text`, in text order.

    `level` 'token' gives one unit per token (its text is the token itself when `tokens` is given, else its
    span). A token with an empty span (e.g. one the tokenizer inserted) joins the unit before it."""
    check_level(level)
    offsets = [(int(s), int(e)) for s, e in offsets]
    if tokens is not None and len(tokens) != len(offsets):
        raise InvalidInputError(f"{len(tokens)} tokens but {len(offsets)} offsets")
    if level == "token":
        return [Unit(text=tokens[i] if tokens is not None else text[s:e], start=s, end=e, tokens=(i,))
                for i, (s, e) in enumerate(offsets)]
    sentence_starts = _sentence_starts(text) if level == "sentence" else []
    groups: list[list[int]] = []
    previous_end = group_start = 0
    for i, (start, end) in enumerate(offsets):
        if groups and end <= start:  # an empty span belongs to the unit before it
            groups[-1].append(i)
            continue
        if not groups:
            new = True
        elif level == "word":
            new = any(c.isspace() for c in text[previous_end:start]) or text[start:start + 1].isspace()
        else:  # a sentence boundary lies after the current sentence's first token, up to this token
            new = any(group_start < b <= start for b in sentence_starts)
        if new:
            groups.append([i])
            group_start = start
        else:
            groups[-1].append(i)
        previous_end = end
    units = []
    for group in groups:
        spans = [offsets[i] for i in group if offsets[i][1] > offsets[i][0]] or [offsets[group[0]]]
        start, end = spans[0][0], spans[-1][1]
        units.append(Unit(text=text[start:end].strip(), start=start, end=end, tokens=tuple(group)))
    return units


def aggregate(scores: Sequence[float], units: Sequence[Unit], how: str = DEFAULT_AGGREGATION) -> np.ndarray:
    """[N] token scores -> [G] unit scores by `how` (sum, mean or max-abs, which keeps the sign)."""
    check_aggregation(how)
    values = np.asarray(scores, dtype=np.float64)
    out = np.empty(len(units))
    for g, unit in enumerate(units):
        part = values[list(unit.tokens)]
        if how == "sum":
            out[g] = part.sum()
        elif how == "mean":
            out[g] = part.mean()
        else:
            out[g] = part[np.argmax(np.where(np.isnan(part), -1.0, np.abs(part)))]
    return out


def unit_index(units: Sequence[Unit], n_tokens: int) -> np.ndarray:
    """[N] the unit each token belongs to."""
    index = np.full(n_tokens, -1, dtype=int)
    for g, unit in enumerate(units):
        index[list(unit.tokens)] = g
    return index


def word_ids_of(batch, texts: Sequence[str]):
    """[B, T] long: the word (0, 1, ... in text order) of each maskable token of each row of `batch`, -1 on the
    other positions; `texts` are the rows' primary texts (what the offsets point into). What whole-word masking
    removes together."""
    import torch

    out = torch.full(tuple(batch.input_ids.shape), -1, dtype=torch.long)
    for row, text in enumerate(texts):
        offsets = maskable_offsets(batch, row)
        out[row, batch.maskable[row].cpu()] = torch.as_tensor(unit_index(group_tokens(offsets, text, "word"), len(offsets)),
                                                              dtype=torch.long)
    return out
