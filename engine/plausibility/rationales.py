"""Explanations against rationales (ERASER, DeYoung et al. 2020): token-F1 at top-k, IOU-F1 and AUPRC.

A rationale is a set of token indices (into a task's tokens). Soft explanation scores are compared
with it in two ways:
- discretised: the top-k scored tokens form the predicted rationale (k: the average gold rationale
  length, ERASER's choice), then token-level P/R/F1 per input, and IOU-F1: spans are contiguous runs
  of selected tokens; a predicted span counts as a match when its IOU with some gold span is at least
  0.5; precision and recall are averaged over inputs (macro) and F1 is taken of those averages, as in
  ERASER's `partial_match_score`.
- soft: AUPRC, the average precision of the scores ranking gold tokens first, per input, averaged.
bAbI's supporting facts are character spans of the paragraph; `rationale_token_indices` maps them to
tokens through the tokenizer's character offsets (`Batch.offsets`).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from engine.errors import InvalidInputError


def rationale_token_indices(offsets: Sequence[tuple[int, int]], maskable: Sequence[bool],
                            spans: Iterable[tuple[int, int]]) -> tuple[int, ...]:
    """Indices (counting maskable tokens only, as a task's tokens do) of the tokens whose character
    span [start, end) overlaps any of `spans`."""
    spans = [(int(a), int(b)) for a, b in spans]
    out, k = [], 0
    for (start, end), keep in zip(offsets, maskable):
        if not keep:
            continue
        if end > start and any(start < b and a < end for a, b in spans):
            out.append(k)
        k += 1
    return tuple(out)


def top_k(scores: Sequence[float], k: int) -> tuple[int, ...]:
    """Indices of the k highest scores (ties: the earlier token first), sorted by position."""
    values = np.asarray(scores, dtype=float)
    values = np.where(np.isfinite(values), values, -np.inf)
    k = max(0, min(int(k), len(values)))
    order = np.argsort(-values, kind="stable")[:k]
    return tuple(sorted(int(i) for i in order))


def spans_of(tokens: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous runs of token indices as [start, end) spans: {1,2,3,7} -> [(1,4), (7,8)]."""
    spans: list[tuple[int, int]] = []
    for t in sorted(set(int(t) for t in tokens)):
        if spans and spans[-1][1] == t:
            spans[-1] = (spans[-1][0], t + 1)
        else:
            spans.append((t, t + 1))
    return spans


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def token_prf(predicted: Iterable[int], gold: Iterable[int]) -> tuple[float, float, float]:
    """Token-level precision, recall and F1 of one input (0 where undefined)."""
    predicted, gold = set(predicted), set(gold)
    tp = len(predicted & gold)
    p = tp / len(predicted) if predicted else 0.0
    r = tp / len(gold) if gold else 0.0
    return p, r, _f1(p, r)


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union if union else 0.0


def iou_f1(predicted: Sequence[Iterable[int]], gold: Sequence[Iterable[int]], threshold: float = 0.5) -> dict:
    """ERASER's IOU-F1 over inputs: predicted[i] and gold[i] are the token sets of input i.

    Returns macro (P and R averaged over inputs, then F1) and micro (matches pooled) figures."""
    if len(predicted) != len(gold):
        raise InvalidInputError(f"{len(predicted)} predicted rationales but {len(gold)} gold ones")
    tps, n_pred, n_gold = [], [], []
    for pred, ref in zip(predicted, gold):
        pred_spans, gold_spans = spans_of(pred), spans_of(ref)
        tps.append(sum(max((iou(p, g) for g in gold_spans), default=0.0) >= threshold for p in pred_spans))
        n_pred.append(len(pred_spans))
        n_gold.append(len(gold_spans))
    macro_p = float(np.mean([t / n if n else 0.0 for t, n in zip(tps, n_pred)])) if tps else 0.0
    macro_r = float(np.mean([t / n if n else 0.0 for t, n in zip(tps, n_gold)])) if tps else 0.0
    micro_p = sum(tps) / sum(n_pred) if sum(n_pred) else 0.0
    micro_r = sum(tps) / sum(n_gold) if sum(n_gold) else 0.0
    return {"macro_precision": macro_p, "macro_recall": macro_r, "macro_f1": _f1(macro_p, macro_r),
            "micro_precision": micro_p, "micro_recall": micro_r, "micro_f1": _f1(micro_p, micro_r)}


def average_precision(scores: Sequence[float], relevant: Iterable[int] | Sequence[bool]) -> float:
    """AUPRC as average precision: sum over score thresholds of (R_n - R_{n-1}) * P_n, thresholds at
    each distinct score from the highest down (tied scores enter together), as scikit-learn's
    `average_precision_score`. `relevant`: gold token indices, or a boolean mask as long as `scores`.
    NaN when there is no gold token (precision-recall is undefined)."""
    values = np.asarray(scores, dtype=float)
    n = len(values)
    relevant = list(relevant)
    if relevant and isinstance(relevant[0], (bool, np.bool_)):
        if len(relevant) != n:
            raise InvalidInputError(f"{len(relevant)} labels for {n} scores")
        y = np.asarray(relevant, dtype=bool)
    else:
        y = np.zeros(n, dtype=bool)
        for i in relevant:
            if not 0 <= int(i) < n:
                raise InvalidInputError(f"gold token {i} is outside the {n} scored tokens")
            y[int(i)] = True
    if not y.any():
        return math.nan
    values = np.where(np.isfinite(values), values, -np.inf)
    order = np.argsort(-values, kind="stable")
    values, y = values[order], y[order]
    # the last index of each run of equal scores is where a threshold falls
    ends = np.r_[np.flatnonzero(np.diff(values) != 0), n - 1]
    tp = np.cumsum(y)[ends]
    precision = tp / (ends + 1)
    recall = tp / y.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def compare_with_rationales(scores: Sequence[Sequence[float]], gold: Sequence[Iterable[int]], k: int | None = None,
                            threshold: float = 0.5) -> dict:
    """One measure against the gold rationales of several inputs (ERASER's three numbers).

    scores[i]: the measure's scores over input i's tokens; gold[i]: that input's rationale token indices.
    k: tokens kept for the discrete metrics; default the average gold length over these inputs (rounded,
    at least 1). Inputs without any gold token count in token-F1/IOU-F1 (as misses) but not in AUPRC.
    """
    if len(scores) != len(gold):
        raise InvalidInputError(f"{len(scores)} score rows but {len(gold)} rationales")
    gold = [tuple(sorted(set(int(t) for t in g))) for g in gold]
    if not gold:
        return {"n": 0, "k": k, "token_f1": math.nan, "iou_f1": math.nan, "auprc": math.nan, "n_auprc": 0}
    if k is None:
        k = max(1, round(float(np.mean([len(g) for g in gold]))))
    predicted = [top_k(s, k) for s in scores]
    aps = [average_precision(s, g) for s, g in zip(scores, gold)]
    aps = [a for a in aps if not math.isnan(a)]
    return {
        "n": len(gold),
        "k": int(k),
        "token_f1": float(np.mean([token_prf(p, g)[2] for p, g in zip(predicted, gold)])),
        "iou_f1": iou_f1(predicted, gold, threshold)["macro_f1"],
        "auprc": float(np.mean(aps)) if aps else math.nan,
        "n_auprc": len(aps),
    }


def measures_against_rationales(tasks: Sequence, rationales: Mapping[str, Sequence[Iterable[int]]] | None = None,
                                k: int | None = None) -> list[dict]:
    """A row per measure: ERASER metrics of its scores against rationales.

    tasks: `Task`s; rationales: task id -> list of rationales (one per annotator, each compared as its
    own input). Without `rationales`, each task's `gold_rationale` (bAbI supporting facts) is used.
    """
    per_measure: dict[str, tuple[list, list]] = {}
    for task in tasks:
        refs = ([task.gold_rationale] if task.gold_rationale is not None else []) if rationales is None \
            else list(rationales.get(task.id, []))
        for e in task.explanations:
            s, g = per_measure.setdefault(e.measure, ([], []))
            for ref in refs:
                s.append(e.scores)
                g.append(ref)
    rows = []
    for measure, (s, g) in sorted(per_measure.items()):
        if g:
            rows.append({"measure": measure, **compare_with_rationales(s, g, k)})
    return sorted(rows, key=lambda r: -r["auprc"] if not math.isnan(r["auprc"]) else math.inf)
