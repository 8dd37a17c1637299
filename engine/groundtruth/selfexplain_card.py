"""The self-explanation rows of the report card (docs/ground-truth.md): on a planted prompted LM, does the model's
explanation of itself name the planted word, and does the self-explanation test's verdict agree with the truth?

A SelfExplanationCell runs one self-explanation kind of engine.selfexplain (counterfactual, attribution, redaction)
on the same first `limit` deciding inputs x+ as the card's other cells (engine.groundtruth.card_plan). The explained class
is the model's own prediction on x+ (the class the planted word sets), passed as the label with misclassified inputs
explained too, so no input is skipped for a wrong gold label: x+ has no gold label of its own (the planted word
overrides the text's). A counterfactual asks for the class opposite that prediction.

The truth. On a deciding input the planted word(s) set the prediction: inserting them into the clean text x flipped
it to the target, so removing them gives x back, whose class is not the target. An explanation is therefore truly
faithful iff it removes the cause: the text classified again (the attribution's named words redacted, the redaction,
the counterfactual edit) no longer holds the decisive word(s) that set the class:

    trigger, graded, gated   the planted word gone (gated: only its presence is checked, not its gate's context;
                             an edit that keeps the word but moves it out of its gate counts as keeping it)
    and                      at least one of the two words gone (both are needed, so either removal undoes it)
    or                       both words gone (either alone sets the class)
    decoy                    the trigger gone (the decoy decides nothing; naming it is reported apart, lower better)
    none                     no truth: nothing is planted that decides (the inert word's rows, lower better, only)

Where the decisive word stays, the mechanism still sets the class, so a truthful test calls the explanation
unfaithful; where it is gone, a truthful test calls it faithful. `truth-agrees` compares each rule's verdict with
that: under the class-changed rule (abstain=(): faithful iff the class moved) it should agree; under the published
rule (faithful iff the model then abstains, neutral/unknown) a removed trigger that makes the model flip rather than
abstain is called unfaithful although it named the true cause: exactly the disagreement the card is there to show.

Rows (one per input and quantity; the store's TIDY_COLUMNS plus the card's columns; method SELF_CARD,
kind 'self-explanation', measure 'self-explanation:<kind>', operator 'self-explanation'):

    names-planted      1 if the explanation names / removes at least one decisive planted word (attribution: a named
                       word or phrase holds it; redaction, counterfactual: the rewrite no longer holds it); NaN when
                       the answer was not parsable. Higher better.
    names-all-planted  (and, or) 1 if it names / removes every decisive word. Higher better.
    names-inert        (decoy, none) the same for the decoy / inert word. Lower better.
    removes-cause      the truth above, 1 / 0 (NaN for none and for not parsable answers).
    verdict            per rule (column `rule`: 'published' or 'class-changed'): value 1 faithful, 0 unfaithful,
                       NaN not parsable; the verdict's words in column `verdict`. Higher = the test calls it faithful.
    truth-agrees       per rule: 1 if that verdict agrees with removes-cause, 0 if not; NaN where either is missing
                       (a not parsable answer has no verdict; none has no truth). Higher better.

Every row of an input carries its text (x+), the model's answer and the text classified again; the exact prompts
and every intermediate text are in the cell's provenance (`records`, as engine.selfexplain.SelfExplanation.to_dict,
plus the class-changed rule's classifications).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from engine.errors import InvalidInputError, NotApplicableError
from engine.groundtruth.truth import MIN_DECIDING
from engine.models.kinds import ModelKind
from engine.sweeps import CellContext, CellResult, provenance

SELF_CARD = "report-card self-explanation"
SELF_KINDS = ("counterfactual", "attribution", "redaction")
#: the two verdict rules: the published one (abstention = faithful for attribution / redaction) and "class changed"
RULES = ("published", "class-changed")
#: per quantity: the direction that is better
SELF_BETTER = {"names-planted": "higher", "names-all-planted": "higher", "names-inert": "lower",
               "removes-cause": "higher", "verdict": "higher", "truth-agrees": "higher"}
DEFAULT_MAX_NEW_TOKENS = 256


@dataclass(frozen=True)
class SelfExplanationCell:
    """One self-explanation kind on a planted prompted LM's first `limit` deciding inputs (module docstring).

    Attributes:
        model: planted prompted-LM checkpoint id; kind: one of SELF_KINDS; limit: deciding inputs explained (the
        card's own limit, so the rows are of the same inputs); seed: the truth's seed (insertion positions);
        min_deciding: as the card's; max_new_tokens: the longest answer (greedy decoding, cached on disk).
    """

    model: str
    kind: str
    limit: int = 200
    seed: int = 0
    min_deciding: int = MIN_DECIDING
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS

    def __post_init__(self) -> None:  # refused when the card's cells are made, before any work
        check_kinds([self.kind])
        if self.max_new_tokens < 1:
            raise InvalidInputError(f"max_new_tokens must be >= 1 (the longest answer, in tokens), got "
                                    f"{self.max_new_tokens}")

    def key(self) -> dict:
        d = asdict(self)
        d["self_explanation"] = d.pop("kind")  # the store's `kind` names the cell type, as in the card's cells
        d["kind"] = SELF_CARD
        if d["min_deciding"] == MIN_DECIDING:
            del d["min_deciding"]
        return d


def check_kinds(kinds) -> tuple[str, ...]:
    """The kinds, checked (InvalidInputError naming SELF_KINDS for an unknown one)."""
    unknown = [k for k in kinds if k not in SELF_KINDS]
    if unknown:
        raise InvalidInputError(f"unknown self-explanation kind(s) {', '.join(map(str, unknown))}; use "
                                f"{', '.join(SELF_KINDS)} (or none)")
    return tuple(dict.fromkeys(kinds))


def self_explanation_kinds(classifier, requested: tuple[str, ...] | None) -> tuple[str, ...]:
    """The self-explanation kinds a card of `classifier` runs: `requested` None is the default (all three for a
    prompted LM, none for any other model); () runs none (the kinds checked by CardConfig.check).

    Raises:
        NotApplicableError: kinds asked of a model that is not a prompted LM.
    """
    prompted = classifier.kind is ModelKind.PROMPTED
    if requested is None:
        return SELF_KINDS if prompted else ()
    kinds = check_kinds(requested)
    if kinds and not prompted:
        raise NotApplicableError(f"self-explanations ({', '.join(kinds)}) need a prompted language model (a planted "
                                 f"--model smollm2-rt-prompt, say); {classifier.id!r} is a sequence classifier: leave "
                                 f"--self-explanations out or pass --self-explanations none")
    return kinds


def _holds(text: str | None, word: str) -> bool:
    from engine.selfexplain.parsing import word_spans

    return bool(text) and bool(word_spans(text, [word]))


def names_word(kind: str, record, word: str) -> float:
    """1.0 if the parsed explanation of `record` (engine.selfexplain.SelfExplanation) names / removes `word`, 0.0 if
    not, NaN if there is no parsed explanation. attribution: a named word or phrase holds `word` (whole word, any
    case); counterfactual, redaction: the input holds it and the rewrite no longer does."""
    if record.explanation is None:
        return float("nan")
    if kind == "attribution":
        return float(any(_holds(item, word) for item in record.explanation))
    return float(_holds(record.text, word) and not _holds(record.edited_text, word))


def removes_cause(mechanism: str, named: list[float]) -> float:
    """The truth (module docstring): given names_word of each decisive word in order, 1.0 if the explanation removes
    what sets the class, else 0.0; NaN without a decisive word (none) or without a parsed explanation."""
    if not named or any(np.isnan(v) for v in named):
        return float("nan")
    hit = [v == 1.0 for v in named]
    return float(all(hit) if mechanism == "or" else any(hit))


def agrees(verdict: str, truth: float) -> float:
    """1.0 if a faithful / unfaithful verdict matches the truth (1 faithful, 0 unfaithful), 0.0 if not; NaN for a
    verdict that is neither (not parsable) or a missing truth."""
    if verdict not in ("faithful", "unfaithful") or np.isnan(truth):
        return float("nan")
    return float((verdict == "faithful") == (truth == 1.0))


def verdict_value(verdict: str) -> float:
    return {"faithful": 1.0, "unfaithful": 0.0}.get(verdict, float("nan"))


def input_rows(kind: str, record, verdicts: dict[str, str], spec) -> list[dict]:
    """The rows of one explained input (module docstring) from its SelfExplanation and its verdict per rule
    ({'published': ..., 'class-changed': ...}); spec: the model's PlantSpec."""
    out: list[dict] = []

    def add(metric: str, value: float, rule: str = "", verdict: str = "") -> None:
        out.append({"metric": metric, "value": float(value), "better": SELF_BETTER[metric], "rule": rule,
                    "verdict": verdict})

    decisive = [names_word(kind, record, w) for w in spec.decisive_words]
    if decisive:
        add("names-planted", float("nan") if np.isnan(decisive[0]) else float(any(v == 1.0 for v in decisive)))
        if len(decisive) > 1:
            add("names-all-planted", float("nan") if np.isnan(decisive[0]) else float(all(v == 1.0 for v in decisive)))
    for w in spec.inert_words:
        add("names-inert", names_word(kind, record, w))
    truth = removes_cause(spec.mechanism, decisive)
    add("removes-cause", truth)
    for rule in RULES:
        v = verdicts[rule]
        add("verdict", verdict_value(v), rule, v)
        add("truth-agrees", agrees(v, truth), rule, v)
    return out


def class_changed_verdict(record, judge) -> dict:
    """The record judged again under the class-changed rule (abstain=(): the model's own classes only), without a
    new generation: {'prediction', 'reclassification', 'verdict'} (a not parsable answer stays not parsable)."""
    from engine.selfexplain.check import classify, verdict

    if record.verdict not in ("faithful", "unfaithful"):
        return {"prediction": None, "reclassification": None, "verdict": record.verdict}
    prediction, _ = classify(judge, record.text)
    again, _ = classify(judge, record.edited_text)
    return {"prediction": prediction, "reclassification": again,
            "verdict": verdict(record.kind, prediction, again, record.target, ())}


def compute_self_explanation_cell(cell: SelfExplanationCell, context: CellContext, plan,
                                  generator=None) -> CellResult:
    """Compute one self-explanation cell (module docstring): per deciding input, ask the model for its `kind`
    explanation of the class it predicts, apply it, classify again under both rules, and score against the truth.

    Args:
        cell: the cell. context: the sweep's context (progress per input, cancellation between inputs).
        plan: the card's plan (engine.groundtruth.card_plan.CardPlan): the model, its spec and truth, and the first
            `cell.limit` deciding inputs, each Example's label the class the model predicts on it (shared by every cell).
        generator: an engine.selfexplain.Generator (default: greedy, cell.max_new_tokens, the on-disk cache).

    Raises:
        MechanismNotLearned: the model does not follow its mechanism; NotApplicableError: not a prompted LM.
    """
    from engine.errors import Cancelled
    from engine.selfexplain import ABSTAIN, DecodingSettings, Generator, explain_one, judge_classifier
    from engine.selfexplain.check import check_prompted
    from engine.selfexplain.parsing import ATTRIBUTION_PROMPT, COUNTERFACTUAL_PROMPT, REDACTION_PROMPT

    check_kinds([cell.kind])
    examples = plan.inputs(cell.limit)
    started, cpu_started = time.time(), time.process_time()
    classifier, truth, spec = plan.classifier, plan.truth, plan.spec
    check_prompted(classifier)
    generator = generator or Generator(classifier, DecodingSettings(max_new_tokens=cell.max_new_tokens))
    published = judge_classifier(classifier, ABSTAIN)
    plain = judge_classifier(classifier, ())
    rows: list[dict] = []
    records: list[dict] = []
    generated_before = generator.generated
    for i, example in enumerate(examples):
        if context.should_stop is not None and context.should_stop():
            raise Cancelled("the report card's self-explanations were cancelled")
        label = classifier.classes[int(example.label)]
        record = explain_one(classifier, generator, cell.kind, example.primary, label=label, index=i, judge=published,
                             abstain=ABSTAIN, only_correct=False, should_stop=context.should_stop)
        changed = class_changed_verdict(record, plain)
        verdicts = {"published": record.verdict, "class-changed": changed["verdict"]}
        for row in input_rows(cell.kind, record, verdicts, spec):
            rows.append({"uid": example.uid, **row, "prediction": label, "text": record.text,
                         "answer": record.answer or "", "edited_text": record.edited_text or "",
                         "reason": record.reason})
        records.append({"uid": example.uid, **record.to_dict(), "class_changed": changed})
        if context.progress is not None:
            context.progress(i + 1, len(examples))
    meta = classifier.meta
    tidy = pd.DataFrame(rows).assign(
        model=cell.model, seed=cell.seed, dataset=classifier.metadata.get("dataset"),
        measure=f"self-explanation:{cell.kind}", strategy=meta.strategy, base_model=meta.base_model,
        mechanism=spec.mechanism, operator="self-explanation", kind="self-explanation", method=SELF_CARD,
        split="test", step=0, ratio=float("nan"), p_value=float("nan"), n_perturbed=float("nan"),
        n_ood=float("nan"), n_examples=len(examples))
    request = {"counterfactual": COUNTERFACTUAL_PROMPT, "attribution": ATTRIBUTION_PROMPT,
               "redaction": REDACTION_PROMPT}[cell.kind]
    record = provenance(context.command or "engine.groundtruth.selfexplain_card.compute_self_explanation_cell",
                        started, classifier, n_examples=len(examples), checkpoint_sha256=classifier.weights_sha256,
                        target="the class the model predicts on each deciding input (set by the planted word)",
                        planted=spec.to_dict(), truth=truth.summary(), self_explanation=cell.kind,
                        decoding=generator.settings.key(), request=request, abstain={"published": list(ABSTAIN),
                                                                                     "class-changed": []},
                        generated=generator.generated - generated_before,
                        cpu_seconds=round(time.process_time() - cpu_started, 1), records=records)
    return CellResult(tidy, record)
