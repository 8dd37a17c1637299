"""bAbI without annotators: the supporting facts are ground-truth rationales by construction, so every
measure's explanations of the model's predictions can be scored against them directly."""
from __future__ import annotations

from collections.abc import Sequence

from engine.errors import InvalidInputError
from engine.plausibility.rationales import measures_against_rationales
from engine.plausibility.tasks import build_tasks


def supporting_fact_metrics(classifier, dataset, measures: Sequence[str], split: str = "test", limit: int | None = 100,
                            k: int | None = None, progress=None) -> list[dict]:
    """bAbI without annotation: each measure's explanations of the model's predictions against the
    supporting facts of `split` (ground-truth rationales by construction): one row per measure with
    token-F1 at k, IOU-F1 and AUPRC (see `compare_with_rationales`)."""
    examples = [e for e in dataset.split(split)[:limit] if e.rationale_spans]
    if not examples:
        raise InvalidInputError(f"dataset {dataset.name!r} carries no rationale spans (only bAbI does)")
    tasks = build_tasks(classifier, examples, measures, progress=progress)
    return measures_against_rationales(tasks, k=k)
