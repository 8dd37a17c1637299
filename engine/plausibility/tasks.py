"""Annotation tasks: one input with several measures' explanations, anonymised (A, B, C ...) and
shuffled with a per-task seed so annotators cannot tell (or learn) which measure is which.

A `Task` is what the store keeps and the page shows: the input, the tokens shown (the primary
sequence's maskable tokens, in order), and each explanation's scores over those tokens with its
provenance (measure, options, target class and whether it is gold or predicted, code version).
The same task serves a ranking (order the explanations) and a rationale (mark the tokens that justify
the label; explanations hidden); bAbI tasks also carry the supporting facts as `gold_rationale`.
"""
from __future__ import annotations

import hashlib
import json
import random
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.errors import InvalidInputError
from engine.plausibility.rationales import rationale_token_indices

SLOTS = string.ascii_uppercase


@dataclass(frozen=True)
class AnonymisedExplanation:
    """One measure's scores over a task's tokens, shown under the anonymised name `slot`."""

    slot: str
    measure: str
    scores: tuple[float, ...]
    options: dict = field(default_factory=dict)
    target: int | None = None
    target_source: str | None = None  # "gold" or "predicted"
    code_version: str | None = None


@dataclass(frozen=True)
class Task:
    id: str
    model_id: str
    primary: str
    tokens: tuple[str, ...]
    explanations: tuple[AnonymisedExplanation, ...]
    seed: int
    auxiliary: str | None = None
    dataset: str | None = None
    example_uid: str | None = None
    label: int | None = None
    label_name: str | None = None
    target: int | None = None
    target_name: str | None = None
    target_source: str | None = None
    gold_rationale: tuple[int, ...] | None = None
    code_version: str | None = None
    created_at: str | None = None

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(e.slot for e in self.explanations)

    def measure_of(self) -> dict[str, str]:
        """slot -> measure (for results only; never shown while annotating)."""
        return {e.slot: e.measure for e in self.explanations}


def task_id(model_id: str, primary: str, auxiliary: str | None, measures: Mapping[str, dict]) -> str:
    """A stable id: the same model, input and measures (with options) give the same task, so preparing
    tasks twice does not duplicate them."""
    text = json.dumps([model_id, primary, auxiliary, sorted((m, measures[m]) for m in measures)], sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def task_seed(task_id_: str) -> int:
    return int(task_id_[:8], 16)


def anonymise(measures: Sequence[str], seed: int) -> list[tuple[str, str]]:
    """[(slot, measure)]: the measures shuffled with `seed` and named A, B, C ... in that order."""
    if len(measures) > len(SLOTS):
        raise InvalidInputError(f"at most {len(SLOTS)} explanations fit one task, got {len(measures)}")
    if len(set(measures)) != len(measures):
        raise InvalidInputError(f"a task shows each measure once, got {list(measures)}")
    shuffled = list(measures)
    random.Random(seed).shuffle(shuffled)
    return list(zip(SLOTS, shuffled))


def make_task(model_id: str, primary: str, tokens: Sequence[str], scores: Mapping[str, Sequence[float]], *,
              options: Mapping[str, dict] | None = None, auxiliary: str | None = None, target: int | None = None,
              target_name: str | None = None, target_source: str | None = None, label: int | None = None,
              label_name: str | None = None, dataset: str | None = None, example_uid: str | None = None,
              gold_rationale: Sequence[int] | None = None, code_version: str | None = None) -> Task:
    """A task from per-measure scores over `tokens` (no model needed: tests and imports use this)."""
    options = {m: dict((options or {}).get(m, {})) for m in scores}
    for measure, values in scores.items():
        if len(values) != len(tokens):
            raise InvalidInputError(f"measure {measure!r} has {len(values)} scores for {len(tokens)} tokens")
    tid = task_id(model_id, primary, auxiliary, options)
    seed = task_seed(tid)
    explanations = tuple(
        AnonymisedExplanation(slot=slot, measure=measure, scores=tuple(float(v) for v in scores[measure]), options=options[measure],
                    target=target, target_source=target_source, code_version=code_version)
        for slot, measure in anonymise(list(scores), seed))
    return Task(id=tid, model_id=model_id, primary=primary, tokens=tuple(str(t) for t in tokens),
                explanations=explanations, seed=seed, auxiliary=auxiliary, dataset=dataset, example_uid=example_uid,
                label=label, label_name=label_name, target=target, target_name=target_name, target_source=target_source,
                gold_rationale=None if gold_rationale is None else tuple(int(i) for i in gold_rationale),
                code_version=code_version)


def build_tasks(classifier, examples: Sequence, measures: Sequence[str], options: Mapping[str, dict] | None = None,
                batch_size: int = 8, progress: Callable[[int, int], None] | None = None) -> list[Task]:
    """Explain dataset `Example`s with each measure and make one task per example.

    All measures explain the same class, the model's prediction (`target_source='predicted'`), so
    annotators compare explanations of one decision.
    """
    import torch

    from engine.importance import get_explainer
    from engine.runtime import code_version

    options = {m: dict((options or {}).get(m, {})) for m in measures}
    version = code_version()
    meta = classifier.meta
    explainers = {m: get_explainer(m, classifier, **options[m]) for m in measures}
    tasks: list[Task] = []
    for start in range(0, len(examples), batch_size):
        chunk = list(examples[start:start + batch_size])
        batch = classifier.batch_of(chunk)
        with torch.no_grad():
            predicted = classifier.predict_logits(batch).argmax(-1)
        per_measure = {}
        for m, explainer in explainers.items():
            imp = explainer.attribute(batch, target=predicted)
            per_measure[m] = (torch.as_tensor(imp.scores).detach().float().cpu(), dict(getattr(imp, "options", None) or options[m]))
        for i, example in enumerate(chunk):
            keep = batch.maskable[i].cpu()
            tokens = classifier.maskable_tokens(batch, i)
            gold = None
            if example.rationale_spans:
                gold = rationale_token_indices(batch.offsets[i], keep.tolist(), example.rationale_spans)
            target = int(predicted[i])
            tasks.append(make_task(
                classifier.id, example.primary, tokens, {m: per_measure[m][0][i][keep].tolist() for m in measures},
                options={m: per_measure[m][1] for m in measures}, auxiliary=example.auxiliary, target=target,
                target_name=classifier.classes[target], target_source="predicted", label=int(example.label),
                label_name=classifier.classes[int(example.label)], dataset=meta.dataset,
                example_uid=example.uid or None, gold_rationale=gold, code_version=version))
        if progress is not None:
            progress(min(start + batch_size, len(examples)), len(examples))
    return tasks
