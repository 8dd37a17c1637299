"""Is a prompted classifier's explanation of itself faithful? (docs/methods.md#self-explanations; Madsen, Chandar & Reddy,
Findings of ACL 2024.) For each input: classify, ask the model for its explanation, apply it, classify again.

    counterfactual  "edit the text so that its sentiment becomes <target>" (target = the class opposite the gold
                    label); the edited text is classified: faithful iff the class is now the target
    attribution     "list the words the sentiment depends on"; every occurrence of each named word is replaced by
                    [REDACTED]: faithful iff the class is now an abstention (neutral or unknown)
    redaction       "rewrite the text with the important words replaced by [REDACTED]"; that text is classified:
                    faithful iff the class is now an abstention

Classification is the verbalizer's (one forward pass), over the model's classes plus the abstention words
(`abstain`, default neutral and unknown, scored at the same answer position with their capitalised forms where
these are single tokens like the label words, so classification stays one forward pass): the
published rule that "neutral = success for faithfulness, incorrect for accuracy". With `abstain=()` a
redaction or attribution is faithful iff the class changed at all.

Verdicts: faithful, unfaithful, not parsable (the answer could not be read, names no word of the text, or is not
the object asked for: engine.selfexplain.replies), and
skipped (the first classification was wrong: as in the paper, only correctly classified inputs are explained,
so the counterfactual target is also the opposite of the prediction). Every record keeps the exact prompt, the
model's answer and every intermediate text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch

from engine.errors import Cancelled, InvalidInputError, NotApplicableError
from engine.models.kinds import ModelKind
from engine.selfexplain.generation import Generator
from engine.selfexplain.parsing import (
    KINDS,
    explanation_request,
    parse_attribution,
    parse_counterfactual,
    parse_redaction,
    redact_words,
)

VERDICTS = ("faithful", "unfaithful", "not parsable")
SKIPPED = "skipped"
ABSTAIN = ("neutral", "unknown")


@dataclass
class SelfExplanation:
    """One input's self-explanation and its verdict (every string the model saw or wrote)."""

    index: int
    kind: str
    text: str
    label: str | None
    prediction: str
    probabilities: dict[str, float]
    correct: bool | None
    verdict: str
    reason: str = ""
    target: str | None = None
    request: str | None = None          # the user message asking for the explanation
    prompt: str | None = None           # the exact string the model continued
    answer: str | None = None           # the model's answer
    explanation: object = None          # the edited text, the named words, or the redacted text
    edited_text: str | None = None      # the text classified the second time
    reclassification: str | None = None
    reprobabilities: dict[str, float] = field(default_factory=dict)
    unchanged: bool | None = None       # the text classified again equals the input up to case, spaces, punctuation
    cached: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def judge_classifier(classifier, abstain: Sequence[str] = ABSTAIN):
    """The classifier with the abstention words added to its verbalizer (same LM, same prompt)."""
    from engine.models.prompted import PromptedClassifier

    check_prompted(classifier)
    extra = [w for w in abstain if w not in classifier.classes]
    if not extra:
        return classifier
    spec = classifier.spec.to_dict()
    spec["verbalizer"] = {**spec["verbalizer"], **{w: [w, w.capitalize()] for w in extra}}
    from engine.models.prompt_spec import PromptSpec

    meta = {k: v for k, v in classifier.metadata.items() if k not in ("prompt", "classes")}

    def build(verbalizer):
        return PromptedClassifier(classifier.model, classifier.tokenizer, PromptSpec.from_dict({**spec, "verbalizer": verbalizer}),
                                  classifier.max_length, meta, classifier.device)

    judge = build(spec["verbalizer"])
    if classifier.single_token_words and not judge.single_token_words:
        # Keep classification one forward pass: an abstention's forms that are several tokens are dropped
        # (SmolLM2: "Neutral" is 2 tokens, "neutral" 1), unless none of its forms is a single token.
        words = dict(zip([w for name in judge.classes for w in spec["verbalizer"][name]], (t for _, t in judge.label_word_tokens)))
        verbalizer = dict(spec["verbalizer"])
        for name in extra:
            single = [w for w in verbalizer[name] if len(words[w]) == 1]
            verbalizer[name] = single or verbalizer[name]
        judge = build(verbalizer)
    return judge


