"""Plausibility of token distributions against bAbI's supporting facts, at the sentence level.

For each story (the primary text; the question is not a candidate), a sentence's score is the sum of the
explanation's probabilities on its tokens, its label whether it holds a supporting fact. The story's AUC is
the probability that a random supporting sentence outscores a random other one (ties count one half: the
Mann-Whitney U statistic over n_pos x n_neg); stories with only one kind of sentence are left out. Reported:
the mean over stories. 0.5 is chance, 1 a perfect ranking.
"""
from __future__ import annotations

import re

import numpy as np
import torch

_SENTENCE = re.compile(r"[^.?!]+[.?!]?")


def sentence_ids(offsets: list[tuple[int, int]], maskable: torch.Tensor, text: str) -> np.ndarray:
    """[T] int: the sentence index of each maskable token of `text` (by character offsets), -1 elsewhere."""
    spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group().strip()]
    out = np.full(len(offsets), -1, dtype=np.int64)
    for col, (start, end) in enumerate(offsets):
        if not bool(maskable[col]) or end <= start:
            continue
        for k, (a, b) in enumerate(spans):
            if a <= start < b:
                out[col] = k
                break
    return out


def sentence_table(batch, examples) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per example: (token -> sentence ids [T], sentence labels [S] bool: holds a supporting fact)."""
    out = []
    for row, example in enumerate(examples):
        ids = sentence_ids(batch.offsets[row], batch.maskable[row], example.primary)
        spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(example.primary) if m.group().strip()]
        labels = np.array([any(a < e and s < b for s, e in example.rationale_spans) for a, b in spans], dtype=bool)
        out.append((ids, labels))
    return out


def pairwise_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + 0.5 P(tie); NaN without both kinds."""
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def sentence_auc(distribution: torch.Tensor, table: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Mean over stories of the sentence-level AUC of `distribution` [N, T] (token probabilities)."""
    values = []
    dist = distribution.detach().cpu().numpy()
    for row, (ids, labels) in enumerate(table):
        sentence_scores = np.zeros(len(labels))
        T = min(len(ids), dist.shape[1])
        for col in range(T):
            if ids[col] >= 0:
                sentence_scores[ids[col]] += dist[row, col]
        values.append(pairwise_auc(sentence_scores, labels))
    values = np.array(values)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
