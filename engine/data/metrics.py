"""Dataset performance metrics on integer labels. Each takes y_true, y_pred [N] and returns a float
in [0, 1]."""
from __future__ import annotations

import numpy as np

from engine.errors import InvalidInputError


def accuracy(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> float:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.size == 0:
        raise InvalidInputError("cannot score an empty set")
    return float(np.mean(y_true == y_pred))


def _per_class_counts(y_true, y_pred, num_classes):
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.size == 0:
        raise InvalidInputError("cannot score an empty set")
    classes = np.arange(num_classes)
    tp = np.array([np.sum((y_pred == c) & (y_true == c)) for c in classes], dtype=float)
    fp = np.array([np.sum((y_pred == c) & (y_true != c)) for c in classes], dtype=float)
    fn = np.array([np.sum((y_pred != c) & (y_true == c)) for c in classes], dtype=float)
    return tp, fp, fn


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> float:
    """Unweighted mean over classes of F1; a class never predicted nor present scores 0."""
    tp, fp, fn = _per_class_counts(y_true, y_pred, num_classes)
    denom = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1.mean())


def micro_f1(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> float:
    """Pooled F1; for single-label multi-class data it equals accuracy."""
    tp, fp, fn = _per_class_counts(y_true, y_pred, num_classes)
    denom = 2 * tp.sum() + fp.sum() + fn.sum()
    return float(2 * tp.sum() / denom) if denom else 0.0


METRICS = {"accuracy": accuracy, "macro_f1": macro_f1, "micro_f1": micro_f1}


def score(metric: str, y_true, y_pred, num_classes: int) -> float:
    if metric not in METRICS:
        raise InvalidInputError(f"unknown metric {metric!r}; known: {sorted(METRICS)}")
    return METRICS[metric](y_true, y_pred, num_classes)