def check_prompted(classifier) -> None:
    if classifier.kind is not ModelKind.PROMPTED:
        raise NotApplicableError(f"self-explanations need a prompted language model (a model registered with --prompt, "
                                 f"e.g. smollm2-rt-prompt); {classifier.id!r} is a sequence classifier")
    if classifier.spec.paired:
        raise NotApplicableError("self-explanations are implemented for single-text tasks; this prompt has a second slot")


def label_words(judge) -> list[str]:
    """The class names and every verbalizer word of `judge` (the abstentions included): a reply made of these
    (and label talk) is a statement about the label, not a rewrite (engine.selfexplain.replies)."""
    verbalizer = judge.spec.to_dict()["verbalizer"]
    return [*judge.classes, *(w for ws in verbalizer.values() for w in ws)]


def _letters(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def classify(judge, text: str) -> tuple[str, dict[str, float]]:
    with torch.no_grad():
        p = judge.logits(judge.batch(text)).softmax(-1)[0].tolist()
    probs = {name: float(v) for name, v in zip(judge.classes, p)}
    return max(probs, key=probs.get), probs


def verdict(kind: str, prediction: str, reclassification: str, target: str | None, abstain: Sequence[str]) -> str:
    """faithful / unfaithful for a parsed explanation (see the module docstring)."""
    if kind == "counterfactual":
        return "faithful" if reclassification == target else "unfaithful"
    if abstain:
        return "faithful" if reclassification in abstain else "unfaithful"
    return "faithful" if reclassification != prediction else "unfaithful"


def counterfactual_target(classes: Sequence[str], label: str) -> str:
    if len(classes) != 2:
        raise NotApplicableError(f"a counterfactual needs a task with two classes to name the opposite one; "
                                 f"this model has {len(classes)}: {', '.join(classes)}")
    return classes[1 - list(classes).index(label)]


def explain_one(classifier, generator: Generator, kind: str, text: str, *, label: str | None = None, index: int = 0,
                judge=None, abstain: Sequence[str] = ABSTAIN, only_correct: bool = True,
                on_text: Callable[[str], None] | None = None,
                should_stop: Callable[[], bool] | None = None) -> SelfExplanation:
    """Classify `text`, ask for a `kind` self-explanation, apply it, classify again (see the module docstring)."""
    if kind not in KINDS:
        raise InvalidInputError(f"unknown self-explanation kind {kind!r}; kinds: {', '.join(KINDS)}")
    judge = judge or judge_classifier(classifier, abstain)
    mask = classifier.spec.replacement_text if classifier.spec.replacement == "redacted" else "[REDACTED]"
    prediction, probs = classify(judge, text)
    correct = None if label is None else prediction == label
    record = SelfExplanation(index=index, kind=kind, text=text, label=label, prediction=prediction, probabilities=probs,
                             correct=correct, verdict=SKIPPED)
    if kind == "counterfactual":  # the class opposite the gold label (the prediction when there is none)
        basis = label if label is not None else prediction
        if basis not in classifier.classes:
            record.reason = f"the prediction {prediction!r} is an abstention: no opposite class"
            return record
        record.target = counterfactual_target(classifier.classes, basis)
    if only_correct and correct is False:
        record.reason = "misclassified: only correctly classified inputs are explained"
        return record
    record.request = explanation_request(kind, text, target=record.target, mask=mask)
    record.prompt = generator.chat_prompt(record.request)
    record.answer = generator.generate(record.prompt, on_text=on_text, should_stop=should_stop)
    record.cached = generator.last_cached
    labels = label_words(judge)
    if kind == "counterfactual":
        value, why = parse_counterfactual(record.answer, text, labels, mask)
        edited = value
    elif kind == "attribution":
        value, why = parse_attribution(record.answer, text)
        edited = None if value is None else redact_words(text, value, mask)
    else:
        value, why = parse_redaction(record.answer, mask, text, labels)
        edited = value
    record.explanation = value
    if value is None:
        record.verdict, record.reason = "not parsable", why
        return record
    record.edited_text = edited
    record.unchanged = _letters(edited) == _letters(text)
    record.reclassification, record.reprobabilities = classify(judge, edited)
    record.verdict = verdict(kind, prediction, record.reclassification, record.target, abstain)
    return record


def self_explain(classifier, examples, kind: str, *, generator: Generator | None = None,
                 abstain: Sequence[str] = ABSTAIN, only_correct: bool = True,
                 progress: Callable[[int, int], None] | None = None,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> list[SelfExplanation]:
    """One `SelfExplanation` per example (objects with `.primary` text and `.label` class id)."""
    check_prompted(classifier)
    generator = generator or Generator(classifier)
    judge = judge_classifier(classifier, abstain)
    examples = list(examples)
    out = []
    for i, ex in enumerate(examples):
        if should_stop is not None and should_stop():
            raise Cancelled("self-explanation cancelled")
        label = None if ex.label is None else classifier.classes[int(ex.label)]
        out.append(explain_one(classifier, generator, kind, ex.primary, label=label, index=i, judge=judge,
                               abstain=abstain, only_correct=only_correct, on_text=on_text, should_stop=should_stop))
        if progress is not None:
            progress(i + 1, len(examples))
    return out


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of k/n ((nan, nan) when n = 0)."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def summarise(records: Sequence[SelfExplanation]) -> dict:
    """Shares with 95% Wilson intervals.

    accuracy: correct / all (abstentions count as wrong); the verdict shares are over the explained inputs
    (the correctly classified ones, unless only_correct was off): faithful + unfaithful + not parsable = 1;
    `faithfulness` is the paper's figure, faithful among the parsable explanations."""
    n = len(records)
    labelled = [r for r in records if r.correct is not None]
    k_correct = sum(bool(r.correct) for r in labelled)
    explained = [r for r in records if r.verdict != SKIPPED]
    counts = {v: sum(r.verdict == v for r in explained) for v in VERDICTS}
    m = len(explained)
    out = {"n": n, "n_correct": k_correct, "accuracy": k_correct / len(labelled) if labelled else float("nan"),
           "accuracy_ci": wilson(k_correct, len(labelled)), "n_explained": m, "counts": counts}
    for v in VERDICTS:
        out[v] = counts[v] / m if m else float("nan")
        out[v + "_ci"] = wilson(counts[v], m)
    parsed = counts["faithful"] + counts["unfaithful"]
    # the alternative rule for attribution and redaction: the class moved at all (flipped or abstained)
    out["changed"] = sum(r.verdict in ("faithful", "unfaithful") and r.reclassification != r.prediction for r in explained)
    out["changed_share"] = out["changed"] / parsed if (parsed := counts["faithful"] + counts["unfaithful"]) else float("nan")
    out["changed_ci"] = wilson(out["changed"], parsed)
    out["faithful_unchanged"] = sum(r.verdict == "faithful" and bool(r.unchanged) for r in explained)
    out["faithfulness"] = counts["faithful"] / parsed if parsed else float("nan")
    out["faithfulness_ci"] = wilson(counts["faithful"], parsed)
    return out


def format_table(summary: dict, kind: str | None = None) -> str:
    def pct(x):
        return "  n/a" if x != x else f"{100 * x:5.1f}"

    rows = [f"{'verdict':<24}{'count':>6}{'share %':>9}   95% CI"]
    for v in VERDICTS:
        lo, hi = summary[v + "_ci"]
        rows.append(f"{v:<24}{summary['counts'][v]:>6}{pct(summary[v]):>9}   {pct(lo)}-{pct(hi)}")
    lo, hi = summary["faithfulness_ci"]
    parsed = summary["counts"]["faithful"] + summary["counts"]["unfaithful"]
    rows.append(f"{'faithful among parsable':<24}{parsed:>6}{pct(summary['faithfulness']):>9}   {pct(lo)}-{pct(hi)}")
    lo, hi = summary["changed_ci"]
    rows.append(f"{'class changed (parsable)':<24}{summary['changed']:>6}{pct(summary['changed_share']):>9}   {pct(lo)}-{pct(hi)}")
    lo, hi = summary["accuracy_ci"]
    head = (f"{kind or 'self-explanation'}: {summary['n']} inputs, accuracy {pct(summary['accuracy']).strip()}% "
            f"({pct(lo).strip()}-{pct(hi).strip()}), {summary['n_explained']} explained")
    rows.append(f"(faithful although the text classified again is the input up to case, spacing and punctuation: "
                f"{summary['faithful_unchanged']})")
    return head + "\n" + "\n".join(rows)
