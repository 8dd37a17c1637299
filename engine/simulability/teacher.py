"""What the frozen teacher contributes, computed once per example set: its predictions (the student's labels),
its per-head scores and the static explanations (docs/methods.md#plausibility-and-simulability).

The teacher is a `Classifier` (a checkpoint of this project); it is only ever run under `torch.no_grad()`
(gradient measures take input gradients, never weight updates), so its weights and predictions cannot
change. The student tokenises with the teacher's tokenizer: both must share one vocabulary (checked).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from engine.errors import NotApplicableError
from engine.importance.head_scores import head_count, model_head_scores
from engine.models import Classifier
from engine.simulability.data import SimSplit
from engine.simulability.explainers import (
    MEASURE_EXPLAINERS,
    head_weighted,
    measure_distribution,
    random_distribution,
    rationale_distribution,
    uniform_weights,
)

CHUNK = 32  # examples per teacher pass (length-sorted, so padding stays small)


def check_shared_vocabulary(teacher: Classifier, student_source: str) -> None:
    """Refuse a student whose tokenizer maps tokens to other ids than the teacher's (their token positions
    must coincide for the explanation KL)."""
    from transformers import AutoTokenizer

    student_vocab = AutoTokenizer.from_pretrained(student_source).get_vocab()
    if student_vocab != teacher.tokenizer.get_vocab():
        raise NotApplicableError(
            f"the student's tokenizer ({student_source}) differs from teacher {teacher.id!r}'s: explanations are "
            "compared token by token, so both must share one vocabulary (tiny and minilm do)")


def rationale_mask(batch, examples) -> torch.Tensor:
    """[B, T] bool: tokens whose characters overlap the example's rationale spans (bAbI supporting facts)."""
    out = torch.zeros(batch.input_ids.shape, dtype=torch.bool)
    for row, example in enumerate(examples):
        spans = example.rationale_spans
        for col, (start, end) in enumerate(batch.offsets[row]):
            if batch.maskable[row, col] and end > start and any(start < b and a < end for a, b in spans):
                out[row, col] = True
    return out


def precompute(teacher: Classifier, examples: Sequence, explainers: Sequence[str] = (), head_scores: bool = False,
               seed: int = 0, progress: Callable[[int, int], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> SimSplit:
    """The teacher's view of `examples` as a `SimSplit` padded to the longest example.

    Always: ids, masks, the teacher's predicted class. head_scores: the teacher's per-head scores [N, H, T].
    explainers: static explainers to compute as distributions (see engine.simulability.explainers), among
    attention-all, attention-last (from head scores), grad-l2, x-grad-sign, ig-sign (engine.importance, for
    the predicted class), oracle (needs rationale spans) and random (seeded with `seed`)."""
    from engine.importance import get_explainer

    examples = list(examples)
    full = teacher.batch_of(examples).to("cpu")
    N, T = full.input_ids.shape
    need_scores = head_scores or any(e in ("attention-all", "attention-last") for e in explainers)
    layers, heads = head_count(teacher.model) if need_scores else (0, 0)
    preds = torch.zeros(N, dtype=torch.long)
    scores = torch.zeros(N, layers * heads, T) if need_scores else None
    measures = {name: torch.zeros(N, T) for name in explainers if name in MEASURE_EXPLAINERS}
    measure_objects = {name: get_explainer(name, teacher, memo=False) for name in measures}
    order = torch.argsort(full.attention_mask.sum(1))
    for start in range(0, N, CHUNK):
        if should_stop is not None and should_stop():
            from engine.errors import SimulabilityCancelled

            raise SimulabilityCancelled("the simulability run was cancelled while the teacher was precomputed")
        idx = order[start:start + CHUNK]
        part = teacher.batch_of([examples[i] for i in idx.tolist()])
        t = part.input_ids.shape[1]
        logits, s = model_head_scores(teacher.model, part.input_ids, part.attention_mask, part.token_type_ids) \
            if need_scores else (teacher.predict_logits(part), None)
        preds[idx] = logits.argmax(-1).cpu()
        if s is not None:
            scores[idx, :, :t] = s.float().cpu()
            scores[idx, :, t:] = -1e9
        for name, explainer in measure_objects.items():
            measures[name][idx, :t] = explainer.attribute(part, target=None).scores
        if progress is not None:
            progress(min(start + CHUNK, N), N)
    mask = full.attention_mask
    explanations = {name: measure_distribution(values, full.maskable) for name, values in measures.items()}
    if "attention-all" in explainers:
        explanations["attention-all"] = head_weighted(scores, uniform_weights(layers * heads), mask)
    if "attention-last" in explainers:
        last = uniform_weights(layers * heads, slice((layers - 1) * heads, layers * heads))
        explanations["attention-last"] = head_weighted(scores, last, mask)
    rationale = rationale_mask(full, examples) if any(e.rationale_spans for e in examples) else None
    if "oracle" in explainers:
        if rationale is None:
            raise NotApplicableError("the oracle explainer needs gold rationales (bAbI's supporting facts)")
        explanations["oracle"] = rationale_distribution(rationale, mask)
    if "random" in explainers:
        explanations["random"] = random_distribution(mask, torch.Generator().manual_seed(seed))
    return SimSplit(input_ids=full.input_ids, attention_mask=mask, token_type_ids=full.token_type_ids,
                    maskable=full.maskable, teacher_pred=preds, teacher_scores=scores if head_scores else None,
                    explanations=explanations, rationale=rationale, uids=[e.uid for e in examples])
